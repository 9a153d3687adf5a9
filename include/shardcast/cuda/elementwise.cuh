#pragma once
/// @file cuda/elementwise.cuh
/// `detail::elementwise_exec<device_memory>`: the elementwise loops of the tensor-level
/// operators (`map`, `zip`, ...) on device memory, stream-ordered on a `cudaStream_t`.
///
/// Each loop is one grid-stride kernel. Where every array is at the same element phase
/// modulo a 16-byte vector, the body moves whole aligned vectors (16 bytes of the widest
/// element type) and only the head and tail go one element at a time; otherwise it is all
/// scalar (see `device::detail::split_for_vectors` in index_math.hpp, tested on the host).
/// `out` may be the same pointer as an input (in place); partially overlapping arrays are
/// not supported.
///
/// The functor runs on the device: the functors of ops/functors.hpp (`fn::add`, `fn::gelu`,
/// ...), any struct with a `__device__` call operator, or an extended `__device__` lambda
/// (nvcc `--extended-lambda`). Its result is converted to the output type (round to nearest
/// even for half, bfloat16 and fp8).
/// @code
///   using ew = sc::detail::elementwise_exec<sc::device_memory>;
///   ew::map(d_x, d_y, n, sc::fn::gelu, stream);                // y = gelu(x)
///   ew::zip(d_y, d_r, d_y, n, sc::fn::add, stream);            // y += r, in place
///   ew::zip_rows(d_y, d_bias, d_y, rows, cols, sc::fn::add, stream);  // y[r, c] += bias[c]
/// @endcode
/// This header launches kernels: include it from CUDA sources (nvcc).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../comm/communicator.hpp"
#include "../detail/elementwise_exec.hpp"
#include "check.hpp"
#include "dtypes.hpp"
#include "index_math.hpp"

namespace shardcast::device::detail {

template <int W, class T, class U, class F>
SHARDCAST_KERNEL void map_kernel(const T* in, U* out, std::size_t n, vector_split vs, F f) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if constexpr (W > 1) {
    const auto* vin = reinterpret_cast<const aligned_vector<T, W>*>(in + vs.head);
    auto* vout = reinterpret_cast<aligned_vector<U, W>*>(out + vs.head);
    for (std::size_t j = tid; j < vs.nvec; j += stride) {
      const aligned_vector<T, W> x = vin[j];
      aligned_vector<U, W> y;
#pragma unroll
      for (int e = 0; e < W; ++e) y.v[e] = convert<U>(f(x.v[e]));
      vout[j] = y;
    }
  }
  const std::size_t ns = scalar_count(n, vs, W);
  for (std::size_t i = tid; i < ns; i += stride) {
    const std::size_t e = scalar_index(vs, W, i);
    out[e] = convert<U>(f(in[e]));
  }
}

template <int W, class T, class U, class V, class F>
SHARDCAST_KERNEL void zip_kernel(const T* a, const U* b, V* out, std::size_t n, vector_split vs, F f) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if constexpr (W > 1) {
    const auto* va = reinterpret_cast<const aligned_vector<T, W>*>(a + vs.head);
    const auto* vb = reinterpret_cast<const aligned_vector<U, W>*>(b + vs.head);
    auto* vout = reinterpret_cast<aligned_vector<V, W>*>(out + vs.head);
    for (std::size_t j = tid; j < vs.nvec; j += stride) {
      const aligned_vector<T, W> x = va[j];
      const aligned_vector<U, W> y = vb[j];
      aligned_vector<V, W> z;
#pragma unroll
      for (int e = 0; e < W; ++e) z.v[e] = convert<V>(f(x.v[e], y.v[e]));
      vout[j] = z;
    }
  }
  const std::size_t ns = scalar_count(n, vs, W);
  for (std::size_t i = tid; i < ns; i += stride) {
    const std::size_t e = scalar_index(vs, W, i);
    out[e] = convert<V>(f(a[e], b[e]));
  }
}

/// out[e] = f(a[e], row[e % cols]); vectors over `a` and `out`, the row read per element
/// (it is small and stays in cache).
template <int W, class T, class U, class V, class F>
SHARDCAST_KERNEL void zip_rows_kernel(const T* a, const U* row, V* out, std::size_t n, std::size_t cols, vector_split vs, F f) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if constexpr (W > 1) {
    const auto* va = reinterpret_cast<const aligned_vector<T, W>*>(a + vs.head);
    auto* vout = reinterpret_cast<aligned_vector<V, W>*>(out + vs.head);
    for (std::size_t j = tid; j < vs.nvec; j += stride) {
      const aligned_vector<T, W> x = va[j];
      aligned_vector<V, W> z;
      std::size_t c = (vs.head + j * std::size_t(W)) % cols;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        z.v[e] = convert<V>(f(x.v[e], row[c]));
        c = c + 1 == cols ? 0 : c + 1;
      }
      vout[j] = z;
    }
  }
  const std::size_t ns = scalar_count(n, vs, W);
  for (std::size_t i = tid; i < ns; i += stride) {
    const std::size_t e = scalar_index(vs, W, i);
    out[e] = convert<V>(f(a[e], row[e % cols]));
  }
}

