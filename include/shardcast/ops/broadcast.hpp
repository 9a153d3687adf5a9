#pragma once
/// @file ops/broadcast.hpp
/// `broadcast_zip<D>(a, b, f)`: y = f(a, b) elementwise with b broadcast along tensor dim D,
/// where b has a's global extents except extent 1 on D (what `reduce<D, Op, keep_dim>`
/// returns). It is the step that makes a row-wise softmax, a layer norm or a
/// cross-entropy out of reductions: `x - max(x)` along the rows, `e / sum(e)`, with x
/// sharded along the reduced dim or not.
///
/// Layout rule, per mesh axis (a's placement pa, b's pb):
/// - pa = shard<D>: pb must be replicate (every rank needs the whole of b's slice); y is
///   shard<D>;
/// - otherwise zip's rule: pb equal to pa (on partial<sum|avg> f linear in (a, b)
///   jointly), or one of them partial and the other replicate, f commuting with that
///   partial in its operand (linear for partial<sum>, affine for partial<avg>,
///   nondecreasing for partial<max|min>; see is_linear_in); y has pa, or the partial one.
/// `broadcast_layout_t<LA, D>` is the layout b needs for a of layout LA (replicate where a is
/// shard<D> or partial<max|min|prod>; a's partial<sum|avg>, which suits an f linear in (a, b)
/// jointly: for one linear in a alone, such as a / b, b must be replicate there). Illegal static
/// layouts fail to compile with an error that names the mesh axis and both placements;
/// dynamic ones throw layout_error.
///
/// @code
///   // 2x2 mesh, logits x [t, v]: layout<shard<0>, shard<1>> (vocab split over axis 1)
///   auto m = sc::redistribute<sc::broadcast_layout_t<L, 1>>(sc::reduce<1, sc::max, sc::keep_dim>(x));  // [t, 1]: all_reduce(max)
///   auto e = sc::map(sc::broadcast_zip<1>(x, m, sc::fn::sub), sc::fn::exp);
///   auto s = sc::redistribute<sc::broadcast_layout_t<L, 1>>(sc::reduce<1, sc::sum, sc::keep_dim>(e));  // all_reduce(sum)
///   auto p = sc::broadcast_zip<1>(std::move(e), s, sc::fn::div);  // softmax, in e's storage
/// @endcode

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../dtensor.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../placement.hpp"
#include "elementwise.hpp"

