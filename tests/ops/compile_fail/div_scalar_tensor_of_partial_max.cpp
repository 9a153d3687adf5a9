// expect: division_of_partial_on_mesh_axis<0, shardcast::partial<shardcast::max ?>, shardcast::replicate, shardcast::fn::div_fn ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: a division meets a partial operand
// div(x, s) of a partial<max> x by a replicated rank-0 s: a negative s would turn the
// maximum into the minimum, and s's sign is not part of its layout. The control: a
// partial<sum> x stays partial<sum> ((x1 + x2) / s = x1 / s + x2 / s).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto s = sc::distribute<sc::layout<sc::replicate>>(m, std::vector<float>{2.0f}, std::array<std::int64_t, 0>{});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 1>{4});
  (void)sc::div(x, s);
#else
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 1>{4});
  auto y = sc::div(x, s);
  static_assert(std::is_same_v<decltype(y)::layout_type, sc::layout<sc::partial<sc::sum>>>);
#endif
}
