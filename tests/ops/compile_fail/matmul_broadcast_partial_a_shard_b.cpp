// expect: matmul_op_illegal_on_mesh_axis<0, shardcast::partial<shardcast::sum ?>, shardcast::shard<0>, 2, 3, shardcast::gemm_op::n, shardcast::gemm_op::n ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// A [m, k] a partial sum, broadcast over B [b, k, n] whose b (a dim A lacks) is sharded on
// the same mesh axis: a partial operand needs the other replicated there.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto b = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 3>{2, 4, 5});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto a = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 2>{3, 4});
#else
  auto a = sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 2>{3, 4});
#endif
  (void)sc::matmul(a, b);
}
