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
/// `static_cast`, so any type convertible to and from float works. Integer arithmetic
/// (fn::neg, fn::abs, fn::square, fn::shift, fn::rsub, lowest() / -1) wraps around modulo 2^bits, as the element
/// type's own unsigned arithmetic does, rather than overflowing; fn::sqrt, fn::rsqrt,
/// fn::log, fn::tanh and fn::sigmoid take no integer elements (convert x to a floating type
/// first).
///
/// Which partial placements each functor may be applied to term by term (its traits in
/// ops/elementwise.hpp):
///
/// | functor                         | property                    | so map/zip keep             |
/// |---------------------------------|-----------------------------|-----------------------------|
/// | neg                             | linear, nonincreasing       | partial<sum\|avg>; max <-> min |
/// | shift(c) (x + c), c finite      | affine, nondecreasing       | partial<avg\|max\|min>       |
/// | rsub(c) (c - x), c finite       | affine, nonincreasing       | partial<avg>; max <-> min    |
/// | div_by(c) (x / c)               | linear (floating point)     | partial<sum\|avg>            |
/// | rdiv(c) (c / x)                 | none                        | (replicate and shard only)  |
/// | exp, relu, tanh, sigmoid        | nondecreasing               | partial<max\|min>            |
/// | max(a, b), min(a, b)            | nondecreasing in each       | partial<max\|min> with a replicated other |
/// | abs, square, sqrt, rsqrt, log   | none                        | (replicate and shard only)  |
///
/// Over integers a partial<max|min> goes through neither neg, shift nor rsub (they wrap, and
/// -lowest() is lowest()), a partial<avg> through nothing but fn::identity, and a
/// partial<sum> through no division (it truncates). div_by(c) keeps no partial<max|min>:
/// whether it keeps or swaps them depends on c's sign, a run-time value that a layout type
/// cannot depend on. sqrt and log
/// are nondecreasing only where they are defined: a negative term, or the -inf that a rank
/// holding no element contributes to a partial<max>, becomes NaN, which the max reduction
/// propagates, so they keep no partial placement.
///
/// @code
///   namespace fn = shardcast::fn;
///   float y = fn::gelu(0.5f);             // 0.3457...
///   float g = fn::gelu_grad(0.5f, 1.0f);  // dL/dx for dL/dy = 1
/// @endcode

#include <cmath>
#include <type_traits>

#include "../config.hpp"
#include "../detail/wrapping.hpp"

namespace shardcast::fn {

namespace detail {
/// The type transcendental functions are evaluated in: double for double, float otherwise.
template <class T>
using math_t = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, long double>, double, float>;
/// The type exact arithmetic (negation, absolute value, comparisons, x * x, x + c) is done
/// in: T itself for the built-in arithmetic types, float for the narrow ones.
template <class T>
using arith_t = std::conditional_t<std::is_arithmetic_v<T>, T, float>;
// Integer arithmetic that wraps (detail/wrapping.hpp).
using shardcast::detail::wrapping_add;
using shardcast::detail::wrapping_mul;
using shardcast::detail::wrapping_sub;
/// T is a floating-point element type (built-in or narrow): the transcendental functors
/// refuse integral T, whose results (NaN, inf, fractions) they would have to truncate.
template <class T>
inline constexpr bool real_v = !std::is_integral_v<T>;
/// a / b: integer division (truncating) for integral T, where lowest() / -1 wraps to
/// lowest() rather than overflowing (the only quotient that does not fit); T's own
/// division otherwise.
template <class T>
SHARDCAST_HOST_DEVICE constexpr T quotient(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    if (b == T(-1)) return wrapping_sub(T(0), a);
  }
  return static_cast<T>(a / b);
}
}  // namespace detail

/// a + b
struct add_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return detail::wrapping_add(a, b); }
};
/// a - b
struct sub_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return detail::wrapping_sub(a, b); }
};
/// a * b
struct mul_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return detail::wrapping_mul(a, b); }
};
/// a / b (integer division, truncating toward zero, for integer T). Not linear in (a, b)
/// jointly. Over signed integers lowest() / -1 wraps to lowest() (as fn::neg) instead of
/// overflowing; a zero divisor is undefined for integers (inf or NaN for floating types):
/// the functor cannot check it; `shardcast::div`, and `zip`/`broadcast_zip` given this
/// functor, scan the divisor's piece on the host first.
struct div_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const { return detail::quotient(a, b); }
};
/// x * factor (the factor is stored in the functor; it converts to T at the call).
template <class S>
struct scale_fn {
  S factor;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const { return detail::wrapping_mul(x, static_cast<T>(factor)); }
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
/// dy * relu'(x), with relu'(0) = 0 (PyTorch's choice); at a NaN x, dy passes (as
/// torch's threshold_backward: 0 only where x <= 0), so the forward's NaN is not hidden here.
struct relu_grad_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x, T dy) const { return x <= T(0) ? T(0) : dy; }
};

