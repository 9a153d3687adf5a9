#pragma once
/// @file nn/activation.hpp
/// Elementwise activation layers (`nn::gelu`, `nn::relu`, `nn::silu`): forward y = f(x) and
/// backward dx = f'(x) * dy on each rank's local piece, with no communication, so the
/// output keeps the input's layout. Between a column- and a row-parallel linear layer the
/// activation runs on the feature-split hidden tensor.
///
/// A partial-sum tensor is refused at compile time: f of the partial values is not f of
/// their sum.
/// @code
///   auto h = fc1.forward(x);                  // layout<shard<0>, shard<1>>
///   auto a = shardcast::nn::gelu.forward(h);  // same layout, a = gelu(h) elementwise
///   auto dh = shardcast::nn::gelu.backward(h, da);
/// @endcode

#include <type_traits>

#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../ops/functors.hpp"
#include "detail/layout_ops.hpp"
#include "detail/local.hpp"

namespace shardcast::nn {

/// An activation layer from a forward functor `f(x)` and a gradient functor `g(x, dy) = f'(x) dy`
/// (both SHARDCAST_HOST_DEVICE so device backends can run them).
/// @tparam Fwd forward functor, e.g. shardcast::fn::gelu_fn
/// @tparam Bwd gradient functor, e.g. shardcast::fn::gelu_grad_fn
template <class Fwd, class Bwd>
struct activation {
  Fwd f{};
  Bwd grad{};

  /// y = f(x) elementwise, in x's layout (a new tensor; x is unchanged, and its elements may
  /// be const).
  template <class TX, int R, class L, class Mesh>
  dtensor<std::remove_const_t<TX>, R, L, Mesh> forward(const dtensor<TX, R, L, Mesh>& x, typename Mesh::stream_type s = {}) const {
    using T = std::remove_const_t<TX>;
    static_assert(!detail::has_partial<L>(),
                  "shardcast::nn::activation: the input has a partial placement, and f of partial values is not f of their sum; "
                  "reduce it first with shardcast::redistribute<...replicate or shard<D> on that axis...>(x).");
    auto y = empty<L, T>(x.mesh(), x.global_extents(), s);
    if (y.local_size() > 0) detail::local_exec<typename Mesh::memory_space>::map(x.data(), y.data(), y.local_size(), f, s);
    return y;
  }

  /// dx = f'(x) * dy elementwise, in x's layout.
  /// @param x the forward input
  /// @param dy dL/dy, in the same layout as x
  /// @throws layout_error if the extents differ
  /// (x and dy may have const elements, each or both.)
  template <class TX, class TY, int R, class L, class LY, class Mesh>
    requires detail::elements_of<TY, std::remove_const_t<TX>>
  dtensor<std::remove_const_t<TX>, R, L, Mesh> backward(const dtensor<TX, R, L, Mesh>& x, const dtensor<TY, R, LY, Mesh>& dy,
                                                       typename Mesh::stream_type s = {}) const {
    using T = std::remove_const_t<TX>;
    static_assert(detail::expect_layout<where::activation_output_grad, L, LY>());
    static_assert(!detail::has_partial<L>(),
                  "shardcast::nn::activation: the input has a partial placement, and f of partial values is not f of their sum; "
                  "reduce it first with shardcast::redistribute<...replicate or shard<D> on that axis...>(x).");
    SHARDCAST_EXPECTS(x.global_extents() == dy.global_extents(),
                      "shardcast::nn::activation::backward: the output gradient's extents differ from the input's; pass the forward input");
    auto dx = empty<L, T>(x.mesh(), x.global_extents(), s);
    if (dx.local_size() > 0) detail::local_exec<typename Mesh::memory_space>::zip(x.data(), dy.data(), dx.data(), dx.local_size(), grad, s);
    return dx;
  }
};

/// GELU, tanh approximation (fn::gelu).
inline constexpr activation<fn::gelu_fn, fn::gelu_grad_fn> gelu{};
/// ReLU (fn::relu).
inline constexpr activation<fn::relu_fn, fn::relu_grad_fn> relu{};
/// SiLU (fn::silu).
inline constexpr activation<fn::silu_fn, fn::silu_grad_fn> silu{};

}  // namespace shardcast::nn
