// expect: matmul_illegal_on_mesh_axis<1, shardcast::shard<0>, shardcast::shard<0> ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// A and B both sharded by rows on mesh axis 1: not a legal matmul pair.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::matmul(a, b);
}
