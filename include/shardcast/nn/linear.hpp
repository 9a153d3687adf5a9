#pragma once
/// @file nn/linear.hpp
/// Tensor-parallel linear layers (Megatron-LM's pairing, Shoeybi et al. 2019, arXiv:1909.08053):
/// `column_parallel_linear` splits its weight's output features over the tensor-parallel
/// (TP) axis and leaves its output split the same way; `row_parallel_linear` splits its
/// weight's input features, consumes that output without communication and produces a
/// partial sum over the TP axis, reduced once. With `sequence_parallel<Tp, Dp>` axes
/// (Korthikanti et al. 2022, arXiv:2205.05198) the activations outside the pair are also
/// split along the token dim over the TP axis: the column layer all-gathers them on entry
/// and the row layer reduce-scatters on exit, and the backward pass mirrors both.
///
/// Y = X W + b with X [tokens, in], W [in, out], b [out]. Backward returns dX = dY W^T,
/// dW = X^T dY (a partial sum over the data-parallel axis) and db = column sums of dY.
/// Every layout is a type fixed by the layer's `parallel_axes`; passing an argument of
/// another layout is a compile error naming the layout it needs.
///
/// Worked example, 2x2 mesh, axis 0 data parallel, axis 1 tensor parallel, 8 tokens, 6 -> 10 -> 6 features:
/// @code
///   using axes = shardcast::nn::sequence_parallel<1, 0>;
///   shardcast::nn::column_parallel_linear<float, Mesh, axes> fc1(w1, b1);  // w1 layout<R, S(1)>: (.,1) holds W1[:, 5..9]
///   shardcast::nn::row_parallel_linear<float, Mesh, axes> fc2(w2, b2);     // w2 layout<R, S(0)>: (.,1) holds W2[5..9, :]
///   auto h = fc1.forward(x);    // x: layout<S(0), S(0)> (2 tokens per rank) -> all_gather over axis 1 -> h: layout<S(0), S(1)>, 4x5 per rank
///   auto y = fc2.forward(h);    // local GEMM -> partial<sum> over axis 1 -> reduce_scatter -> y: layout<S(0), S(0)>
/// @endcode

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../ops/gemm.hpp"
#include "../redistribute.hpp"
#include "axes.hpp"
#include "detail/local.hpp"

namespace shardcast::nn {

namespace detail {
template <class T, class LW, class LB, class Mesh>
void check_weight_bias(const dtensor<T, 2, LW, Mesh>& w, const dtensor<T, 1, LB, Mesh>& b, const char* who) {
  SHARDCAST_EXPECTS(b.global_extents()[0] == w.global_extents()[1],
                    std::string(who) + ": the bias has " + std::to_string(b.global_extents()[0]) + " elements but the weight is " +
                        std::to_string(w.global_extents()[0]) + "x" + std::to_string(w.global_extents()[1]) +
                        " ([in, out]); give the bias one element per output feature");
  SHARDCAST_EXPECTS(w.mesh() == b.mesh(), std::string(who) + ": the weight and the bias live on different meshes; distribute both on the same mesh");
}
template <class T, class LX, class Mesh>
void check_cols(const dtensor<T, 2, LX, Mesh>& x, std::int64_t cols, const char* who, const char* what) {
  SHARDCAST_EXPECTS(x.global_extents()[1] == cols, std::string(who) + ": " + what + " has " + std::to_string(x.global_extents()[1]) +
                                                       " features but the layer needs " + std::to_string(cols));
}
template <class T, class LX, class LY, class Mesh>
void check_tokens(const dtensor<T, 2, LX, Mesh>& x, const dtensor<T, 2, LY, Mesh>& dy, const char* who) {
  SHARDCAST_EXPECTS(x.global_extents()[0] == dy.global_extents()[0],
                    std::string(who) + ": the input has " + std::to_string(x.global_extents()[0]) + " tokens but the output gradient has " +
                        std::to_string(dy.global_extents()[0]) + "; pass the forward input and the gradient of its output");
}
}  // namespace detail

/// Gradients returned by a linear layer's backward pass.
/// @tparam Input the input-gradient dtensor (same layout as the layer's input)
/// @tparam Weight the weight-gradient dtensor (partial<sum> over the data-parallel axis)
/// @tparam Bias the bias-gradient dtensor (partial<sum> over the data-parallel axis)
template <class Input, class Weight, class Bias>
struct linear_gradients {
  Input input;    ///< dL/dX
  Weight weight;  ///< dL/dW, summed over this rank's tokens only
  Bias bias;      ///< dL/db, summed over this rank's tokens only
};

/// Column-parallel linear layer: W [in, out] split by output features over the TP axis.
/// Forward: Y = X W + b with X in `input_layout` (replicated over TP, or token-split with
/// sequence parallelism, then all-gathered) and Y in `output_layout` (features split over TP).
/// Backward: dX = dY W^T is a partial sum over TP, all-reduced (or reduce-scattered with
/// sequence parallelism) back to `input_layout`.
/// @tparam T element type
/// @tparam Mesh the shardcast::mesh type
/// @tparam Axes shardcast::nn::parallel_axes<Tp, Dp, SequenceParallel>
/// @tparam Gemm local GEMM functor with both forms of ops/gemm.hpp (host_gemm on the host, a cuBLAS functor on devices)
template <class T, class Mesh, class Axes, class Gemm = host_gemm>
class column_parallel_linear {
  using L = layouts<Axes, Mesh::naxes>;

