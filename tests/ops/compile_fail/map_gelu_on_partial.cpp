// expect: map_on_partial_mesh_axis_needs_linear_functor<1, shardcast::partial<shardcast::sum ?>, shardcast::fn::gelu_fn ?>.*static assertion failed: shardcast::map: x is partial<sum.avg> on the mesh axis
// gelu of a partial sum is not the sum of the gelus.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::replicate, sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::map(x, sc::fn::gelu);
#else
  (void)sc::map(x, sc::fn::scale(2.0f));
#endif
}