/// out[e] = f(a[e], b[(e / (mid*inner))*inner + e % inner]): b broadcast along the middle
/// dim of a row-major [outer, mid, inner] array. One element per thread and step; the b
/// element is read per element (b is mid times smaller than a and stays in cache).
template <class T, class U, class V, class F>
SHARDCAST_KERNEL void zip_broadcast_kernel(const T* a, const U* b, V* out, std::size_t n, std::size_t mid, std::size_t inner, F f) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t plane = mid * inner;
  for (std::size_t e = tid; e < n; e += stride) out[e] = convert<V>(f(a[e], b[(e / plane) * inner + e % inner]));
}

template <class... P>
vector_split split_arrays(std::size_t n, int w, const P*... p) {
  const std::uintptr_t addrs[] = {reinterpret_cast<std::uintptr_t>(p)...};
  const std::size_t sizes[] = {sizeof(P)...};
  return split_for_vectors(n, w, addrs, sizes, int(sizeof...(P)));
}

template <class... P>
constexpr int width_of() {
  constexpr std::size_t sizes[] = {sizeof(P)...};
  return vector_width(sizes, int(sizeof...(P)));
}

inline unsigned elementwise_grid(std::size_t n, const vector_split& vs, int w, unsigned block) {
  const std::size_t ns = scalar_count(n, vs, w);
  return grid_for(static_cast<std::int64_t>(vs.nvec > ns ? vs.nvec : ns), block);
}

}  // namespace shardcast::device::detail

namespace shardcast::detail {

/// Elementwise loops on device memory (see the file comment). Every call is stream-ordered
/// on `s` and returns without waiting for the device; n == 0 launches nothing.
template <>
struct elementwise_exec<device_memory> {
  /// out[i] = f(in[i]) for i < n.
  /// @tparam T input element type; @tparam U output element type (the result of f converts to it).
  /// @throws cuda_error if the launch fails.
  template <class T, class U, class F>
  static void map(const T* in, U* out, std::size_t n, F f, cudaStream_t s = {}) {
    if (n == 0) return;
    namespace dd = device::detail;
    constexpr int w = dd::width_of<T, U>();
    const dd::vector_split vs = dd::split_arrays(n, w, in, static_cast<const U*>(out));
    constexpr unsigned block = 256;
    dd::map_kernel<w><<<dd::elementwise_grid(n, vs, w, block), block, 0, s>>>(in, out, n, vs, f);
    SHARDCAST_CUDA_CHECK_LAUNCH();
  }

  /// out[i] = f(a[i], b[i]) for i < n.
  /// @throws cuda_error if the launch fails.
  template <class T, class U, class V, class F>
  static void zip(const T* a, const U* b, V* out, std::size_t n, F f, cudaStream_t s = {}) {
    if (n == 0) return;
    namespace dd = device::detail;
    constexpr int w = dd::width_of<T, U, V>();
    const dd::vector_split vs = dd::split_arrays(n, w, a, b, static_cast<const V*>(out));
    constexpr unsigned block = 256;
    dd::zip_kernel<w><<<dd::elementwise_grid(n, vs, w, block), block, 0, s>>>(a, b, out, n, vs, f);
    SHARDCAST_CUDA_CHECK_LAUNCH();
  }

  /// out[r*cols + c] = f(a[r*cols + c], row[c]) for r < rows, c < cols: a row vector
  /// broadcast over the rows of a row-major [rows, cols] array (e.g. a bias).
  /// @throws cuda_error if the launch fails.
  template <class T, class U, class V, class F>
  static void zip_rows(const T* a, const U* row, V* out, std::size_t rows, std::size_t cols, F f, cudaStream_t s = {}) {
    const std::size_t n = rows * cols;
    if (n == 0) return;
    namespace dd = device::detail;
    constexpr int w = dd::width_of<T, V>();
    const dd::vector_split vs = dd::split_arrays(n, w, a, static_cast<const V*>(out));
    constexpr unsigned block = 256;
    dd::zip_rows_kernel<w><<<dd::elementwise_grid(n, vs, w, block), block, 0, s>>>(a, row, out, n, cols, vs, f);
    SHARDCAST_CUDA_CHECK_LAUNCH();
  }

  /// out[(o*mid + m)*inner + k] = f(a[(o*mid + m)*inner + k], b[o*inner + k]): b broadcast
  /// along the middle dim of a row-major [outer, mid, inner] array.
  /// @throws cuda_error if the launch fails.
  template <class T, class U, class V, class F>
  static void zip_broadcast(const T* a, const U* b, V* out, std::size_t outer, std::size_t mid, std::size_t inner, F f, cudaStream_t s = {}) {
    const std::size_t n = outer * mid * inner;
    if (n == 0) return;
    namespace dd = device::detail;
    constexpr unsigned block = 256;
    dd::zip_broadcast_kernel<<<dd::grid_for(static_cast<std::int64_t>(n), block), block, 0, s>>>(a, b, out, n, mid, inner, f);
    SHARDCAST_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace shardcast::detail
