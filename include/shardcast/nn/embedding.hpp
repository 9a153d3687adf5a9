#pragma once
/// @file nn/embedding.hpp
/// Vocab-parallel embedding (Megatron-LM's VocabParallelEmbedding): the table [vocab, hidden]
/// is split by vocab rows over the tensor-parallel (TP) axis. Each rank looks its tokens up
/// in its own rows; an id outside them (another rank's rows, or outside [0, vocab)) gives a
/// zero row, so the per-rank outputs are a partial sum over TP, combined once (all-reduce,
/// or reduce-scatter over tokens with sequence parallelism). Backward scatter-adds the
/// output gradient of the ids in this rank's rows into its shard of the table gradient.
///
/// Worked example, 2x2 mesh, axis 0 data parallel, axis 1 tensor parallel, vocab 5, hidden 3, 4 tokens:
/// @code
///   using axes = shardcast::nn::tensor_parallel<1, 0>;
///   shardcast::nn::vocab_parallel_embedding<float, Mesh, axes> emb(table);  // table layout<R, S(0)>: (.,0) rows 0..2, (.,1) rows 3..4
///   auto e = emb.forward(ids);   // ids [4] layout<S(0), R>, e.g. {4, 0, 7, 2} on DP coord 0 holds {4, 0}
///                                // on (0,0): id 4 -> zeros, id 0 -> row 0; on (0,1): id 4 -> its row 1, id 0 -> zeros;
///                                // the two partial results are all-reduced over axis 1
///   auto g = emb.backward(ids, de);  // layout<P(sum), S(0)>: partial over DP, this rank's vocab rows
/// @endcode

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../redistribute.hpp"
#include "axes.hpp"
#include "detail/layout_ops.hpp"
#include "detail/local.hpp"

namespace shardcast::nn {

/// Vocab-parallel embedding lookup; see the file comment.
/// @tparam T element type of the table
/// @tparam Mesh the shardcast::mesh type
/// @tparam Axes shardcast::nn::parallel_axes<Tp, Dp, SequenceParallel>
/// @tparam Index integer type of the token ids
template <class T, class Mesh, class Axes, class Index = std::int64_t>
class vocab_parallel_embedding {
  using L = layouts<Axes, Mesh::naxes>;
  using space = typename Mesh::memory_space;
  static_assert(std::is_integral_v<Index>, "shardcast::nn::vocab_parallel_embedding: Index is the type of the token ids; use an integer type.");
  static_assert(detail::has_embedding_exec<space>,
                "shardcast::nn::vocab_parallel_embedding: no lookup/scatter-add for this memory space; specialise "
                "shardcast::nn::detail::embedding_exec<Space> (nn/detail/local.hpp provides host_memory).");

 public:
  using stream_type = typename Mesh::stream_type;
  using ids_layout = typename L::token_ids;             ///< ids [tokens]
  using output_layout = typename L::outside;            ///< E [tokens, hidden], after the reduction
  using partial_output_layout = typename L::partial_sum;  ///< E before the reduction
  using table_layout = typename L::vocab_table;         ///< [vocab, hidden]
  using table_grad_layout = typename L::template grad_of<table_layout>;
  using table_type = dtensor<T, 2, table_layout, Mesh>;

  /// The layer uses (does not copy) `table` [vocab, hidden]; replace it through `table`.
  explicit vocab_parallel_embedding(table_type t) : table(std::move(t)) {}

  std::int64_t vocab_size() const { return table.global_extents()[0]; }
  std::int64_t hidden_size() const { return table.global_extents()[1]; }

