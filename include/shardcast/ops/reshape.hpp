#pragma once
/// @file ops/reshape.hpp
/// `flatten<First, Last>(x)` merges dims First..Last of x into one (row-major, as
/// `torch.flatten(x, First, Last)`); `unflatten<D>(x, {s0, s1, ...})` splits dim D into dims
/// of those sizes (as `torch.unflatten`; one size may be -1, inferred). Neither moves data:
/// the result is a new handle on x's storage (as `torch.Tensor.view`; copies of a dtensor
/// share storage too), with x's element type, const included.
///
/// Layout per mesh axis: replicate and partial stay; a shard of a dim before the merged
/// (split) ones stays, a shard of a dim after them moves by the change of rank; a shard of
/// the first merged dim (of the split dim) becomes a shard of the merged dim (of the first
/// new dim). A shard of any other merged dim is a compile error (each rank's merged piece
/// would not be one run of the merged dim). When the first merged dim (the split dim) is
/// sharded, each rank's piece must still be a balanced piece of the result: checked on
/// every rank for the whole mesh (a pure function of the layout, the mesh shape and the
/// extents, so every rank that passes the same arguments reaches the same verdict; the
/// sizes are not compared between ranks), throwing `layout_error` otherwise. It holds
/// whenever the mesh axes that shard that dim divide its extent (for unflatten: the first
/// new size, as heads over tensor-parallel ranks) evenly, and always when the other merged
/// dims have extent 1. A tensor the caller gives up (`flatten(std::move(x))`) is left empty.
///
/// @code
///   // q [b, s, h * dh]: layout<shard<0>, shard<2>> (batch over axis 0, heads over axis 1)
///   auto q4 = sc::unflatten<2>(q, {heads, dh});   // [b, s, heads, dh]: layout<shard<0>, shard<2>>
///   auto q3 = sc::flatten<2, 3>(q4);              // back to [b, s, h * dh]
/// @endcode

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "elementwise.hpp"

