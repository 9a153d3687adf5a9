#pragma once
/// @file ops/gemm.hpp
/// The local-GEMM hook operators and layers call on each rank's pieces, and the default
/// host implementation. A GEMM functor `g` is callable in two forms (row-major storage):
/// @code
///   g(m, n, k, a, lda, b, ldb, c, ldc);                          // C = A * B, C overwritten
///   g(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);      // C = op(A) * op(B), or C += ... when accumulate
/// @endcode
/// where op(A) is m x k, op(B) is k x n, `ta`/`tb` are gemm_op::n (as stored) or
/// gemm_op::t (transposed), and lda/ldb/ldc are the row strides of A, B and C as stored
/// (A stored k x m when ta == t). Device backends pass their own functor (cuBLAS).
///
/// A functor may also take a strided batch (as cuBLAS's GemmStridedBatched), which
/// `matmul` then prefers for its batched and broadcast products (fewer, larger calls):
/// @code
///   g(ta, tb, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c, batch, accumulate);
/// @endcode
/// the product above for each i < batch on the matrices a + i * stride_a, b + i * stride_b
/// and c + i * stride_c. A stride of 0 reads one matrix for every i (an operand broadcast
/// over the batch); C's matrices do not overlap.
///
/// Example: the weight gradient of Y = X W with X [t, i] and dY [t, o] is
/// dW = X^T dY, i.e. `g(gemm_op::t, gemm_op::n, i, o, t, x, i, dy, o, dw, o, false)`.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../detail/wrapping.hpp"

namespace shardcast {

/// Whether a GEMM operand is used as stored (`n`) or transposed (`t`).
enum class gemm_op : std::uint8_t { n, t };

/// Default local GEMM: cache-blocked, host memory, any arithmetic T.
struct host_gemm {
  /// C[m,n] = A[m,k] * B[k,n]; C is overwritten.
  template <class T>
  void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c,
                  std::int64_t ldc) const {
    (*this)(gemm_op::n, gemm_op::n, m, n, k, a, lda, b, ldb, c, ldc, false);
  }

  /// C = op(A) * op(B), or C += op(A) * op(B) when `accumulate`.
  template <class T>
  void operator()(gemm_op ta, gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
                  std::int64_t ldb, T* c, std::int64_t ldc, bool accumulate) const {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = T{};
    // Element (i, p) of op(A) and (p, j) of op(B) with their strides, so the innermost
    // loop walks B (or B^T) with the smallest stride available.
    const std::int64_t a_i = ta == gemm_op::n ? lda : 1, a_p = ta == gemm_op::n ? 1 : lda;
    const std::int64_t b_p = tb == gemm_op::n ? ldb : 1, b_j = tb == gemm_op::n ? 1 : ldb;
    constexpr std::int64_t bs = 64;
    for (std::int64_t i0 = 0; i0 < m; i0 += bs)
      for (std::int64_t p0 = 0; p0 < k; p0 += bs)
        for (std::int64_t j0 = 0; j0 < n; j0 += bs) {
          const std::int64_t i1 = std::min(m, i0 + bs), p1 = std::min(k, p0 + bs), j1 = std::min(n, j0 + bs);
          for (std::int64_t i = i0; i < i1; ++i)
            for (std::int64_t p = p0; p < p1; ++p) {
              const T av = a[i * a_i + p * a_p];
              const T* brow = b + p * b_p;
              T* crow = c + i * ldc;
              if constexpr (std::is_integral_v<T>) {  // integer products and sums wrap (detail/wrapping.hpp)
                for (std::int64_t j = j0; j < j1; ++j) crow[j] = detail::wrapping_add(crow[j], detail::wrapping_mul(av, brow[j * b_j]));
              } else if (b_j == 1) {
                for (std::int64_t j = j0; j < j1; ++j) crow[j] += av * brow[j];
              } else {
                for (std::int64_t j = j0; j < j1; ++j) crow[j] += av * brow[j * b_j];
              }
            }
        }
  }

  /// The strided batch: for i < batch, C_i = op(A_i) * op(B_i) (or +=), X_i = x + i * stride_x.
  template <class T>
  void operator()(gemm_op ta, gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, std::int64_t stride_a,
                  const T* b, std::int64_t ldb, std::int64_t stride_b, T* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch,
                  bool accumulate) const {
    for (std::int64_t i = 0; i < batch; ++i)
      (*this)(ta, tb, m, n, k, a + i * stride_a, lda, b + i * stride_b, ldb, c + i * stride_c, ldc, accumulate);
  }
};

}  // namespace shardcast
