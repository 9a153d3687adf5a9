// expect: map_on_partial_mesh_axis_needs_linear_functor<1, shardcast::partial<shardcast::sum ?>, shardcast::fn::shift_fn<float> ?>.*static assertion failed: shardcast::map: x is partial<sum.avg> on the mesh axis
// x + c is affine, not linear: on a partial sum c would be added once per term. The
// control: on a partial<avg>, whose terms' weights sum to 1, the shift is exact.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::replicate, sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto x = sc::distribute<sc::layout<sc::replicate, sc::partial<sc::avg>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::map(x, sc::fn::shift(1.0f));
}
