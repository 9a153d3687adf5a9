// expect: zip_partial_with_replicated_operand_on_mesh_axis<0, shardcast::partial<shardcast::sum ?>, shardcast::replicate, shardcast::fn::add_fn ?>.*static assertion failed: shardcast::zip/add/sub/mul/broadcast_zip: one operand is partial and the other replicate
// (a1 + b) + (a2 + b) != (a1 + a2) + b: the replicated b would be added once per partial term.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto b = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::add(x, b);
#else
  (void)sc::mul(x, b);
#endif
}
