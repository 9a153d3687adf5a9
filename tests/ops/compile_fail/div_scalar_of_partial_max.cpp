// expect: division_of_partial_on_mesh_axis<0, shardcast::partial<shardcast::max ?>, void, shardcast::fn::div_by_fn<float> ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: a division meets a partial operand
// Dividing by a negative c would turn the maximum into the minimum, and c's sign is not part
// of the layout. The control: a c the caller declares positive, through the mark.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 1>{4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::div(x, 2.0f);
#else
  auto y = sc::map(x, sc::fn::nondecreasing_in<0>(sc::fn::div_by(2.0f)));
  static_assert(std::is_same_v<decltype(y)::layout_type, sc::layout<sc::partial<sc::max>>>);
#endif
}
