// expect: X must be shard<1> on mesh axis Axis
// X sharded by rows on the overlap axis: X * W is not partial there.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, sc::overlap_context<sc::mesh<1>>& ctx, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else  // the legal call
  auto x = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  auto w = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::matmul_reduce_scatter<0>(ctx, x, w, 2);
}