/// GELU, tanh approximation (PyTorch `gelu(approximate="tanh")`, Megatron-LM's `gelu_impl`):
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Floating-point elements only.
struct gelu_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::gelu: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    const M k = M(0.7978845608028654);  // sqrt(2/pi)
    using std::tanh;
    return static_cast<T>(M(0.5) * v * (M(1) + tanh(k * (v + M(0.044715) * v * v * v))));
  }
};
/// dy * gelu'(x) for the tanh approximation. Floating-point elements only.
struct gelu_grad_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x, T dy) const {
    static_assert(detail::real_v<T>, "shardcast::fn::gelu_grad: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    const M k = M(0.7978845608028654);
    using std::tanh;
    const M t = tanh(k * (v + M(0.044715) * v * v * v));
    const M d = M(0.5) * (M(1) + t) + M(0.5) * v * (M(1) - t * t) * k * (M(1) + M(3) * M(0.044715) * v * v);
    return static_cast<T>(static_cast<M>(dy) * d);
  }
};

/// e^x (computed in double for double, in float otherwise). Floating-point elements only.
struct exp_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::exp: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    using std::exp;
    return static_cast<T>(exp(static_cast<M>(x)));
  }
};

/// SiLU (swish): x * sigmoid(x). Floating-point elements only.
struct silu_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::silu: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    using std::exp;
    return static_cast<T>(v / (M(1) + exp(-v)));
  }
};
/// dy * silu'(x) = dy * s (1 + x (1 - s)), s = sigmoid(x). Floating-point elements only.
struct silu_grad_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x, T dy) const {
    static_assert(detail::real_v<T>, "shardcast::fn::silu_grad: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    const M v = static_cast<M>(x);
    using std::exp;
    const M s = M(1) / (M(1) + exp(-v));
    return static_cast<T>(static_cast<M>(dy) * s * (M(1) + v * (M(1) - s)));
  }
};

/// -x. Over integers it wraps: -lowest() is lowest() (as in two's complement and torch.neg).
struct neg_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return detail::wrapping_sub(T(0), x);
    } else {
      return static_cast<T>(-static_cast<detail::arith_t<T>>(x));
    }
  }
};
/// |x|; |-0.0| is +0.0 and a NaN stays NaN. Over signed integers |lowest()| wraps to
/// lowest() (as torch.abs).
struct abs_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) return x < T(0) ? neg_fn{}(x) : x;
      else return x;
    } else {
      using A = detail::arith_t<T>;
      const A v = static_cast<A>(x);
      return static_cast<T>(v < A(0) ? -v : v == A(0) ? A(0) : v);
    }
  }
};
/// x * x (over integers modulo 2^bits).
struct square_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return detail::wrapping_mul(x, x);
    } else {
      const detail::arith_t<T> v = static_cast<detail::arith_t<T>>(x);
      return static_cast<T>(v * v);
    }
  }
};
/// x + c (c is stored in the functor and converted to x's arithmetic type at the call; over
/// integers the sum wraps modulo 2^bits). `shardcast::add(x, c)` checks that an integral
/// element type holds c; the functor cannot.
template <class S>
struct shift_fn {
  S c;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return detail::wrapping_add(x, static_cast<T>(c));
    } else {
      using A = detail::arith_t<T>;
      return static_cast<T>(static_cast<A>(x) + static_cast<A>(c));
    }
  }
};
/// c - x (c is stored in the functor and converted to x's arithmetic type at the call, as
/// in fn::shift; over integers the difference wraps modulo 2^bits). What
/// `shardcast::sub(c, x)` maps with.
template <class S>
struct rsub_fn {
  S c;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return detail::wrapping_sub(static_cast<T>(c), x);
    } else {
      using A = detail::arith_t<T>;
      return static_cast<T>(static_cast<A>(c) - static_cast<A>(x));
    }
  }
};
/// x / c, computed as a division (not as x * (1 / c), which rounds differently); c is
/// stored and converted to x's arithmetic type at the call. Integer division truncates,
/// and lowest() / -1 wraps to lowest() (see fn::div); c = 0 is undefined for integers:
/// `shardcast::div(x, c)` and `map` refuse it before dividing, the functor cannot.
template <class S>
struct div_by_fn {
  S c;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    using A = detail::arith_t<T>;
    if constexpr (std::is_integral_v<T>) return detail::quotient(x, static_cast<T>(c));
    else return static_cast<T>(static_cast<A>(x) / static_cast<A>(c));
  }
};
/// c / x (c stored and converted as in fn::div_by). For integers x = 0 is undefined
/// (`shardcast::div(c, x)` and `map` check x's piece on the host) and lowest() / -1 wraps.
template <class S>
struct rdiv_fn {
  S c;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    using A = detail::arith_t<T>;
    if constexpr (std::is_integral_v<T>) return detail::quotient(static_cast<T>(c), x);
    else return static_cast<T>(static_cast<A>(c) / static_cast<A>(x));
  }
};
/// sqrt(x); NaN for x < 0. Floating-point elements only.
struct sqrt_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::sqrt: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    using std::sqrt;
    return static_cast<T>(sqrt(static_cast<M>(x)));
  }
};
/// 1 / sqrt(x) (inf at +0, NaN for x < 0), as torch.rsqrt. Floating-point elements only.
struct rsqrt_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::rsqrt: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    using std::sqrt;
    return static_cast<T>(M(1) / sqrt(static_cast<M>(x)));
  }
};
/// The natural logarithm (-inf at 0, NaN for x < 0). Floating-point elements only.
struct log_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::log: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    using std::log;
    return static_cast<T>(log(static_cast<M>(x)));
  }
};
/// tanh(x). Floating-point elements only.
struct tanh_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::tanh: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    using std::tanh;
    return static_cast<T>(tanh(static_cast<M>(x)));
  }
};
/// The logistic function 1 / (1 + e^-x), in [0, 1] (no NaN but for a NaN x).
/// Floating-point elements only.
struct sigmoid_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T x) const {
    static_assert(detail::real_v<T>, "shardcast::fn::sigmoid: integer elements; convert to a floating type first, e.g. map(x, [](int v) { return float(v); }).");
    using M = detail::math_t<T>;
    using std::exp;
    return static_cast<T>(M(1) / (M(1) + exp(-static_cast<M>(x))));
  }
};
/// The larger of a and b; a NaN in either wins (as torch.maximum, and as the library's
/// max reductions), so a diverging value is not hidden.
struct max_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const {
    using A = detail::arith_t<T>;
    const A u = static_cast<A>(a), v = static_cast<A>(b);
    if constexpr (!std::is_integral_v<T>) {
      if (u != u) return a;
      if (v != v) return b;
    }
    return u < v ? b : a;
  }
};
/// The smaller of a and b; a NaN in either wins (as torch.minimum).
struct min_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const {
    using A = detail::arith_t<T>;
    const A u = static_cast<A>(a), v = static_cast<A>(b);
    if constexpr (!std::is_integral_v<T>) {
      if (u != u) return a;
      if (v != v) return b;
    }
    return v < u ? b : a;
  }
};

