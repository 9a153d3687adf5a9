#pragma once
/// @file cuda/index_math.hpp
/// The host-side planning and the index math of the device kernels, in plain C++ so that
/// it is unit-tested with a host compiler (tests/cudahost) and reused verbatim inside the
/// kernels (SHARDCAST_HOST_DEVICE). Nothing here includes a CUDA header.
///
/// - vector splits: which elements of an elementwise loop go through aligned vector
///   loads/stores and which go one at a time (cuda/elementwise.cuh);
/// - region plans: an N-D box copy between row-major buffers, with dims that are
///   contiguous in both buffers merged and the widest unit every address and stride
///   allows (cuda/pack.cuh);
/// - the row-major to column-major argument mapping of a GEMM (cuda/gemm.hpp).

#include <cstddef>
#include <cstdint>

#include "../config.hpp"
#include "../ops/gemm.hpp"
#include "../split.hpp"

namespace shardcast::device::detail {

// ---------------------------------------------------------------------------------------
// Vector splits
// ---------------------------------------------------------------------------------------

/// N elements of T moved as one load or store (alignment: the whole vector).
template <class T, int N>
struct alignas(sizeof(T) * N) aligned_vector {
  T v[N];
};

/// Elements per vector for a loop over arrays whose element sizes are `sizes[0..k)`: 16 bytes
/// of the widest type when every size is a power of two no larger than 16, else 1 (scalar).
SHARDCAST_HOST_DEVICE constexpr int vector_width(const std::size_t* sizes, int k) {
  std::size_t widest = 1;
  for (int j = 0; j < k; ++j) {
    const std::size_t s = sizes[j];
    if (s == 0 || s > 16 || (s & (s - 1)) != 0) return 1;
    if (s > widest) widest = s;
  }
  return static_cast<int>(16 / widest);
}

/// How a loop of n elements is cut: `head` scalar elements, then `nvec` vectors of `width`
/// elements, then the rest (the tail) scalar.
struct vector_split {
  std::size_t head = 0;
  std::size_t nvec = 0;
};

/// Splits n elements so that element `head` is aligned to a whole vector in every array at
/// once: array j (address addrs[j], element size sizes[j]) needs `width * sizes[j]`-byte
/// alignment for a vector. That is possible only when every array is at the same element
/// phase modulo `width`; otherwise (or for width 1) everything is scalar (head = n).
SHARDCAST_HOST_DEVICE constexpr vector_split split_for_vectors(std::size_t n, int width, const std::uintptr_t* addrs,
                                                               const std::size_t* sizes, int k) {
  vector_split s;
  s.head = n;
  if (width <= 1 || n == 0) return s;
  const std::size_t w = static_cast<std::size_t>(width);
  std::size_t phase = 0;
  for (int j = 0; j < k; ++j) {
    if (addrs[j] % sizes[j] != 0) return s;  // not even element-aligned: scalar
    const std::size_t p = (addrs[j] / sizes[j]) % w;
    if (j == 0) phase = p;
    else if (p != phase) return s;
  }
  const std::size_t head = (w - phase) % w;
  if (head >= n) return s;
  s.head = head;
  s.nvec = (n - head) / w;
  return s;
}

/// Number of elements a split leaves to scalar code (head + tail).
SHARDCAST_HOST_DEVICE constexpr std::size_t scalar_count(std::size_t n, const vector_split& s, int width) {
  return n - s.nvec * static_cast<std::size_t>(width);
}

/// The element index of the i-th scalar element (0 <= i < scalar_count): the head first,
/// then the tail after the vectors.
SHARDCAST_HOST_DEVICE constexpr std::size_t scalar_index(const vector_split& s, int width, std::size_t i) {
  return i < s.head ? i : s.head + s.nvec * static_cast<std::size_t>(width) + (i - s.head);
}

// ---------------------------------------------------------------------------------------
// Region plans
// ---------------------------------------------------------------------------------------

/// A strided N-D copy between two row-major buffers, in units of `unit` bytes, after
/// merging dims that are contiguous in both buffers. Dims are outermost first; the
/// innermost (`ext[rank - 1]`) is contiguous in both buffers (stride 1 unit).
struct region_plan {
  int rank = 0;                                ///< merged dims (0: nothing to copy)
  std::int64_t ext[SHARDCAST_MAX_RANK]{};      ///< extents in units (innermost) or rows
  std::int64_t sstride[SHARDCAST_MAX_RANK]{};  ///< source strides in units (innermost: 1)
  std::int64_t dstride[SHARDCAST_MAX_RANK]{};  ///< destination strides in units
  std::int64_t total = 0;                      ///< units to copy
  std::int64_t src_byte_offset = 0;            ///< where the region starts in the source, bytes
  std::int64_t dst_byte_offset = 0;            ///< where it starts in the destination, bytes
  int unit = 1;                                ///< bytes per unit (1, 2, 4, 8 or 16)

