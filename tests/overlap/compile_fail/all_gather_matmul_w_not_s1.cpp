// expect: W must be shard<1> on mesh axis Axis
// W sharded by rows on the overlap axis: the product would not be column-parallel.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, sc::overlap_context<sc::mesh<1>>& ctx, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto w = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else  // the legal call
  auto w = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::all_gather_matmul<0>(ctx, x, w, 2);
}
