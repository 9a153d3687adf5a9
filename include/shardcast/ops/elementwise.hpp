#pragma once
/// @file ops/elementwise.hpp
/// Elementwise operators on dtensors: `map(x, f)`, `zip(a, b, f)`, `add`, `sub`, `mul`,
/// `div`, `scale(x, s)`, the forms with an arithmetic scalar c on either side (`add(x, c)`,
/// `sub(x, c)`, `mul(x, c)`, `div(x, c)`, `add(c, x)`, `sub(c, x)`, `mul(c, x)`, `div(c, x)`),
/// and `bias_add(x, bias)`. None of them communicates: every rank applies
/// the functor to its local piece. The output layout is computed per mesh axis at compile
/// time (for `dynamic_layout` tensors at run time, with the same rules):
///
/// | op                  | x / a on the axis          | b on the axis   | output           |
/// |---------------------|----------------------------|-----------------|------------------|
/// | map(x, f)           | replicate, shard<d>        |                 | same as x        |
/// | map(x, f)           | partial<sum\|avg>          |                 | same, f linear   |
/// | map(x, f)           | partial<max\|min>          |                 | same, f nondecr. |
/// | zip(a, b, f)        | replicate, shard<d>        | equal to a      | same as a        |
/// | zip(a, b, f)        | partial<sum\|avg>          | equal to a      | same, f linear   |
/// | zip(a, b, f)        | partial<Op>                | replicate       | partial<Op>, (*) |
/// | zip(a, b, f)        | replicate                  | partial<Op>     | partial<Op>, (*) |
/// | mul(x, s), s rank 0 | replicate, shard<d>, partial<sum\|avg> | replicate | same as x |
/// | add(x, c), sub(x, c), c scalar | replicate, shard<d>, partial<avg\|max\|min> | | same as x |
/// | sub(c, x), c scalar | replicate, shard<d>, partial<avg>  |                 | same as x        |
/// | sub(c, x), c scalar | partial<max\|min>                  |                 | min\|max (swapped) |
/// | div(x, c), c scalar | replicate, shard<d>, partial<sum\|avg> (floating point) | | same as x |
/// | div(c, x), c scalar | replicate, shard<d>                |                 | same as x        |
/// | div(a, b)           | replicate, shard<d>                | equal to a      | same as a        |
/// | div(a, b)           | partial<sum\|avg> (floating point) | replicate       | same as a        |
/// | div(a, s), s rank 0 | replicate, shard<d>, partial<sum\|avg> (floating point) | replicate | same as a |
/// | bias_add(x, bias)   | shard<R-1> (x's last dim)  | shard<0>        | shard<R-1>       |
/// | bias_add(x, bias)   | replicate, shard<d>, d<R-1 | replicate       | same as x        |
/// | bias_add(x, bias)   | partial<avg\|max\|min>      | replicate       | same as x        |
///
/// A functor is *linear* when `is_linear_v<F>` holds: `fn::identity`, `fn::scale(s)`,
/// `fn::neg`, `fn::div_by(c)` (floating point), `fn::add`, `fn::sub` and anything wrapped in
/// `fn::linear(f)`. Only linear
/// functors commute with a partial sum (f(x1 + x2) = f(x1) + f(x2)); `add`/`sub` are linear,
/// `mul`, `gelu`, `relu`, `silu`, `square` and `fn::shift(c)` (x + c, affine) are not. (*): f must commute with Op in the partial operand,
/// the other held fixed: linear in it for sum (fn::mul, fn::div's numerator), affine for avg
/// (also fn::add, fn::sub), nondecreasing for max/min (fn::add, fn::sub's first operand), or
/// nonincreasing, which swaps max and min (fn::sub's second operand); see is_linear_in,
/// is_affine_in, is_nondecreasing_in, is_nonincreasing_in. Every other case is a compile error naming the
/// mesh axis and placements (e.g. `map_on_partial_mesh_axis_needs_linear_functor<0,
/// partial<sum>, fn::gelu_fn>`) with the `redistribute` that makes it legal.
/// Two partial<max|min|prod> operands are never combined term by term, and partial<prod>
/// takes no map but fn::identity: redistribute first. A partial<avg> of integers takes nothing but
/// fn::identity (no map, zip, scale, mul or bias_add): its value is the truncated mean
/// trunc((x1 + ... + xn) / n), which no other function commutes with
/// (`partial_avg_of_integers_on_mesh_axis<Axis, P, F>`).
///
/// @code
///   // 2x2 mesh, x: layout<shard<0>, shard<1>> [m, n], bias: layout<replicate, shard<0>> [n]
///   auto y = sc::bias_add(x, bias);          // layout<shard<0>, shard<1>>
///   auto z = sc::map(y, sc::fn::gelu);       // same layout, no communication
///   auto p = sc::matmul(h, w);               // layout<..., partial<sum>>
///   auto q = sc::scale(p, 0.5f);             // still partial<sum>: scaling is linear
/// @endcode
///
/// Every operator also takes operands the caller gives up (`map(std::move(x), f)`, a
/// temporary, `add(x, map(x, f))`): they are left empty, and the result is written over the
/// piece of one that owns its storage alone and has the result's element type (see the
/// map and zip overloads for the rules).
///
/// Local work goes through `detail::elementwise_exec<memory_space>` (host loops here, CUDA
/// kernels in cuda/elementwise.cuh), so the same calls work on device meshes, with the
/// stream as the last argument.

#include <array>
#include <concepts>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "../comm/communicator.hpp"
#include "../config.hpp"
#include "../detail/elementwise_exec.hpp"
#include "../detail/host_ops.hpp"
#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../placement.hpp"
#include "../plan.hpp"
#include "functors.hpp"

