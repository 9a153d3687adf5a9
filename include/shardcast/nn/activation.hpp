#pragma once
/// @file nn/activation.hpp
/// Elementwise activation layers (`nn::gelu`, `nn::relu`, `nn::silu`): forward y = f(x) and
/// backward dx = f'(x) * dy on each rank's local piece, with no communication, so the
/// output keeps the input's layout. Between a column- and a row-parallel linear layer the
/// activation runs on the feature-split hidden tensor.
///
/// A tensor with a partial placement is refused (f of the partial values is not f of their
/// sum): at compile time for a static layout, with layout_error for a `dynamic_layout` one.
/// A dynamic-layout input gives a dynamic-layout output of the same run-time layout.
/// @code
///   auto h = fc1.forward(x);                  // layout<shard<0>, shard<1>>
///   auto a = shardcast::nn::gelu.forward(h);  // same layout, a = gelu(h) elementwise
///   auto dh = shardcast::nn::gelu.backward(h, da);
/// @endcode

#include <concepts>
#include <string>
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
  /// @throws layout_error if x has a dynamic layout with a partial placement
  template <class TX, int R, class L, class Mesh>
  dtensor<std::remove_const_t<TX>, R, L, Mesh> forward(const dtensor<TX, R, L, Mesh>& x, typename Mesh::stream_type s = {}) const {
    using T = std::remove_const_t<TX>;
    check_no_partial<L>(x.layout(), "forward");
    auto y = output<T, R, L>(x, s);
    if (y.local_size() > 0) detail::local_exec<typename Mesh::memory_space>::map(x.data(), y.data(), y.local_size(), f, s);
    return y;
  }

  /// dx = f'(x) * dy elementwise, in x's layout.
  /// @param x the forward input
  /// @param dy dL/dy, in the same layout as x (a static layout and a `dynamic_layout` may
  ///        meet: the layouts are then compared at run time)
  /// @throws layout_error if x and dy live on different meshes, the extents or (at run
  ///         time) the layouts differ, or x has a dynamic layout with a partial placement
  /// (x and dy may have const elements, each or both.)
  template <class TX, class TY, int R, class L, class LY, class Mesh>
    requires detail::elements_of<TY, std::remove_const_t<TX>>
  dtensor<std::remove_const_t<TX>, R, L, Mesh> backward(const dtensor<TX, R, L, Mesh>& x, const dtensor<TY, R, LY, Mesh>& dy,
                                                       typename Mesh::stream_type s = {}) const {
    using T = std::remove_const_t<TX>;
    if constexpr (!std::same_as<L, dynamic_layout> && !std::same_as<LY, dynamic_layout>)
      static_assert(detail::expect_layout<where::activation_output_grad, L, LY>());
    check_no_partial<L>(x.layout(), "backward");
    shardcast::detail::expect_same_mesh("shardcast::nn::activation::backward", x.mesh(), dy.mesh(), "x", "dy");
    SHARDCAST_EXPECTS(x.global_extents() == dy.global_extents(),
                      "shardcast::nn::activation::backward: the output gradient's extents differ from the input's; pass the forward input");
    if constexpr (std::same_as<L, dynamic_layout> || std::same_as<LY, dynamic_layout>)
      SHARDCAST_EXPECTS(x.layout() == dy.layout(), "shardcast::nn::activation::backward: the output gradient has layout \"" + to_string(dy.layout()) +
                                                       "\" but the input \"" + to_string(x.layout()) +
                                                       "\"; redistribute the gradient to the input's layout first");
    auto dx = output<T, R, L>(x, s);
    if (dx.local_size() > 0) detail::local_exec<typename Mesh::memory_space>::zip(x.data(), dy.data(), dx.data(), dx.local_size(), grad, s);
    return dx;
  }

 private:
  /// A partial placement in x's layout L: a compile error for a static L, else layout_error.
  template <class L>
  static void check_no_partial(const runtime_layout& l, const char* which) {
    if constexpr (!std::same_as<L, dynamic_layout>) {
      static_assert(!detail::has_partial<L>(),
                    "shardcast::nn::activation: the input has a partial placement, and f of partial values is not f of their sum; "
                    "reduce it first with shardcast::redistribute<...replicate or shard<D> on that axis...>(x).");
    } else {
      for (int a = 0; a < l.naxes; ++a)
        if (l[a].is_partial())
          throw layout_error(std::string("shardcast::nn::activation::") + which + ": the input has layout \"" + to_string(l) +
                             "\", partial on mesh axis " + std::to_string(a) +
                             ", and f of partial values is not f of their sum; reduce it first (redistribute to replicate or a shard on that axis)");
    }
  }
  /// Uninitialised storage for the result, in x's layout.
  template <class T, int R, class L, class TX, class Mesh>
  static dtensor<T, R, L, Mesh> output(const dtensor<TX, R, L, Mesh>& x, typename Mesh::stream_type s) {
    if constexpr (std::same_as<L, dynamic_layout>) return empty<T>(x.mesh(), x.layout(), x.global_extents(), s);
    else return empty<L, T>(x.mesh(), x.global_extents(), s);
  }
};

/// GELU, tanh approximation (fn::gelu).
inline constexpr activation<fn::gelu_fn, fn::gelu_grad_fn> gelu{};
/// ReLU (fn::relu).
inline constexpr activation<fn::relu_fn, fn::relu_grad_fn> relu{};
/// SiLU (fn::silu).
inline constexpr activation<fn::silu_fn, fn::silu_grad_fn> silu{};

}  // namespace shardcast::nn