 public:
  using stream_type = typename Mesh::stream_type;
  using input_layout = typename L::outside;     ///< X [tokens, in]
  using output_layout = typename L::features;   ///< Y [tokens, out]
  using weight_layout = typename L::column_weight;
  using bias_layout = typename L::column_bias;
  using weight_grad_layout = typename L::template grad_of<weight_layout>;
  using bias_grad_layout = typename L::template grad_of<bias_layout>;
  using weight_type = dtensor<T, 2, weight_layout, Mesh>;
  using bias_type = dtensor<T, 1, bias_layout, Mesh>;
  using gradients = linear_gradients<dtensor<T, 2, input_layout, Mesh>, dtensor<T, 2, weight_grad_layout, Mesh>,
                                     dtensor<T, 1, bias_grad_layout, Mesh>>;

  /// The layer uses (does not copy) `w` [in, out] and `b` [out]; replace them with `weight`/`bias`.
  /// @throws layout_error if b's extent differs from w's output features
  column_parallel_linear(weight_type w, bias_type b, Gemm gemm = {}) : weight(std::move(w)), bias(std::move(b)), gemm_(std::move(gemm)) {
    if constexpr (std::is_same_v<Gemm, host_gemm>)
      static_assert(std::is_same_v<typename Mesh::memory_space, host_memory>,
                    "shardcast::nn::column_parallel_linear: the default GEMM runs on the host; pass a device GEMM functor as Gemm.");
    detail::check_weight_bias(weight, bias, "shardcast::nn::column_parallel_linear");
  }

  std::int64_t in_features() const { return weight.global_extents()[0]; }
  std::int64_t out_features() const { return weight.global_extents()[1]; }

  /// Y = X W + b.
  /// @param x [tokens, in] in `input_layout` (a compile error names it otherwise)
  /// @throws layout_error if x has other than in_features() columns, or `bias` other than
  ///         out_features() elements (after either member was replaced)
  /// @throws comm_error if a collective fails
  template <class TX, class LX>
    requires detail::elements_of<TX, T>
  dtensor<T, 2, output_layout, Mesh> forward(const dtensor<TX, 2, LX, Mesh>& x, stream_type s = {}) const {
    static_assert(detail::expect_layout<where::column_parallel_linear_input, input_layout, LX>());
    decltype(auto) xr = shardcast::detail::readable(x);  // (x of const elements: only read, no copy)
    detail::check_cols(xr, in_features(), "shardcast::nn::column_parallel_linear::forward", "the input");
    // weight and bias are public members: checked again here, by every rank alike (global extents)
    detail::check_weight_bias(weight, bias, "shardcast::nn::column_parallel_linear::forward");
    const auto xt = redistribute<typename L::tokens>(xr, s);  // sequence parallel: all_gather over TP; else free
    auto y = detail::gemm_op_dtensor<gemm_op::n, gemm_op::n>(xt, weight, gemm_, s);
    static_assert(std::is_same_v<typename decltype(y)::layout_type, output_layout>);
    detail::add_bias_rows(y, bias, s);
    return y;
  }