  /// This rank's lookups: rows of ids outside this rank's vocab rows are zero. No communication.
  /// @param ids [tokens] in `ids_layout`
  template <class TI, class LI>
    requires detail::elements_of<TI, Index>
  dtensor<T, 2, partial_output_layout, Mesh> forward_partial(const dtensor<TI, 1, LI, Mesh>& ids, stream_type s = {}) const {
    static_assert(detail::expect_layout<where::vocab_parallel_embedding_ids, ids_layout, LI>());
    shardcast::detail::expect_same_mesh("shardcast::nn::vocab_parallel_embedding::forward", ids.mesh(), table.mesh(), "ids", "table");
    auto out = empty<partial_output_layout, T>(ids.mesh(), std::array<std::int64_t, 2>{ids.global_extents()[0], hidden_size()}, s);
    const box &bo = out.local_box(), &bi = ids.local_box(), &bt = table.local_box();
    SHARDCAST_EXPECTS(bo.off[0] == bi.off[0] && bo.ext[0] == bi.ext[0],
                      "shardcast::nn::vocab_parallel_embedding: the ids and the output do not line up (internal error)");
    if (out.local_size() > 0)
      detail::embedding_exec<space>::gather(ids.data(), static_cast<std::size_t>(bi.ext[0]), table.data(), bt.off[0], bt.ext[0], hidden_size(),
                                            out.data(), s);
    return out;
  }

  /// The embeddings of `ids`, combined over the TP axis (all-reduce; reduce-scatter over
  /// tokens with sequence parallelism). Ids outside [0, vocab) give zero rows.
  /// @param ids [tokens] in `ids_layout`
  /// @throws comm_error if a collective fails
  template <class TI, class LI>
    requires detail::elements_of<TI, Index>
  dtensor<T, 2, output_layout, Mesh> forward(const dtensor<TI, 1, LI, Mesh>& ids, stream_type s = {}) const {
    return redistribute<output_layout>(forward_partial(ids, s), s);
  }

  /// dL/dtable for the forward ids and dL/dE: this rank's vocab rows, a partial sum over the
  /// DP axis (ZeRO reduce-scatters it). With sequence parallelism dy is all-gathered over TP first.
  /// @param ids the forward ids, in `ids_layout`
  /// @param dy dL/dE [tokens, hidden], in `output_layout`
  /// @throws layout_error if dy's extents do not match the ids and the hidden size
  template <class TI, class TY, class LI, class LY>
    requires(detail::elements_of<TI, Index> && detail::elements_of<TY, T>)
  dtensor<T, 2, table_grad_layout, Mesh> backward(const dtensor<TI, 1, LI, Mesh>& ids, const dtensor<TY, 2, LY, Mesh>& dy,
                                                  stream_type s = {}) const {
    static_assert(detail::expect_layout<where::vocab_parallel_embedding_ids, ids_layout, LI>());
    static_assert(detail::expect_layout<where::vocab_parallel_embedding_output_grad, output_layout, LY>());
    shardcast::detail::expect_same_mesh("shardcast::nn::vocab_parallel_embedding::backward", ids.mesh(), table.mesh(), "ids", "table");
    shardcast::detail::expect_same_mesh("shardcast::nn::vocab_parallel_embedding::backward", dy.mesh(), table.mesh(), "dy", "table");
    SHARDCAST_EXPECTS(dy.global_extents()[0] == ids.global_extents()[0] && dy.global_extents()[1] == hidden_size(),
                      "shardcast::nn::vocab_parallel_embedding::backward: the output gradient is " + std::to_string(dy.global_extents()[0]) +
                          "x" + std::to_string(dy.global_extents()[1]) + " but the lookup was " + std::to_string(ids.global_extents()[0]) +
                          "x" + std::to_string(hidden_size()) + "; pass the forward ids and the gradient of forward's output");
    // sequence parallel: all_gather over TP; else free (dy of const elements: only read, no copy)
    const auto dyt = redistribute<typename L::tokens>(shardcast::detail::readable(dy), s);
    auto g = empty<table_grad_layout, T>(table.mesh(), table.global_extents(), s);
    const box &bg = g.local_box(), &bi = ids.local_box(), &bd = dyt.local_box();
    SHARDCAST_EXPECTS(bd.off[0] == bi.off[0] && bd.ext[0] == bi.ext[0] && bg.off[0] == table.local_box().off[0],
                      "shardcast::nn::vocab_parallel_embedding::backward: the ids, the gradient and the table do not line up (internal error)");
    if (g.local_size() > 0)
      detail::embedding_exec<space>::scatter_add(ids.data(), static_cast<std::size_t>(bi.ext[0]), dyt.data(), bg.off[0], bg.ext[0],
                                                 hidden_size(), g.data(), s);
    return g;
  }

  table_type table;  ///< [vocab, hidden], this rank's vocab rows
};

}  // namespace shardcast::nn
