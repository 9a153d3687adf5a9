// expect: map_on_partial_mesh_axis_needs_linear_functor<0, shardcast::partial<shardcast::sum ?>, shardcast::fn::square_fn ?>.*static assertion failed: shardcast::map: x is partial<sum.avg> on the mesh axis
// The square of a partial sum is not the sum of the squares: (x1 + x2)^2 != x1^2 + x2^2.
// The control: fn::neg, which is linear, keeps it.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::map(x, sc::fn::square);
#else
  (void)sc::map(x, sc::fn::neg);
#endif
}