  /// Gradients for the forward input `x` and the output gradient `dy`. With sequence
  /// parallelism x is all-gathered again here (as Megatron-LM does) rather than kept.
  /// @param x the forward input, in `input_layout`
  /// @param dy dL/dY, in `output_layout`
  /// @throws layout_error on mismatched extents
  template <class TX, class TY, class LX, class LY>
    requires(detail::elements_of<TX, T> && detail::elements_of<TY, T>)
  gradients backward(const dtensor<TX, 2, LX, Mesh>& x, const dtensor<TY, 2, LY, Mesh>& dy, stream_type s = {}) const {
    static_assert(detail::expect_layout<where::column_parallel_linear_input, input_layout, LX>());
    static_assert(detail::expect_layout<where::column_parallel_linear_output_grad, output_layout, LY>());
    decltype(auto) xr = shardcast::detail::readable(x);  // (const elements: only read, no copy)
    decltype(auto) dyr = shardcast::detail::readable(dy);
    detail::check_cols(xr, in_features(), "shardcast::nn::column_parallel_linear::backward", "the input");
    detail::check_cols(dyr, out_features(), "shardcast::nn::column_parallel_linear::backward", "the output gradient");
    detail::check_tokens(xr, dyr, "shardcast::nn::column_parallel_linear::backward");
    const auto xt = redistribute<typename L::tokens>(xr, s);
    auto dw = detail::gemm_op_dtensor<gemm_op::t, gemm_op::n>(xt, dyr, gemm_, s);  // X^T dY: partial over DP
    static_assert(std::is_same_v<typename decltype(dw)::layout_type, weight_grad_layout>);
    auto db = detail::colsum(dyr, gemm_, s);
    static_assert(std::is_same_v<typename decltype(db)::layout_type, bias_grad_layout>);
    auto dxp = detail::gemm_op_dtensor<gemm_op::n, gemm_op::t>(dyr, weight, gemm_, s);  // dY W^T: partial over TP
    static_assert(std::is_same_v<typename decltype(dxp)::layout_type, typename L::partial_sum>);
    return gradients{redistribute<input_layout>(std::move(dxp), s), std::move(dw), std::move(db)};  // in place when one all_reduce
  }

  weight_type weight;  ///< W [in, out], this rank's columns
  bias_type bias;      ///< b [out], this rank's elements

 private:
  Gemm gemm_;
};

/// Row-parallel linear layer: W [in, out] split by input features over the TP axis.
/// Forward: X in `input_layout` (features split over TP, a column-parallel output) times
/// this rank's rows of W is a partial sum over TP (`forward_partial`); `forward` reduces it
/// once (all-reduce, or reduce-scatter over tokens with sequence parallelism) and adds b.
/// Backward: dY in `output_layout` (all-gathered over TP with sequence parallelism);
/// dX = dY W^T comes out split like X, with no communication.
/// @tparam T element type
/// @tparam Mesh the shardcast::mesh type
/// @tparam Axes shardcast::nn::parallel_axes<Tp, Dp, SequenceParallel>
/// @tparam Gemm local GEMM functor with both forms of ops/gemm.hpp
template <class T, class Mesh, class Axes, class Gemm = host_gemm>
class row_parallel_linear {
  using L = layouts<Axes, Mesh::naxes>;

 public:
  using stream_type = typename Mesh::stream_type;
  using input_layout = typename L::features;            ///< X [tokens, in]
  using output_layout = typename L::outside;            ///< Y [tokens, out], after the reduction
  using partial_output_layout = typename L::partial_sum;  ///< Y before the reduction
  using weight_layout = typename L::row_weight;
  using bias_layout = typename L::row_bias;
  using weight_grad_layout = typename L::template grad_of<weight_layout>;
  using bias_grad_layout = typename L::template grad_of<bias_layout>;
  using weight_type = dtensor<T, 2, weight_layout, Mesh>;
  using bias_type = dtensor<T, 1, bias_layout, Mesh>;
  using gradients = linear_gradients<dtensor<T, 2, input_layout, Mesh>, dtensor<T, 2, weight_grad_layout, Mesh>,
                                     dtensor<T, 1, bias_grad_layout, Mesh>>;

  /// The layer uses (does not copy) `w` [in, out] and `b` [out]; replace them with `weight`/`bias`.
  /// @throws layout_error if b's extent differs from w's output features
  row_parallel_linear(weight_type w, bias_type b, Gemm gemm = {}) : weight(std::move(w)), bias(std::move(b)), gemm_(std::move(gemm)) {
    if constexpr (std::is_same_v<Gemm, host_gemm>)
      static_assert(std::is_same_v<typename Mesh::memory_space, host_memory>,
                    "shardcast::nn::row_parallel_linear: the default GEMM runs on the host; pass a device GEMM functor as Gemm.");
    detail::check_weight_bias(weight, bias, "shardcast::nn::row_parallel_linear");
  }

  std::int64_t in_features() const { return weight.global_extents()[0]; }
  std::int64_t out_features() const { return weight.global_extents()[1]; }

