#pragma once
/// @file ops/transpose.hpp
/// `transpose<Perm...>(x)`: permutes the dims of x (output dim k is input dim Perm[k], as
/// `torch.permute` / `numpy.transpose`); `transpose(x)` swaps the two dims of a rank-2 x.
/// No communication: each rank permutes its local piece into a new owning tensor. Layout
/// per mesh axis: shard<d> becomes shard<k> where Perm[k] == d; replicate and partial stay.
///
/// @code
///   // 2x2 mesh, x [m, n]: layout<shard<0>, shard<1>>
///   auto t = sc::transpose(x);              // [n, m]: layout<shard<1>, shard<0>>
///   // y [b, s, h]: layout<shard<1>, partial<sum>>
///   auto z = sc::transpose<0, 2, 1>(y);     // [b, h, s]: layout<shard<2>, partial<sum>>
/// @endcode
///
/// Local work goes through `detail::transpose_exec<memory_space>`: host loops here, and for
/// other memory spaces a portable version made of `detail::memory_ops` region copies (one per
/// run of the output that is contiguous in the input's order), which a memory space may
/// replace with a specialisation of its own (a tiled transpose kernel).

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../detail/host_ops.hpp"
#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../layout.hpp"
#include "elementwise.hpp"

namespace shardcast {

namespace detail {

/// A permutation of up to SHARDCAST_MAX_RANK dims, as a literal value.
struct dim_perm {
  int p[SHARDCAST_MAX_RANK]{};
  int rank = 0;
  constexpr int operator[](int k) const { return p[k]; }
  /// The position k with p[k] == d.
  constexpr int inverse(int d) const {
    for (int k = 0; k < rank; ++k)
      if (p[k] == d) return k;
    return -1;
  }
  constexpr bool valid() const {
    for (int k = 0; k < rank; ++k)
      if (p[k] < 0 || p[k] >= rank || inverse(p[k]) != k) return false;
    return true;
  }
};

template <int R, int... Perm>
constexpr dim_perm make_perm() {
  dim_perm q;
  q.rank = R;
  if constexpr (sizeof...(Perm) == 0) {
    for (int k = 0; k < R; ++k) q.p[k] = R - 1 - k;  // rank 2: (1, 0)
  } else {
    int k = 0;
    ((q.p[k++] = Perm), ...);
  }
  return q;
}

/// transpose on one mesh axis: shard<d> -> shard<position of d>.
constexpr placement_desc transpose_placement(const placement_desc& p, const dim_perm& q) {
  return p.is_shard() ? placement_desc::make_shard(q.inverse(p.dim)) : p;
}
constexpr runtime_layout transpose_rules(const runtime_layout& x, const dim_perm& q) {
  runtime_layout y = x;
  for (int a = 0; a < x.naxes; ++a) y[a] = transpose_placement(x[a], q);
  return y;
}

/// Local permutation for any memory space, from memory_ops region copies: the longest
/// suffix of output dims that keeps the input's order is copied as one region per index
/// of the remaining (prefix) output dims.
template <class Space>
struct portable_transpose {
  template <class T, class S>
  static void run(const T* in, const std::int64_t* in_ext, const dim_perm& q, T* out, S s) {
    const int R = q.rank;
    box src;
    src.rank = R;
    std::int64_t total = 1;
    for (int d = 0; d < R; ++d) total *= (src.ext[d] = in_ext[d]);
    if (total == 0) return;
    int j = R - 1;  // output dims [j, R) appear in increasing input order
    while (j > 0 && q[j - 1] < q[j]) --j;
    std::int64_t ostride[SHARDCAST_MAX_RANK];
    std::int64_t st = 1;
    for (int k = R - 1; k >= 0; --k) {
      ostride[k] = st;
      st *= in_ext[q[k]];
    }
    box region = src;
    for (int k = 0; k < j; ++k) region.ext[q[k]] = 1;
    std::int64_t idx[SHARDCAST_MAX_RANK]{};
    while (true) {
      std::int64_t o = 0;
      for (int k = 0; k < j; ++k) {
        region.off[q[k]] = idx[k];
        o += idx[k] * ostride[k];
      }
      memory_ops<Space>::copy_region(in, src, out + o, region, region, s);
      int k = j - 1;
      for (; k >= 0; --k) {
        if (++idx[k] < in_ext[q[k]]) break;
        idx[k] = 0;
      }
      if (k < 0) break;
    }
  }
};

/// The per-memory-space local permutation: run(in, in_ext, perm, out, stream) writes the
/// row-major tensor `in` (extents in_ext) permuted by `perm` to `out`.
template <class Space>
struct transpose_exec : portable_transpose<Space> {};

/// Host loops: walks the output in order, the input with the permuted strides.
template <>
struct transpose_exec<host_memory> {
  template <class T>
  static void run(const T* in, const std::int64_t* in_ext, const dim_perm& q, T* out, host_stream = {}) {
    const int R = q.rank;
    std::int64_t istride[SHARDCAST_MAX_RANK], ext[SHARDCAST_MAX_RANK], step[SHARDCAST_MAX_RANK];
    std::int64_t st = 1, total = 1;
    for (int d = R - 1; d >= 0; --d) {
      istride[d] = st;
      st *= in_ext[d];
    }
    for (int k = 0; k < R; ++k) {
      ext[k] = in_ext[q[k]];
      step[k] = istride[q[k]];
      total *= ext[k];
    }
    if (total == 0) return;
    if (R <= 1) {
      memory_ops<host_memory>::copy(out, in, static_cast<std::size_t>(total));
      return;
    }
    const std::int64_t n = ext[R - 1], inner_step = step[R - 1];
    std::int64_t idx[SHARDCAST_MAX_RANK]{};
    std::int64_t src = 0;
    T* o = out;
    while (true) {
      for (std::int64_t i = 0; i < n; ++i) o[i] = in[src + i * inner_step];
      o += n;
      int k = R - 2;
      for (; k >= 0; --k) {
        src += step[k];
        if (++idx[k] < ext[k]) break;
        src -= step[k] * ext[k];
        idx[k] = 0;
      }
      if (k < 0) break;
    }
  }
};

template <int R, int... Perm>
struct transpose_permutation_invalid {
  static_assert(R != R,
                "shardcast::transpose<Perm...>: Perm must list every dim 0..R-1 of x exactly once (output dim k is input dim "
                "Perm[k]), e.g. transpose<1, 0>(x) for rank 2 or transpose<0, 2, 1>(x) for rank 3; transpose(x) without Perm "
                "is for rank 2 only.");
};

template <int R, int... Perm>
constexpr bool perm_ok() {
  if constexpr (sizeof...(Perm) == 0) return R == 2;
  else if constexpr (sizeof...(Perm) != static_cast<std::size_t>(R)) return false;
  else return make_perm<R, Perm...>().valid();
}

/// `type` is void for a valid permutation; otherwise transpose_permutation_invalid's static_assert fires.
template <int R, int... Perm>
struct check_perm : std::conditional_t<perm_ok<R, Perm...>(), std::type_identity<void>, fail_with<transpose_permutation_invalid<R, Perm...>, void>> {};

}  // namespace detail

/// The layout of transpose<Perm...>(x) for x of layout L and rank R.
/// Example: transpose_layout_t<layout<shard<0>, replicate>, 2, 1, 0> is layout<shard<1>, replicate>.
template <class L, int R, int... Perm>
struct transpose_layout {
  static_assert(layout_type<L>, "shardcast::transpose_layout: L must be a compile-time layout<P...>.");
  using checked = typename detail::check_perm<R, Perm...>::type;
  using type = typename std::conditional_t<detail::perm_ok<R, Perm...>(),
                                           detail::layout_from<detail::transpose_rules(L::desc, detail::make_perm<R, Perm...>())>,
                                           std::type_identity<L>>::type;
};
/// Shorthand for transpose_layout<L, R, Perm...>::type.
template <class L, int R, int... Perm>
using transpose_layout_t = typename transpose_layout<L, R, Perm...>::type;

/// Permutes the dims of x: output dim k is input dim Perm[k]; without Perm, x must be
/// rank 2 and its dims are swapped. The result is a new owning tensor.
/// @tparam Perm a permutation of 0..R-1 (or nothing, for rank 2)
/// @param x input (unchanged)
/// @param s stream for device meshes (host meshes ignore it)
/// @code
///   // x [4, 6]: layout<shard<0>, shard<1>> on a 2x2 mesh; rank (1,0) holds rows 2..3, columns 0..2
///   auto t = sc::transpose(x);   // [6, 4]: layout<shard<1>, shard<0>>; rank (1,0) holds rows 0..2, columns 2..3
/// @endcode
template <int... Perm, class T, int R, class L, class Mesh>
auto transpose(const dtensor<T, R, L, Mesh>& x, typename Mesh::stream_type s = {}) {
  using checked [[maybe_unused]] = typename detail::check_perm<R, Perm...>::type;
  constexpr detail::dim_perm q = detail::make_perm<R, Perm...>();
  constexpr bool dyn = detail::is_dynamic_v<L>;
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>, transpose_layout<L, R, Perm...>>::type;
  const auto& ex = x.global_extents();
  std::array<std::int64_t, static_cast<std::size_t>(R)> ey{};
  for (int k = 0; k < R; ++k) ey[static_cast<std::size_t>(k)] = ex[static_cast<std::size_t>(q[k])];
  auto y = detail::make_output<std::remove_const_t<T>, R, LY>(x.mesh(), ey, detail::transpose_rules(x.layout(), q), s);
  const box &bx = x.local_box(), &by = y.local_box();
  for (int k = 0; k < R; ++k)
    SHARDCAST_EXPECTS(by.off[k] == bx.off[q[k]] && by.ext[k] == bx.ext[q[k]],
                      "shardcast::transpose: the local piece of the result is not the permuted local piece of the input");
  detail::transpose_exec<typename Mesh::memory_space>::run(x.data(), bx.ext, q, y.data(), s);
  return y;
}

}  // namespace shardcast