namespace shardcast {

namespace detail {

/// A layout verdict of flatten/unflatten: the result's layout, or the first mesh axis that
/// shards a merged dim other than the first (-1 when there is none).
struct reshape_verdict {
  int bad_axis = -1;
  runtime_layout out{};
};

/// flatten of dims [first, last] on every mesh axis.
constexpr reshape_verdict flatten_rules(const runtime_layout& x, int first, int last) {
  reshape_verdict v;
  v.out = x;
  for (int a = 0; a < x.naxes; ++a) {
    const placement_desc& p = x[a];
    if (!p.is_shard() || p.dim <= first) continue;
    if (p.dim <= last) {
      if (v.bad_axis < 0) v.bad_axis = a;
      continue;
    }
    v.out[a] = placement_desc::make_shard(p.dim - (last - first));
  }
  return v;
}

/// unflatten of dim d into n dims on every mesh axis.
constexpr runtime_layout unflatten_rules(const runtime_layout& x, int d, int n) {
  runtime_layout y = x;
  for (int a = 0; a < x.naxes; ++a)
    if (x[a].is_shard() && x[a].dim > d) y[a] = placement_desc::make_shard(x[a].dim + n - 1);
  return y;
}

template <int Axis, class P, int First, int Last>
struct flatten_merges_a_sharded_inner_dim_on_mesh_axis {
  static_assert(Axis != Axis,
                "shardcast::flatten<First, Last>: the mesh axis named in flatten_merges_a_sharded_inner_dim_on_mesh_axis<Axis, P, "
                "First, Last> shards (P) one of the merged dims after First, so a rank's piece would not be one run of the merged "
                "dim; only dim First may be sharded. Redistribute that dim to replicate on that axis first, or transpose the "
                "sharded dim to the front of the merged ones.");
};

template <int R, int First, int Last>
inline constexpr bool flatten_dims_ok = 0 <= First && First <= Last && Last < R;

/// Checks, for every mesh coordinate, that x's piece and the result's piece hold the same
/// run of the merged dim `d`: the merged side (layout lm, extents em) is the result of a
/// flatten and x of an unflatten (`x_merged`), the split side (ls, es) the other, whose
/// run is its outer dim's piece times `inner`. Only a layout that shards dim `d` can fail,
/// and only a tensor with elements (an empty one has nothing to place). Throws layout_error
/// naming a failing rank.
template <class Who, class Mesh, std::size_t RM, std::size_t RS>
void check_merged_pieces(const Who& who, const Mesh& m, const runtime_layout& lm, const std::array<std::int64_t, RM>& em,
                         const runtime_layout& ls, const std::array<std::int64_t, RS>& es, int d, std::int64_t inner, bool x_merged) {
  bool sharded = false;
  for (int a = 0; a < lm.naxes; ++a) sharded = sharded || lm[a].is_shard(d);
  if (!sharded || std::find(em.begin(), em.end(), std::int64_t{0}) != em.end()) return;
  const auto& shape = m.shape();
  int ranks = 1;
  for (int s : shape) ranks *= s;
  std::array<int, static_cast<std::size_t>(Mesh::naxes)> c{};
  for (int r = 0; r < ranks; ++r) {
    rank_to_coord(r, shape.data(), Mesh::naxes, c.data());
    const box bm = local_box(lm, shape.data(), c.data(), em.data(), static_cast<int>(RM));
    const box bs = local_box(ls, shape.data(), c.data(), es.data(), static_cast<int>(RS));
    const std::int64_t s0 = bs.off[d] * inner, s1 = (bs.off[d] + bs.ext[d]) * inner, m0 = bm.off[d], m1 = bm.off[d] + bm.ext[d];
    if (s0 == m0 && s1 == m1) continue;
    const auto range = [](std::int64_t a, std::int64_t b) { return std::to_string(a) + ".." + std::to_string(b); };
    std::string coord = "(";
    for (int a = 0; a < Mesh::naxes; ++a) coord += (a ? ", " : "") + std::to_string(c[static_cast<std::size_t>(a)]);
    const std::string ds = std::to_string(d);
    throw layout_error(who() + ": layout \"" + to_string(x_merged ? lm : ls) + "\" on a " + describe_mesh(m) + ": dim " + ds +
                       " is sharded and its pieces do not stay balanced pieces: the rank at mesh coordinates " + coord +
                       ") holds elements " + range(x_merged ? m0 : s0, x_merged ? m1 : s1) + " of the merged extent " +
                       std::to_string(em[static_cast<std::size_t>(d)]) + ", but the result's layout gives it " +
                       range(x_merged ? s0 : m0, x_merged ? s1 : m1) +
                       "; redistribute so that dim " + ds + " is not sharded first, or choose " +
                       (x_merged ? "a first size " + std::to_string(es[static_cast<std::size_t>(d)]) + " that the mesh axes sharding dim " + ds +
                                       " divide evenly"
                                 : "an extent of dim " + ds + " (" + std::to_string(es[static_cast<std::size_t>(d)]) +
                                       ") that the mesh axes sharding it divide evenly"));
  }
}

}  // namespace detail

/// The layout of flatten<First, Last>(x) for x of layout L and rank R.
/// Example: flatten_layout_t<layout<shard<0>, shard<3>>, 4, 1, 2> is layout<shard<0>, shard<2>>.
template <class L, int R, int First, int Last>
struct flatten_layout {
  static_assert(layout_type<L>, "shardcast::flatten_layout: L must be a compile-time layout<P...>.");
  static_assert(detail::flatten_dims_ok<R, First, Last>,
                "shardcast::flatten<First, Last>: need 0 <= First <= Last < rank of x (the dims First..Last are merged).");
  static constexpr detail::reshape_verdict v = detail::flatten_rules(L::desc, First, Last);
  static constexpr int axis = v.bad_axis < 0 ? 0 : v.bad_axis;
  using type = typename std::conditional_t<
      v.bad_axis < 0, detail::layout_from<v.out>,
      detail::fail_with<detail::flatten_merges_a_sharded_inner_dim_on_mesh_axis<axis, typename detail::placement_on_axis<L, axis>::type,
                                                                                First, Last>,
                        L>>::type;
};
template <class L, int R, int First, int Last>
using flatten_layout_t = typename flatten_layout<L, R, First, Last>::type;

/// The layout of unflatten<D>(x, sizes) for x of layout L and N sizes.
/// Example: unflatten_layout_t<layout<shard<2>, shard<1>>, 1, 3> is layout<shard<4>, shard<1>>.
template <class L, int D, int N>
struct unflatten_layout {
  static_assert(layout_type<L>, "shardcast::unflatten_layout: L must be a compile-time layout<P...>.");
  using type = typename detail::layout_from<detail::unflatten_rules(L::desc, D, N)>::type;
};
template <class L, int D, int N>
using unflatten_layout_t = typename unflatten_layout<L, D, N>::type;

/// Merges dims First..Last of x into one of their product's extent; no data moves (see the
/// file comment). The result shares x's storage and element type.
/// @throws layout_error (dynamic layouts) if a merged dim after First is sharded, or if
///         First is sharded and its pieces are not balanced pieces of the merged dim
template <int First, int Last, class T, int R, class L, class Mesh>
auto flatten(const dtensor<T, R, L, Mesh>& x) {
  constexpr bool dims_ok = detail::flatten_dims_ok<R, First, Last>;
  static_assert(dims_ok, "shardcast::flatten<First, Last>: need 0 <= First <= Last < rank of x (the dims First..Last are merged).");
  constexpr int RY = dims_ok ? R - (Last - First) : R;
  constexpr bool dyn = detail::is_dynamic_v<L>;
  using LY = typename std::conditional_t<dyn || !dims_ok, std::type_identity<std::conditional_t<dyn, dynamic_layout, L>>,
                                         flatten_layout<L, R, First, Last>>::type;
  detail::require_mesh(x.mesh(), "shardcast::flatten");
  // The call's name in messages, made only when one is thrown (flatten is otherwise free).
  const auto who = [] { return "shardcast::flatten<" + std::to_string(First) + ", " + std::to_string(Last) + ">"; };
  const detail::reshape_verdict v = detail::flatten_rules(x.layout(), First, Last);
  if constexpr (dyn)
    if (v.bad_axis >= 0)
      throw layout_error(who() + ": layout \"" + to_string(x.layout()) +
                         "\": mesh axis " + std::to_string(v.bad_axis) + " shards dim " + std::to_string(x.layout()[v.bad_axis].dim) +
                         ", a merged dim after the first, so a rank's piece would not be one run of the merged dim; redistribute that "
                         "dim to replicate on that axis first, or transpose it to the front of the merged dims");
  const auto& ex = x.global_extents();
  std::array<std::int64_t, static_cast<std::size_t>(RY)> ey{};
  std::int64_t inner = 1;
  for (int d = First + 1; d <= Last; ++d) inner *= ex[static_cast<std::size_t>(d)];
  for (int d = 0; d < RY; ++d)
    ey[static_cast<std::size_t>(d)] = d < First ? ex[static_cast<std::size_t>(d)] : d > First ? ex[static_cast<std::size_t>(d + Last - First)]
                                                                                              : ex[static_cast<std::size_t>(First)] * inner;
  detail::check_merged_pieces(who, x.mesh(), v.out, ey, x.layout(), ex, First, inner, false);
  const box b = local_box(v.out, x.mesh().shape().data(), x.mesh().coords().data(), ey.data(), RY);
  return detail::handle_of<dtensor<T, RY, LY, Mesh>>(x.mesh(), ey, x.owner(), x.data(), b, v.out);
}

/// Splits dim D of x into dims of extents `sizes` (their product is x's extent D; one may
/// be -1, inferred); no data moves (see the file comment). The result shares x's storage
/// and element type.
/// @throws layout_error if the sizes do not multiply to x's extent D (or one is negative
///         but -1, or more than one is -1), or if D is sharded and its pieces are not
///         balanced pieces of the first new dim times the others
template <int D, class T, int R, class L, class Mesh, std::size_t N>
auto unflatten(const dtensor<T, R, L, Mesh>& x, const std::array<std::int64_t, N>& sizes) {
  static_assert(0 <= D && D < R, "shardcast::unflatten<D>: D must be a dim of x (0 <= D < rank).");
  static_assert(N >= 1, "shardcast::unflatten<D>: give at least one size.");
  constexpr int RY = R + static_cast<int>(N) - 1;
  static_assert(RY <= SHARDCAST_MAX_RANK, "shardcast::unflatten: the result's rank exceeds SHARDCAST_MAX_RANK.");
  constexpr bool dyn = detail::is_dynamic_v<L>;
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>, unflatten_layout<L, D, static_cast<int>(N)>>::type;
  detail::require_mesh(x.mesh(), "shardcast::unflatten");
  const auto who = [] { return "shardcast::unflatten<" + std::to_string(D) + ">"; };  // (made only when thrown)
  const auto& ex = x.global_extents();
  const std::int64_t n = ex[static_cast<std::size_t>(D)];
  std::array<std::int64_t, N> s = sizes;
  int infer = -1;
  std::int64_t known = 1;  // the product of the given sizes
  const char* why = nullptr;  // what is wrong with the sizes, if anything
  for (std::size_t i = 0; i < N && !why; ++i) {
    if (s[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
      continue;
    }
    if (s[i] == -1) why = "only one size may be -1 (inferred)";
    else if (s[i] < 0) why = "a size is negative (only -1, inferred, is allowed)";
    else if (__builtin_mul_overflow(known, s[i], &known)) why = "their product overflows";
  }
  if (!why && infer >= 0) {
    if (known == 0) {
      why = n == 0 ? "the -1 cannot be inferred when another size is 0 (any size would do); give every size"
                   : "the -1 cannot be inferred when another size is 0 (no size gives a nonzero extent)";
    } else if (n % known == 0) {
      s[static_cast<std::size_t>(infer)] = n / known;
      known = n;
    } else {
      why = "the given sizes do not divide the extent, so the -1 has no whole value";
    }
  }
  if (!why && known != n) why = "their product must equal the extent";
  if (why) {
    std::string given = "{";
    for (std::size_t i = 0; i < N; ++i) given += (i ? ", " : "") + std::to_string(sizes[i]);
    throw layout_error(who() + ": sizes " + given + "} do not split dim " + std::to_string(D) +
                       " of extent " + std::to_string(n) + ": " + why);
  }
  const runtime_layout ly = detail::unflatten_rules(x.layout(), D, static_cast<int>(N));
  std::array<std::int64_t, static_cast<std::size_t>(RY)> ey{};
  for (int d = 0; d < RY; ++d)
    ey[static_cast<std::size_t>(d)] = d < D ? ex[static_cast<std::size_t>(d)]
                                      : d < D + static_cast<int>(N) ? s[static_cast<std::size_t>(d - D)]
                                                                    : ex[static_cast<std::size_t>(d - static_cast<int>(N) + 1)];
  detail::checked_volume(ey, "shardcast::unflatten");  // the new extents' non-zero product fits, as for any tensor
  std::int64_t inner = 1;
  for (std::size_t i = 1; i < N; ++i) inner *= s[i];
  detail::check_merged_pieces(who, x.mesh(), x.layout(), ex, ly, ey, D, inner, true);
  const box b = local_box(ly, x.mesh().shape().data(), x.mesh().coords().data(), ey.data(), RY);
  return detail::handle_of<dtensor<T, RY, LY, Mesh>>(x.mesh(), ey, x.owner(), x.data(), b, ly);
}
/// unflatten with the sizes as a braced list: `unflatten<2>(q, {heads, dh})`.
template <int D, class T, int R, class L, class Mesh, std::size_t N>
auto unflatten(const dtensor<T, R, L, Mesh>& x, const std::int64_t (&sizes)[N]) {
  return unflatten<D>(x, detail::to_extents(sizes));
}

/// flatten of a tensor the caller gives up: the result holds its storage and x is left
/// empty (as for the operators; a tensor of const elements is never given up). If it
/// throws, x is left as it was.
template <int First, int Last, class T, int R, class L, class Mesh>
  requires(!std::is_const_v<T>)
auto flatten(dtensor<T, R, L, Mesh>&& x) {
  auto y = flatten<First, Last>(std::as_const(x));
  x = dtensor<T, R, L, Mesh>();
  return y;
}
/// unflatten of a tensor the caller gives up (see flatten).
template <int D, class T, int R, class L, class Mesh, std::size_t N>
  requires(!std::is_const_v<T>)
auto unflatten(dtensor<T, R, L, Mesh>&& x, const std::array<std::int64_t, N>& sizes) {
  auto y = unflatten<D>(std::as_const(x), sizes);
  x = dtensor<T, R, L, Mesh>();
  return y;
}
template <int D, class T, int R, class L, class Mesh, std::size_t N>
  requires(!std::is_const_v<T>)
auto unflatten(dtensor<T, R, L, Mesh>&& x, const std::int64_t (&sizes)[N]) {
  return unflatten<D>(std::move(x), detail::to_extents(sizes));
}

}  // namespace shardcast
