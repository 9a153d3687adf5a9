#pragma once
/// @file cuda/epilogue.cuh
/// Epilogue functors applied to a reduced value before its single store.
///
/// An epilogue is called as `epi(acc, i)` on host or device, where `acc` is the reduced
/// value in the accumulator type (float for half/bf16/fp8, the element type otherwise)
/// and `i` is the element's index in the output buffer; it returns the new accumulator
/// value. The kernel converts the result to the output type, so "cast to bf16" is
/// choosing `Out = __nv_bfloat16` (spelled `cast<__nv_bfloat16>` for readability).
/// @code
///   auto epi = sc::device::compose(sc::device::scale{0.5f}, sc::device::bias_add<float>{bias, n}, sc::device::gelu{});
///   // out[i] = gelu(0.5 * sum_p src_p[i] + bias[i % n])
/// @endcode

#include <cmath>
#include <cstddef>

#include "../config.hpp"
#include "dtypes.hpp"

namespace shardcast::device {

/// out = acc.
struct identity {
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return v; }
};

/// out = factor * acc.
struct scale {
  float factor = 1.0f;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return static_cast<A>(v * static_cast<A>(factor)); }
};

/// out = acc + bias[i % period]: a bias over the innermost dim of a row-major [..., period] output.
/// @tparam B element type of the bias vector (device memory when used in a kernel).
template <class B>
struct bias_add {
  const B* bias = nullptr;
  std::size_t period = 1;
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t i) const {
    return static_cast<A>(v + convert<A>(bias[i % period]));
  }
};

/// out = max(acc, 0).
struct relu {
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const { return v > A(0) ? v : A(0); }
};

/// out = acc * Phi(acc) with the exact (erf) form, as torch.nn.GELU() by default.
struct gelu {
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const {
    const float x = static_cast<float>(v);
    return static_cast<A>(0.5f * x * (1.0f + ::erff(x * 0.70710678118654752f)));
  }
};

/// out = acc * sigmoid(acc).
struct silu {
  template <class A>
  SHARDCAST_HOST_DEVICE A operator()(A v, std::size_t) const {
    const float x = static_cast<float>(v);
    return static_cast<A>(x / (1.0f + ::expf(-x)));
  }
};

/// Marks the output type of a reduction (the store converts to Out); as a functor it is the identity.
template <class Out>
struct cast : identity {
  using output_type = Out;
};

/// Applies the epilogues left to right: compose(f, g)(v, i) == g(f(v, i), i).
template <class F, class G>
struct composed {
  F f;
  G g;
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
