// expect: integer_division_of_partial_sum_on_mesh_axis<1, shardcast::partial<shardcast::sum ?>, shardcast::fn::div_fn ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: the numerator of an integer division is partial<sum>
// div(x, s) of an integer partial<sum> x by a replicated rank-0 s: integer division
// truncates, trunc(1 / 2) + trunc(1 / 2) = 0, but trunc((1 + 1) / 2) = 1. The control: the
// same division of floating-point terms.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<int>& gi, const std::vector<float>& gf) {
  using L = sc::layout<sc::shard<0>, sc::partial<sc::sum>>;
  using LS = sc::layout<sc::replicate, sc::replicate>;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<L>(m, gi, std::array<std::int64_t, 1>{4});
  auto s = sc::distribute<LS>(m, std::vector<int>{2}, std::array<std::int64_t, 0>{});
  (void)sc::div(x, s);
  (void)gf;
#else
  auto x = sc::distribute<L>(m, gf, std::array<std::int64_t, 1>{4});
  auto s = sc::distribute<LS>(m, std::vector<float>{2.0f}, std::array<std::int64_t, 0>{});
  auto y = sc::div(x, s);
  static_assert(std::is_same_v<decltype(y)::layout_type, L>);
  (void)gi;
#endif
}
