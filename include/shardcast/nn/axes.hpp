#pragma once
/// @file nn/axes.hpp
/// `parallel_axes<Tp, Dp, SequenceParallel>` names, at compile time, the mesh axis a
/// layer splits its weights over (tensor parallel) and the one its batch of tokens is
/// split over (data parallel); `layouts<Axes, N>` derives from it every layout the
/// parallel layers use, so a layer's inputs, outputs, weights and gradients all have
/// types fixed by those two numbers.
///
/// Activations are rank 2, `[tokens, features]`; weights `[in, out]`; biases `[out]`.
/// Worked example, `sequence_parallel<1, 0>` on a 2x2 mesh (axis 0 data parallel, axis 1
/// tensor parallel), 8 tokens, 6 features:
/// @code
///   layouts<sequence_parallel<1, 0>, 2>::sequence   // layout<shard<0>, shard<0>>: tokens 0..1 on (0,0), 2..3 on (0,1), 4..5 on (1,0) ...
///   layouts<sequence_parallel<1, 0>, 2>::tokens     // layout<shard<0>, replicate>: tokens 0..3 on (0,*), 4..7 on (1,*)
///   layouts<sequence_parallel<1, 0>, 2>::features   // layout<shard<0>, shard<1>>: (0,1) holds tokens 0..3, features 3..5
///   layouts<sequence_parallel<1, 0>, 2>::partial_sum  // layout<shard<0>, partial<sum>>
///   layouts<sequence_parallel<1, 0>, 2>::column_weight  // layout<replicate, shard<1>>: [in, out], out split over axis 1
/// @endcode

#include "../layout.hpp"
#include "../placement.hpp"
#include "detail/layout_ops.hpp"

namespace shardcast::nn {

/// The mesh axes a parallel layer uses.
/// @tparam TpAxis the tensor-parallel mesh axis: weights are split over it
/// @tparam DpAxis the data-parallel mesh axis: tokens are split over it, weight gradients are partial sums over it
/// @tparam SequenceParallel when true, activations outside the tensor-parallel block are also split along
///         the token dim over the tensor-parallel axis (all-gathered on entry, reduce-scattered on exit);
///         it needs DpAxis < TpAxis (a compile error says so otherwise)
template <int TpAxis, int DpAxis, bool SequenceParallel = false>
struct parallel_axes {
  static_assert(TpAxis >= 0 && DpAxis >= 0, "shardcast::nn::parallel_axes<Tp, Dp>: mesh axes are numbered from 0; give two axes of the mesh.");
  static_assert(TpAxis != DpAxis,
                "shardcast::nn::parallel_axes<Tp, Dp>: the tensor-parallel and the data-parallel axis must differ; a mesh axis of size 1 "
                "can stand in for a dimension of parallelism you do not use.");
  // Tokens split over both axes (the sequence layout) nest in increasing axis order. With the
  // DP axis first, a TP rank's tokens are a slice of its DP group's, so the entry all-gather
  // and the exit reduce-scatter run over the TP axis alone; with the TP axis first they do
  // not, and each becomes three collectives (all_to_all, gather or scatter, all_to_all).
  static_assert(!SequenceParallel || DpAxis < TpAxis,
                "shardcast::nn::sequence_parallel<Tp, Dp>: sequence parallelism needs the data-parallel mesh axis before the "
                "tensor-parallel one (Dp < Tp): tokens split over both axes nest in axis order, and only with DP first is the "
                "entry all-gather (exit reduce-scatter) one collective over the TP axis. Order the mesh axes so that DP comes "
                "first, e.g. make_mesh(comm, {dp_size, tp_size}) with sequence_parallel<1, 0>.");
  static constexpr int tp = TpAxis;
  static constexpr int dp = DpAxis;
  static constexpr bool sequence_parallel = SequenceParallel;
};

/// Megatron tensor parallelism: activations outside the block are replicated over the TP axis.
template <int TpAxis, int DpAxis>
using tensor_parallel = parallel_axes<TpAxis, DpAxis, false>;
/// Megatron tensor parallelism with sequence parallelism: activations outside the block are
/// split along the token dim over the TP axis.
template <int TpAxis, int DpAxis>
using sequence_parallel = parallel_axes<TpAxis, DpAxis, true>;

namespace detail {
template <class A>
struct is_parallel_axes : std::false_type {};
template <int T, int D, bool S>
struct is_parallel_axes<parallel_axes<T, D, S>> : std::true_type {};
}  // namespace detail

/// Every layout the parallel layers use, for `Axes` on a mesh of `N` axes. Placements are
/// listed as (on the TP axis, on the DP axis); every other mesh axis is `replicate`.
/// @tparam Axes a parallel_axes<Tp, Dp, SequenceParallel>
/// @tparam N the number of mesh axes
template <class Axes, int N>
struct layouts {
  static_assert(detail::is_parallel_axes<Axes>::value, "shardcast::nn::layouts<Axes, N>: Axes must be a shardcast::nn::parallel_axes<Tp, Dp, Sp>.");
  static_assert(Axes::tp < N && Axes::dp < N,
                "shardcast::nn: the parallel_axes name a mesh axis the mesh does not have; use axes below the mesh's number of axes.");

  /// (PTp on the TP axis, PDp on the DP axis, replicate elsewhere).
  template <class PTp, class PDp>
  using on = typename detail::axes_layout<N, Axes::tp, PTp, Axes::dp, PDp>::type;

  /// Activations inside the tensor-parallel block: all tokens of the DP group on every TP rank.
  using tokens = on<replicate, shard<0>>;
  /// Sequence-parallel activations: tokens split over the DP axis, then over the TP axis.
  using sequence = on<shard<0>, shard<0>>;
  /// Activations entering a column-parallel layer and leaving a row-parallel one.
  using outside = std::conditional_t<Axes::sequence_parallel, sequence, tokens>;
  /// The column-parallel output (and row-parallel input): features split over the TP axis.
  using features = on<shard<1>, shard<0>>;
  /// The row-parallel product before its one reduction over the TP axis.
  using partial_sum = on<partial<sum>, shard<0>>;

  /// Column-parallel weight [in, out]: output features split over TP.
  using column_weight = on<shard<1>, replicate>;
  /// Column-parallel bias [out].
  using column_bias = on<shard<0>, replicate>;
  /// Row-parallel weight [in, out]: input features split over TP.
  using row_weight = on<shard<0>, replicate>;
  /// Row-parallel bias [out] (added once, after the reduction).
  using row_bias = on<replicate, replicate>;
  /// Vocab-parallel embedding table [vocab, hidden]: vocab rows split over TP.
  using vocab_table = on<shard<0>, replicate>;
  /// Token ids [tokens] for an embedding lookup: split like the tokens, replicated over TP.
  using token_ids = on<replicate, shard<0>>;

  /// The gradient of a parameter of layout L: a partial sum over the DP axis.
  template <class L>
  using grad_of = detail::replace_placement_t<L, Axes::dp, partial<sum>>;
};

}  // namespace shardcast::nn