// The functor objects: usable in host code and, compiled by nvcc, in device code too (a
// kernel or a __device__ lambda may call fn::sigmoid(v) directly).
SHARDCAST_GLOBAL_CONSTANT add_fn add{};
SHARDCAST_GLOBAL_CONSTANT sub_fn sub{};
SHARDCAST_GLOBAL_CONSTANT mul_fn mul{};
SHARDCAST_GLOBAL_CONSTANT div_fn div{};
SHARDCAST_GLOBAL_CONSTANT exp_fn exp{};
SHARDCAST_GLOBAL_CONSTANT identity_fn identity{};
SHARDCAST_GLOBAL_CONSTANT relu_fn relu{};
SHARDCAST_GLOBAL_CONSTANT relu_grad_fn relu_grad{};
SHARDCAST_GLOBAL_CONSTANT gelu_fn gelu{};
SHARDCAST_GLOBAL_CONSTANT gelu_grad_fn gelu_grad{};
SHARDCAST_GLOBAL_CONSTANT silu_fn silu{};
SHARDCAST_GLOBAL_CONSTANT silu_grad_fn silu_grad{};
SHARDCAST_GLOBAL_CONSTANT neg_fn neg{};
SHARDCAST_GLOBAL_CONSTANT abs_fn abs{};
SHARDCAST_GLOBAL_CONSTANT square_fn square{};
SHARDCAST_GLOBAL_CONSTANT sqrt_fn sqrt{};
SHARDCAST_GLOBAL_CONSTANT rsqrt_fn rsqrt{};
SHARDCAST_GLOBAL_CONSTANT log_fn log{};
SHARDCAST_GLOBAL_CONSTANT tanh_fn tanh{};
SHARDCAST_GLOBAL_CONSTANT sigmoid_fn sigmoid{};
SHARDCAST_GLOBAL_CONSTANT max_fn max{};
SHARDCAST_GLOBAL_CONSTANT min_fn min{};
/// `fn::scale(2.0f)` multiplies by 2.
template <class S>
SHARDCAST_HOST_DEVICE constexpr scale_fn<S> scale(S factor) { return scale_fn<S>{factor}; }
/// `fn::shift(1.0f)` adds 1.
template <class S>
SHARDCAST_HOST_DEVICE constexpr shift_fn<S> shift(S c) { return shift_fn<S>{c}; }
/// `fn::rsub(1.0f)` maps x to 1 - x.
template <class S>
SHARDCAST_HOST_DEVICE constexpr rsub_fn<S> rsub(S c) { return rsub_fn<S>{c}; }
/// `fn::div_by(4.0f)` divides by 4.
template <class S>
SHARDCAST_HOST_DEVICE constexpr div_by_fn<S> div_by(S c) { return div_by_fn<S>{c}; }
/// `fn::rdiv(1.0f)` maps x to 1 / x.
template <class S>
SHARDCAST_HOST_DEVICE constexpr rdiv_fn<S> rdiv(S c) { return rdiv_fn<S>{c}; }

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
