// expect: W must be shard<0> on mesh axis Axis
// W replicated on the overlap axis while X's columns are split: not a row-parallel pair.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, sc::overlap_context<sc::mesh<1>>& ctx, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto w = sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else  // the legal call
  auto w = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::matmul_reduce_scatter<0>(ctx, x, w, 2);
}
