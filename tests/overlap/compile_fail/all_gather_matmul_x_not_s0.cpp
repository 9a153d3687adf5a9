// expect: X must be shard<0> on mesh axis Axis
// X replicated on the overlap axis: nothing to gather.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, sc::overlap_context<sc::mesh<1>>& ctx, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else  // the legal call
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  auto w = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::all_gather_matmul<0>(ctx, x, w, 2);
}
