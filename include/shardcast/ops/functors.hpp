#pragma once
/// @file ops/functors.hpp
/// Elementwise functors for `map`/`zip` and the parallel layers, usable on the host and,
/// compiled by nvcc, inside kernels (SHARDCAST_HOST_DEVICE). They live in
/// `shardcast::fn` so that the tensor-level operators (`shardcast::add`, ...) keep the
/// short names. `fn::linear(f)`, `fn::linear_in<I>(f)`, `fn::affine_in<I>(f)`,
/// `fn::nondecreasing_in<I>(f)` and `fn::nonincreasing_in<I>(f)` wrap a functor with a
/// property the layout rules read (which partial placements it may be applied to term by
/// term; see ops/elementwise.hpp).
///
/// Narrow types (half, bfloat16, fp8) are computed in float: the functors convert with
/// `static_cast`, so any type convertible to and from float works.
///
/// @code
///   namespace fn = shardcast::fn;
///   float y = fn::gelu(0.5f);             // 0.3457...
///   float g = fn::gelu_grad(0.5f, 1.0f);  // dL/dx for dL/dy = 1
/// @endcode

#include <cmath>
#include <type_traits>

#include "../config.hpp"

namespace shardcast::fn {

namespace detail {
/// The type transcendental functions are evaluated in: double for double, float otherwise.
template <class T>
using math_t = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, long double>, double, float>;
}  // namespace detail

/// a + b
struct add_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return static_cast<T>(a + b); }
};
/// a - b
struct sub_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return static_cast<T>(a - b); }
};
/// a * b
struct mul_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return static_cast<T>(a * b); }
};
/// a / b (integer division for integer T). Not linear in (a, b) jointly.
struct div_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return static_cast<T>(a / b); }
};
/// x * factor (the factor is stored in the functor; it converts to T at the call).
template <class S>
struct scale_fn {
  S factor;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const { return static_cast<T>(x * static_cast<T>(factor)); }
};
/// The identity map.
struct identity_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const { return x; }
};

/// max(x, 0); a NaN stays NaN (as torch.relu), so a diverging activation is not hidden.
struct relu_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const { return (x > T(0) || x != x) ? x : T(0); }
};
/// dy * relu'(x), with relu'(0) = 0 (PyTorch's choice).
struct relu_grad_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x, T dy) const { return x > T(0) ? dy : T(0); }
};

/// GELU, tanh approximation (PyTorch `gelu(approximate="tanh")`, Megatron-LM's `gelu_impl`):
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct gelu_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    const M k = M(0.7978845608028654);  // sqrt(2/pi)
    using std::tanh;
    return static_cast<T>(M(0.5) * v * (M(1) + tanh(k * (v + M(0.044715) * v * v * v))));
  }
};
/// dy * gelu'(x) for the tanh approximation.
struct gelu_grad_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x, T dy) const {
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    const M k = M(0.7978845608028654);
    using std::tanh;
    const M t = tanh(k * (v + M(0.044715) * v * v * v));
    const M d = M(0.5) * (M(1) + t) + M(0.5) * v * (M(1) - t * t) * k * (M(1) + M(3) * M(0.044715) * v * v);
    return static_cast<T>(static_cast<M>(dy) * d);
  }
};

/// e^x (computed in double for double, in float otherwise).
struct exp_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    using M = detail::math_t<T>;
    using std::exp;
    return static_cast<T>(exp(static_cast<M>(x)));
  }
};

/// SiLU (swish): x * sigmoid(x).
struct silu_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    using std::exp;
    return static_cast<T>(v / (M(1) + exp(-v)));
  }
};
/// dy * silu'(x) = dy * s (1 + x (1 - s)), s = sigmoid(x).
struct silu_grad_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x, T dy) const {
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    using std::exp;
    const M s = M(1) / (M(1) + exp(-v));
    return static_cast<T>(static_cast<M>(dy) * s * (M(1) + v * (M(1) - s)));
  }
};

inline constexpr add_fn add{};
inline constexpr sub_fn sub{};
inline constexpr mul_fn mul{};
inline constexpr div_fn div{};
inline constexpr exp_fn exp{};
inline constexpr identity_fn identity{};
inline constexpr relu_fn relu{};
inline constexpr relu_grad_fn relu_grad{};
inline constexpr gelu_fn gelu{};
inline constexpr gelu_grad_fn gelu_grad{};
inline constexpr silu_fn silu{};
inline constexpr silu_grad_fn silu_grad{};
/// `fn::scale(2.0f)` multiplies by 2.
template <class S>
SHARDCAST_HOST_DEVICE constexpr scale_fn<S> scale(S factor) { return scale_fn<S>{factor}; }

// ---------------------------------------------------------------------------------------
// Marks: a functor wrapped with a property the layout rules of map/zip read (the traits
// is_linear, is_linear_in, is_affine_in, is_nondecreasing_in in ops/elementwise.hpp).
// ---------------------------------------------------------------------------------------

