// expect: matmul_op_illegal_on_mesh_axis<1, shardcast::shard<1>, shardcast::shard<0>, 3, 2, shardcast::gemm_op::n, shardcast::gemm_op::t ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// x [b, s, h] sharded over s on axis 1, W stored [out, in] sharded over its rows there:
// the pair (row shard, column shard of op(W)) has no local product on that axis.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, std::array<std::int64_t, 3>{2, 3, 4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto w = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{5, 4});
#else
  auto w = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{5, 4});
#endif
  (void)sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(x, w);
}
