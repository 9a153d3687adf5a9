// expect: static assertion failed: shardcast::matmul<gemm_op::t, \.\.\.>: a transposed A of rank > 2 needs a batched B of the same rank
// A [2, 3, 4] read transposed: only a matrix can be.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  using L = sc::layout<sc::replicate>;
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{4, 5});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 3>{2, 3, 4});
  (void)sc::matmul<sc::gemm_op::t, sc::gemm_op::n>(a, w);
#else
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 3>{2, 3, 4});
  (void)sc::matmul<sc::gemm_op::n, sc::gemm_op::n>(a, w);
#endif
}