namespace shardcast {

namespace detail {

/// The placement b needs on an axis where a is `a`, for a broadcast along dim d.
/// Where a is partial<max|min|prod>, b cannot be partial too (two such partials never
/// combine term by term), so b must be replicate there.
constexpr placement_desc broadcast_placement_for(const placement_desc& a, int d) {
  const bool termwise_partial = a.is_partial() && (a.op == reduce_op::max || a.op == reduce_op::min || a.op == reduce_op::prod);
  return a.is_shard(d) || termwise_partial ? placement_desc::make_replicate() : a;
}

/// broadcast_zip<D>(a, b, f) on one axis.
constexpr axis_rule broadcast_axis_rule(const placement_desc& a, const placement_desc& b, int d, const functor_props& f) {
  if (a.is_shard(d)) return b.is_replicate() ? axis_rule{op_rule::ok, a} : axis_rule{op_rule::broadcast_placement, a};
  const axis_rule r = zip_axis_rule(a, b, f);
  return r.err == op_rule::layouts_differ ? axis_rule{op_rule::broadcast_placement, a} : r;
}

constexpr layout_rule broadcast_rules(const runtime_layout& a, const runtime_layout& b, int d, const functor_props& f) {
  return no_mixed_partials(fold_axes(a.naxes, [&](int i) { return broadcast_axis_rule(a[i], b[i], d, f); }));
}

constexpr runtime_layout broadcast_layout_for(const runtime_layout& a, int d) {
  return per_axis(a, [d](const placement_desc& p) { return broadcast_placement_for(p, d); });
}

template <int Axis, class PA, class PB>
struct broadcast_zip_operand_placement_on_mesh_axis {
  static_assert(!std::is_same_v<PA, PA>,
                "shardcast::broadcast_zip<D>: b's placement does not fit a's on the mesh axis named in "
                "broadcast_zip_operand_placement_on_mesh_axis<Axis, PA, PB>: where a is shard<D> (the dim b is broadcast "
                "along) b must be replicate, and elsewhere b must have a's placement (or one of them partial and the other "
                "replicate, for a functor that commutes with the partial). Redistribute b first: "
                "b2 = redistribute<broadcast_layout_t<typename decltype(a)::layout_type, D>>(b).");
};
template <int Axis, class PA, class PB, class F>
struct elementwise_error<op_rule::broadcast_placement, Axis, PA, PB, F> : broadcast_zip_operand_placement_on_mesh_axis<Axis, PA, PB> {};

}  // namespace detail

/// The layout b needs in broadcast_zip<D>(a, b, f) for a of layout LA: replicate on the
/// axes where LA is shard<D> or partial<max|min|prod>, LA's placement elsewhere (for a
/// partial<sum|avg> LA that suits an f linear in (a, b) jointly; see the file comment).
/// Example: broadcast_layout_t<layout<shard<0>, shard<1>>, 1> is layout<shard<0>, replicate>.
template <class LA, int D>
using broadcast_layout_t = typename detail::layout_from<detail::broadcast_layout_for(LA::desc, D)>::type;

/// The layout of broadcast_zip<D>(a, b, f) for layouts LA and LB: LA, except on the axes
/// where b is partial and a replicate, which are b's partial (an error names the mesh axis
/// when illegal).
/// @tparam TA, TB the element types (they matter only for fn::div, which is not linear on integers)
template <class LA, class LB, int D, class F, class TA = float, class TB = TA>
struct broadcast_zip_layout {
  static_assert(layout_type<LA> && layout_type<LB>, "shardcast::broadcast_zip_layout: LA and LB must be compile-time layouts layout<P...>.");
  static_assert(LA::naxes == LB::naxes,
                "shardcast::broadcast_zip: the operands' layouts have different numbers of mesh axes; both must live on the same mesh.");
  using type =
      typename detail::checked_layout<detail::broadcast_rules(LA::desc, LB::desc, D, detail::props_of<F, TA, TB>()), LA, LB, F>::type;
};
/// Shorthand for broadcast_zip_layout<LA, LB, D, F, TA, TB>::type.
template <class LA, class LB, int D, class F, class TA = float, class TB = TA>
using broadcast_zip_layout_t = typename broadcast_zip_layout<LA, LB, D, F, TA, TB>::type;

namespace detail {

/// broadcast_zip<D> of a and b; GA / GB: the caller gives a / b up. The output may go over
/// a's piece (b, at most as large, cannot hold it); a given-up b is only emptied.
template <int D, bool GA, bool GB, class XA, class XB, class F>
auto broadcast_zip_impl(XA& a, XB& b, F f, typename XA::mesh_type::stream_type s) {
  using TA = typename XA::value_type;
  using TB = typename XB::value_type;
  using LA = typename XA::layout_type;
  using LB = typename XB::layout_type;
  using Mesh = typename XA::mesh_type;
  constexpr int R = XA::rank;
  static_assert(R >= 1 && D >= 0 && D < R, "shardcast::broadcast_zip<D>: D must name a dim of a (0 <= D < rank).");
  static_assert(XB::rank == R, "shardcast::broadcast_zip<D>: b must have a's rank, with extent 1 on dim D (reduce<D, Op, keep_dim> gives that).");
  static_assert(std::is_same_v<typename XB::mesh_type, Mesh>, "shardcast::broadcast_zip<D>: the operands have different mesh types; both must live on the same mesh.");
  constexpr const char* who = "shardcast::broadcast_zip";
  static_assert(check_functor<F, TA, TB>());
  using V = zip_result_t<TA, TB, F>;
  constexpr bool dyn = is_dynamic_v<LA> || is_dynamic_v<LB>;
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>, broadcast_zip_layout<LA, LB, D, F, TA, TB>>::type;
  expect_same_mesh(who, a.mesh(), b.mesh());
  auto want = a.global_extents();
  want[D] = 1;
  if (b.global_extents() != want)
    throw layout_error(std::string(who) + ": a has global extents " + describe_extents(a.global_extents()) + " and b has " +
                       describe_extents(b.global_extents()) + "; b must have a's extents with 1 on dim " + std::to_string(D) + ", " +
                       describe_extents(want) + " (reduce<" + std::to_string(D) + ", Op, keep_dim> gives that)");
  runtime_layout ly;
  if constexpr (dyn) {
    const layout_rule r = broadcast_rules(a.layout(), b.layout(), D, props_of<F, TA, TB>());
    expect_legal(who, r, a.layout(), b.layout());
    ly = r.out;
  } else {
    ly = runtime_layout(LY::desc);
  }
  const box &ba = a.local_box(), &bb = b.local_box();
  bool aligned = bb.off[D] == 0 && bb.ext[D] == 1;
  for (int i = 0; i < R; ++i)
    if (i != D && (ba.off[i] != bb.off[i] || ba.ext[i] != bb.ext[i])) aligned = false;
  SHARDCAST_EXPECTS(aligned, std::string(who) + ": the local pieces of a and b do not line up");
  if constexpr (std::is_same_v<unmarked_t<F>, fn::div_fn>) expect_no_zero_divisor(who, "b (the divisor of fn::div)", b);  // as shardcast::div does
  std::size_t outer = 1, inner = 1;
  for (int i = 0; i < D; ++i) outer *= static_cast<std::size_t>(ba.ext[i]);
  for (int i = D + 1; i < R; ++i) inner *= static_cast<std::size_t>(ba.ext[i]);
  const auto mid = static_cast<std::size_t>(ba.ext[D]);
  const TA* const ain = a.data();
  const TB* const bin = b.data();
  const std::size_t n = a.local_size();
  // Every element of b's piece is read for mid elements of the output: it must not lie in
  // the piece being overwritten.
  auto y = elementwise_output<V, R, LY, GA, false>(a, a, ly, !ranges_overlap(ain, n, bin, b.local_size()), s);
  if (n > 0) elementwise_exec<typename Mesh::memory_space>::zip_broadcast(ain, bin, y.data(), outer, mid, inner, f, s);
  release_given_up<GA>(a);
  release_given_up<GB>(b);
  return y;
}

}  // namespace detail

/// y = f(a, b) elementwise with b broadcast along tensor dim D: y[i0, ..., iD, ...] =
/// f(a[i0, ..., iD, ...], b[i0, ..., 0, ...]). b has a's rank and global extents except
/// extent 1 on D (as `reduce<D, Op, keep_dim>(x)` returns). See the file comment for the
/// layout rule; y has a's layout (or b's partial where a is replicate) and element type
/// zip_result_t<TA, TB, F>.
/// @tparam D the dim of a along which b is broadcast
/// @param a kept or given up: a given-up a is left empty, and y is written over its piece
///        when a owns its storage alone, f returns TA and b's piece does not overlap it
///        (see zip with given-up operands); a given-up b is left empty
/// @param b the broadcast operand
/// @param f functor callable as f(TA, TB); on partial axes it must commute with the partial
///        (see the file comment)
/// @param s stream for device meshes
/// @throws layout_error if the meshes or extents do not fit, or (dynamic layouts) if the
///         layouts are not legal
/// @code
///   // x [t, h]: layout<shard<0>, replicate>; mean [t, 1] = reduce<1, avg, keep_dim>(x): layout<shard<0>, replicate>
///   auto centred = sc::broadcast_zip<1>(x, mean, sc::fn::sub);  // layout<shard<0>, replicate>
/// @endcode
template <int D, class A, class B, class F>
  requires detail::dtensor_operands<A, B>
auto broadcast_zip(A&& a, B&& b, F f, typename std::remove_cvref_t<A>::mesh_type::stream_type s = {}) {
  return detail::broadcast_zip_impl<D, detail::given_v<A>, detail::given_v<B>>(detail::as_operand<A>(a), detail::as_operand<B>(b), f, s);
}

}  // namespace shardcast
