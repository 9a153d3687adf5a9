#pragma once
// Single-rank global references for the parallel-layer tests: plain row-major loops over
// whole tensors, written independently of the library's local kernels.
#include <cstdint>
#include <vector>

#include "common/reference.hpp"

namespace nn_ref {

using i64 = std::int64_t;

template <class T>
using mat = std::vector<T>;

/// Small integers in [-3, 3], different for each salt: products and sums stay exact in double.
template <class T>
mat<T> ints(i64 n, int salt) {
  mat<T> g(static_cast<std::size_t>(n));
  for (i64 i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<T>((i * 5 + salt * 3 + 1) % 7 - 3);
  return g;
}

/// C[m,n] = A[m,k] B[k,n]
template <class T>
mat<T> matmul(const mat<T>& a, const mat<T>& b, i64 m, i64 k, i64 n) {
  return shardcast::testing::ref_gemm(a, b, m, k, n);
}

/// A[m,n] -> A^T[n,m]
template <class T>
mat<T> transpose(const mat<T>& a, i64 m, i64 n) {
  mat<T> t(a.size());
  for (i64 i = 0; i < m; ++i)
    for (i64 j = 0; j < n; ++j) t[static_cast<std::size_t>(j * m + i)] = a[static_cast<std::size_t>(i * n + j)];
  return t;
}

/// y[r, c] = x[r, c] + b[c]
template <class T>
mat<T> add_rows(mat<T> x, const mat<T>& b, i64 rows, i64 cols) {
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) x[static_cast<std::size_t>(r * cols + c)] += b[static_cast<std::size_t>(c)];
  return x;
}

/// s[c] = sum_r x[r, c]
template <class T>
mat<T> colsum(const mat<T>& x, i64 rows, i64 cols) {
  mat<T> s(static_cast<std::size_t>(cols), T{});
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) s[static_cast<std::size_t>(c)] += x[static_cast<std::size_t>(r * cols + c)];
  return s;
}

}  // namespace nn_ref