  /// Units per row (the merged innermost dim).
  SHARDCAST_HOST_DEVICE constexpr std::int64_t row_units() const { return rank ? ext[rank - 1] : 0; }
  /// Number of rows (product of the outer merged dims).
  SHARDCAST_HOST_DEVICE constexpr std::int64_t rows() const { return rank ? total / ext[rank - 1] : 0; }
  /// True when the region is one contiguous run in both buffers (a single memcpy).
  SHARDCAST_HOST_DEVICE constexpr bool contiguous() const { return rank == 1; }
};

/// Plans the copy of global box `region` from a buffer holding `src_box` row-major (at
/// address `src_addr`) to one holding `dst_box` (at `dst_addr`), elements of `elem` bytes.
/// The caller has checked that region lies inside both boxes and all three have one rank.
SHARDCAST_HOST_DEVICE constexpr region_plan plan_region(std::size_t elem, const box& src_box, const box& dst_box, const box& region,
                                                        std::uintptr_t src_addr, std::uintptr_t dst_addr) {
  region_plan p;
  const int r = region.rank;
  if (r < 1) return p;
  for (int d = 0; d < r; ++d)
    if (region.ext[d] == 0) return p;
  const auto e = static_cast<std::int64_t>(elem);
  // Element strides of both buffers and the region's start offsets in them.
  std::int64_t ss[SHARDCAST_MAX_RANK]{}, ds[SHARDCAST_MAX_RANK]{};
  std::int64_t sacc = 1, dacc = 1, soff = 0, doff = 0;
  for (int d = r - 1; d >= 0; --d) {
    ss[d] = sacc;
    ds[d] = dacc;
    soff += (region.off[d] - src_box.off[d]) * sacc;
    doff += (region.off[d] - dst_box.off[d]) * dacc;
    sacc *= src_box.ext[d];
    dacc *= dst_box.ext[d];
  }
  // Merge, innermost first: dim d joins the current group when one step along d is exactly
  // one whole group in both buffers.
  std::int64_t mext[SHARDCAST_MAX_RANK]{}, mss[SHARDCAST_MAX_RANK]{}, mds[SHARDCAST_MAX_RANK]{};
  int n = 1;
  mext[0] = region.ext[r - 1];
  mss[0] = ss[r - 1];
  mds[0] = ds[r - 1];
  for (int d = r - 2; d >= 0; --d) {
    const int last = n - 1;
    if (mss[last] * mext[last] == ss[d] && mds[last] * mext[last] == ds[d]) {
      mext[last] *= region.ext[d];
    } else {
      mext[n] = region.ext[d];
      mss[n] = ss[d];
      mds[n] = ds[d];
      ++n;
    }
  }
  p.src_byte_offset = soff * e;
  p.dst_byte_offset = doff * e;
  // The widest unit (<= 16 bytes) dividing both start addresses, the row length in bytes
  // and every outer stride in bytes. The innermost stride is one element in both buffers
  // (row-major) and is one unit whatever the unit, so it does not constrain it.
  std::uintptr_t bits = (src_addr + static_cast<std::uintptr_t>(p.src_byte_offset)) |
                        (dst_addr + static_cast<std::uintptr_t>(p.dst_byte_offset)) | static_cast<std::uintptr_t>(mext[0] * e);
  for (int k = 1; k < n; ++k) bits |= static_cast<std::uintptr_t>(mss[k] * e) | static_cast<std::uintptr_t>(mds[k] * e);
  int w = 16;
  while (w > 1 && (bits & static_cast<std::uintptr_t>(w - 1)) != 0) w /= 2;
  p.unit = w;
  p.rank = n;
  p.total = 1;
  for (int k = 0; k < n; ++k) {
    const int o = n - 1 - k;  // the plan is outermost first; the merged arrays innermost first
    p.ext[o] = k == 0 ? mext[0] * e / w : mext[k];
    p.sstride[o] = k == 0 ? 1 : mss[k] * e / w;
    p.dstride[o] = k == 0 ? 1 : mds[k] * e / w;
    p.total *= p.ext[o];
  }
  return p;
}

/// Offset, in units, of the start of row `row` (0 <= row < p.rows()) in the source
/// (`dst == false`) or the destination buffer, relative to the region's start.
SHARDCAST_HOST_DEVICE constexpr std::int64_t row_offset(const region_plan& p, std::int64_t row, bool dst) {
  std::int64_t off = 0;
  for (int k = p.rank - 2; k >= 0; --k) {
    const std::int64_t c = row % p.ext[k];
    row /= p.ext[k];
    off += c * (dst ? p.dstride[k] : p.sstride[k]);
  }
  return off;
}

/// Source and destination offsets, in units, of unit `idx` (0 <= idx < p.total) of the copy.
SHARDCAST_HOST_DEVICE constexpr void unit_offsets(const region_plan& p, std::int64_t idx, std::int64_t& src, std::int64_t& dst) {
  const std::int64_t inner = p.ext[p.rank - 1];
  const std::int64_t row = idx / inner, col = idx - row * inner;
  src = row_offset(p, row, false) + col;
  dst = row_offset(p, row, true) + col;
}

// ---------------------------------------------------------------------------------------
// GEMM: row-major arguments to a column-major library call
// ---------------------------------------------------------------------------------------

/// Arguments of a column-major GEMM `C' = op1(X) * op2(Y)` (BLAS order: transa, transb, m,
/// n, k, then X with ldx, Y with ldy, C with ldc) that computes the row-major
/// C[m,n] = op(A) * op(B). A row-major matrix is its transpose in column-major storage, so
/// C^T = op(B)^T * op(A)^T: X is B, Y is A, and the dims m and n swap.
struct column_major_gemm {
  bool trans_x = false, trans_y = false;  ///< transpose X (= B), Y (= A)
  std::int64_t m = 0, n = 0, k = 0;       ///< rows of C^T (= n), its columns (= m), inner dim
  std::int64_t ldx = 1, ldy = 1, ldc = 1; ///< leading dims of X (= ldb), Y (= lda), C
};

SHARDCAST_HOST_DEVICE constexpr column_major_gemm to_column_major(gemm_op ta, gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k,
                                                                  std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  column_major_gemm g;
  g.trans_x = tb == gemm_op::t;
  g.trans_y = ta == gemm_op::t;
  g.m = n;
  g.n = m;
  g.k = k;
  // BLAS wants every leading dim >= 1, even for an empty operand.
  g.ldx = ldb > 1 ? ldb : 1;
  g.ldy = lda > 1 ? lda : 1;
  g.ldc = ldc > 1 ? ldc : 1;
  return g;
}

/// True when the row strides fit the row-major shapes: A is stored m x k (k x m when ta is
/// t) and needs lda >= its columns; likewise B (k x n, or n x k) and C (m x n). Empty
/// operands need nothing.
SHARDCAST_HOST_DEVICE constexpr bool gemm_strides_valid(gemm_op ta, gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k,
                                                        std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) return false;
  const std::int64_t a_rows = ta == gemm_op::n ? m : k, a_cols = ta == gemm_op::n ? k : m;
  const std::int64_t b_rows = tb == gemm_op::n ? k : n, b_cols = tb == gemm_op::n ? n : k;
  const bool a_ok = a_rows == 0 || a_cols == 0 || lda >= a_cols;
  const bool b_ok = b_rows == 0 || b_cols == 0 || ldb >= b_cols;
  const bool c_ok = m == 0 || n == 0 || ldc >= n;
  return a_ok && b_ok && c_ok;
}

/// True when a strided batch of `batch` GEMMs (ops/gemm.hpp) is well formed: no stride is
/// negative, and C's matrices (m x n, row stride ldc) do not overlap, which would make the
/// products race: for more than one, stride_c is at least the span of one C, (m-1)*ldc + n.
/// A and B may repeat (stride 0: one matrix for every product).
SHARDCAST_HOST_DEVICE constexpr bool gemm_batch_valid(std::int64_t m, std::int64_t n, std::int64_t ldc, std::int64_t stride_a,
                                                      std::int64_t stride_b, std::int64_t stride_c, std::int64_t batch) {
  if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0) return false;
  if (batch <= 1 || m == 0 || n == 0) return true;
  return stride_c >= (m - 1) * ldc + n;
}

}  // namespace shardcast::device::detail
