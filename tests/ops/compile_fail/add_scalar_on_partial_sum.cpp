// expect: map_on_partial_mesh_axis_needs_linear_functor<0, shardcast::partial<shardcast::sum ?>, shardcast::fn::shift_fn<double> ?>.*static assertion failed: shardcast::map: x is partial<sum.avg> on the mesh axis
// add(x, c) of a partial sum would add c once per term. The control: subtracting from a
// partial<max> keeps it (x - c is nondecreasing in x).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 1>{4});
  auto y = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 1>{4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::add(x, 1.0);
#else
  (void)sc::sub(y, 1.0);
  (void)sc::add(x, x);
#endif
}
