// expect: matmul_illegal_on_mesh_axis<1, shardcast::shard<0>, shardcast::shard<0> ?>
// A and B both sharded by rows on mesh axis 1: not a legal matmul pair.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto b = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::matmul(a, b);
}
