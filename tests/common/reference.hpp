#pragma once
// Single-rank references shared by the test suites: small integer data, whose sums and
// products stay exact in every element type, and a naive row-major GEMM.
#include <cstdint>
#include <vector>

namespace shardcast::testing {

/// Small integers in [-3, 3] (salt shifts the pattern); every sum, product and comparison
/// of the tests that use them is exact.
template <class T>
std::vector<T> small_ints(std::int64_t n, int salt) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<T>((i * 5 + salt) % 7 - 3);
  return g;
}

/// C[m,n] = A[m,k] B[k,n], row-major, the naive triple loop.
template <class T>
std::vector<T> ref_gemm(const std::vector<T>& a, const std::vector<T>& b, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::vector<T> c(static_cast<std::size_t>(m * n), T{});
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T s{};
      for (std::int64_t p = 0; p < k; ++p) s += a[static_cast<std::size_t>(i * k + p)] * b[static_cast<std::size_t>(p * n + j)];
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  return c;
}

}  // namespace shardcast::testing
