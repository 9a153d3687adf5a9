// expect: matmul_op_illegal_on_mesh_axis<1, shardcast::shard<1>, shardcast::replicate, 4, 3, shardcast::gemm_op::n, shardcast::gemm_op::n ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// A [x, h, m, k] @ B [h, k, n] (B broadcast over x) with h, a batch dim of both, sharded in
// A only on mesh axis 1: B must shard its dim 0 (h) alike there.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, std::array<std::int64_t, 4>{2, 3, 4, 5});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 3>{3, 5, 6});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 3>{3, 5, 6});
#endif
  (void)sc::matmul(a, b);
}
