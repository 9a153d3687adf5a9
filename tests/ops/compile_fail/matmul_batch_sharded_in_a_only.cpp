// expect: matmul_op_illegal_on_mesh_axis<0, shardcast::shard<0>, shardcast::replicate, 3, 3, shardcast::gemm_op::n, shardcast::gemm_op::n ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// A batched product [b, m, k] @ [b, k, n] whose batch dim is sharded in A only: both
// operands must shard a batch dim alike.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 3>{2, 3, 4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 3>{2, 4, 5});
#else
  auto b = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 3>{2, 4, 5});
#endif
  (void)sc::matmul(a, b);
}
