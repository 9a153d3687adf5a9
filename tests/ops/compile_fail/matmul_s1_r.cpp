// expect: matmul_illegal_on_mesh_axis<0, shardcast::shard<1>, shardcast::replicate ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// A sharded along the contracted dim but B replicated: every rank would hold a partial
// product of only its columns of A, which is not what (shard<1>, replicate) would claim.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::matmul(a, b);
}
