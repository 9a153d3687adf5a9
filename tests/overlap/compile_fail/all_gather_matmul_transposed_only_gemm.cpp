// expect: all_gather_matmul: the GEMM functor must be callable as gemm\(m, n, k, a, lda, b, ldb, c, ldc\)
// A GEMM functor with only the transposed 12-argument form: matmul takes it, the overlapped
// matmuls call the 9-argument form.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
struct transposed_only {
  template <class T>
  void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
                  std::int64_t ldb, T* c, std::int64_t ldc, bool acc) const {
    sc::host_gemm{}(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
  }
};
void f(sc::mesh<1>& m, sc::overlap_context<sc::mesh<1>>& ctx, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto w = sc::distribute<sc::layout<sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::all_gather_matmul<0>(ctx, x, w, 2, transposed_only{});
#else  // the legal call
  (void)sc::all_gather_matmul<0>(ctx, x, w, 2, sc::host_gemm{});
#endif
}
