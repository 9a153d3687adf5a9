// expect: zip_on_partial_mesh_axis_needs_linear_functor<0, shardcast::partial<shardcast::sum ?>, shardcast::partial<shardcast::sum ?>, shardcast::fn::mul_fn ?>.*static assertion failed: shardcast::zip/mul: both operands are partial<sum.avg>
// (a1 + a2) * (b1 + b2) != a1 * b1 + a2 * b2.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::mul(x, x);
#else
  (void)sc::add(x, x);
#endif
}
