#pragma once
/// @file cuda/epilogue.cuh
/// Epilogue functors applied to a reduced value before its single store.
///
/// An epilogue is called as `epi(acc, i)` on host or device, where `acc` is the reduced
/// value in the accumulator type (float for half/bf16/fp8, the element type otherwise)
/// and `i` is the element's index in the output buffer; it returns the new accumulator
/// value. The kernel converts the result to the element type of the destination pointer,
/// so "cast to bf16" is passing a `__nv_bfloat16*` destination; `cast<__nv_bfloat16>` only
/// says so at the call site (it is the identity, and does not choose the type).
///
/// An epilogue that ignores `i` says so with `static constexpr bool uses_index = false;`
/// (every one here except bias_add); the fused reduction then runs on CUB's
/// DeviceTransform, which does not pass indices. Epilogues without the member are
/// assumed to use the index.
/// @code
///   auto epi = sc::device::compose(sc::device::scale{0.5f}, sc::device::bias_add<float>{bias, n}, sc::device::gelu{});
///   // out[i] = gelu(0.5 * sum_p src_p[i] + bias[i % n])
/// @endcode

#include <cmath>
#include <concepts>
#include <cstddef>

#include "../config.hpp"
#include "dtypes.hpp"

namespace shardcast::device {

/// False when epilogue E declares that it ignores the element index (`uses_index = false`).
template <class E>
inline constexpr bool epilogue_uses_index_v = [] {
  if constexpr (requires { { E::uses_index } -> std::convertible_to<bool>; }) return bool(E::uses_index);
  else return true;
}();

/// out = acc.
struct identity {
  static constexpr bool uses_index = false;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return v; }
};

/// out = factor * acc.
struct scale {
  static constexpr bool uses_index = false;
  float factor = 1.0f;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return static_cast<A>(v * static_cast<A>(factor)); }
};

/// out = acc + bias[i % period]: a bias over the innermost dim of a row-major [..., period] output.
/// @tparam B element type of the bias vector (device memory when used in a kernel).
template <class B>
struct bias_add {
  static constexpr bool uses_index = true;
  const B* bias = nullptr;
  std::size_t period = 1;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t i) const {
    return static_cast<A>(v + convert<A>(bias[i % period]));
  }
};

/// out = max(acc, 0); a NaN stays NaN, as fn::relu.
struct relu {
  static constexpr bool uses_index = false;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return (v > A(0) || v != v) ? v : A(0); }
};

/// out = acc * Phi(acc) with the exact (erf) form, as torch.nn.GELU() by default.
struct gelu {
  static constexpr bool uses_index = false;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const {
    const float x = static_cast<float>(v);
    return static_cast<A>(0.5f * x * (1.0f + ::erff(x * 0.70710678118654752f)));
  }
};

/// out = acc * sigmoid(acc).
struct silu {
  static constexpr bool uses_index = false;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const {
    const float x = static_cast<float>(v);
    return static_cast<A>(x / (1.0f + ::expf(-x)));
  }
};

/// Any elementwise functor `f(x)` as an epilogue: the activations of ops/functors.hpp
/// (`fn::gelu`, the tanh form; `fn::relu`; `fn::silu`) or your own `__device__` functor.
/// @code
///   auto epi = sc::device::compose(sc::device::scale{0.5f}, sc::device::activation{sc::fn::gelu});
/// @endcode
template <class F>
struct activation {
  static constexpr bool uses_index = false;
  F f;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return static_cast<A>(f(v)); }
};
template <class F>
activation(F) -> activation<F>;

/// Names the intended output type at the call site; as a functor it is the identity. The
/// store converts to the destination pointer's element type, whatever Out says.
template <class Out>
struct cast : identity {
  using output_type = Out;
};

/// Applies the epilogues left to right: compose(f, g)(v, i) == g(f(v, i), i).
template <class F, class G>
struct composed {
  F f;
  G g;
  static constexpr bool uses_index = epilogue_uses_index_v<F> || epilogue_uses_index_v<G>;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t i) const { return g(f(v, i), i); }
};

template <class F>
SHARDCAST_HOST_DEVICE constexpr F compose(F f) { return f; }
template <class F, class G, class... H>
SHARDCAST_HOST_DEVICE constexpr auto compose(F f, G g, H... h) {
  return compose(composed<F, G>{f, g}, h...);
}

}  // namespace shardcast::device
