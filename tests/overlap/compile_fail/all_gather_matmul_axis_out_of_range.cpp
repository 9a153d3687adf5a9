// expect: Axis is not a mesh axis
// Overlap axis 1 on a 1-axis mesh.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, sc::overlap_context<sc::mesh<1>>& ctx, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto w = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::all_gather_matmul<1>(ctx, x, w, 2);
#else  // the legal call
  (void)sc::all_gather_matmul<0>(ctx, x, w, 2);
#endif
}
