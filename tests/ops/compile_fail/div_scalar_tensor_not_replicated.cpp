// expect: division_of_partial_on_mesh_axis<1, shardcast::replicate, shardcast::partial<shardcast::sum ?>, shardcast::fn::div_fn ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: a division meets a partial operand
// div(x, s) with a rank-0 s partial on mesh axis 1: 1 / (s1 + s2) is not a sum of per-rank
// quotients, so s must be replicated on every axis. The control: s replicated.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto s = sc::distribute<sc::layout<sc::replicate, sc::partial<sc::sum>>>(m, std::vector<float>{2.0f}, std::array<std::int64_t, 0>{});
#else
  auto s = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, std::vector<float>{2.0f}, std::array<std::int64_t, 0>{});
#endif
  auto y = sc::div(x, s);
  static_assert(std::is_same_v<decltype(y)::layout_type, sc::layout<sc::shard<0>, sc::replicate>>);
}