namespace shardcast {

namespace detail {

/// Host loops of the elementwise customization point (see detail/elementwise_exec.hpp).
/// `out` may alias `in` / `a`: every element is read before it is written.
template <>
struct elementwise_exec<host_memory> {
  /// out[i] = f(in[i])
  template <class T, class U, class F>
  static void map(const T* in, U* out, std::size_t n, F f, host_stream = {}) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<U>(f(in[i]));
  }
  /// out[i] = f(a[i], b[i])
  template <class T, class U, class V, class F>
  static void zip(const T* a, const U* b, V* out, std::size_t n, F f, host_stream = {}) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<V>(f(a[i], b[i]));
  }
  /// out[r*cols + c] = f(a[r*cols + c], row[c]): zip_broadcast with one outer block
  template <class T, class U, class V, class F>
  static void zip_rows(const T* a, const U* row, V* out, std::size_t rows, std::size_t cols, F f, host_stream s = {}) {
    zip_broadcast(a, row, out, 1, rows, cols, f, s);
  }
  /// out[(o*mid + m)*inner + k] = f(a[(o*mid + m)*inner + k], b[o*inner + k])
  template <class T, class U, class V, class F>
  static void zip_broadcast(const T* a, const U* b, V* out, std::size_t outer, std::size_t mid, std::size_t inner, F f, host_stream = {}) {
    for (std::size_t o = 0; o < outer; ++o) {
      const U* bo = b + o * inner;
      for (std::size_t m = 0; m < mid; ++m) {
        const std::size_t base = (o * mid + m) * inner;
        for (std::size_t k = 0; k < inner; ++k) out[base + k] = static_cast<V>(f(a[base + k], bo[k]));
      }
    }
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Functor properties the layout rules read: linearity, and how each argument commutes with
// a partial reduction when the other argument is the same on every rank (the fn::marked
// wrappers that declare them are in functors.hpp).
// ---------------------------------------------------------------------------------------


namespace detail {
/// Trait<F::wrapped_functor, I...> for a wrapper F (fn::linear, fn::linear_in, ...), false otherwise:
/// a wrapper keeps the properties of what it wraps.
template <template <class, int> class Trait, class F, int I, class = void>
struct wrapped_has : std::false_type {};
template <template <class, int> class Trait, class F, int I>
struct wrapped_has<Trait, F, I, std::void_t<typename F::wrapped_functor>> : Trait<typename F::wrapped_functor, I> {};
}  // namespace detail

/// Whether functor `F` is linear (see fn::linear). Specialise it for your own functor
/// types: `template <> struct shardcast::is_linear<my_fn> : std::true_type {};`
/// @tparam F functor type (cv/ref-qualifiers are ignored by is_linear_v)
template <class F>
struct is_linear : std::false_type {};
template <>
struct is_linear<fn::identity_fn> : std::true_type {};
template <class S>
struct is_linear<fn::scale_fn<S>> : std::true_type {};
template <>
struct is_linear<fn::add_fn> : std::true_type {};
template <>
struct is_linear<fn::sub_fn> : std::true_type {};
/// -x: -(x1 + x2) = -x1 - x2, exact in IEEE arithmetic; over integers modulo 2^bits, as
/// a partial<sum> of integers adds.
template <>
struct is_linear<fn::neg_fn> : std::true_type {};
/// x / c: (x1 + x2) / c = x1 / c + x2 / c, for floating-point x only (props_of drops it for
/// integers, whose division truncates).
template <class S>
struct is_linear<fn::div_by_fn<S>> : std::true_type {};
template <class P, class F>
struct is_linear<fn::marked<P, F>> : is_linear<F> {};
template <class F>
struct is_linear<fn::linear_fn<F>> : std::true_type {};
/// is_linear<F>::value for the unqualified F.
template <class F>
inline constexpr bool is_linear_v = is_linear<std::remove_cvref_t<F>>::value;

/// Whether binary functor `F` is linear in its argument I (0 or 1) with the other one fixed:
/// fn::mul in both, fn::div in its numerator (I = 0; with floating-point operands only, as
/// integer division truncates). zip(a, b, f) with a partial<sum|avg> on a mesh axis where b
/// is replicate needs it for I = 0 (and for I = 1 the other way round). Specialise it for
/// your own types (`template <> struct shardcast::is_linear_in<my_fn, 0> : std::true_type {};`)
/// or wrap with fn::linear_in<I>(f).
template <class F, int I>
struct is_linear_in : detail::wrapped_has<is_linear_in, F, I> {};
template <int I>
struct is_linear_in<fn::mul_fn, I> : std::true_type {};
template <>
struct is_linear_in<fn::div_fn, 0> : std::true_type {};
template <int I, class F>
struct is_linear_in<fn::linear_in_fn<I, F>, I> : std::true_type {};
/// is_linear_in<F, I>::value for the unqualified F.
template <class F, int I>
inline constexpr bool is_linear_in_v = is_linear_in<std::remove_cvref_t<F>, I>::value;

/// Whether functor `F` is affine in its argument I with the other one fixed (a partial<avg>
/// operand, whose terms' weights sum to 1, goes through it term by term): every functor
/// linear in I, fn::add and fn::sub in both, fn::shift(c) and fn::rsub(c) (the maps marked
/// linear, such as fn::neg, count through is_linear). Specialise it or wrap with fn::affine_in<I>(f).
template <class F, int I>
struct is_affine_in : std::bool_constant<is_linear_in<F, I>::value || detail::wrapped_has<is_affine_in, F, I>::value> {};
template <int I>
struct is_affine_in<fn::add_fn, I> : std::true_type {};
template <int I>
struct is_affine_in<fn::sub_fn, I> : std::true_type {};
/// x + c: avg(x_i + c) = avg(x_i) + c.
template <class S>
struct is_affine_in<fn::shift_fn<S>, 0> : std::true_type {};
/// c - x: avg(c - x_i) = c - avg(x_i).
template <class S>
struct is_affine_in<fn::rsub_fn<S>, 0> : std::true_type {};
template <int I, class F>
struct is_affine_in<fn::affine_in_fn<I, F>, I> : std::true_type {};
/// is_affine_in<F, I>::value for the unqualified F.
template <class F, int I>
inline constexpr bool is_affine_in_v = is_affine_in<std::remove_cvref_t<F>, I>::value;

/// Whether functor `F` is nondecreasing in its argument I with the other one fixed, so that
/// it keeps a partial<max|min> operand (f(max(x1, x2)) = max(f(x1), f(x2))): fn::add, fn::max
/// and fn::min in both, fn::sub in its first, and the maps fn::identity, fn::relu, fn::exp,
/// fn::tanh, fn::sigmoid and fn::shift(c) (I = 0). Each maps a NaN, and only a NaN, to NaN,
/// so a NaN term wins the reduction either way. Not fn::scale or fn::mul: a negative factor
/// turns max into min. Not fn::sqrt or fn::log: nondecreasing where they are defined, but a
/// negative term (or the -inf identity that a rank holding no element contributes to a
/// partial<max>) becomes NaN and wins the max, where sqrt(max x_i) is a number. Not
/// fn::abs, fn::square (they decrease below 0) or fn::rsqrt (it decreases, but
/// rsqrt(-0.0) = -inf < rsqrt(+0.0)). Specialise it or wrap with fn::nondecreasing_in<I>(f).
template <class F, int I>
struct is_nondecreasing_in : detail::wrapped_has<is_nondecreasing_in, F, I> {};
template <int I>
struct is_nondecreasing_in<fn::add_fn, I> : std::true_type {};
template <>
struct is_nondecreasing_in<fn::sub_fn, 0> : std::true_type {};
template <>
struct is_nondecreasing_in<fn::identity_fn, 0> : std::true_type {};
template <>
struct is_nondecreasing_in<fn::relu_fn, 0> : std::true_type {};
template <>
struct is_nondecreasing_in<fn::exp_fn, 0> : std::true_type {};
template <>
struct is_nondecreasing_in<fn::tanh_fn, 0> : std::true_type {};
template <>
struct is_nondecreasing_in<fn::sigmoid_fn, 0> : std::true_type {};
/// x + c (for a finite c: c = inf turns a -inf term into NaN, as fn::add with a replicated
/// infinity does; see "Floating-point infinities" in docs/02_operators.md).
template <class S>
struct is_nondecreasing_in<fn::shift_fn<S>, 0> : std::true_type {};
/// max(max(a1, a2), b) = max(max(a1, b), max(a2, b)) and min(max(a1, a2), b) =
/// max(min(a1, b), min(a2, b)) (and the same with min outside): max and min distribute
/// over each other.
template <int I>
struct is_nondecreasing_in<fn::max_fn, I> : std::true_type {};
template <int I>
struct is_nondecreasing_in<fn::min_fn, I> : std::true_type {};
template <int I, class F>
struct is_nondecreasing_in<fn::nondecreasing_in_fn<I, F>, I> : std::true_type {};
/// is_nondecreasing_in<F, I>::value for the unqualified F.
template <class F, int I>
inline constexpr bool is_nondecreasing_in_v = is_nondecreasing_in<std::remove_cvref_t<F>, I>::value;

/// Whether functor `F` is nonincreasing in its argument I with the other one fixed, so that
/// it turns a partial<max> operand into partial<min> and the reverse (f(max(x1, x2)) =
/// min(f(x1), f(x2))): fn::sub in its second argument (b - max(a1, a2) = min(b - a1, b - a2)),
/// and the maps fn::neg and fn::rsub(c) (I = 0). Specialise it or wrap with fn::nonincreasing_in<I>(f).
template <class F, int I>
struct is_nonincreasing_in : detail::wrapped_has<is_nonincreasing_in, F, I> {};
template <>
struct is_nonincreasing_in<fn::sub_fn, 1> : std::true_type {};
template <>
struct is_nonincreasing_in<fn::neg_fn, 0> : std::true_type {};
/// c - x (for a finite c, as fn::shift).
template <class S>
struct is_nonincreasing_in<fn::rsub_fn<S>, 0> : std::true_type {};
template <int I, class F>
struct is_nonincreasing_in<fn::nonincreasing_in_fn<I, F>, I> : std::true_type {};
/// is_nonincreasing_in<F, I>::value for the unqualified F.
template <class F, int I>
inline constexpr bool is_nonincreasing_in_v = is_nonincreasing_in<std::remove_cvref_t<F>, I>::value;


// ---------------------------------------------------------------------------------------
// Rules, as constexpr functions over placement values: one source for the compile-time
// layouts and the run-time checks of dynamic_layout tensors.
// ---------------------------------------------------------------------------------------

namespace detail {

/// Why an operator's layouts are illegal on a mesh axis (ok when they are legal).
enum class op_rule : std::uint8_t {
  ok,
  layouts_differ,           ///< zip family: the operands' placements differ
  nonlinear_on_partial,     ///< map/zip: partial<sum|avg> with a functor not known to be linear
  partial_not_termwise,     ///< map/zip/scale: partial<max|min|prod> cannot be processed term by term
  bias_on_partial,          ///< bias_add: x is partial<sum|prod>, the bias would be added once per term
  bias_placement,           ///< bias_add: the bias placement is not the one x's placement needs
  scalar_not_replicated,    ///< mul(x, s): the rank-0 factor is not replicated
  reduce_partial_op,        ///< reduce<D, Op>: x is partial with another op
  reduce_mixed_partials,    ///< reduce<D, avg>: the result would mix partial<sum> and partial<avg>
  matmul_pair,              ///< matmul: the (A, B) pair is not in matmul's table
  broadcast_placement,      ///< broadcast_zip<D>: b's placement is not the one a's placement needs
  partial_with_replicate,   ///< zip family: one operand partial, the other replicate, and f lacks the property the partial needs
  mixed_partials,           ///< zip family: the result would be partial with different reduce ops on two axes
  integer_mean,             ///< map/zip family/mul/bias_add: a partial<avg> of integers would go through something other than the identity
  integer_order,            ///< zip family/bias_add: a partial<max|min> of integers would go through integer addition or subtraction
  integer_division,         ///< div, map/zip of a division: a partial<sum> numerator of integers would go through truncating division
  division_of_partial,      ///< div, map/zip of a division: a partial operand the division does not go through term by term
};

/// One axis' verdict: the output placement, or why there is none.
struct axis_rule {
  op_rule err = op_rule::ok;
  placement_desc out{};
};

/// A whole layout's verdict: the output layout, or the first illegal axis and why.
struct layout_rule {
  op_rule err = op_rule::ok;
  int axis = 0;
  runtime_layout out{};
};

constexpr bool additive_partial(const placement_desc& p) {
  return p.is_partial() && (p.op == reduce_op::sum || p.op == reduce_op::avg);
}

/// What the rules need to know of a functor (filled from its traits by props_of; see
/// is_linear, is_linear_in, is_affine_in and is_nondecreasing_in).
struct functor_props {
  bool linear = false;                 ///< linear (a binary functor: jointly in both arguments)
  bool linear_in[2] = {false, false};  ///< linear in argument i with the other one fixed
  bool affine_in[2] = {false, false};  ///< affine in argument i with the other one fixed (linear ones are)
  bool nondecreasing_in[2] = {false, false};  ///< nondecreasing in argument i with the other one fixed
  bool nonincreasing_in[2] = {false, false};  ///< nonincreasing in argument i with the other one fixed
  /// Argument i holds integers and f is not the identity. A partial<avg> of integers ends
  /// in an integer division, trunc((x1 + ... + xn) / n), and no map or combination but the
  /// identity commutes with it (2 * trunc(1 / 2) = 0, trunc((2 * 1 + 2 * 0) / 2) = 1), so
  /// such an operand is refused whatever f's other properties.
  bool truncating_mean_in[2] = {false, false};
  /// f adds or subtracts argument i in integer arithmetic (fn::add, fn::sub and bias_add
  /// over integral operands). Integer sums wrap around, so f keeps the order of its terms
  /// only where nothing wraps: with terms 1 and 5 of a partial<max> of uint32, 1 - 3 wraps
  /// to 2^32 - 2 and becomes the maximum. A term can also be the op's identity
  /// (numeric_limits<T>::lowest() for max), on a rank that held no element, and
  /// lowest() - 1 overflows. Such a partial<max|min> operand is refused. The maps fn::neg
  /// (-lowest() wraps to lowest(); over unsigned types -1 is the maximum), fn::shift(c)
  /// (add(x, c), sub(x, c)) and fn::rsub(c) (sub(c, x)) over integers are flagged too.
  bool wrapping_in[2] = {false, false};
  /// Argument i is the numerator of an integer division (fn::div, fn::div_by(c) over
  /// integers). It truncates, so a partial<sum> there does not split into the quotients of
  /// its terms: trunc(1 / 2) + trunc(1 / 2) = 0, but trunc((1 + 1) / 2) = 1.
  bool truncating_div_in[2] = {false, false};
  /// f is a division (fn::div, fn::div_by(c), fn::rdiv(c)): a refusal of a partial operand
  /// gets the division's own message (which operand may be partial, and why).
  bool division = false;
  bool identity = false;  ///< fn::identity: it keeps every placement
};

/// Is argument i a partial<avg> of integers that f would transform?
constexpr bool integer_mean_through(const placement_desc& p, const functor_props& f, int i) {
  return p.is_partial() && p.op == reduce_op::avg && f.truncating_mean_in[i];
}

/// Is argument i a partial<max|min> of integers that f would add or subtract?
constexpr bool integer_order_through(const placement_desc& p, const functor_props& f, int i) {
  return p.is_partial() && (p.op == reduce_op::max || p.op == reduce_op::min) && f.wrapping_in[i];
}

/// Can the partial terms of argument i (placement p) go through f one by one, the other
/// argument being the same on every rank (replicate, or absent for map)? The placement
/// the results are partial in, or replicate when they cannot.
/// partial<sum> needs f linear in it, partial<avg> affine (the terms' weights sum to 1),
/// partial<max|min> nondecreasing (f(max(x1, x2)) = max(f(x1), f(x2))) or nonincreasing
/// (f(max(x1, x2)) = min(f(x1), f(x2)): max becomes min), partial<prod> never.
constexpr placement_desc termwise(const placement_desc& p, const functor_props& f, int i) {
  const placement_desc none = placement_desc::make_replicate();
  if (f.identity) return p;
  switch (p.op) {
    case reduce_op::sum: return f.linear_in[i] ? p : none;
    case reduce_op::avg: return f.affine_in[i] ? p : none;
    case reduce_op::max:
    case reduce_op::min:
      if (f.nondecreasing_in[i]) return p;
      if (f.nonincreasing_in[i]) return placement_desc::make_partial(p.op == reduce_op::max ? reduce_op::min : reduce_op::max);
      return none;
    case reduce_op::prod: return none;
  }
  return none;
}

/// Why a division f refuses its partial argument i (placement p) that termwise could not
/// take: the truncation of an integer partial<sum> numerator, or the division's general
/// refusal; ok when f is no division.
constexpr op_rule division_refusal(const placement_desc& p, const functor_props& f, int i) {
  if (p.op == reduce_op::sum && f.truncating_div_in[i]) return op_rule::integer_division;
  return f.division ? op_rule::division_of_partial : op_rule::ok;
}

/// map(x, f) on one axis with placement p.
constexpr axis_rule map_axis_rule(const placement_desc& p, const functor_props& f) {
  if (!p.is_partial()) return {op_rule::ok, p};
  if (integer_mean_through(p, f, 0)) return {op_rule::integer_mean, p};
  if (integer_order_through(p, f, 0)) return {op_rule::integer_order, p};
  const placement_desc y = termwise(p, f, 0);
  if (y.is_partial()) return {op_rule::ok, y};
  if (const op_rule d = division_refusal(p, f, 0); d != op_rule::ok) return {d, p};
  return {additive_partial(p) ? op_rule::nonlinear_on_partial : op_rule::partial_not_termwise, p};
}

/// zip(a, b, f) on one axis: equal placements (on partial<sum|avg> f linear in (a, b)
/// jointly), or one operand partial and the other replicate (f termwise in the partial
/// one; the output is partial, with the op termwise says).
constexpr axis_rule zip_axis_rule(const placement_desc& a, const placement_desc& b, const functor_props& f) {
  if (a == b) {
    if (!a.is_partial()) return {op_rule::ok, a};
    if (integer_mean_through(a, f, 0) || integer_mean_through(b, f, 1)) return {op_rule::integer_mean, a};
    if (f.division && !f.linear) return {op_rule::division_of_partial, a};
    if (!additive_partial(a)) return {op_rule::partial_not_termwise, a};
    return f.linear ? axis_rule{op_rule::ok, a} : axis_rule{op_rule::nonlinear_on_partial, a};
  }
  const int k = a.is_partial() && b.is_replicate() ? 0 : a.is_replicate() && b.is_partial() ? 1 : -1;
  if (k >= 0) {
    if (integer_mean_through(k == 0 ? a : b, f, k)) return {op_rule::integer_mean, a};
    if (integer_order_through(k == 0 ? a : b, f, k)) return {op_rule::integer_order, a};
    const placement_desc y = termwise(k == 0 ? a : b, f, k);
    if (y.is_partial()) return {op_rule::ok, y};
    if (const op_rule d = division_refusal(k == 0 ? a : b, f, k); d != op_rule::ok) return {d, a};
    return {op_rule::partial_with_replicate, a};
  }
  return {op_rule::layouts_differ, a};
}

/// mul(x, s) with a rank-0 s on one axis; `integers`: x's element type is integral.
constexpr axis_rule scalar_mul_axis_rule(const placement_desc& x, const placement_desc& s, bool integers) {
  if (!s.is_replicate()) return {op_rule::scalar_not_replicated, x};
  functor_props times_s;  // x * s for a replicated s: linear in x (s's sign is not known)
  times_s.linear = times_s.linear_in[0] = times_s.affine_in[0] = true;
  times_s.truncating_mean_in[0] = integers;
  return map_axis_rule(x, times_s);
}

/// The bias placement that goes with x placement `x` (x of rank `rank`): shard<0> where x
/// shards its last dim, replicate otherwise.
constexpr placement_desc bias_placement_for(const placement_desc& x, int rank) {
  return x.is_shard(rank - 1) ? placement_desc::make_shard(0) : placement_desc::make_replicate();
}

/// bias_add(x, bias) on one axis, x of rank `rank`. On a partial x the bias is replicate
/// and added to every term: right for partial<avg|max|min> (x + b is affine and
/// nondecreasing in x; for avg, max and min, x of a floating-point type), once per term
/// too many for partial<sum|prod>. `integers`: x's element type is integral.
constexpr axis_rule bias_axis_rule(const placement_desc& x, const placement_desc& b, int rank, bool integers) {
  functor_props plus_bias;
  plus_bias.affine_in[0] = plus_bias.nondecreasing_in[0] = true;
  plus_bias.truncating_mean_in[0] = plus_bias.wrapping_in[0] = integers;
  if (integer_mean_through(x, plus_bias, 0)) return {op_rule::integer_mean, x};
  if (integer_order_through(x, plus_bias, 0)) return {op_rule::integer_order, x};
  if (x.is_partial() && !termwise(x, plus_bias, 0).is_partial()) return {op_rule::bias_on_partial, x};
  if (!(b == bias_placement_for(x, rank))) return {op_rule::bias_placement, x};
  return {op_rule::ok, x};
}

template <class Rule>
constexpr layout_rule fold_axes(int naxes, Rule rule) {
  layout_rule r;
  r.out.naxes = naxes;
  for (int a = 0; a < naxes; ++a) {
    const axis_rule ar = rule(a);
    if (ar.err != op_rule::ok) {
      r.err = ar.err;
      r.axis = a;
      return r;
    }
    r.out[a] = ar.out;
  }
  return r;
}

constexpr layout_rule map_rules(const runtime_layout& x, const functor_props& f) {
  return fold_axes(x.naxes, [&](int a) { return map_axis_rule(x[a], f); });
}
/// A legal verdict whose output has partial axes with different reduce ops (one operand's
/// partial<sum> axis next to the other's partial<max> axis) becomes mixed_partials, on the
/// first axis whose op differs from the first partial axis'.
constexpr layout_rule no_mixed_partials(layout_rule r) {
  if (r.err != op_rule::ok || same_op_partials(r.out)) return r;
  int first = -1;
  for (int a = 0; a < r.out.naxes; ++a) {
    if (!r.out[a].is_partial()) continue;
    if (first < 0) {
      first = a;
    } else if (r.out[a].op != r.out[first].op) {
      r.err = op_rule::mixed_partials;
      r.axis = a;
      return r;
    }
  }
  return r;
}
constexpr layout_rule zip_rules(const runtime_layout& a, const runtime_layout& b, const functor_props& f) {
  return no_mixed_partials(fold_axes(a.naxes, [&](int i) { return zip_axis_rule(a[i], b[i], f); }));
}
constexpr layout_rule scalar_mul_rules(const runtime_layout& x, const runtime_layout& s, bool integers = false) {
  return fold_axes(x.naxes, [&](int a) { return scalar_mul_axis_rule(x[a], s[a], integers); });
}
constexpr layout_rule bias_rules(const runtime_layout& x, const runtime_layout& b, int rank, bool integers = false) {
  return fold_axes(x.naxes, [&](int a) { return bias_axis_rule(x[a], b[a], rank, integers); });
}
/// The layout whose placement on each axis is p(x's placement there).
template <class P>
constexpr runtime_layout per_axis(const runtime_layout& x, P p) {
  runtime_layout y;
  y.naxes = x.naxes;
  for (int a = 0; a < x.naxes; ++a) y[a] = p(x[a]);
  return y;
}
constexpr runtime_layout bias_layout_for(const runtime_layout& x, int rank) {
  return per_axis(x, [rank](const placement_desc& p) { return bias_placement_for(p, rank); });
}

// Placement values back to types, for the compile-time layouts.
template <reduce_op O>
struct op_tag;
template <> struct op_tag<reduce_op::sum> { using type = sum; };
template <> struct op_tag<reduce_op::avg> { using type = avg; };
template <> struct op_tag<reduce_op::max> { using type = max; };
template <> struct op_tag<reduce_op::min> { using type = min; };
template <> struct op_tag<reduce_op::prod> { using type = prod; };

template <placement_kind K, int Dim, reduce_op O>
struct placement_from_impl;
template <int Dim, reduce_op O>
struct placement_from_impl<placement_kind::replicate, Dim, O> { using type = replicate; };
template <int Dim, reduce_op O>
struct placement_from_impl<placement_kind::shard, Dim, O> { using type = shard<Dim>; };
template <int Dim, reduce_op O>
struct placement_from_impl<placement_kind::partial, Dim, O> { using type = partial<typename op_tag<O>::type>; };

// (Kept free of alias templates over class-type template parameters: GCC 12 crashes on them.)
template <runtime_layout L, class Seq>
struct layout_from_impl;
template <runtime_layout L, int... I>
struct layout_from_impl<L, std::integer_sequence<int, I...>> {
  using type = layout<typename placement_from_impl<L.p[I].kind, L.p[I].dim, L.p[I].op>::type...>;
};
/// The layout type of a layout value: layout_from<L::desc>::type is L.
template <runtime_layout L>
struct layout_from : layout_from_impl<L, std::make_integer_sequence<int, L.naxes>> {};

template <class L>
inline constexpr bool is_dynamic_v = std::same_as<L, dynamic_layout>;

// ---------------------------------------------------------------------------------------
// Compile-time errors. Each is instantiated for an illegal case; its name carries the mesh
// axis and placements, the message says what to do.
// ---------------------------------------------------------------------------------------

template <int Axis, class PA, class PB>
struct zip_layouts_differ_on_mesh_axis {
  static_assert(!std::is_same_v<PA, PA>,
                "shardcast::zip/add/sub/mul/div: the operands' placements differ on the mesh axis named in "
                "zip_layouts_differ_on_mesh_axis<Axis, PA, PB>; elementwise operators need equal layouts. Redistribute one "
                "operand to the other's layout first, e.g. b2 = redistribute<typename decltype(a)::layout_type>(b).");
};

template <int Axis, class P, class F>
struct map_on_partial_mesh_axis_needs_linear_functor {
  static_assert(!std::is_same_v<P, P>,
                "shardcast::map: x is partial<sum|avg> on the mesh axis named in map_on_partial_mesh_axis_needs_linear_functor<Axis, P, F>, "
                "but the functor F is not linear (affine would do for partial<avg>), and f(x1 + x2) != f(x1) + f(x2) for gelu, relu, "
                "silu and other nonlinear maps. Redistribute x to replicate on that axis first (all_reduce), e.g. "
                "x2 = redistribute<layout<..., replicate, ...>>(x), or to shard<d> (reduce_scatter); if f really is linear, pass "
                "fn::linear(f) (fn::affine_in<0>(f) if it is affine and x is partial<avg>).");
};

template <int Axis, class PA, class PB, class F>
struct zip_on_partial_mesh_axis_needs_linear_functor {
  static_assert(!std::is_same_v<PA, PA>,
                "shardcast::zip/mul: both operands are partial<sum|avg> on the mesh axis named in "
                "zip_on_partial_mesh_axis_needs_linear_functor<Axis, PA, PB, F>, but the functor F is not linear "
                "(for mul, (a1 + a2) * (b1 + b2) != a1 * b1 + a2 * b2). Redistribute both operands to replicate (all_reduce) or to "
                "the same shard<d> (reduce_scatter) on that axis first; to multiply a partial tensor by a scalar use scale(x, s) "
                "or mul(x, s) with a replicated rank-0 s; if f is linear in (a, b) jointly, pass fn::linear(f).");
};

template <int Axis, class P, class F>
struct partial_not_termwise_on_mesh_axis {
  static_assert(!std::is_same_v<P, P>,
                "shardcast::map/zip/add/sub/mul/scale: the tensor is partial<max|min|prod> on the mesh axis named in "
                "partial_not_termwise_on_mesh_axis<Axis, P, F>; such partial terms cannot be transformed or combined one by one "
                "(scaling by a negative number swaps max and min, max(a1, a2) + max(b1, b2) != max(a1 + b1, a2 + b2)), except "
                "that a map nondecreasing in x (fn::relu, fn::exp, fn::tanh, fn::sigmoid, fn::shift(c), fn::identity, "
                "fn::nondecreasing_in<0>(f)) keeps partial<max|min> and a nonincreasing one (fn::neg, fn::nonincreasing_in<0>(f)) "
                "swaps them; fn::sqrt and fn::log are neither (a negative term, or the -inf of a rank that held no element, "
                "becomes NaN and wins the max), and fn::abs and fn::square are not monotone. "
                "Redistribute to replicate on that axis first (all_reduce), e.g. x2 = redistribute<layout<..., replicate, ...>>(x).");
};

template <int Axis, class PA, class PB, class F>
struct zip_partial_with_replicated_operand_on_mesh_axis {
  static_assert(!std::is_same_v<PA, PA>,
                "shardcast::zip/add/sub/mul/broadcast_zip: one operand is partial and the other replicate on the mesh axis named in "
                "zip_partial_with_replicated_operand_on_mesh_axis<Axis, PA, PB, F>, and F is not known to commute with that partial "
                "in the partial operand (the other one fixed): partial<sum> needs f linear in it (fn::mul, fn::div's numerator), "
                "partial<avg> affine (also fn::add, fn::sub), partial<max|min> nondecreasing (fn::add, fn::sub's first operand) or "
                "nonincreasing (fn::sub's second operand; max becomes min), partial<prod> is never combined. Redistribute the partial "
                "operand to replicate (all_reduce) on that axis first, or declare the property: fn::linear_in<I>(f), "
                "fn::affine_in<I>(f), fn::nondecreasing_in<I>(f), fn::nonincreasing_in<I>(f) for argument I.");
};

template <int Axis, class PA, class PB>
struct zip_result_mixes_partial_ops_on_mesh_axis {
  static_assert(!std::is_same_v<PA, PA>,
                "shardcast::zip/add/sub/mul/broadcast_zip: the result would be partial with one reduce op on an earlier mesh axis "
                "and with another on the mesh axis named in zip_result_mixes_partial_ops_on_mesh_axis<Axis, PA, PB> (a layout "
                "holds one partial op); redistribute one operand's partial axes to replicate (all_reduce) first.");
};

template <int Axis, class PX>
struct bias_add_on_partial_mesh_axis {
  static_assert(!std::is_same_v<PX, PX>,
                "shardcast::bias_add: x is partial on the mesh axis named in bias_add_on_partial_mesh_axis<Axis, PX> (partial<sum> "
                "or partial<prod>), so the bias would be added once per partial term. Redistribute x to replicate (all_reduce) or "
                "to shard<d> (reduce_scatter) on that axis first, then add the bias.");
};

template <int Axis, class PX, class PBias>
struct bias_add_bias_placement_on_mesh_axis {
  static_assert(!std::is_same_v<PX, PX>,
                "shardcast::bias_add: the bias placement does not fit x's on the mesh axis named in "
                "bias_add_bias_placement_on_mesh_axis<Axis, PX, PBias>: where x is shard<R-1> (its last dim, along which the "
                "bias runs) the bias must be shard<0>; where x is replicate or shard<d> for another d the bias must be "
                "replicate. Redistribute the bias first: b2 = redistribute<bias_layout_t<typename decltype(x)::layout_type, R>>(bias).");
};

template <int Axis, class PX, class PS>
struct mul_scalar_not_replicated_on_mesh_axis {
  static_assert(!std::is_same_v<PX, PX>,
                "shardcast::mul(x, s): the rank-0 factor s is not replicate on the mesh axis named in "
                "mul_scalar_not_replicated_on_mesh_axis<Axis, PX, PS>; redistribute it to replicate on every axis first, "
                "e.g. s2 = redistribute<layout<replicate, replicate>>(s).");
};

template <int Axis, class P, class F>
struct partial_avg_of_integers_on_mesh_axis {
  static_assert(!std::is_same_v<P, P>,
                "shardcast::map/zip/add/sub/mul/div/scale/bias_add/broadcast_zip/reduce<D, sum>: the tensor is partial<avg> with an integral element "
                "type on the mesh axis named in partial_avg_of_integers_on_mesh_axis<Axis, P, F>. Its value is the truncated "
                "integer mean trunc((x1 + ... + xn) / n), which no map or combination but the identity commutes with "
                "(2 * trunc(1 / 2) = 0, but trunc((2 * 1 + 2 * 0) / 2) = 1), whatever f's declared properties. Redistribute "
                "it to replicate (all_reduce) on that axis first, e.g. x2 = redistribute<layout<..., replicate, ...>>(x), "
                "or hold the terms in a floating-point type.");
};

template <int Axis, class P, class F>
struct partial_max_min_of_integers_on_mesh_axis {
  static_assert(!std::is_same_v<P, P>,
                "shardcast::add/sub/map/zip/bias_add/broadcast_zip: the tensor is partial<max> or partial<min> with an integral element "
                "type on the mesh axis named in partial_max_min_of_integers_on_mesh_axis<Axis, P, F>, and F adds to it, subtracts "
                "it or negates it in integer arithmetic (fn::add, fn::sub, fn::neg, fn::shift(c), fn::rsub(c), add(x, c), sub(x, c), "
                "sub(c, x)). "
                "Integer sums wrap around, so the maximum of the transformed terms is not the transformed maximum (uint32 terms "
                "1 and 5, minus 3: 1 - 3 wraps to 4294967294), and a rank that held no element holds the op's identity "
                "(numeric_limits<T>::lowest() for max), which overflows. Redistribute it to replicate (all_reduce) on that axis "
                "first, e.g. x2 = redistribute<layout<..., replicate, ...>>(x), or hold the terms in a floating-point type.");
};

template <int Axis, class PA, class PB, class F>
struct division_of_partial_on_mesh_axis {
  static_assert(!std::is_same_v<PA, PA>,
                "shardcast::div/zip/map/broadcast_zip: a division meets a partial operand on the mesh axis named in "
                "division_of_partial_on_mesh_axis<Axis, PA, PB, F> (PB is void for div(x, c), div(c, x) and maps) that it cannot "
                "divide term by term. Only a partial<sum|avg> numerator of a floating-point type over a divisor that is the same on "
                "every rank (replicate, a replicated rank-0 s, or a scalar c) stays partial: (a1 + a2) / b = a1 / b + a2 / b. A partial "
                "divisor is refused (1 / (b1 + b2) is not a sum of per-rank quotients), and so is a "
                "partial<max|min> numerator (dividing by a negative number swaps max and min, and the divisor's sign is not part "
                "of the layout; for a c known to be positive, map(x, fn::nondecreasing_in<0>(fn::div_by(c))) keeps the partial) "
                "and a partial<prod> one. Redistribute the partial operand to replicate (all_reduce) on that axis first, e.g. "
                "x2 = redistribute<layout<..., replicate, ...>>(x).");
};

template <int Axis, class P, class F>
struct integer_division_of_partial_sum_on_mesh_axis {
  static_assert(!std::is_same_v<P, P>,
                "shardcast::div/zip/map/broadcast_zip: the numerator of an integer division is partial<sum> on the mesh axis named in "
                "integer_division_of_partial_sum_on_mesh_axis<Axis, P, F>. Integer division truncates, so the quotient of the sum "
                "is not the sum of the terms' quotients (trunc(1 / 2) + trunc(1 / 2) = 0, but trunc((1 + 1) / 2) = 1). "
                "Redistribute it to replicate (all_reduce) or shard<d> (reduce_scatter) on that axis first, e.g. "
                "x2 = redistribute<layout<..., replicate, ...>>(x), or hold the terms in a floating-point type.");
};

/// Picks the error struct for verdict E (only instantiated when E != ok).
template <op_rule E, int Axis, class PA, class PB, class F>
struct elementwise_error {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::layouts_differ, Axis, PA, PB, F> : zip_layouts_differ_on_mesh_axis<Axis, PA, PB> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::nonlinear_on_partial, Axis, PA, PB, F>
    : std::conditional_t<std::is_void_v<PB>, map_on_partial_mesh_axis_needs_linear_functor<Axis, PA, F>,
                         zip_on_partial_mesh_axis_needs_linear_functor<Axis, PA, PB, F>> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::partial_not_termwise, Axis, PA, PB, F> : partial_not_termwise_on_mesh_axis<Axis, PA, F> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::bias_on_partial, Axis, PA, PB, F> : bias_add_on_partial_mesh_axis<Axis, PA> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::bias_placement, Axis, PA, PB, F> : bias_add_bias_placement_on_mesh_axis<Axis, PA, PB> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::scalar_not_replicated, Axis, PA, PB, F> : mul_scalar_not_replicated_on_mesh_axis<Axis, PA, PB> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::partial_with_replicate, Axis, PA, PB, F> : zip_partial_with_replicated_operand_on_mesh_axis<Axis, PA, PB, F> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::mixed_partials, Axis, PA, PB, F> : zip_result_mixes_partial_ops_on_mesh_axis<Axis, PA, PB> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::integer_mean, Axis, PA, PB, F>
    : partial_avg_of_integers_on_mesh_axis<Axis, std::conditional_t<std::is_same_v<PA, partial<avg>>, PA, PB>, F> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::integer_order, Axis, PA, PB, F>
    : partial_max_min_of_integers_on_mesh_axis<Axis, std::conditional_t<std::is_same_v<PA, partial<max>> || std::is_same_v<PA, partial<min>>, PA, PB>,
                                               F> {};

template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::division_of_partial, Axis, PA, PB, F> : division_of_partial_on_mesh_axis<Axis, PA, PB, F> {};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::integer_division, Axis, PA, PB, F> : integer_division_of_partial_sum_on_mesh_axis<Axis, PA, F> {};

/// `type` is layout_from<R.out>::type when the verdict is ok, else the error struct's (after its static_assert).
template <class L, int Axis>
struct placement_on_axis {
  using type = typename placement_from_impl<L::desc.p[Axis].kind, L::desc.p[Axis].dim, L::desc.p[Axis].op>::type;
};
template <int Axis>
struct placement_on_axis<void, Axis> {
  using type = void;
};

/// Instantiates the error struct E (its static_assert fires) and falls back to layout L, so
/// the compiler reports the one error instead of a cascade.
template <class E, class L>
struct fail_with : E {
  using type = L;
};

template <layout_rule R, class LA, class LB, class F>
struct checked_layout {
  static constexpr int axis = R.err == op_rule::ok ? 0 : R.axis;
  using type = typename std::conditional_t<R.err == op_rule::ok, layout_from<R.out>,
                                           fail_with<elementwise_error<R.err, axis, typename placement_on_axis<LA, axis>::type,
                                                                       typename placement_on_axis<LB, axis>::type, F>,
                                                     LA>>::type;
};

// ---------------------------------------------------------------------------------------
// Run-time checks (dynamic layouts) and shared helpers
// ---------------------------------------------------------------------------------------

inline std::string rule_message(const char* who, const layout_rule& r, const runtime_layout& a, const runtime_layout& b) {
  const std::string ax = "mesh axis " + std::to_string(r.axis);
  const std::string pa = to_string(a[r.axis]), pb = to_string(b[r.axis]);
  const std::string head = std::string(who) + (b.naxes ? ": layouts \"" + to_string(a) + "\" and \"" + to_string(b) + "\": "
                                                        : ": layout \"" + to_string(a) + "\": ");
  switch (r.err) {
    case op_rule::ok: return "";
    case op_rule::layouts_differ:
      return head + "the operands' placements differ on " + ax + " (" + pa + " vs " + pb +
             "); elementwise operators need equal layouts, so redistribute one operand to the other's layout first";
    case op_rule::nonlinear_on_partial:
      return head + "the tensor is " + pa + " on " + ax +
             " but the functor is not linear (f(x1 + x2) != f(x1) + f(x2)); redistribute to replicate (all_reduce) or shard "
             "(reduce_scatter) on that axis first, or pass fn::linear(f) if f is linear";
    case op_rule::partial_not_termwise:
      if (b.naxes && b[r.axis].is_partial())  // zip: both operands hold that partial (not mul(x, s) with a replicated s)
        return head + "both operands are " + pa + " on " + ax +
               "; two partial<max|min|prod> operands are not combined term by term (max(a1, a2) + max(b1, b2) != max(a1 + b1, a2 + "
               "b2), and the few functors for which it holds, such as fn::max of two partial<max>, are not told apart), so "
               "redistribute one operand to replicate (all_reduce) on that axis first";
      return head + "the tensor is " + pa + " on " + ax +
             "; partial<max|min|prod> terms cannot be transformed or combined one by one (only a map nondecreasing in x keeps "
             "partial<max|min>, and a nonincreasing one swaps them; fn::sqrt and fn::log are neither, as a negative term becomes "
             "NaN), so redistribute to replicate (all_reduce) on that axis first";
    case op_rule::partial_with_replicate:
      return head + "on " + ax + " a is " + pa + " and b is " + pb +
             ", and the functor is not known to commute with the partial in that operand (partial<sum> needs it linear there, "
             "partial<avg> affine, partial<max|min> nondecreasing or nonincreasing, partial<prod> is never combined); "
             "redistribute the partial operand to replicate (all_reduce) on that axis first, or declare the property with "
             "fn::linear_in<I>, fn::affine_in<I>, fn::nondecreasing_in<I> or fn::nonincreasing_in<I>";
    case op_rule::integer_mean:
      return head + "the tensor is partial<avg> with an integral element type on " + ax +
             "; its value is the truncated integer mean trunc((x1 + ... + xn) / n), which no map or combination but the identity "
             "commutes with (2 * trunc(1 / 2) = 0, but trunc((2 * 1 + 2 * 0) / 2) = 1), so redistribute it to replicate "
             "(all_reduce) on that axis first, or hold the terms in a floating-point type";
    case op_rule::integer_order:
      return head + "the tensor is partial<max|min> with an integral element type on " + ax +
             " and the operator adds to it, subtracts it or negates it in integer arithmetic; integer sums wrap around, so the "
             "maximum of the transformed terms is not the transformed maximum (uint32 terms 1 and 5, minus 3: 1 - 3 wraps to 4294967294), "
             "and a rank that held no element holds the op's identity (numeric_limits<T>::lowest() for max), which "
             "overflows; redistribute it to replicate (all_reduce) on that axis first, or hold the terms in a floating-point type";
    case op_rule::integer_division:
      return head + "the numerator is " + pa + " with an integral element type on " + ax +
             "; integer division truncates, so the quotient of the sum is not the sum of the terms' quotients (trunc(1 / 2) + "
             "trunc(1 / 2) = 0, but trunc((1 + 1) / 2) = 1); redistribute it to replicate (all_reduce) or shard (reduce_scatter) "
             "on that axis first, or hold the terms in a floating-point type";
    case op_rule::division_of_partial:
      return head + "on " + ax + (b.naxes ? " a is " + pa + " and b is " + pb : " x is " + pa) +
             ", which the division cannot divide term by term: only a partial<sum|avg> numerator of a floating-point type over "
             "a divisor that is the same on every rank stays partial ((a1 + a2) / b = a1 / b + a2 / b); a partial divisor is "
             "refused (1 / (b1 + b2) is not a sum of per-rank quotients), and so is a partial<max|min> numerator (dividing by "
             "a negative number swaps max and min, and the divisor's sign is not part of the layout; for a c known to be "
             "positive, map(x, fn::nondecreasing_in<0>(fn::div_by(c))) keeps the partial) and a partial<prod> one; "
             "redistribute the partial operand to replicate (all_reduce) on that axis first";
    case op_rule::mixed_partials:
      return head + "the result would be partial with different reduce ops on two mesh axes (the second is " + ax + ", where a is " +
             pa + " and b is " + pb + "); redistribute one operand's partial axes to replicate (all_reduce) first";
    case op_rule::bias_on_partial:
      return head + "x is " + pa + " on " + ax +
             ", so the bias would be added once per partial term; redistribute x to replicate (all_reduce) or shard "
             "(reduce_scatter) on that axis first";
    case op_rule::bias_placement:
      return head + "on " + ax + " x is " + pa + " and the bias is " + pb +
             "; the bias must be S(0) where x shards its last dim and R elsewhere, so redistribute the bias first";
    case op_rule::scalar_not_replicated:
      return head + "the rank-0 factor is " + pb + " on " + ax + "; redistribute it to replicate on every axis first";
    case op_rule::reduce_partial_op:
      return head + "x is " + pa + " on " + ax +
             ", a partial with another reduce op than the reduction's; redistribute x to replicate (all_reduce) on that axis "
             "first, or reduce with the partial's op";
    case op_rule::reduce_mixed_partials:
      return head + "the result would mix partial<sum> (from the sharded reduced dim) with x's partial<avg>; redistribute x's "
             "partial<avg> axes to replicate (all_reduce) first";
    case op_rule::broadcast_placement:
      return head + "on " + ax + " a is " + pa + " and b is " + pb +
             "; b (broadcast along the dim where it has extent 1) must be R where a shards that dim and a's placement "
             "elsewhere, so redistribute b first";
    case op_rule::matmul_pair:
      return head + "on " + ax + " A is " + pa + " and B is " + pb +
             ", which matmul does not take; the legal (A, B) -> C pairs on each axis are (S(0), R) -> S(0), (R, S(1)) -> S(1), "
             "(S(1), S(0)) -> P(sum), (R, R) -> R, (P(sum), R) -> P(sum) and (R, P(sum)) -> P(sum), so redistribute A or B "
             "first (e.g. to R on that axis)";
  }
  return head + "illegal layouts";
}

/// Throws layout_error describing `r` unless it is ok.
inline void expect_legal(const char* who, const layout_rule& r, const runtime_layout& a, const runtime_layout& b) {
  if (r.err != op_rule::ok) throw layout_error(rule_message(who, r, a, b));
}

template <class Mesh>
std::string describe_mesh(const Mesh& m) {
  std::string s = "mesh ";
  for (int a = 0; a < Mesh::naxes; ++a) {
    if (a) s += "x";
    s += std::to_string(m.size(a));
  }
  return s;
}

template <std::size_t R>
std::string describe_extents(const std::array<std::int64_t, R>& e) {
  std::string s = "[";
  for (std::size_t d = 0; d < R; ++d) {
    if (d) s += ", ";
    s += std::to_string(e[d]);
  }
  return s + "]";
}

/// Throws layout_error unless the two operands live on the same mesh object.
template <class Mesh>
void expect_same_mesh(const char* who, const Mesh& a, const Mesh& b, const char* na = "a", const char* nb = "b") {
  require_mesh(a, who);
  require_mesh(b, who);
  if (!(a == b))
    throw layout_error(std::string(who) + ": the operands live on different meshes (" + na + " on a " + describe_mesh(a) + ", " + nb +
                       " on another " + describe_mesh(b) +
                       "); meshes compare equal only when one is a copy of the other, so create both operands on the same mesh");
}

/// An owning output dtensor of layout L (or, for dynamic_layout, of the value `l`).
template <class U, int R, class L, class Mesh>
dtensor<U, R, L, Mesh> make_output(const Mesh& m, const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext,
                                   const runtime_layout& l, typename Mesh::stream_type s) {
  require_mesh(m, "shardcast: an operator's operand");
  if constexpr (is_dynamic_v<L>) {
    const box b = local_box(l, m.shape().data(), m.coords().data(), ext.data(), R);
    auto owner = memory_ops<typename Mesh::memory_space>::template allocate<U>(static_cast<std::size_t>(b.volume()), s);
    return dtensor<U, R, dynamic_layout, Mesh>(m, ext, owner, owner.get(), l);
  } else {
    (void)l;
    return empty<L, U>(m, ext, s);
  }
}

template <class T, class F>
using map_result_t = std::remove_cvref_t<std::invoke_result_t<const F&, const T&>>;
template <class T, class U, class F>
using zip_result_t = std::remove_cvref_t<std::invoke_result_t<const F&, const T&, const U&>>;

}  // namespace detail

namespace detail {
/// The functor inside the property marks (fn::linear, fn::affine_in, ...): what the
/// element-type checks below look at, since a mark claims a property and changes nothing of
/// the arithmetic (fn::linear(fn::neg) still wraps over integers).
template <class G>
struct unmarked {
  using type = G;
};
template <class P, class F>
struct unmarked<fn::marked<P, F>> : unmarked<F> {};
template <class G>
using unmarked_t = typename unmarked<G>::type;

/// Maps that add to or negate their argument: over integers they wrap around (see
/// functor_props::wrapping_in).
template <class G>
inline constexpr bool integer_wrapping_map_v = std::is_same_v<G, fn::neg_fn>;
template <class S>
inline constexpr bool integer_wrapping_map_v<fn::shift_fn<S>> = true;
template <class S>
inline constexpr bool integer_wrapping_map_v<fn::rsub_fn<S>> = true;

/// The divisions: fn::div (a / b), fn::div_by(c) (x / c) and fn::rdiv(c) (c / x); the
/// first two divide their argument 0 (numerator_first_v), fn::rdiv divides by it.
template <class G>
inline constexpr bool division_v = std::is_same_v<G, fn::div_fn>;
template <class S>
inline constexpr bool division_v<fn::div_by_fn<S>> = true;
template <class S>
inline constexpr bool division_v<fn::rdiv_fn<S>> = true;
template <class G>
inline constexpr bool numerator_first_v = division_v<G>;
template <class S>
inline constexpr bool numerator_first_v<fn::rdiv_fn<S>> = false;

/// The properties of functor F the rules read, for a map over elements of type TA (TB
/// void) or a zip over TA and TB. A division (fn::div, fn::div_by(c), fn::rdiv(c)) with an
/// integral operand is not linear or affine in anything, even when marked so (integer
/// division truncates); an integral operand other than fn::identity's may not be
/// partial<avg> (truncating_mean_in).
template <class F, class TA, class TB = void>
constexpr functor_props props_of() {
  using G = std::remove_cvref_t<F>;
  using B = unmarked_t<G>;  // the arithmetic, for the integer checks
  constexpr bool int_div = division_v<B> && (std::is_integral_v<TA> || std::is_integral_v<TB>);
  functor_props p;
  p.division = division_v<B>;
  p.truncating_div_in[0] = int_div && numerator_first_v<B>;
  p.linear = is_linear_v<G> && !int_div;
  p.linear_in[0] = is_linear_in_v<G, 0> && !int_div;
  p.linear_in[1] = is_linear_in_v<G, 1> && !int_div;
  p.affine_in[0] = is_affine_in_v<G, 0> && !int_div;
  p.affine_in[1] = is_affine_in_v<G, 1> && !int_div;
  p.nondecreasing_in[0] = is_nondecreasing_in_v<G, 0>;
  p.nondecreasing_in[1] = is_nondecreasing_in_v<G, 1>;
  p.nonincreasing_in[0] = is_nonincreasing_in_v<G, 0>;
  p.nonincreasing_in[1] = is_nonincreasing_in_v<G, 1>;
  p.identity = std::is_same_v<G, fn::identity_fn>;
  p.truncating_mean_in[0] = std::is_integral_v<TA> && !p.identity;
  if constexpr (!std::is_void_v<TB>) {
    p.truncating_mean_in[1] = std::is_integral_v<TB>;
    // integer addition and subtraction wrap around (see wrapping_in)
    constexpr bool int_sum = (std::is_same_v<B, fn::add_fn> || std::is_same_v<B, fn::sub_fn>) && std::is_integral_v<TA> && std::is_integral_v<TB>;
    p.wrapping_in[0] = p.wrapping_in[1] = int_sum;
  }
  if constexpr (std::is_void_v<TB>) {
    // a map: linear is linear in x
    p.linear_in[0] = p.linear_in[0] || p.linear;
    p.affine_in[0] = p.affine_in[0] || p.linear_in[0];
    p.wrapping_in[0] = integer_wrapping_map_v<B> && std::is_integral_v<TA>;
  }
  return p;
}

/// div(x, s) with a rank-0 s on one axis, x of element type T. A rank-0 tensor is replicate
/// or partial on each axis; a partial s is refused as div(a, b) refuses a partial divisor
/// (1 / (s1 + s2) is not a sum of per-rank quotients). Over a replicated s, x / s is x / c
/// for the value c that every rank holds, so div(x, c)'s rule applies (fn::div_by's
/// properties): replicate and shard<d> are kept, and floating-point partial<sum|avg>;
/// partial<max|min|prod> and, over integers, every partial are refused with their reasons.
template <class T>
constexpr axis_rule scalar_div_axis_rule(const placement_desc& x, const placement_desc& s) {
  if (!s.is_replicate()) return {op_rule::division_of_partial, x};
  return map_axis_rule(x, props_of<fn::div_by_fn<T>, T>());
}
template <class T>
constexpr layout_rule scalar_div_rules(const runtime_layout& x, const runtime_layout& s) {
  return fold_axes(x.naxes, [&](int a) { return scalar_div_axis_rule<T>(x[a], s[a]); });
}
}  // namespace detail

// ---------------------------------------------------------------------------------------
// Output layouts (compile time)
// ---------------------------------------------------------------------------------------

/// The layout of map(x, f) for x of layout L (an error names the axis when illegal).
/// @tparam L x's layout, a layout<...>
/// @tparam F the functor type
/// @tparam T the element type (it matters for fn::div, which is not linear on integers, and
///           for partial<avg>, which a map over integers refuses unless f is fn::identity)
template <class L, class F, class T = float>
struct map_layout {
  static_assert(layout_type<L>, "shardcast::map_layout: L must be a compile-time layout<P...>.");
  using type = typename detail::checked_layout<detail::map_rules(L::desc, detail::props_of<F, T>()), L, void, F>::type;
};
/// Shorthand for map_layout<L, F, T>::type.
template <class L, class F, class T = float>
using map_layout_t = typename map_layout<L, F, T>::type;

/// The layout of zip(a, b, f) for layouts LA and LB, per mesh axis: a's placement where the
/// two are equal, the partial one's where one is partial and the other replicate.
/// @tparam LA, LB the operands' layouts (layout<P...>, same number of axes)
/// @tparam F the functor type (add_fn, sub_fn, mul_fn, a user functor)
/// @tparam TA, TB the element types (they matter for fn::div, which is not linear on
///                integers, and for partial<avg> operands, which integers refuse)
/// Examples: zip_layout_t<layout<partial<sum>>, layout<partial<sum>>, fn::add_fn> is
/// layout<partial<sum>>; zip_layout_t<layout<replicate, shard<0>>, layout<partial<sum>, shard<0>>, fn::mul_fn>
/// is layout<partial<sum>, shard<0>>.
template <class LA, class LB, class F, class TA = float, class TB = TA>
struct zip_layout {
  static_assert(layout_type<LA> && layout_type<LB>, "shardcast::zip_layout: LA and LB must be compile-time layouts layout<P...>.");
  static_assert(LA::naxes == LB::naxes, "shardcast::zip: the operands' layouts have different numbers of mesh axes; both must live on the same mesh.");
  using type = typename detail::checked_layout<detail::zip_rules(LA::desc, LB::desc, detail::props_of<F, TA, TB>()), LA, LB, F>::type;
};
/// Shorthand for zip_layout<LA, LB, F, TA, TB>::type.
template <class LA, class LB, class F, class TA = float, class TB = TA>
using zip_layout_t = typename zip_layout<LA, LB, F, TA, TB>::type;

/// The bias layout that bias_add accepts for x of layout LX and rank R: shard<0> on the axes
/// where x is shard<R-1>, replicate elsewhere.
/// Example: bias_layout_t<layout<shard<0>, shard<1>>, 2> is layout<replicate, shard<0>>.
template <class LX, int R>
using bias_layout_t = typename detail::layout_from<detail::bias_layout_for(LX::desc, R)>::type;

/// The layout of bias_add(x, bias) for x of layout LX and rank R, bias of layout LB: LX when legal.
/// @tparam LX x's layout
/// @tparam LB the bias's layout
/// @tparam R x's rank
/// @tparam T the element type (a partial<avg> x of integers is refused)
/// Example: bias_add_layout_t<layout<shard<1>, shard<1>>, layout<shard<0>, shard<0>>, 2> is layout<shard<1>, shard<1>>.
template <class LX, class LB, int R, class T = float>
struct bias_add_layout {
  static_assert(layout_type<LX> && layout_type<LB>, "shardcast::bias_add_layout: LX and LB must be compile-time layouts layout<P...>.");
  static_assert(LX::naxes == LB::naxes, "shardcast::bias_add: x's and the bias's layouts have different numbers of mesh axes; both must live on the same mesh.");
  using type = typename detail::checked_layout<detail::bias_rules(LX::desc, LB::desc, R, std::is_integral_v<T>), LX, LB, void>::type;
};
/// Shorthand for bias_add_layout<LX, LB, R, T>::type.
template <class LX, class LB, int R, class T = float>
using bias_add_layout_t = typename bias_add_layout<LX, LB, R, T>::type;

// ---------------------------------------------------------------------------------------
// Operators
// ---------------------------------------------------------------------------------------

namespace detail {

/// True when the element ranges [p, p + n) and [q, q + m) share a byte.
template <class A, class B>
bool ranges_overlap(const A* p, std::size_t n, const B* q, std::size_t m) {
  if (n == 0 || m == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(p), b0 = reinterpret_cast<std::uintptr_t>(q);
  return a0 < b0 + m * sizeof(B) && b0 < a0 + n * sizeof(A);
}

/// True when x owns its storage and no other handle shares it.
template <class X>
bool sole_owner(const X& x) {
  return x.owns() && x.owner().use_count() == 1;
}

/// The output of an elementwise op on operands a and b (b is a again for a one-operand
/// op) whose output has a's layout (`ly`, a's layout value) and box, with elements of type
/// U. GA / GB: the caller gives a / b up.
/// - the output goes over the piece of a given-up operand whose storage can take it, a's
///   first, then b's: it owns that storage alone, U is its element type, and `may_alias`
///   (no operand reads memory that overlaps the piece other than element for element). The
///   output takes that operand's mesh handle and storage, and the operand is left empty.
///   The op then writes over the elements it reads.
/// - otherwise new storage on a's mesh; given-up operands are emptied by
///   `release_given_up` once the op has run, so they are unchanged if the op throws.
/// (XA / XB are the operands' dtensor types, const-qualified when the caller keeps them.)
template <class U, int R, class LY, bool GA, bool GB, class XA, class XB>
dtensor<U, R, LY, typename XA::mesh_type> elementwise_output(XA& a, XB& b, const runtime_layout& ly, bool may_alias,
                                                            typename XA::mesh_type::stream_type s) {
  using Y = dtensor<U, R, LY, typename XA::mesh_type>;
  static_assert(!(GA && std::is_const_v<XA>) && !(GB && std::is_const_v<XB>), "shardcast: a given-up operand is passed as a non-const dtensor");
  // (The output's layout may differ from an operand's only where one is replicate and the
  // output partial, or the reverse: the local pieces are the same.)
  if constexpr (GA && std::is_same_v<U, typename XA::value_type>) {
    if (may_alias && sole_owner(a)) return take_as<Y>(a, ly);
  }
  if constexpr (GB && std::is_same_v<U, typename XB::value_type>) {
    if (may_alias && sole_owner(b)) return take_as<Y>(b, ly);
  }
  (void)b;
  (void)may_alias;
  return make_output<U, R, LY>(a.mesh(), a.global_extents(), ly, s);
}

/// Leaves a given-up operand empty (its storage goes unless a copy holds it; a no-op when
/// the output already took it).
template <bool Given, class X>
void release_given_up(X& x) noexcept {
  if constexpr (Given) (void)x.take();
}

/// The check an operator runs once its layouts are known to be legal, before anything is
/// written or allocated (div's scan for integer zeros); none by default.
struct no_check {
  void operator()() const noexcept {}
};

template <class D>
void expect_no_zero_divisor(const char* who, const char* name, const D& d);

template <class F>
inline constexpr bool is_div_by_v = false;
template <class S>
inline constexpr bool is_div_by_v<fn::div_by_fn<S>> = true;
template <class F>
inline constexpr bool is_rdiv_v = false;
template <class S>
inline constexpr bool is_rdiv_v<fn::rdiv_fn<S>> = true;

/// The functor inside the property marks (fn::linear(g), fn::nondecreasing_in<0>(g), ...).
template <class G>
constexpr const auto& unmark(const G& g) {
  if constexpr (requires { typename G::wrapped_functor; })
    return unmark(g.f);
  else
    return g;
}

/// The zero-divisor checks of shardcast::div, for the same division passed as a functor to
/// map, zip or broadcast_zip (integer division by zero is undefined: on the host it ends the
/// process): fn::div_by(c) with c 0 in x's integer type (every rank throws alike), fn::rdiv(c)
/// with a 0 in x's piece, fn::div with a 0 in b's piece (those ranks throw; the scan reads
/// host memory only, see expect_no_zero_divisor). Not when the caller checked already
/// (`Checked`: shardcast::div passes its own check).
template <class F, bool Checked, class X>
void expect_functor_divisor(const char* who, const X& x, const F& marked_f) {
  using T = std::remove_const_t<typename X::value_type>;
  const auto& f = unmark(marked_f);  // a mark claims a property; the division is the same
  using G = std::remove_cvref_t<decltype(f)>;
  if constexpr (std::is_integral_v<T> && is_div_by_v<G>) {
    if (static_cast<T>(f.c) == T(0))
      throw layout_error(std::string(who) + ": fn::div_by(c) divides integer elements by c converted to their type, which is 0; integer "
                         "division by zero is undefined, so nothing was divided. Pass a c that is nonzero in the element type, or "
                         "convert x to a floating type first");
  } else if constexpr (is_rdiv_v<G> && !Checked) {
    expect_no_zero_divisor(who, "x (the divisor of fn::rdiv)", x);
  }
}

/// (X: x's dtensor type, const when the caller keeps x; likewise XA and X below.)
/// `check()` runs after the layout checks, before the output is made.
/// The functor checks of map and zip, as first errors (before the result type, which names
/// std::invoke_result, is formed): f callable on a const functor, and an element type out.
template <class F, class... T>
constexpr bool check_functor() {
  static_assert(std::is_invocable_v<const F&, const T&...>,
                "shardcast::map/zip/broadcast_zip: f cannot be called as a const functor with the operands' elements (a lambda marked "
                "mutable cannot: the operators call one f for every element, on every rank, in any order; keep state outside f)");
  if constexpr (std::is_invocable_v<const F&, const T&...>)
    static_assert(element_type<std::remove_cvref_t<std::invoke_result_t<const F&, const T&...>>>,
                  "shardcast::map/zip/broadcast_zip: f returns a type that is not an element type (float, double, std::int8_t, "
                  "std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, and __half, __nv_bfloat16, __nv_fp8_e4m3, "
                  "__nv_fp8_e5m2 with <shardcast/cuda/dtypes.hpp>); a comparison's bool is not one either: return T(a < b), say");
  return true;
}

template <bool Given, class X, class F, class Check = no_check>
auto map_impl(const char* who, X& x, F f, typename X::mesh_type::stream_type s, Check check = {}) {
  using T = typename X::value_type;
  static_assert(check_functor<F, T>());
  constexpr int R = X::rank;
  using L = typename X::layout_type;
  using Mesh = typename X::mesh_type;
  using U = map_result_t<T, F>;
  using LY = typename std::conditional_t<is_dynamic_v<L>, std::type_identity<dynamic_layout>, map_layout<L, F, T>>::type;
  runtime_layout ly = x.layout();
  if constexpr (is_dynamic_v<L>) {
    const layout_rule r = map_rules(ly, props_of<F, T>());
    expect_legal(who, r, ly, runtime_layout{});
    ly = r.out;
  }
  check();
  expect_functor_divisor<F, !std::is_same_v<Check, no_check>>(who, x, f);
  const T* const in = x.data();
  const std::size_t n = x.local_size();
  auto y = elementwise_output<U, R, LY, Given, false>(x, x, ly, true, s);
  if (n > 0) elementwise_exec<typename Mesh::memory_space>::map(in, y.data(), n, f, s);
  release_given_up<Given>(x);
  return y;
}

/// zip of a and b; GA / GB: the caller gives a / b up. The output goes over a given-up
/// operand's piece as elementwise_output decides, a's first; the given-up operands are
/// left empty. `check()` runs after the mesh, extent and layout checks, before the output
/// is made.
template <bool GA, bool GB, class XA, class XB, class F, class Check = no_check>
auto zip_impl(const char* who, XA& a, XB& b, F f, typename XA::mesh_type::stream_type s, Check check = {}) {
  using TA = typename XA::value_type;
  using TB = typename XB::value_type;
  using LA = typename XA::layout_type;
  using LB = typename XB::layout_type;
  using Mesh = typename XA::mesh_type;
  constexpr int R = XA::rank;
  // The callers' check_binary_types says the same, but this function's return type is
  // deduced first: without these messages the first error a user read was a bare one.
  static_assert(std::is_same_v<typename XB::mesh_type, Mesh>,
                "shardcast::zip/add/sub/mul/div: the operands have different mesh types; both must live on the same mesh.");
  static_assert(XB::rank == R, "shardcast::zip/add/sub/mul/div: the operands have different tensor ranks; elementwise operands need equal global extents "
                               "(for a rank-0 factor use mul(x, s) or scale(x, s), for a rank-0 divisor div(x, s), for a host divisor div(x, c), "
                               "for a row vector bias_add(x, bias)).");
  static_assert(check_functor<F, TA, TB>());
  using V = zip_result_t<TA, TB, F>;
  constexpr bool dyn = is_dynamic_v<LA> || is_dynamic_v<LB>;
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>, zip_layout<LA, LB, F, TA, TB>>::type;
  using Y = dtensor<V, R, LY, Mesh>;
  expect_same_mesh(who, a.mesh(), b.mesh());
  if (a.global_extents() != b.global_extents())
    throw layout_error(std::string(who) + ": a has global extents " + describe_extents(a.global_extents()) + " but b has " +
                       describe_extents(b.global_extents()) + "; elementwise operands need equal global extents");
  runtime_layout ly;  // the output's layout: a's, or the partial operand's on axes where the other is replicate
  if constexpr (dyn) {
    const layout_rule r = zip_rules(a.layout(), b.layout(), props_of<F, TA, TB>());
    expect_legal(who, r, a.layout(), b.layout());
    ly = r.out;
  } else {
    ly = runtime_layout(LY::desc);
  }
  SHARDCAST_EXPECTS(a.local_box() == b.local_box(), std::string(who) + ": the operands' local pieces do not line up");
  check();
  if constexpr (std::is_same_v<unmarked_t<F>, fn::div_fn> && std::is_same_v<Check, no_check>)
    expect_no_zero_divisor(who, "b (the divisor of fn::div)", b);
  // Pointers first: b may be a itself (zip(std::move(a), a)), which taking a empties.
  const TA* const ain = a.data();
  const TB* const bin = b.data();
  const std::size_t n = a.local_size();
  // Element i of each operand is read before element i of the output is written, so the
  // output may go over either piece when the two are the same piece or do not overlap.
  const bool may_alias = static_cast<const void*>(bin) == static_cast<const void*>(ain) || !ranges_overlap(ain, n, bin, n);
  Y y = elementwise_output<V, R, LY, GA, GB>(a, b, ly, may_alias, s);
  if (n > 0) elementwise_exec<typename Mesh::memory_space>::zip(ain, bin, y.data(), n, f, s);
  release_given_up<GA>(a);
  release_given_up<GB>(b);
  return y;
}

/// The operand is one the caller gives up: a non-const rvalue (A deduced from A&& is not a
/// reference) of mutable elements (a tensor of const elements is only read, and stays).
template <class A>
inline constexpr bool given_v = !std::is_reference_v<A> && !std::is_const_v<A> && !std::is_const_v<typename std::remove_cvref_t<A>::value_type>;
template <class>
struct is_dtensor : std::false_type {};
template <class T, int R, class L, class Mesh>
struct is_dtensor<dtensor<T, R, L, Mesh>> : std::true_type {};
/// Two dtensor operands, each kept or given up: zip, add, sub, mul.
template <class A, class B>
concept dtensor_operands = is_dtensor<std::remove_cvref_t<A>>::value && is_dtensor<std::remove_cvref_t<B>>::value;
template <class A, class B>
inline constexpr bool same_value_types =
    same_elements_v<typename std::remove_cvref_t<A>::value_type, typename std::remove_cvref_t<B>::value_type>;

/// The operand as the impls take it: non-const when given up, const when kept (so a kept
/// operand, const or not, instantiates one impl).
template <class A>
constexpr auto& as_operand(std::remove_reference_t<A>& x) noexcept {
  if constexpr (given_v<A>)
    return x;
  else
    return std::as_const(x);
}

template <class A, class B>
constexpr void check_binary_types() {
  using DA = std::remove_cvref_t<A>;
  using DB = std::remove_cvref_t<B>;
  static_assert(std::is_same_v<typename DA::mesh_type, typename DB::mesh_type>,
                "shardcast::zip/add/sub/mul/div: the operands have different mesh types; both must live on the same mesh.");
  static_assert(DA::rank == DB::rank, "shardcast::zip/add/sub/mul/div: the operands have different tensor ranks; elementwise operands need equal global extents "
                                      "(for a rank-0 factor use mul(x, s) or scale(x, s), for a rank-0 divisor div(x, s), for a host divisor div(x, c), "
                                      "for a row vector bias_add(x, bias)).");
}

/// The layout of mul(x, s) for a rank-0 s (x's layout when legal); T: x's element type.
template <class LX, class LS, class T = float>
struct scalar_mul_layout {
  static_assert(LX::naxes == LS::naxes, "shardcast::mul(x, s): x's and s's layouts have different numbers of mesh axes; both must live on the same mesh.");
  using type = typename checked_layout<scalar_mul_rules(LX::desc, LS::desc, std::is_integral_v<T>), LX, LS, fn::mul_fn>::type;
};

/// The layout of div(x, s) for a rank-0 s (x's layout when legal; see scalar_div_axis_rule);
/// T: x's element type.
template <class LX, class LS, class T = float>
struct scalar_div_layout {
  static_assert(LX::naxes == LS::naxes, "shardcast::div(x, s): x's and s's layouts have different numbers of mesh axes; both must live on the same mesh.");
  using type = typename checked_layout<scalar_div_rules<std::remove_const_t<T>>(LX::desc, LS::desc), LX, LS, fn::div_fn>::type;
};

/// Throws layout_error when the rank-0 divisor s of div(x, s) has integer elements, lives in
/// host memory and holds 0 (integer division by zero is undefined). s is replicated (its
/// layout was checked first), so every rank holds the same value and throws alike. Device
/// memory is not read (as in expect_no_zero_divisor).
template <class D>
void expect_nonzero_scalar_divisor(const char* who, const D& d) {
  using T = std::remove_const_t<typename D::value_type>;
  static_assert(D::rank == 0);
  if constexpr (std::is_integral_v<T> && std::is_same_v<typename D::mesh_type::memory_space, host_memory>) {
    if (d.local_size() == 1 && d.data()[0] == T(0))
      throw layout_error(std::string(who) + ": x has integer elements and the rank-0 divisor s is 0 (on every rank, as s is "
                         "replicated); integer division by zero is undefined, so nothing was divided. Make s nonzero, or convert the "
                         "operands to a floating type first, where x / 0 is inf or NaN");
  }
}

/// mul(x, s) and div(x, s) with a rank-0 s (Div: the division): x * s or x / s with the one
/// element of s's local piece, s replicated on every mesh axis (the rules: scalar_mul_rules,
/// scalar_div_rules). For div, an integral s of 0 is refused before anything is written.
/// Given: the caller gives x up (the result may go over x's piece; s is read for every
/// element, so not when s lies in that piece).
template <bool Div, bool Given, class X, class TS, class LS, class Mesh>
auto scalar_operand_impl(X& x, const dtensor<TS, 0, LS, Mesh>& sc, typename Mesh::stream_type s) {
  using TX = typename X::value_type;
  constexpr int R = X::rank;
  using LX = typename X::layout_type;
  static_assert(std::is_same_v<typename X::mesh_type, Mesh>);
  constexpr const char* who = Div ? "shardcast::div" : "shardcast::mul";
  constexpr bool dyn = is_dynamic_v<LX> || is_dynamic_v<LS>;
  expect_same_mesh(who, x.mesh(), sc.mesh(), "x", "s");
  runtime_layout ly = x.layout();
  if constexpr (dyn) {
    layout_rule r;
    if constexpr (Div)
      r = scalar_div_rules<std::remove_const_t<TX>>(x.layout(), sc.layout());
    else
      r = scalar_mul_rules(x.layout(), sc.layout(), std::is_integral_v<TX>);
    expect_legal(who, r, x.layout(), sc.layout());
    ly = r.out;
  }
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>,
                                         std::conditional_t<Div, scalar_div_layout<LX, LS, TX>, scalar_mul_layout<LX, LS, TX>>>::type;
  if constexpr (Div) expect_nonzero_scalar_divisor(who, sc);
  const TX* const in = x.data();
  const TS* const factor = sc.data();
  const std::size_t n = x.local_size();
  // s is read for every element: it must not lie in the piece being overwritten.
  auto y = elementwise_output<std::remove_const_t<TX>, R, LY, Given, false>(x, x, ly, !ranges_overlap(in, n, factor, sc.local_size()), s);
  // s's value is the one element of its local piece, broadcast as a row of length 1.
  using F = std::conditional_t<Div, fn::div_fn, fn::mul_fn>;
  if (n > 0) elementwise_exec<typename Mesh::memory_space>::zip_rows(in, factor, y.data(), n, std::size_t{1}, F{}, s);
  release_given_up<Given>(x);
  return y;
}

template <class T, int R, class Mesh, class TB, int RB, class MeshB>
constexpr bool check_bias_types() {
  static_assert(std::is_same_v<Mesh, MeshB>, "shardcast::bias_add: x and the bias have different mesh types; both must live on the same mesh.");
  static_assert(R >= 1, "shardcast::bias_add: x must have rank >= 1 (the bias runs along x's last dim).");
  static_assert(RB == 1, "shardcast::bias_add: the bias must have rank 1 with x's last extent; for a b of x's rank use add(x, b) (b of x's "
                         "shape) or broadcast_zip<D>(x, b, fn::add) (b of extent 1 on dim D).");
  static_assert(same_elements_v<T, TB>, "shardcast::bias_add: x and the bias have different element types; convert one first.");
  return true;
}

template <bool Given, class X, class TB, int RB, class LB, class MeshB>
auto bias_add_impl(X& x, const dtensor<TB, RB, LB, MeshB>& bias, typename X::mesh_type::stream_type s) {
  using T = typename X::value_type;
  constexpr int R = X::rank;
  using LX = typename X::layout_type;
  using Mesh = typename X::mesh_type;
  constexpr const char* who = "shardcast::bias_add";
  constexpr bool dyn = is_dynamic_v<LX> || is_dynamic_v<LB>;
  expect_same_mesh(who, x.mesh(), bias.mesh(), "x", "bias");
  const auto ex = x.global_extents();
  if (bias.global_extents()[0] != ex[R - 1])
    throw layout_error(std::string(who) + ": x has global extents " + describe_extents(ex) + " but the bias has " +
                       describe_extents(bias.global_extents()) + "; the bias needs x's last extent " + std::to_string(ex[R - 1]));
  runtime_layout ly = x.layout();
  if constexpr (dyn) {
    const layout_rule r = bias_rules(x.layout(), bias.layout(), R, std::is_integral_v<T>);
    if (r.err == op_rule::bias_placement)
      throw layout_error(std::string(who) + ": on mesh axis " + std::to_string(r.axis) + " x is " + to_string(x.layout()[r.axis]) +
                         " and the bias is " + to_string(bias.layout()[r.axis]) + "; for x \"" + to_string(x.layout()) +
                         "\" the bias layout must be \"" + to_string(bias_layout_for(x.layout(), R)) + "\", so redistribute the bias first");
    expect_legal(who, r, x.layout(), bias.layout());
  }
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>, bias_add_layout<LX, LB, R, T>>::type;
  const box &bx = x.local_box(), &bb = bias.local_box();
  SHARDCAST_EXPECTS(bx.off[R - 1] == bb.off[0] && bx.ext[R - 1] == bb.ext[0],
                    std::string(who) + ": the local pieces of x and the bias do not line up along x's last dim");
  const auto cols = static_cast<std::size_t>(bx.ext[R - 1]);
  const T* const in = x.data();
  const TB* const row = bias.data();  // read before the output is made, as in zip_impl
  const std::size_t n = x.local_size();
  // Every row reads the whole bias piece: it must not lie in the piece being overwritten.
  auto y = elementwise_output<std::remove_const_t<T>, R, LY, Given, false>(x, x, ly, !ranges_overlap(in, n, row, bias.local_size()), s);
  if (n > 0) elementwise_exec<typename Mesh::memory_space>::zip_rows(in, row, y.data(), n / cols, cols, fn::add, s);
  release_given_up<Given>(x);
  return y;
}

}  // namespace detail

/// y = f(x) elementwise, on the local pieces (no communication). The element type of y is
/// what f returns for T.
/// @tparam F functor callable as f(T); on device meshes it must be callable in device code
/// @param x input (unchanged; see the overload below for an x the caller gives up)
/// @param f the functor; on a partial<sum|avg> axis it must be linear (is_linear_v<F>, e.g.
///        fn::scale(2.0f) or fn::linear(g); affine will do on partial<avg>); on
///        partial<max|min> it must be nondecreasing (fn::relu, fn::exp,
///        fn::nondecreasing_in<0>(g)), or nonincreasing (fn::nonincreasing_in<0>(g)),
///        which swaps max and min in y's layout; on partial<prod>, and on partial<avg> of
///        an integral T, no map but fn::identity
/// @param s stream for device meshes (host meshes ignore it)
/// @throws layout_error for a dynamic_layout x whose layout makes f illegal (compile error otherwise)
/// @code
///   // x: layout<shard<0>, replicate> on a 2x2 mesh
///   auto y = sc::map(x, sc::fn::gelu);      // layout<shard<0>, replicate>
/// @endcode
template <class T, int R, class L, class Mesh, class F>
auto map(const dtensor<T, R, L, Mesh>& x, F f, typename Mesh::stream_type s = {}) {
  return detail::map_impl<false>("shardcast::map", x, f, s);
}

/// map of a tensor the caller gives up (`map(std::move(x), f)`, or a temporary such as
/// `map(bias_add(matmul(h, w), b), fn::gelu)`): the same result, and x is left empty.
/// When x owns its storage alone and f returns T, y is written over x's piece in x's
/// storage (nothing is allocated); otherwise into new storage, and x's storage is released
/// when the call returns unless a copy of x holds it. A view's memory (make_view) is never
/// written. If f throws part-way through x's own storage, that storage is released too.
/// The same holds for the first operand of scale and bias_add, and for either operand of
/// zip, add, sub and mul (see zip with given-up operands). A tensor of const elements
/// (`dtensor<const T, ...>`) is never given up: every operator only reads it, and it stays.
/// @code
///   auto h = sc::map(sc::bias_add(sc::matmul(x, w1), b1), sc::fn::gelu);  // one local piece per rank, not three
/// @endcode
template <class T, int R, class L, class Mesh, class F>
  requires(!std::is_const_v<T>)
auto map(dtensor<T, R, L, Mesh>&& x, F f, typename Mesh::stream_type s = {}) {
  return detail::map_impl<true>("shardcast::map", x, f, s);
}

namespace detail {
/// Whether the arithmetic value v converted to the integral type T keeps its value (a
/// whole number in T's range); `shown` gets v as text for a message.
template <class T, class S>
bool whole_in(S v, std::string& shown) {
  static_assert(std::is_integral_v<T>);
  bool fits = true;
  if constexpr (std::is_floating_point_v<S>) {
    // T holds the whole numbers in [-2^d, 2^d) (signed) or [0, 2^d) (unsigned), d = its
    // value bits; powers of two are exact in every floating type.
    const long double f = v, top = std::ldexp(1.0L, std::numeric_limits<T>::digits);
    fits = f == std::trunc(f) && f < top && f >= (std::is_signed_v<T> ? -top : 0.0L);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17Lg", f);
    shown = buf;
  } else if constexpr (std::is_integral_v<S>) {
    // Converting to T and back keeps the value and its sign exactly when T holds it.
    const T t = static_cast<T>(v);
    fits = static_cast<S>(t) == v && (t < T(0)) == (v < S(0));
    using wide = std::conditional_t<std::is_signed_v<S>, long long, unsigned long long>;
    shown = std::to_string(static_cast<wide>(v));
  }
  return fits;
}

/// scale(x, factor), add(x, c) and sub(x, c) use the scalar converted to x's element type
/// T: for an integral T it must be a whole number in T's range, which the conversion keeps
/// (0.5 would become 0, 1000 would wrap in int8, and -1 in any unsigned type). Throws
/// layout_error naming the scalar (`noun`) and the `remedy` otherwise.
template <class T, class S>
void expect_whole_scalar(const char* who, const char* noun, S v, const char* remedy) {
  if constexpr (std::is_integral_v<T>) {
    std::string shown;
    if (!whole_in<T>(v, shown))
      throw layout_error(std::string(who) + ": x has integer elements and the " + noun + " " + shown +
                         " is not a whole number in their range, so converting it to the element type would change it; "
                         "convert x to a floating type first (map(x, [](int v) { return double(v); })) or pass " + remedy);
  }
}

/// Instantiated when add(x, c), sub(x, c), add(c, x) or sub(c, x) meets a partial<sum> x on mesh axis `Axis`.
template <int Axis>
struct scalar_shift_of_partial_sum_on_mesh_axis {
  static_assert(Axis != Axis,
                "shardcast::add(x, c) / sub(x, c) / add(c, x) / sub(c, x): x is partial<sum> on the mesh axis named in "
                "scalar_shift_of_partial_sum_on_mesh_axis<Axis>, so c would enter the sum once per partial term (n times; for sub(c, x), "
                "c - (x1 + x2) is not (c - x1) + (c - x2)); "
                "redistribute x to replicate (all_reduce) or shard (reduce_scatter) on that axis first.");
};
/// The first mesh axis where `l` is partial<sum>, or -1.
constexpr int partial_sum_axis(const runtime_layout& l) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a] == placement_desc::make_partial(reduce_op::sum)) return a;
  return -1;
}
/// The shift that subtracts c from elements of type T: -T(c), wrapped modulo 2^bits, for
/// an integral T (x + (-c) then wraps to x - c for every c in T's range, the lowest() of a
/// signed T included); -c in T's arithmetic type otherwise (x + (-c) is x - c exactly in
/// IEEE arithmetic, which defines subtraction so).
template <class T, class S>
constexpr auto negated_shift(S c) {
  if constexpr (std::is_integral_v<T>)
    return fn::neg_fn{}(static_cast<T>(c));
  else
    return -static_cast<fn::detail::arith_t<T>>(c);
}

/// Which shift of x by a scalar c: x + c (add(x, c), add(c, x)), x - c (sub(x, c)) or
/// c - x (sub(c, x)).
enum class shift_form : std::uint8_t { plus, minus, from };

/// The map of add(x, c), sub(x, c) or sub(c, x) (Form) for x of element type T and layout L
/// (value `l`): fn::shift(c), fn::shift(-c) or fn::rsub(c), after the checks of c for
/// integral T, and of x's layout: a partial<sum> axis is a compile-time message (static L,
/// and then fn::identity, so that map adds no second message) or a layout_error (dynamic
/// L), as c would be added once per term (c - x: c - (x1 + x2) is not (c - x1) + (c - x2)).
/// The other refusals are map's.
template <class L, class T, shift_form Form, class S>
auto shift_for(const char* who, const runtime_layout& l, S c) {
  if constexpr (Form == shift_form::from)
    expect_whole_scalar<T>(who, "scalar", c,
                           "a whole number in the element type's range (c - x wraps, so for an unsigned type -1 - x is "
                           "sub(std::numeric_limits<T>::max(), x))");
  else if constexpr (Form == shift_form::minus)
    expect_whole_scalar<T>(who, "scalar", c, "a whole number in the element type's range (for an unsigned type, add(x, 1) rather than sub(x, -1))");
  else
    expect_whole_scalar<T>(who, "scalar", c, "a whole number in the element type's range (for an unsigned type, sub(x, 1) rather than add(x, -1))");
  const auto f = [c] {
    if constexpr (Form == shift_form::minus) return fn::shift(negated_shift<T>(c));
    else if constexpr (Form == shift_form::from) return fn::rsub(c);
    else return fn::shift(c);
  };
  if constexpr (is_dynamic_v<L>) {
    if (const int a = partial_sum_axis(l); a >= 0)
      throw layout_error(std::string(who) + ": layout \"" + to_string(l) + "\": x is partial<sum> on mesh axis " + std::to_string(a) +
                         ", so c would enter the sum once per partial term (n times)" +
                         (Form == shift_form::from ? ": c - (x1 + x2) is not (c - x1) + (c - x2)" : "") + "; redistribute x to replicate "
                         "(all_reduce) or shard (reduce_scatter) on that axis first");
    return f();
  } else {
    (void)l;
    constexpr int a = partial_sum_axis(L::desc);
    if constexpr (a >= 0) {
      (void)sizeof(scalar_shift_of_partial_sum_on_mesh_axis<a>);
      return fn::identity;
    } else {
      return f();
    }
  }
}

/// add(x, c), sub(x, c), add(c, x) and sub(c, x) (the form Form; who names the operator):
/// map(x, shift_for(...)) of x kept or given up (Given).
template <shift_form Form, bool Given, class X, class S>
auto shift_impl(const char* who, X& x, S c, typename X::mesh_type::stream_type s) {
  using T = std::remove_const_t<typename X::value_type>;
  return map_impl<Given>(who, x, shift_for<typename X::layout_type, T, Form>(who, x.layout(), c), s);
}

/// scale(x, factor) and mul(x, c) (who names the operator in the messages): x * factor.
template <bool Given, class X, class S>
auto scale_impl(const char* who, X& x, S factor, typename X::mesh_type::stream_type s) {
  expect_whole_scalar<std::remove_const_t<typename X::value_type>>(who, "factor", factor, "a whole factor");
  return map_impl<Given>(who, x, fn::scale(factor), s);
}

/// div(x, c) of x with elements of type T: c must be a whole number in T's range and not 0
/// for an integral T (integer division by zero is undefined); every rank passes the same
/// c, so every rank throws alike, before anything is divided. Floating-point x takes any
/// c (x / 0 is inf or NaN, as in C++).
template <class T, class S>
void expect_divisor(const char* who, S c) {
  expect_whole_scalar<T>(who, "divisor", c, "a whole divisor");
  if constexpr (std::is_integral_v<T>) {
    if (c == S(0))
      throw layout_error(std::string(who) + ": x has integer elements and the divisor c is 0; integer division by zero is undefined, "
                         "so nothing was divided. Pass a nonzero c, the same c on every rank (every rank then takes the same "
                         "branch), or convert x to a floating type first, where x / 0 is inf or NaN");
  }
}

/// Throws layout_error when the divisor d (`name`) has integer elements, lives in host
/// memory and its local piece holds a 0: integer division by zero is undefined (on the
/// host it ends the process). Only this rank's piece is read, so only the ranks whose
/// pieces hold a 0 throw. Device memory is not scanned (that would take a kernel and a
/// copy back on every call): there a zero divisor gives an unspecified quotient.
template <class D>
void expect_no_zero_divisor(const char* who, const char* name, const D& d) {
  using T = std::remove_const_t<typename D::value_type>;
  if constexpr (std::is_integral_v<T> && std::is_same_v<typename D::mesh_type::memory_space, host_memory>) {
    const auto* p = d.data();
    const std::size_t n = d.local_size();
    for (std::size_t i = 0; i < n; ++i) {
      if (p[i] != T(0)) continue;
      std::string at;
      for (int a = 0; a < D::mesh_type::naxes; ++a) at += (a ? ", " : "") + std::to_string(d.mesh().coords()[static_cast<std::size_t>(a)]);
      throw layout_error(std::string(who) + ": " + name + " has integer elements, and its local piece on the rank at mesh coordinates (" +
                         at + ") holds 0 at local element " + std::to_string(i) +
                         "; integer division by zero is undefined, so nothing was divided. Make every divisor nonzero, or "
                         "convert the operands to a floating type first, where x / 0 is inf or NaN");
    }
  }
}
}  // namespace detail

/// y = factor * x elementwise. Scaling is linear, so it is legal on partial<sum|avg> axes
/// (each partial term is scaled); partial<max|min|prod>, and partial<avg> of an integral T
/// (its truncated mean does not scale), are refused at compile time.
/// @param factor converted to T at each element; for an integral T a whole number in T's
///        range (else layout_error: the conversion would change it)
/// @param s stream for device meshes
/// @throws layout_error for a dynamic_layout x with a partial<max|min|prod> axis (or
///         partial<avg>, T integral)
/// @code
///   auto q = sc::scale(p /* layout<partial<sum>> */, 0.5);  // layout<partial<sum>>
/// @endcode
template <class T, int R, class L, class Mesh, class S>
  requires std::is_arithmetic_v<S>
auto scale(const dtensor<T, R, L, Mesh>& x, S factor, typename Mesh::stream_type s = {}) {
  return detail::scale_impl<false>("shardcast::scale", x, factor, s);
}
/// scale of a tensor the caller gives up: x is left empty, and y takes x's storage when x
/// owns it alone (see map of a given-up tensor).
template <class T, int R, class L, class Mesh, class S>
  requires(std::is_arithmetic_v<S> && !std::is_const_v<T>)
auto scale(dtensor<T, R, L, Mesh>&& x, S factor, typename Mesh::stream_type s = {}) {
  return detail::scale_impl<true>("shardcast::scale", x, factor, s);
}

/// y = f(a, b) elementwise. a and b need the same mesh, rank and global extents, and per
/// mesh axis equal placements (on a partial<sum|avg> axis f linear in (a, b) jointly), or
/// one partial<Op> and the other replicate with f commuting with Op in the partial operand
/// (see the file comment); y has a's placement, or the partial one.
/// @param a, b inputs: a tensor the caller keeps is unchanged. Either or both may be given
///        up (`zip(std::move(a), b, f)`, or a temporary as in `zip(a, g(x), f)`): the result
///        is the same, every given-up operand is left empty, and y is written over a's
///        piece in a's storage when a is given up, owns it alone and f returns TA, else over
///        b's on the same terms (b given up, owned alone, f returns TB), else into new
///        storage. Storage a copy still holds, and memory under a view, is never written
///        (see map of a given-up tensor). The same holds for add, sub and mul below:
///        `add(x, f(x))` (a residual connection) writes over f(x)'s piece.
/// @param f functor callable as f(TA, TB)
/// @param s stream for device meshes
/// @throws layout_error if a and b live on different meshes or have different global
///         extents, or (dynamic layouts) if the layouts are not legal for f
/// @code
///   // a, b: layout<replicate, shard<1>>
///   auto c = sc::zip(a, b, [](float u, float v) { return u > v ? u : v; });  // layout<replicate, shard<1>>
/// @endcode
template <class A, class B, class F>
  requires detail::dtensor_operands<A, B>
auto zip(A&& a, B&& b, F f, typename std::remove_cvref_t<A>::mesh_type::stream_type s = {}) {
  detail::check_binary_types<A, B>();
  return detail::zip_impl<detail::given_v<A>, detail::given_v<B>>("shardcast::zip", detail::as_operand<A>(a), detail::as_operand<B>(b), f, s);
}

/// a + b elementwise: equal layouts; partial<sum> + partial<sum> (and avg) stays partial.
/// @param a, b operands of equal element type, rank, extents and layout; either or both may
///        be given up: the sum goes over the piece of a given-up operand that owns its
///        storage alone, a's first (see zip)
/// @param s stream for device meshes
/// @throws layout_error for different meshes or global extents
/// @code
///   auto c = sc::add(p, q);  // p, q: layout<shard<0>, partial<sum>>  ->  layout<shard<0>, partial<sum>>
///   acc = sc::add(std::move(acc), g);     // accumulates in acc's storage
///   auto h = sc::add(x, sc::map(x, f));  // residual: written over map's result
/// @endcode
template <class A, class B>
  requires detail::dtensor_operands<A, B>
auto add(A&& a, B&& b, typename std::remove_cvref_t<A>::mesh_type::stream_type s = {}) {
  detail::check_binary_types<A, B>();
  static_assert(detail::same_value_types<A, B>,
                "shardcast::add: the operands have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
  return detail::zip_impl<detail::given_v<A>, detail::given_v<B>>("shardcast::add", detail::as_operand<A>(a), detail::as_operand<B>(b), fn::add, s);
}

/// a - b elementwise; same rules as add (given-up operands too).
/// @param s stream for device meshes
/// @throws layout_error for different meshes or global extents
template <class A, class B>
  requires detail::dtensor_operands<A, B>
auto sub(A&& a, B&& b, typename std::remove_cvref_t<A>::mesh_type::stream_type s = {}) {
  detail::check_binary_types<A, B>();
  static_assert(detail::same_value_types<A, B>,
                "shardcast::sub: the operands have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
  return detail::zip_impl<detail::given_v<A>, detail::given_v<B>>("shardcast::sub", detail::as_operand<A>(a), detail::as_operand<B>(b), fn::sub, s);
}

/// y = x + c elementwise for an arithmetic scalar c (a host value, the same on every rank):
/// map(x, fn::shift(c)). x + c is affine and nondecreasing in x, so y keeps every placement
/// of x but partial<sum> (c would be added once per term: a compile error, or layout_error
/// for a dynamic layout; redistribute first) and partial<prod>; over integers also
/// partial<avg> (its mean truncates) and partial<max|min> (the sums wrap) are refused. A
/// dtensor is never taken as c: add(a, b) of two tensors is the overload above.
/// @param x the tensor (const elements too); one the caller gives up is left empty and y
///        takes its storage when x owns it alone (see map of a given-up tensor)
/// @param c converted to x's element type at each element (float for narrow types); for an
///        integral element type a whole number in its range (else layout_error: the
///        conversion would change it)
/// @param s stream for device meshes
/// @throws layout_error for a c an integral element type cannot hold, or a dynamic_layout x
///         with an axis the shift may not go through
/// @code
///   auto y = sc::add(x /* layout<shard<0>, partial<avg>> */, 1.0f);  // layout<shard<0>, partial<avg>>
/// @endcode
template <class T, int R, class L, class Mesh, class S>
  requires std::is_arithmetic_v<S>
auto add(const dtensor<T, R, L, Mesh>& x, S c, typename Mesh::stream_type s = {}) {
  return detail::shift_impl<detail::shift_form::plus, false>("shardcast::add", x, c, s);
}
/// add(x, c) of a tensor the caller gives up.
template <class T, int R, class L, class Mesh, class S>
  requires(std::is_arithmetic_v<S> && !std::is_const_v<T>)
auto add(dtensor<T, R, L, Mesh>&& x, S c, typename Mesh::stream_type s = {}) {
  return detail::shift_impl<detail::shift_form::plus, true>("shardcast::add", x, c, s);
}

/// y = x - c elementwise for an arithmetic scalar c: x + (-c) (fn::shift of -c converted to
/// x's element type; over integers the negation wraps, so every c the element type holds
/// works, unsigned ones included). The same rules as add(x, c).
/// @throws layout_error as add(x, c)
template <class T, int R, class L, class Mesh, class S>
  requires std::is_arithmetic_v<S>
auto sub(const dtensor<T, R, L, Mesh>& x, S c, typename Mesh::stream_type s = {}) {
  return detail::shift_impl<detail::shift_form::minus, false>("shardcast::sub", x, c, s);
}
/// sub(x, c) of a tensor the caller gives up.
template <class T, int R, class L, class Mesh, class S>
  requires(std::is_arithmetic_v<S> && !std::is_const_v<T>)
auto sub(dtensor<T, R, L, Mesh>&& x, S c, typename Mesh::stream_type s = {}) {
  return detail::shift_impl<detail::shift_form::minus, true>("shardcast::sub", x, c, s);
}

/// y = x * c elementwise for an arithmetic scalar c: scale(x, c) (the same rules and
/// checks), spelled as the tensor-by-tensor mul; its messages name shardcast::mul.
template <class T, int R, class L, class Mesh, class S>
  requires std::is_arithmetic_v<S>
auto mul(const dtensor<T, R, L, Mesh>& x, S c, typename Mesh::stream_type s = {}) {
  return detail::scale_impl<false>("shardcast::mul", x, c, s);
}
/// mul(x, c) of a tensor the caller gives up.
template <class T, int R, class L, class Mesh, class S>
  requires(std::is_arithmetic_v<S> && !std::is_const_v<T>)
auto mul(dtensor<T, R, L, Mesh>&& x, S c, typename Mesh::stream_type s = {}) {
  return detail::scale_impl<true>("shardcast::mul", x, c, s);
}

/// y = x / c elementwise for an arithmetic scalar c (a host value, the same on every rank),
/// computed as a division (map(x, fn::div_by(c))), not as x * (1 / c), which rounds
/// differently. Over floating-point x, x / c is linear in x, so y keeps every placement of
/// x but partial<max|min|prod>: whether dividing keeps max and min (c > 0) or swaps them
/// (c < 0) depends on c's sign, which the layout cannot, so they are refused as scale(x, c)
/// refuses them (map(x, fn::nondecreasing_in<0>(fn::div_by(c))) divides a partial<max> by
/// a c known to be positive). Integer division truncates: it keeps no partial<sum> (nor
/// partial<avg>, whose mean truncates); the quotient of lowest() by -1 wraps to lowest().
/// @param x the tensor (const elements too); one the caller gives up is left empty and y
///        takes its storage when x owns it alone (see map of a given-up tensor)
/// @param c converted to x's element type at each element (float for narrow types); for
///        integer elements a nonzero whole number in their range. Floating-point x / 0 is
///        inf or NaN, as in C++
/// @param s stream for device meshes
/// @throws layout_error for integer elements and a c that is 0 or that they cannot hold
///         (on every rank, before anything is divided), or for a dynamic_layout x with an
///         axis the division may not go through
/// @code
///   auto y = sc::div(p /* layout<shard<0>, partial<sum>>, float */, 4.0f);  // layout<shard<0>, partial<sum>>
/// @endcode
template <class T, int R, class L, class Mesh, class S>
  requires std::is_arithmetic_v<S>
auto div(const dtensor<T, R, L, Mesh>& x, S c, typename Mesh::stream_type s = {}) {
  detail::expect_divisor<std::remove_const_t<T>>("shardcast::div", c);
  return detail::map_impl<false>("shardcast::div", x, fn::div_by(c), s);
}
/// div(x, c) of a tensor the caller gives up.
template <class T, int R, class L, class Mesh, class S>
  requires(std::is_arithmetic_v<S> && !std::is_const_v<T>)
auto div(dtensor<T, R, L, Mesh>&& x, S c, typename Mesh::stream_type s = {}) {
  detail::expect_divisor<T>("shardcast::div", c);
  return detail::map_impl<true>("shardcast::div", x, fn::div_by(c), s);
}

/// y = c + x for an arithmetic scalar c: add(x, c) (the same rules, checks and messages).
/// The scalar forms with c first take an arithmetic c and a dtensor x only (kept, const
/// elements or given up, as the forms with c last), so two tensors still go to the
/// tensor forms.
template <class S, class X>
  requires(std::is_arithmetic_v<S> && detail::is_dtensor<std::remove_cvref_t<X>>::value)
auto add(S c, X&& x, typename std::remove_cvref_t<X>::mesh_type::stream_type s = {}) {
  return detail::shift_impl<detail::shift_form::plus, detail::given_v<X>>("shardcast::add", detail::as_operand<X>(x), c, s);
}

/// y = c * x for an arithmetic scalar c: mul(x, c) (the same rules, checks and messages).
template <class S, class X>
  requires(std::is_arithmetic_v<S> && detail::is_dtensor<std::remove_cvref_t<X>>::value)
auto mul(S c, X&& x, typename std::remove_cvref_t<X>::mesh_type::stream_type s = {}) {
  return detail::scale_impl<detail::given_v<X>>("shardcast::mul", detail::as_operand<X>(x), c, s);
}

/// y = c - x elementwise for an arithmetic scalar c: map(x, fn::rsub(c)), with the check of
/// c that sub(x, c) makes for integer elements. c - x is affine in x and nonincreasing, so
/// y keeps replicate, shard<d> and partial<avg>, and turns partial<max> into partial<min>
/// and the reverse (c - max(x1, x2) = min(c - x1, c - x2)). A partial<sum> x is refused as
/// for add(x, c): c - (x1 + x2) is not (c - x1) + (c - x2), c would be counted once per
/// term (scalar_shift_of_partial_sum_on_mesh_axis, or layout_error for a dynamic layout).
/// Over integers the difference wraps, so partial<max|min> (and partial<avg>) are refused too.
/// @throws layout_error as sub(x, c)
/// @code
///   auto y = sc::sub(1.0f, m /* layout<shard<0>, partial<max>> */);  // layout<shard<0>, partial<min>>
/// @endcode
template <class S, class X>
  requires(std::is_arithmetic_v<S> && detail::is_dtensor<std::remove_cvref_t<X>>::value)
auto sub(S c, X&& x, typename std::remove_cvref_t<X>::mesh_type::stream_type s = {}) {
  return detail::shift_impl<detail::shift_form::from, detail::given_v<X>>("shardcast::sub", detail::as_operand<X>(x), c, s);
}

/// y = c / x elementwise for an arithmetic scalar c: map(x, fn::rdiv(c)). c / x is
/// neither linear nor monotone over terms of either sign (c / (x1 + x2) is no sum of
/// quotients, and 1 / x jumps at 0), so every partial placement is refused
/// (division_of_partial_on_mesh_axis, or layout_error); replicate and shard<d> are kept.
/// @param c for integer elements a whole number in their range (else layout_error)
/// @throws layout_error for such a c; for integer elements in host memory, on the ranks
///         whose piece of x holds a 0 (integer division by zero is undefined; checked
///         before anything is divided, and on device memory not checked); for a
///         dynamic_layout x with a partial axis
/// @code
///   auto inv = sc::div(1.0f, x /* layout<shard<0>, replicate> */);  // layout<shard<0>, replicate>
/// @endcode
template <class S, class X>
  requires(std::is_arithmetic_v<S> && detail::is_dtensor<std::remove_cvref_t<X>>::value)
auto div(S c, X&& x, typename std::remove_cvref_t<X>::mesh_type::stream_type s = {}) {
  using T = std::remove_const_t<typename std::remove_cvref_t<X>::value_type>;
  detail::expect_whole_scalar<T>("shardcast::div", "numerator", c, "a whole numerator");
  auto& xo = detail::as_operand<X>(x);
  return detail::map_impl<detail::given_v<X>>("shardcast::div", xo, fn::rdiv(c), s,
                                              [&xo] { detail::expect_no_zero_divisor("shardcast::div", "x", xo); });
}

namespace detail {
template <bool GA, bool GB, class XA, class XB>
auto mul_impl(XA& a, XB& b, typename XB::mesh_type::stream_type s) {
  using T = std::remove_const_t<typename XA::value_type>;
  constexpr int RA = XA::rank, RB = XB::rank;
  using Mesh = typename XA::mesh_type;
  using MeshB = typename XB::mesh_type;
  static_assert(std::is_same_v<Mesh, MeshB>, "shardcast::mul: the operands have different mesh types; both must live on the same mesh.");
  static_assert(same_elements_v<T, typename XB::value_type>,
                "shardcast::mul: the operands have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
  if constexpr (RB == 0 && RA > 0) {
    auto y = scalar_operand_impl<false, GA>(a, b, s);
    release_given_up<GB>(b);  // a rank-0 factor cannot hold the product
    return y;
  } else {
    check_binary_types<XA, XB>();
    return zip_impl<GA, GB>("shardcast::mul", a, b, fn::mul, s);
  }
}
}  // namespace detail

/// a * b elementwise. Two forms:
/// - b of the same rank as a: equal layouts with no partial axis (the product of two
///   partial sums is not the sum of the products), except that on a mesh axis where one
///   operand is partial<sum|avg> and the other replicate the product is that partial;
/// - b of rank 0 (a scalar dtensor), replicated on every axis: a may also be
///   partial<sum|avg> (a partial sum times a replicated scalar is the sum of the scaled
///   terms; partial<avg> for floating-point types only), y has a's layout.
/// Operands the caller gives up: as for add (a rank-0 b given up is only left empty).
/// @throws layout_error for different meshes or global extents
/// @code
///   auto y = sc::mul(p /* layout<partial<sum>> [n] */, s /* layout<replicate>, rank 0 */);  // layout<partial<sum>>
/// @endcode
template <class A, class B>
  requires detail::dtensor_operands<A, B>
auto mul(A&& a, B&& b, typename std::remove_cvref_t<A>::mesh_type::stream_type s = {}) {
  return detail::mul_impl<detail::given_v<A>, detail::given_v<B>>(detail::as_operand<A>(a), detail::as_operand<B>(b), s);
}

namespace detail {
template <bool GA, bool GB, class XA, class XB>
auto div_impl(XA& a, XB& b, typename XB::mesh_type::stream_type s) {
  if constexpr (XB::rank == 0 && XA::rank > 0) {
    static_assert(std::is_same_v<typename XA::mesh_type, typename XB::mesh_type>,
                  "shardcast::div: the operands have different mesh types; both must live on the same mesh.");
    static_assert(same_value_types<XA, XB>,
                  "shardcast::div: the operands have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
    auto y = scalar_operand_impl<true, GA>(a, b, s);
    release_given_up<GB>(b);  // a rank-0 divisor cannot hold the quotient
    return y;
  } else {
    check_binary_types<XA, XB>();
    static_assert(same_value_types<XA, XB>,
                  "shardcast::div: the operands have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
    return zip_impl<GA, GB>("shardcast::div", a, b, fn::div, s, [&b] { expect_no_zero_divisor("shardcast::div", "b", b); });
  }
}
}  // namespace detail

/// a / b elementwise, computed as a division (never as a * (1 / b)). Two forms:
/// - b of the same rank as a (zip(a, b, fn::div)): equal element types, ranks, extents and
///   meshes, and per mesh axis equal placements with no partial, or a partial<sum|avg> a
///   over a replicated b for floating-point types (the quotient stays partial: (a1 + a2) / b
///   = a1 / b + a2 / b);
/// - b of rank 0 (a scalar dtensor s, the tensor twin of div(x, c)), replicated on every
///   mesh axis: a may be replicate, shard<d>, or for floating-point types partial<sum|avg>
///   (kept partial, as above); y has a's layout, and every element of a is divided by s's
///   one value.
/// Refused in both forms, with the reason: a partial b (1 / (b1 + b2) is not a sum of
/// per-rank quotients), a partial<max|min> a (dividing by a negative number swaps max and
/// min, and b's sign is not part of its layout), a partial<prod> a, two partial operands,
/// and over integers a partial a (division truncates: trunc(1 / 2) + trunc(1 / 2) = 0, but
/// trunc(2 / 2) = 1; a partial<avg> of integers is a truncated mean); a compile error naming
/// the mesh axis (division_of_partial_on_mesh_axis, integer_division_of_partial_sum_on_mesh_axis,
/// partial_avg_of_integers_on_mesh_axis), or layout_error for dynamic layouts. Over
/// floating-point types a zero in b gives inf or NaN, as in C++; over integers lowest() / -1
/// wraps to lowest().
/// Operands the caller gives up: as for add (the quotient goes over a's piece first); a
/// rank-0 b given up is only left empty, and the quotient does not go over a's piece where
/// b lies in it.
/// @param s stream for device meshes
/// @throws layout_error for different meshes or global extents, illegal dynamic layouts,
///         and for integer elements in host memory: on the ranks whose piece of b holds a 0
///         (checked before anything is divided), and for a rank-0 b of 0 on every rank (b is
///         replicated, so each rank holds the 0); device memory is not checked, and there a
///         zero divisor gives an unspecified quotient
/// @code
///   auto y = sc::div(p /* layout<shard<0>, partial<sum>>, float */, norm /* layout<shard<0>, replicate> */);  // layout<shard<0>, partial<sum>>
///   auto z = sc::div(p, n /* layout<replicate, replicate>, rank 0 */);  // layout<shard<0>, partial<sum>>
/// @endcode
template <class A, class B>
  requires detail::dtensor_operands<A, B>
auto div(A&& a, B&& b, typename std::remove_cvref_t<A>::mesh_type::stream_type s = {}) {
  return detail::div_impl<detail::given_v<A>, detail::given_v<B>>(detail::as_operand<A>(a), detail::as_operand<B>(b), s);
}

/// y[..., j] = x[..., j] + bias[j]: adds a rank-1 bias along x's last dim (every row).
/// Layout per mesh axis (checked at compile time; see bias_layout_t):
/// x shard<R-1> needs bias shard<0>; x replicate or shard<d> (d < R-1) needs bias
/// replicate; x partial<avg|max|min> needs bias replicate (every term gets the bias, which
/// is right for a mean, a maximum or a minimum); x partial<sum|prod> is refused (the bias
/// would be added once per partial term), and so is partial<avg> of integers (its mean
/// truncates: trunc((-1 + 2) / 2) = 0 but trunc(-1 / 2) + 1 = 1).
/// y has x's layout.
/// @param x rank R >= 1 (unchanged; an x the caller gives up is left empty, and y takes
///        its storage when x owns it alone: see map of a given-up tensor)
/// @param bias rank 1, extent = x's last global extent
/// @throws layout_error if bias's extent differs from x's last extent or the meshes differ
/// @code
///   // 2x2 mesh; x [t, h]: layout<shard<0>, shard<1>>; bias [h]: layout<replicate, shard<0>>
///   auto y = sc::bias_add(x, bias);   // layout<shard<0>, shard<1>>
/// @endcode
template <class T, int R, class LX, class Mesh, class TB, int RB, class LB, class MeshB>
auto bias_add(const dtensor<T, R, LX, Mesh>& x, const dtensor<TB, RB, LB, MeshB>& bias, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_bias_types<T, R, Mesh, TB, RB, MeshB>());
  return detail::bias_add_impl<false>(x, bias, s);
}
template <class T, int R, class LX, class Mesh, class TB, int RB, class LB, class MeshB>
  requires(!std::is_const_v<T>)
auto bias_add(dtensor<T, R, LX, Mesh>&& x, const dtensor<TB, RB, LB, MeshB>& bias, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_bias_types<T, R, Mesh, TB, RB, MeshB>());
  return detail::bias_add_impl<true>(x, bias, s);
}

}  // namespace shardcast
