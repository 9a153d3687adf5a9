// expect: static assertion failed: shardcast::matmul: the GEMM functor must be callable as gemm\(m, n, k, a, lda, b, ldb, c, ldc\) or, for a transposed operand, as gemm\(op_a, op_b
// A GEMM hook with only the plain form cannot read an operand transposed.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  using L = sc::layout<sc::replicate>;
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{3, 4});
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{5, 4});
  auto hook = [](std::int64_t mm, std::int64_t n, std::int64_t k, const float* pa, std::int64_t lda, const float* pb, std::int64_t ldb,
                 float* pc, std::int64_t ldc) { sc::host_gemm{}(mm, n, k, pa, lda, pb, ldb, pc, ldc); };
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(a, w, hook);
#else
  (void)sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(a, w, sc::host_gemm{});
  (void)hook;
#endif
}
