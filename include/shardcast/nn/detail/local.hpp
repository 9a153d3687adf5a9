#pragma once
/// @file nn/detail/local.hpp
/// The local (per-rank, no communication) computations of the parallel layers, written
/// over the mesh's memory space: products through the GEMM hook (with its transposed
/// forms), elementwise loops through `local_exec<Space>`, embedding gathers and
/// scatter-adds through `embedding_exec<Space>`, and buffers through `memory_ops<Space>`.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../comm/communicator.hpp"
#include "../../detail/elementwise_exec.hpp"
#include "../../detail/host_ops.hpp"
#include "../../distribute.hpp"
#include "../../dtensor.hpp"
#include "../../error.hpp"
#include "../../ops/elementwise.hpp"
#include "../../ops/functors.hpp"
#include "../../ops/gemm.hpp"
#include "../../ops/matmul.hpp"
#include "layout_ops.hpp"

namespace shardcast::nn::detail {

/// A layer input of element type TX fits a layer of element type T: TX is T or const T
/// (the layers only read their inputs).
template <class TX, class T>
concept elements_of = shardcast::detail::same_elements_v<TX, T>;

/// Elementwise loops on local pieces (`map`, `zip`, `zip_rows`): the memory space's
/// `shardcast::detail::elementwise_exec` (host loops in ops/elementwise.hpp, kernels in
/// cuda/elementwise.cuh).
template <class Space>
struct local_exec : shardcast::detail::elementwise_exec<Space> {};

/// Embedding lookups and their gradient on local pieces. Declared for every memory
/// space, defined for host memory; a device backend specialises it with kernels.
/// @code
///   gather(ids, n, table, v0, nv, h, out, s);       // out[r, :] = table[ids[r] - v0, :] if v0 <= ids[r] < v0 + nv, else 0
///   scatter_add(ids, n, dy, v0, nv, h, grad, s);    // grad (nv x h) = 0; grad[ids[r] - v0, :] += dy[r, :] for ids in range
/// @endcode
template <class Space>
struct embedding_exec;

template <>
struct embedding_exec<host_memory> {
  template <class I, class T>
  static void gather(const I* ids, std::size_t n, const T* table, std::int64_t v0, std::int64_t nv, std::int64_t h, T* out,
                     host_stream = {}) {
    const auto uh = static_cast<std::size_t>(h);
    for (std::size_t r = 0; r < n; ++r) {
      const auto id = static_cast<std::int64_t>(ids[r]);  // compared before subtracting: id - v0 could overflow
      const std::int64_t v = id >= v0 ? id - v0 : -1;
      T* o = out + r * uh;
      if (v >= 0 && v < nv) std::copy(table + static_cast<std::size_t>(v) * uh, table + static_cast<std::size_t>(v + 1) * uh, o);
      else std::fill(o, o + uh, T{});
    }
  }
  template <class I, class T>
  static void scatter_add(const I* ids, std::size_t n, const T* dy, std::int64_t v0, std::int64_t nv, std::int64_t h, T* grad,
                          host_stream = {}) {
    const auto uh = static_cast<std::size_t>(h);
    std::fill(grad, grad + static_cast<std::size_t>(nv) * uh, T{});
    for (std::size_t r = 0; r < n; ++r) {
      const auto id = static_cast<std::int64_t>(ids[r]);
      const std::int64_t v = id >= v0 ? id - v0 : -1;
      if (v < 0 || v >= nv) continue;
      T* g = grad + static_cast<std::size_t>(v) * uh;
      const T* d = dy + r * uh;
      for (std::size_t c = 0; c < uh; ++c) g[c] = shardcast::detail::wrapping_add(g[c], d[c]);  // integers wrap, as every sum here
    }
  }
};

template <class Space>
concept has_embedding_exec = requires { sizeof(embedding_exec<Space>); };

/// C = op(A) * op(B) for rank-2 dtensors: the public matmul<TA, TB> (its layout follows the
/// matmul rule table applied to op(A) and op(B)). No communication.
/// @throws layout_error if the inner extents differ
template <gemm_op TA, gemm_op TB, class T, class LA, class LB, class Mesh, class Gemm>
dtensor<T, 2, matmul_layout_t<LA, LB, 2, 2, TA, TB>, Mesh> gemm_op_dtensor(const dtensor<T, 2, LA, Mesh>& a, const dtensor<T, 2, LB, Mesh>& b,
                                                                         const Gemm& gemm, typename Mesh::stream_type s) {
  return shardcast::matmul<TA, TB>(a, b, gemm, s);
}

/// Column sums s[c] = sum_r x[r, c] of a rank-2 dtensor, as the GEMM ones[1, rows] * x;
/// the result's layout is colsum_layout_t<L> (a token shard becomes a partial sum).
template <class T, class L, class Mesh, class Gemm>
dtensor<T, 1, colsum_layout_t<L>, Mesh> colsum(const dtensor<T, 2, L, Mesh>& x, const Gemm& gemm, typename Mesh::stream_type s) {
  using ops = shardcast::detail::memory_ops<typename Mesh::memory_space>;
  auto out = empty<colsum_layout_t<L>, T>(x.mesh(), std::array<std::int64_t, 1>{x.global_extents()[1]}, s);
  const box& bx = x.local_box();
  SHARDCAST_EXPECTS(out.local_box().off[0] == bx.off[1] && out.local_box().ext[0] == bx.ext[1],
                    "shardcast::nn: column sums do not line up with the columns (internal error)");
  const std::int64_t rows = bx.ext[0], cols = bx.ext[1];
  if (cols == 0) return out;
  auto ones = ops::template allocate<T>(static_cast<std::size_t>(std::max<std::int64_t>(rows, 1)), s);
  ops::fill(ones.get(), static_cast<std::size_t>(std::max<std::int64_t>(rows, 1)), T(1), s);
  // As matmul calls it: a const functor whose call operator is not const is called on a copy.
  auto&& g = shardcast::detail::callable_gemm<T>(gemm);
  g(gemm_op::n, gemm_op::n, std::int64_t{1}, cols, rows, static_cast<const T*>(ones.get()), std::max<std::int64_t>(rows, 1), x.data(),
       cols, out.data(), cols, false);
  return out;
}

/// y[r, c] += b[c] on the local pieces (b's shard of the columns must match y's).
template <class T, class LY, class LB, class Mesh>
void add_bias_rows(const dtensor<T, 2, LY, Mesh>& y, const dtensor<T, 1, LB, Mesh>& b, typename Mesh::stream_type s) {
  const box &by = y.local_box(), &bb = b.local_box();
  SHARDCAST_EXPECTS(by.off[1] == bb.off[0] && by.ext[1] == bb.ext[0],
                    "shardcast::nn: the bias piece does not line up with the output's columns (bias of the wrong size?)");
  if (y.local_size() == 0) return;
  local_exec<typename Mesh::memory_space>::zip_rows(y.data(), b.data(), y.data(), static_cast<std::size_t>(by.ext[0]),
                                                    static_cast<std::size_t>(by.ext[1]), fn::add, s);
}

}  // namespace shardcast::nn::detail
