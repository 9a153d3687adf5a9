// expect: division_of_partial_on_mesh_axis<1, shardcast::replicate, shardcast::partial<shardcast::sum ?>, shardcast::fn::div_fn ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: a division meets a partial operand
// 1 / (b1 + b2) is not a sum of per-rank quotients. The control: a partial numerator over
// a replicated divisor stays partial.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto p = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto r = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::div(r, p);
#else
  (void)sc::div(p, r);
#endif
}
