// expect: X is also shard<0> on a mesh axis after Axis
// Data parallel on axis 1, reduce-scatter over axis 0: the scattered rows would not nest.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, sc::overlap_context<sc::mesh<2>>& ctx, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::shard<1>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else  // the legal call
  auto x = sc::distribute<sc::layout<sc::shard<1>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  auto w = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::matmul_reduce_scatter<0>(ctx, x, w, 2);
}
