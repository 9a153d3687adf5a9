// expect: integer_division_of_partial_sum_on_mesh_axis<0, shardcast::partial<shardcast::sum ?>, shardcast::fn::div_by_fn<int> ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: the numerator of an integer division is partial<sum>
// Integer division truncates: trunc(1 / 2) + trunc(1 / 2) = 0, but trunc((1 + 1) / 2) = 1.
// The control: the same division of floating-point terms.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<int>& gi, const std::vector<float>& gf) {
  auto xi = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, gi, std::array<std::int64_t, 1>{4});
  auto xf = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, gf, std::array<std::int64_t, 1>{4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::div(xi, 2);
#else
  (void)sc::div(xf, 2);
  (void)xi;
#endif
}