  /// X W as a partial sum over the TP axis, with b added on TP coordinate 0 only (so the
  /// reduction adds it once). No communication; reduce it yourself, e.g. fused with
  /// another reduction, with redistribute<output_layout>(y).
  /// @param x [tokens, in] in `input_layout`
  template <class TX, class LX>
    requires detail::elements_of<TX, T>
  dtensor<T, 2, partial_output_layout, Mesh> forward_partial(const dtensor<TX, 2, LX, Mesh>& x, stream_type s = {}) const {
    auto y = product(shardcast::detail::readable(x), s, "shardcast::nn::row_parallel_linear::forward_partial");  // (const x: no copy)
    if (x.mesh().coord(Axes::tp) == 0) detail::add_bias_rows(y, bias, s);
    return y;
  }

  /// Y = X W + b, reduced once over the TP axis (all-reduce; reduce-scatter over tokens with
  /// sequence parallelism), b added after the reduction.
  /// @param x [tokens, in] in `input_layout`
  /// @throws layout_error if x has other than in_features() columns, or `bias` other than
  ///         out_features() elements (after either member was replaced)
  /// @throws comm_error if a collective fails
  template <class TX, class LX>
    requires detail::elements_of<TX, T>
  dtensor<T, 2, output_layout, Mesh> forward(const dtensor<TX, 2, LX, Mesh>& x, stream_type s = {}) const {
    auto y = redistribute<output_layout>(product(shardcast::detail::readable(x), s, "shardcast::nn::row_parallel_linear::forward"), s);
    detail::add_bias_rows(y, bias, s);
    return y;
  }

  /// Gradients for the forward input `x` and the output gradient `dy` (of forward's output;
  /// for forward_partial, the gradient of the reduced output).
  /// @param x the forward input, in `input_layout`
  /// @param dy dL/dY, in `output_layout`
  /// @throws layout_error on mismatched extents
  template <class TX, class TY, class LX, class LY>
    requires(detail::elements_of<TX, T> && detail::elements_of<TY, T>)
  gradients backward(const dtensor<TX, 2, LX, Mesh>& x, const dtensor<TY, 2, LY, Mesh>& dy, stream_type s = {}) const {
    static_assert(detail::expect_layout<where::row_parallel_linear_input, input_layout, LX>());
    static_assert(detail::expect_layout<where::row_parallel_linear_output_grad, output_layout, LY>());
    decltype(auto) xr = shardcast::detail::readable(x);  // (const elements: only read, no copy)
    decltype(auto) dyr = shardcast::detail::readable(dy);
    detail::check_cols(xr, in_features(), "shardcast::nn::row_parallel_linear::backward", "the input");
    detail::check_cols(dyr, out_features(), "shardcast::nn::row_parallel_linear::backward", "the output gradient");
    detail::check_tokens(xr, dyr, "shardcast::nn::row_parallel_linear::backward");
    const auto dyt = redistribute<typename L::tokens>(dyr, s);  // sequence parallel: all_gather over TP; else free
    auto dw = detail::gemm_op_dtensor<gemm_op::t, gemm_op::n>(xr, dyt, gemm_, s);
    static_assert(std::is_same_v<typename decltype(dw)::layout_type, weight_grad_layout>);
    auto db = detail::colsum(dyt, gemm_, s);
    static_assert(std::is_same_v<typename decltype(db)::layout_type, bias_grad_layout>);
    auto dx = detail::gemm_op_dtensor<gemm_op::n, gemm_op::t>(dyt, weight, gemm_, s);
    static_assert(std::is_same_v<typename decltype(dx)::layout_type, input_layout>);
    return gradients{std::move(dx), std::move(dw), std::move(db)};
  }

  weight_type weight;  ///< W [in, out], this rank's rows
  bias_type bias;      ///< b [out], replicated

 private:
  template <class LX>
  dtensor<T, 2, partial_output_layout, Mesh> product(const dtensor<T, 2, LX, Mesh>& x, stream_type s, const char* who) const {
    static_assert(detail::expect_layout<where::row_parallel_linear_input, input_layout, LX>());
    detail::check_cols(x, in_features(), who, "the input");
    // weight and bias are public members: checked again here, by every rank alike (global extents)
    detail::check_weight_bias(weight, bias, who);
    auto y = detail::gemm_op_dtensor<gemm_op::n, gemm_op::n>(x, weight, gemm_, s);
    static_assert(std::is_same_v<typename decltype(y)::layout_type, partial_output_layout>);
    return y;
  }

  Gemm gemm_;
};

}  // namespace shardcast::nn
