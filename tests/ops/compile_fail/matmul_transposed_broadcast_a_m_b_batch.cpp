// expect: matmul_op_illegal_on_mesh_axis<0, shardcast::shard<1>, shardcast::shard<0>, 2, 3, shardcast::gemm_op::t, shardcast::gemm_op::n ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// A stored [k, m] read transposed, broadcast over B [b, k, n]: A's stored shard<1> is op(A)'s
// m (C's dim 1) and B's shard<0> is b (C's dim 0); one mesh axis cannot shard both.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{4, 3});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 3>{2, 4, 5});
#else
  auto b = sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 3>{2, 4, 5});
#endif
  (void)sc::matmul<sc::gemm_op::t, sc::gemm_op::n>(a, b);
}
