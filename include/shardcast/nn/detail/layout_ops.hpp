#pragma once
/// @file nn/detail/layout_ops.hpp
/// Compile-time layout algebra the parallel layers derive their layouts with: build a
/// layout from per-axis choices, replace one axis' placement, the layout of a column sum,
/// and the layout-mismatch diagnostic.

#include <type_traits>
#include <utility>

#include "../../layout.hpp"
#include "../../placement.hpp"

namespace shardcast::nn::detail {

template <class...>
inline constexpr bool dependent_false = false;

/// layout on N mesh axes with `PTp` on axis `Tp`, `PDp` on axis `Dp` and replicate on every other axis.
template <int N, int Tp, class PTp, int Dp, class PDp, class Seq = std::make_integer_sequence<int, N>>
struct axes_layout;
template <int N, int Tp, class PTp, int Dp, class PDp, int... I>
struct axes_layout<N, Tp, PTp, Dp, PDp, std::integer_sequence<int, I...>> {
  using type = layout<std::conditional_t<I == Tp, PTp, std::conditional_t<I == Dp, PDp, replicate>>...>;
};

/// L with the placement of mesh axis `Axis` replaced by P.
template <class L, int Axis, class P, class Seq = std::make_integer_sequence<int, L::naxes>>
struct replace_placement;
template <class... Ps, int Axis, class P, int... I>
struct replace_placement<layout<Ps...>, Axis, P, std::integer_sequence<int, I...>> {
  using type = layout<std::conditional_t<I == Axis, P, Ps>...>;
};
template <class L, int Axis, class P>
using replace_placement_t = typename replace_placement<L, Axis, P>::type;

/// The placement of the column sums s[c] = sum_r x[r, c] of a rank-2 tensor: summing a
/// row-sharded tensor leaves partial sums, a column shard becomes a shard of s.
template <class P>
struct colsum_placement {
  using type = P;
};
template <>
struct colsum_placement<shard<0>> {
  using type = partial<sum>;
};
template <>
struct colsum_placement<shard<1>> {
  using type = shard<0>;
};
template <class L>
struct colsum_layout;
template <class... Ps>
struct colsum_layout<layout<Ps...>> {
  using type = layout<typename colsum_placement<Ps>::type...>;
};
template <class L>
using colsum_layout_t = typename colsum_layout<L>::type;

/// True when some mesh axis other than `skip` shards tensor dim `d` in L.
template <class L>
constexpr bool dim_sharded_elsewhere(int d, int skip) {
  for (int a = 0; a < L::naxes; ++a)
    if (a != skip && L::desc[a].is_shard(d)) return true;
  return false;
}

/// Whether L has a partial placement on any axis.
template <class L>
constexpr bool has_partial() {
  for (int a = 0; a < L::naxes; ++a)
    if (L::desc[a].is_partial()) return true;
  return false;
}

/// Instantiated when a layer argument's layout differs from the one the layer derives
/// from its parallel axes; the compiler prints the three arguments before the message.
/// @tparam Where a tag naming the layer and the argument (shardcast::nn::where::...)
/// @tparam Expected the layout the argument needs
/// @tparam Given the layout that was passed
template <class Where, class Expected, class Given>
struct layout_mismatch {
  static_assert(dependent_false<Where, Expected, Given>,
                "shardcast::nn: a layer argument has the wrong layout. In layout_mismatch<Where, Expected, Given>, Where names the "
                "layer and the argument, Expected is the layout that argument needs (derived from the layer's tensor-parallel and "
                "data-parallel axes) and Given is the layout passed. Convert it first with shardcast::redistribute<Expected>(x), "
                "or give the layer the parallel_axes that match how the tensor is laid out.");
  static constexpr bool value = false;
};

/// Compile-time check used by every layer on each dtensor argument.
template <class Where, class Expected, class Given>
constexpr bool expect_layout() {
  if constexpr (std::is_same_v<Expected, Given>) return true;
  else return layout_mismatch<Where, Expected, Given>::value;
}

}  // namespace shardcast::nn::detail

namespace shardcast::nn::where {
/// Tags naming a layer argument in layout_mismatch diagnostics.
struct column_parallel_linear_input {};
struct column_parallel_linear_output_grad {};
struct row_parallel_linear_input {};
struct row_parallel_linear_output_grad {};
struct vocab_parallel_embedding_ids {};
struct vocab_parallel_embedding_output_grad {};
struct activation_output_grad {};
}  // namespace shardcast::nn::where
