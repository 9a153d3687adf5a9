// expect: broadcast_zip_operand_placement_on_mesh_axis<1, shardcast::shard<1>, shardcast::shard<1> ?>.*static assertion failed: shardcast::broadcast_zip<D>: b's placement does not fit a's
// Where a is sharded along the broadcast dim, every rank needs the whole of b: b must be replicate there.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/broadcast.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 1});
#else
  auto b = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 1});
#endif
  (void)sc::broadcast_zip<1>(a, b, sc::fn::sub);
}