/// The properties a functor can be marked with (see fn::marked).
namespace property {
struct linear;  ///< linear (a binary functor: jointly in both arguments)
template <int I>
struct linear_in;  ///< linear in argument I with the other one fixed
template <int I>
struct affine_in;  ///< affine in argument I with the other one fixed
template <int I>
struct nondecreasing_in;  ///< nondecreasing in argument I with the other one fixed
template <int I>
struct nonincreasing_in;  ///< nonincreasing in argument I with the other one fixed
}  // namespace property

/// Functor F marked with property P for the layout rules (what fn::linear, fn::linear_in,
/// fn::affine_in and fn::nondecreasing_in return). Calls `f` unchanged and keeps the
/// properties of F, so marks stack.
/// @tparam P a property from fn::property
/// @tparam F the wrapped functor
template <class P, class F>
struct marked {
  using wrapped_functor = F;
  F f;
  template <class... A>
  SHARDCAST_HOST_DEVICE constexpr auto operator()(const A&... a) const -> decltype(f(a...)) {
    return f(a...);
  }
};
/// F marked linear: `f(a + b) = f(a) + f(b)` and `f(c a) = c f(a)` (for binary functors,
/// jointly in both arguments).
template <class F>
using linear_fn = marked<property::linear, F>;
/// F marked linear in argument I (0 or 1) with the other fixed: f(x1 + x2, b) = f(x1, b) + f(x2, b) for I = 0.
template <int I, class F>
using linear_in_fn = marked<property::linear_in<I>, F>;
/// F marked affine in argument I with the other fixed: f(x, b) = g(b) x + h(b) for I = 0 (linear ones are).
template <int I, class F>
using affine_in_fn = marked<property::affine_in<I>, F>;
/// F marked nondecreasing in argument I with the other fixed: x1 <= x2 implies f(x1, b) <= f(x2, b) for I = 0.
template <int I, class F>
using nondecreasing_in_fn = marked<property::nondecreasing_in<I>, F>;
/// F marked nonincreasing in argument I with the other fixed: x1 <= x2 implies f(x1, b) >= f(x2, b) for I = 0.
template <int I, class F>
using nonincreasing_in_fn = marked<property::nonincreasing_in<I>, F>;

/// Wraps `f` so that `map`/`zip` accept it on partial<sum|avg> axes. The library cannot
/// check the claim: an affine map (`2 * x + 1`) marked linear gives wrong results there.
/// @code
///   auto y = sc::map(p /* layout<partial<sum>> */, sc::fn::linear([](float v) { return 3 * v; }));
/// @endcode
template <class F>
SHARDCAST_HOST_DEVICE constexpr linear_fn<F> linear(F f) {
  return linear_fn<F>{f};
}
/// Wraps `f` as linear in argument I: zip then takes a partial<sum|avg> operand I with a
/// replicated other operand on a mesh axis. Wrappers stack: `fn::affine_in<1>(fn::linear_in<0>(f))`.
/// The library cannot check the claim.
/// @code
///   auto ratio = sc::fn::linear_in<0>([](float n, float d) { return n / (d + 1e-6f); });
///   auto y = sc::zip(p /* partial<sum> */, d /* replicate */, ratio);  // partial<sum>
/// @endcode
template <int I, class F>
SHARDCAST_HOST_DEVICE constexpr linear_in_fn<I, F> linear_in(F f) {
  static_assert(I == 0 || I == 1, "shardcast::fn::linear_in<I>: I is the argument index, 0 or 1.");
  return linear_in_fn<I, F>{f};
}
/// Wraps `f` as affine in argument I: zip then takes a partial<avg> operand I with a
/// replicated other operand (map: a partial<avg> x, with I = 0).
template <int I, class F>
SHARDCAST_HOST_DEVICE constexpr affine_in_fn<I, F> affine_in(F f) {
  static_assert(I == 0 || I == 1, "shardcast::fn::affine_in<I>: I is the argument index, 0 or 1.");
  return affine_in_fn<I, F>{f};
}
/// Wraps `f` as nondecreasing in argument I: zip then takes a partial<max|min> operand I
/// with a replicated other operand (map: a partial<max|min> x, with I = 0).
template <int I, class F>
SHARDCAST_HOST_DEVICE constexpr nondecreasing_in_fn<I, F> nondecreasing_in(F f) {
  static_assert(I == 0 || I == 1, "shardcast::fn::nondecreasing_in<I>: I is the argument index, 0 or 1.");
  return nondecreasing_in_fn<I, F>{f};
}
/// Wraps `f` as nonincreasing in argument I: zip then takes a partial<max> operand I with a
/// replicated other operand and gives partial<min>, and the reverse (map: x, with I = 0).
template <int I, class F>
SHARDCAST_HOST_DEVICE constexpr nonincreasing_in_fn<I, F> nonincreasing_in(F f) {
  static_assert(I == 0 || I == 1, "shardcast::fn::nonincreasing_in<I>: I is the argument index, 0 or 1.");
  return nonincreasing_in_fn<I, F>{f};
}

}  // namespace shardcast::fn
