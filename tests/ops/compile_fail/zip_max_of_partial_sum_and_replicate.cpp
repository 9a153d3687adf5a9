// expect: zip_partial_with_replicated_operand_on_mesh_axis<0, shardcast::partial<shardcast::sum ?>, shardcast::replicate, shardcast::fn::max_fn ?>.*static assertion failed: shardcast::zip/add/sub/mul/broadcast_zip: one operand is partial and the other replicate
// max(x1 + x2, b) is not max(x1, b) + max(x2, b). The control: the max of a partial<max>
// and a replicated b is the max of the terms' maxima with b.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto a = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto a = sc::distribute<sc::layout<sc::partial<sc::max>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  auto b = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::zip(a, b, sc::fn::max);
}
