// expect: scalar_shift_of_partial_sum_on_mesh_axis<0>.*static assertion failed: shardcast::add\(x, c\) / sub\(x, c\) / add\(c, x\) / sub\(c, x\): x is partial<sum> on the mesh axis named in scalar_shift_of_partial_sum_on_mesh_axis<Axis>, so c would enter the sum once per partial term
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
