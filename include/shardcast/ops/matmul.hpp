#pragma once
/// @file ops/matmul.hpp
/// `matmul(a, b)`: distributed C = A * B on one mesh, with the batch dims broadcast by rank
/// as in torch.matmul. A is [..., m, k] of rank RA >= 2, B is [..., k, n] of rank RB >= 2,
/// and C is [..., m, n] of rank RC = max(RA, RB). The leading dims of A and B (all but their
/// last two) are right-aligned: C's first RC-2 dims are the batch dims, A holds the last
/// RA-2 of them and B the last RB-2, and an operand that lacks a batch dim is broadcast
/// over it (it reads the same matrix for every index along that dim). So:
///  - B the matrix [k, n]: every dim of A but the last is a row dim, as in a batched
///    projection `[batch, seq, hidden] @ [hidden, out]`;
///  - B of A's rank, [b..., k, n]: a batched product, as attention's per-head `Q K^T`;
///  - 2 < RB < RA: B [h..., k, n] is shared by A's first RA-RB dims, `[x, h, m, k] @ [h, k, n]`;
///  - RA < RB: A is shared by B's first RB-RA dims, `[m, k] @ [b, k, n]` is [b, m, n].
/// A batch dim present in both operands has the same extent in both or, as in
/// torch.matmul, extent 1 in one of them, whose one matrix along it is then stretched over
/// the other's extent (`[1, h, m, k] @ [b, h, k, n]` is [b, h, m, n]). A stretched dim must
/// not be sharded over a mesh axis of more than one rank (layout_error; any other mismatch
/// of extents throws layout_error too).
/// `matmul<gemm_op::n, gemm_op::t>(a, b)` multiplies by B transposed (its last two dims
/// swapped: a matrix stored [n, k], as a PyTorch `Linear` weight), `matmul<gemm_op::t>(a, b)`
/// by A transposed (A stored [..., k, m]); no transposed copy is made: the local GEMM reads
/// the operand transposed.
/// The output layout is computed at compile time, one mesh axis at a time, from the
/// placements of op(A) and op(B) (a transposed operand's shard on one of its last two dims
/// is op's shard on the other). Every dim of op(A) and op(B) but k is a dim of C: op(A)'s
/// dim d < RA-1 (its batch dims and m) is C's dim d+RC-RA, op(B)'s dim d < RB-2 is C's
/// d+RC-RB, and op(B)'s n is C's RC-1. Writing A(c) and B(c) for the operand dim that is C's
/// dim c:
///
/// | op(A) placement | op(B) placement | C placement  | for                                          |
/// |-----------------|-----------------|--------------|----------------------------------------------|
/// | shard<A(c)>     | shard<B(c)>     | shard<c>     | c a batch dim of both operands               |
/// | shard<A(c)>     | replicate       | shard<c>     | c a dim of A only: m, or a batch dim B lacks |
/// | replicate       | shard<B(c)>     | shard<c>     | c a dim of B only: n, or a batch dim A lacks |
/// | shard<RA-1>     | shard<RB-2>     | partial<sum> | the contracted dim k                         |
/// | replicate       | replicate       | replicate    |                                              |
/// | partial<sum>    | replicate       | partial<sum> |                                              |
/// | replicate       | partial<sum>    | partial<sum> |                                              |
///
/// A batch dim of both operands sharded in one only is refused: over several mesh axes the
/// pieces of the two would not nest (a balanced split of a split is not a piece of the
/// other split), and sharding the replicated operand is a local slice. A dim that only one
/// operand has is sharded in that operand with the other replicated, as a row dim is.
///
/// For matrices (RA = RB = 2) this reads (shard<0>, replicate) -> shard<0>, (replicate,
/// shard<1>) -> shard<1> and (shard<1>, shard<0>) -> partial<sum>, plus the last three rows.
/// Any other pair is a compile error naming the mesh axis (in the instantiation of
/// `matmul_illegal_on_mesh_axis<Axis, PA, PB>`, or for a batched or transposed product
/// `matmul_op_illegal_on_mesh_axis<Axis, PA, PB, RankA, RankB, OpA, OpB>`) and the
/// redistribute that fixes it. With a `dynamic_layout` operand the same table is applied at
/// run time: C has a `dynamic_layout`, and an illegal pair throws `layout_error` naming the
/// axis and both placements.
/// No communication happens inside matmul: every rank multiplies its local pieces with a
/// local GEMM (a pluggable functor; the default is a cache-blocked host GEMM). With a
/// matrix B and A not transposed the row dims of A's local piece are contiguous, so that is
/// one [rows, k] GEMM; otherwise it is one GEMM per batch element of C's local piece, of the
/// A and B matrices that element reads.
///
/// @code
///   using row = sc::layout<sc::shard<0>, sc::replicate>;
///   auto c = sc::matmul(a /* row */, b /* layout<replicate, replicate> */);  // c: row
///   // y = x W^T with W stored [out, in], sharded over its rows (column parallel):
///   auto y = sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(x /* [b, s, in], R */, w /* [out, in], S(0) */);  // y: S(2)
///   // attention scores per head: q, k [batch, heads, seq, dh], heads sharded:
///   auto s = sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(q /* S(1) */, k /* S(1) */);  // s [batch, heads, seq, seq]: S(1)
///   // one matrix per head shared by the batch: x [batch, heads, seq, dh] @ w [heads, dh, e]
///   auto z = sc::matmul(x /* S(1) */, w /* S(0) */);  // z [batch, heads, seq, e]: S(1)
/// @endcode

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../placement.hpp"
#include "elementwise.hpp"
#include "gemm.hpp"

namespace shardcast {

namespace detail {
template <class...>
inline constexpr bool dependent_false = false;

/// Instantiated for an illegal (A, B) placement pair on mesh axis `Axis` of a product of
/// two matrices as stored; the compiler prints this name with the axis and both placements
/// before the message.
template <int Axis, class PA, class PB>
struct matmul_illegal_on_mesh_axis {
  static_assert(dependent_false<PA, PB>,
                "shardcast::matmul: illegal (A, B) placement pair on the mesh axis named in matmul_illegal_on_mesh_axis<Axis, PA, PB>. "
                "Legal pairs on each axis (A, B) -> C: (shard<0>, replicate) -> shard<0>; (replicate, shard<1>) -> shard<1>; "
                "(shard<1>, shard<0>) -> partial<sum>; (replicate, replicate) -> replicate; (partial<sum>, replicate) -> partial<sum>; "
                "(replicate, partial<sum>) -> partial<sum>. Redistribute A or B first, e.g. "
                "b2 = redistribute<layout<...replicate on that axis...>>(b), so the pair on that axis is one of these.");
  using type = replicate;
};

/// The same for a batched (A or B of rank > 2) or transposed product: PA and PB are the
/// placements as stored, RankA and RankB the operands' ranks, OpA and OpB whether each
/// operand is read transposed.
template <int Axis, class PA, class PB, int RankA, int RankB, gemm_op OpA, gemm_op OpB>
struct matmul_op_illegal_on_mesh_axis {
  static_assert(dependent_false<PA, PB>,
                "shardcast::matmul: illegal (A, B) placement pair on the mesh axis named in matmul_op_illegal_on_mesh_axis<Axis, PA, PB, "
                "RankA, RankB, OpA, OpB>. The table applies to op(A) [..., m, k] of rank RankA and op(B) [..., k, n] of rank RankB, "
                "where a transposed operand (gemm_op::t) has the shards of its last two dims swapped; C has rank RC = max(RankA, "
                "RankB), and the leading dims of op(A) and op(B) are right-aligned with C's first RC-2 (op(A)'s dim d < RankA-1 is "
                "C's dim d+RC-RankA, op(B)'s dim d < RankB-2 is C's d+RC-RankB, op(B)'s n is C's RC-1). Legal pairs on each axis "
                "(op(A), op(B)) -> C, for C's dim c: (shard<A's dim of c>, shard<B's dim of c>) -> shard<c> for a batch dim of both "
                "operands; (shard<A's dim of c>, replicate) -> shard<c> for a dim of A only (m, or a batch dim that B lacks); "
                "(replicate, shard<B's dim of c>) -> shard<c> for a dim of B only (n, or a batch dim that A lacks); (shard<RankA-1>, "
                "shard<RankB-2>) -> partial<sum>; (replicate, replicate) -> replicate; (partial<sum>, replicate) -> partial<sum>; "
                "(replicate, partial<sum>) -> partial<sum>. Redistribute A or B first so the pair on that axis is one of these.");
  using type = replicate;
};

/// Dim d of op(X) as a dim of X as stored, X of rank `r` (and the reverse: the map is its
/// own inverse): a transposed operand swaps its last two dims.
constexpr int operand_dim(int d, int r, gemm_op o) {
  return o == gemm_op::n || d < r - 2 ? d : (d == r - 1 ? r - 2 : r - 1);
}
/// The placement of op(X) for X's placement `p` as stored, X of rank `r`.
constexpr placement_desc operand_placement(const placement_desc& p, int r, gemm_op o) {
  return p.is_shard() ? placement_desc::make_shard(operand_dim(p.dim, r, o)) : p;
}

/// How the dims of op(A) [..., m, k] of rank `ra` and op(B) [..., k, n] of rank `rb` map to
/// C's: C has rank rc = max(ra, rb), and the leading dims of the operands are right-aligned
/// with C's batch dims (torch.matmul's broadcasting by rank).
struct matmul_dims {
  int ra, rb, rc, lead_a, lead_b;  // lead_x: C's dims before op(X)'s first (the dims X is broadcast over)
  constexpr matmul_dims(int a, int b) : ra(a), rb(b), rc(a > b ? a : b), lead_a(rc - a), lead_b(rc - b) {}
  /// op(A)'s dim of C's dim c < rc-1 (a batch dim or m), or -1 when A lacks it.
  constexpr int a_dim(int c) const { return c >= lead_a && c < rc - 1 ? c - lead_a : -1; }
  /// op(B)'s dim of C's dim c (a batch dim or n), or -1 when B lacks it.
  constexpr int b_dim(int c) const { return c == rc - 1 ? rb - 1 : (c >= lead_b && c < rc - 2 ? c - lead_b : -1); }
};

/// matmul on one mesh axis: C's placement for A placement `pa` and B placement `pb` (as
/// stored), with A of rank `ra`, B of rank `rb` and the operands read as `oa`/`ob`, or
/// op_rule::matmul_pair when the pair is not in the table above. One source for the
/// compile-time layouts (matmul_rule) and the run-time checks of dynamic_layout operands.
constexpr axis_rule matmul_axis_rule(const placement_desc& pa, const placement_desc& pb, int ra = 2, int rb = 2,
                                     gemm_op oa = gemm_op::n, gemm_op ob = gemm_op::n) {
  const placement_desc sum_partial = placement_desc::make_partial(reduce_op::sum);
  const placement_desc a = operand_placement(pa, ra, oa), b = operand_placement(pb, rb, ob);
  const matmul_dims m(ra, rb);
  // A shard of one of C's dims c: in both operands alike when both have c, else in the one
  // that has it with the other replicated.
  for (int c = 0; c < m.rc; ++c) {
    const int da = m.a_dim(c), db = m.b_dim(c);
    const bool in_a = da >= 0 && a.is_shard(da), in_b = db >= 0 && b.is_shard(db);
    if (da >= 0 && db >= 0 ? in_a && in_b : da >= 0 ? in_a && b.is_replicate() : in_b && a.is_replicate())
      return {op_rule::ok, placement_desc::make_shard(c)};
  }
  if (a.is_shard(ra - 1) && b.is_shard(rb - 2)) return {op_rule::ok, sum_partial};
  if (a.is_replicate() && b.is_replicate()) return {op_rule::ok, a};
  if (a == sum_partial && b.is_replicate()) return {op_rule::ok, a};
  if (a.is_replicate() && b == sum_partial) return {op_rule::ok, b};
  return {op_rule::matmul_pair, pa};
}

/// matmul's verdict on whole layouts: C's layout, or the first axis whose pair is illegal.
constexpr layout_rule matmul_rules(const runtime_layout& a, const runtime_layout& b, int ra = 2, int rb = 2, gemm_op oa = gemm_op::n,
                                   gemm_op ob = gemm_op::n) {
  return fold_axes(a.naxes, [&](int i) { return matmul_axis_rule(a[i], b[i], ra, rb, oa, ob); });
}

/// Per-axis rule: `type` is C's placement on mesh axis `Axis` for A placement PA and B
/// placement PB (matmul_axis_rule), or the error struct's when the pair is illegal.
template <int Axis, class PA, class PB, int RA = 2, int RB = 2, gemm_op OA = gemm_op::n, gemm_op OB = gemm_op::n>
struct matmul_rule {
  static constexpr axis_rule r = matmul_axis_rule(PA::desc, PB::desc, RA, RB, OA, OB);
  using error = std::conditional_t<RA == 2 && RB == 2 && OA == gemm_op::n && OB == gemm_op::n, matmul_illegal_on_mesh_axis<Axis, PA, PB>,
                                   matmul_op_illegal_on_mesh_axis<Axis, PA, PB, RA, RB, OA, OB>>;
  using type = typename std::conditional_t<r.err == op_rule::ok, placement_from_impl<r.out.kind, r.out.dim, r.out.op>, error>::type;
};

template <class LA, class LB, int RA, int RB, gemm_op OA, gemm_op OB, class Seq>
struct matmul_layout_impl;
template <class... PA, class... PB, int RA, int RB, gemm_op OA, gemm_op OB, int... I>
struct matmul_layout_impl<layout<PA...>, layout<PB...>, RA, RB, OA, OB, std::integer_sequence<int, I...>> {
  using type = layout<typename matmul_rule<I, PA, PB, RA, RB, OA, OB>::type...>;
};

/// The legal (A, B) -> C pairs of the table above in terms of the stored placements, for
/// the run-time message.
inline std::string matmul_pairs_text(int ra, int rb, gemm_op oa, gemm_op ob) {
  std::string t;  // appended piece by piece (GCC 12 warns falsely on "(" + std::string at -O3)
  // (A, B) -> C with each placement a shard dim, or R (-1) or P(sum) (-2).
  const auto pair = [&t](int a, int b, int c) {
    const char* sep[3] = {"(", ", ", ") -> "};
    const int d[3] = {a, b, c};
    for (int i = 0; i < 3; ++i) {
      t.append(sep[i]);
      if (d[i] >= 0) t.append("S(").append(std::to_string(d[i])).append(")");
      else t.append(d[i] == -1 ? "R" : "P(sum)");
    }
    t.append(", ");
  };
  // C's dims in order (the batch dims, m, n), then k.
  const matmul_dims m(ra, rb);
  for (int c = 0; c < m.rc; ++c) {
    const int da = m.a_dim(c), db = m.b_dim(c);
    pair(da >= 0 ? operand_dim(da, ra, oa) : -1, db >= 0 ? operand_dim(db, rb, ob) : -1, c);
  }
  pair(operand_dim(ra - 1, ra, oa), operand_dim(rb - 2, rb, ob), -2);
  return t.append("(R, R) -> R, (P(sum), R) -> P(sum) and (R, P(sum)) -> P(sum)");
}

/// Throws layout_error describing `r` unless it is ok (the pairs listed for these ranks and
/// transpositions).
inline void expect_matmul_legal(const char* who, const layout_rule& r, const runtime_layout& a, const runtime_layout& b, int ra, int rb,
                                gemm_op oa, gemm_op ob) {
  if (r.err == op_rule::ok) return;
  if (ra == 2 && rb == 2 && oa == gemm_op::n && ob == gemm_op::n) expect_legal(who, r, a, b);
  throw layout_error(std::string(who) + ": layouts \"" + to_string(a) + "\" and \"" + to_string(b) + "\": on mesh axis " +
                     std::to_string(r.axis) + " A is " + to_string(a[r.axis]) + " and B is " + to_string(b[r.axis]) + " (as stored" +
                     (oa == gemm_op::t ? ", A read transposed" : "") + (ob == gemm_op::t ? ", B read transposed" : "") +
                     "), which matmul does not take; the legal (A, B) -> C pairs on each axis are " + matmul_pairs_text(ra, rb, oa, ob) +
                     ", so redistribute A or B first (e.g. to R on that axis" +
                     (ra > 2 && rb > 2 ? "; a batch dim of both sharded in one operand only: shard the other alike, a local slice" : "") + ")");
}

/// The box of op(X) for X's box as stored: a transposed operand swaps its last two dims.
inline box operand_box(box b, gemm_op o) {
  if (o == gemm_op::t) {
    std::swap(b.off[b.rank - 2], b.off[b.rank - 1]);
    std::swap(b.ext[b.rank - 2], b.ext[b.rank - 1]);
  }
  return b;
}
/// The extents of op(X) for X's as stored.
template <std::size_t R>
std::array<std::int64_t, R> operand_extents(std::array<std::int64_t, R> e, gemm_op o) {
  if (o == gemm_op::t) std::swap(e[R - 2], e[R - 1]);
  return e;
}
/// Whether G (a reference type) is callable as a GEMM of T in the plain form
/// g(m, n, k, a, lda, b, ldb, c, ldc), in the transposed form g(ta, tb, m, n, k, a, lda, b,
/// ldb, c, ldc, accumulate) (ops/gemm.hpp), or in either.
template <class T, class G>
inline constexpr bool gemm_plain_v =
    std::is_invocable_v<G, std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t, const T*, std::int64_t, T*, std::int64_t>;
template <class T, class G>
inline constexpr bool gemm_transposed_v = std::is_invocable_v<G, gemm_op, gemm_op, std::int64_t, std::int64_t, std::int64_t, const T*,
                                                              std::int64_t, const T*, std::int64_t, T*, std::int64_t, bool>;
template <class T, class G>
inline constexpr bool gemm_callable_v = gemm_plain_v<T, G> || gemm_transposed_v<T, G>;
/// Whether G also takes a strided batch, g(ta, tb, m, n, k, a, lda, stride_a, b, ldb,
/// stride_b, c, ldc, stride_c, batch, accumulate) (ops/gemm.hpp).
template <class T, class G>
inline constexpr bool gemm_strided_batched_v =
    std::is_invocable_v<G, gemm_op, gemm_op, std::int64_t, std::int64_t, std::int64_t, const T*, std::int64_t, std::int64_t, const T*,
                        std::int64_t, std::int64_t, T*, std::int64_t, std::int64_t, std::int64_t, bool>;

/// The GEMM functor matmul calls: `g` itself (a reference), or a copy of a const one
/// whose call operator is not const (as when matmul took its functor by value).
template <class T, class Gemm>
decltype(auto) callable_gemm(Gemm&& g) {
  using G = std::remove_reference_t<Gemm>;
  using M = std::remove_const_t<G>;
  if constexpr (std::is_const_v<G> && !gemm_callable_v<T, G&> && gemm_callable_v<T, M&> && std::is_copy_constructible_v<M>)
    return M(g);
  else
    return std::forward<Gemm>(g);
}
}  // namespace detail

/// The layout of matmul(A, B) for A of layout LA and rank RankA, B of layout LB and rank
/// RankB (both >= 2; the result has rank max(RankA, RankB)), the operands read as OpA and
/// OpB (gemm_op::t: transposed).
template <class LA, class LB, int RankA = 2, int RankB = 2, gemm_op OpA = gemm_op::n, gemm_op OpB = gemm_op::n>
struct matmul_layout {
  static_assert(layout_type<LA> && layout_type<LB>,
                "shardcast::matmul_layout: both layouts must be compile-time layouts (layout<P...>); with a dynamic_layout operand "
                "matmul returns a dynamic_layout tensor (matmul_result_layout_t)");
  static_assert(LA::naxes == LB::naxes, "shardcast::matmul: A and B must live on the same mesh (same number of axes).");
  using type = typename detail::matmul_layout_impl<LA, LB, RankA, RankB, OpA, OpB, std::make_integer_sequence<int, LA::naxes>>::type;
};
/// Shorthand for matmul_layout<LA, LB, RankA, RankB, OpA, OpB>::type.
template <class LA, class LB, int RankA = 2, int RankB = 2, gemm_op OpA = gemm_op::n, gemm_op OpB = gemm_op::n>
using matmul_layout_t = typename matmul_layout<LA, LB, RankA, RankB, OpA, OpB>::type;

/// The layout type of matmul's result: matmul_layout_t<LA, LB, RankA, RankB, OpA, OpB> for
/// two compile-time layouts, dynamic_layout when either operand has a dynamic_layout (its
/// layout value is then checked and computed at run time, with the same rules).
template <class LA, class LB, int RankA = 2, int RankB = 2, gemm_op OpA = gemm_op::n, gemm_op OpB = gemm_op::n>
struct matmul_result_layout : std::conditional_t<detail::is_dynamic_v<LA> || detail::is_dynamic_v<LB>, std::type_identity<dynamic_layout>,
                                                 matmul_layout<LA, LB, RankA, RankB, OpA, OpB>> {};
template <class LA, class LB, int RankA = 2, int RankB = 2, gemm_op OpA = gemm_op::n, gemm_op OpB = gemm_op::n>
using matmul_result_layout_t = typename matmul_result_layout<LA, LB, RankA, RankB, OpA, OpB>::type;

/// C = op(A) * op(B) (see the file comment): OpA/OpB = gemm_op::t reads that operand
/// transposed (its last two dims swapped). A is [..., m, k] (rank RA >= 2), B is [..., k, n]
/// (rank RB >= 2), both on the same mesh; C is [..., m, n] of rank max(RA, RB), the leading
/// dims right-aligned and an operand broadcast over the batch dims it lacks or has with
/// extent 1. No communication.
/// Either operand may have a dynamic_layout; C then has one too, and an illegal pair of
/// layouts throws instead of failing to compile.
/// @param gemm local GEMM functor (ops/gemm.hpp), taken by reference: a move-only or stateful
///        one is called as it is (a const one whose call operator is not const is copied);
///        the default is a host_gemm. Called as gemm(m, n, k, a, lda, b, ldb,
///        c, ldc) when neither operand is transposed and that form exists, else as
///        gemm(OpA, OpB, m, n, k, a, lda, b, ldb, c, ldc, false), once for A's flattened rows
///        (a matrix B, A not transposed) or once per batch element of C's local piece; a
///        functor with the strided-batch form (ops/gemm.hpp) is called that way instead for
///        a batched or broadcast product: once, or (an operand with some of C's batch dims
///        but not all, or one that stretches a dim) once per run of C's batch elements over
///        which both operands' matrices are evenly spaced;
///        row-major pointers in the mesh's memory space, lda/ldb the row strides as stored;
///        it must overwrite c.
///        Device backends pass their own (e.g. a cuBLAS wrapper).
/// @param s stream C is allocated on (device meshes; the GEMM functor carries its own stream)
/// @throws layout_error if the operands live on different meshes, if the inner extents or
///         the extents of a batch dim of both differ and neither is 1, if a stretched batch
///         dim (extent 1 in one operand) is sharded over a mesh axis of more than one rank, or
///         (dynamic layouts) if the pair of placements on some mesh axis is not in the table
///         above (the message names the axis and both placements)
template <gemm_op OpA, gemm_op OpB = gemm_op::n, class TA, class TB, int RA, int RB, class LA, class LB, class Mesh, class Gemm = host_gemm>
  requires(RA >= 2 && RB >= 2 && !std::is_same_v<std::remove_cvref_t<Gemm>, typename Mesh::stream_type>)
dtensor<std::remove_const_t<TA>, std::max(RA, RB), matmul_result_layout_t<LA, LB, RA, RB, OpA, OpB>, Mesh> matmul(const dtensor<TA, RA, LA, Mesh>& a,
                                                                                                                  const dtensor<TB, RB, LB, Mesh>& b,
                                                                                                                  Gemm&& gemm = Gemm{},
                                                                                                                  typename Mesh::stream_type s = {}) {
  using T = std::remove_const_t<TA>;
  static_assert(detail::same_elements_v<TA, TB>,
                "shardcast::matmul: A and B have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
  using LC = matmul_result_layout_t<LA, LB, RA, RB, OpA, OpB>;
  constexpr const char* who = "shardcast::matmul";
  constexpr bool plain = OpA == gemm_op::n && OpB == gemm_op::n;
  auto&& g = detail::callable_gemm<T>(std::forward<Gemm>(gemm));
  using G = decltype(g);
  constexpr bool nine = detail::gemm_plain_v<T, G&>, twelve = detail::gemm_transposed_v<T, G&>;
  static_assert(twelve || (plain && nine),
                "shardcast::matmul: the GEMM functor must be callable as gemm(m, n, k, a, lda, b, ldb, c, ldc) or, for a transposed "
                "operand, as gemm(op_a, op_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate) (see shardcast/ops/gemm.hpp)");
  if constexpr (std::is_same_v<std::remove_cvref_t<Gemm>, host_gemm>)
    static_assert(std::is_same_v<typename Mesh::memory_space, host_memory>,
                  "shardcast::matmul: the default GEMM runs on the host; pass a device GEMM functor as the third argument.");
  detail::expect_same_mesh(who, a.mesh(), b.mesh(), "A", "B");
  // Two declarations: the arrays differ in length when RA != RB (one `auto` for both is
  // ill-formed; GCC accepts it in a template, nvcc does not).
  const auto ea = detail::operand_extents(a.global_extents(), OpA);
  const auto eb = detail::operand_extents(b.global_extents(), OpB);
  constexpr int RC = std::max(RA, RB), kd = RA - 1;  // C's rank, A's contracted dim
  constexpr detail::matmul_dims dims(RA, RB);
  // The batch dims of both operands: C's dims from the later of the two operands' first.
  constexpr int shared_from = std::max(dims.lead_a, dims.lead_b);
  // A shared batch dim has one extent in both, or 1 in one of them: that operand's one
  // matrix along it is stretched over the other's extent, as in torch.matmul.
  const auto stretched = [&](int c) { return ea[dims.a_dim(c)] != eb[dims.b_dim(c)]; };
  // op(A)'s (op(B)'s) dim that is C's dim c as a dim of its own, or -1: -1 where the operand
  // lacks the dim, or is the one of extent 1 along a stretched batch dim (it reads its one
  // index for all of C's).
  const auto a_own = [&](int c) {
    const int da = dims.a_dim(c);
    return da >= 0 && !(c >= shared_from && c < RC - 2 && stretched(c) && ea[da] == 1) ? da : -1;
  };
  const auto b_own = [&](int c) {
    const int db = dims.b_dim(c);
    return db >= 0 && !(c >= shared_from && c < RC - 2 && stretched(c) && eb[db] == 1) ? db : -1;
  };
  bool fits = ea[kd] == eb[RB - 2];
  for (int c = shared_from; c < RC - 2; ++c) fits = fits && (!stretched(c) || ea[dims.a_dim(c)] == 1 || eb[dims.b_dim(c)] == 1);
  if (!fits) {
    // Only the conditions that fail: the contracted extents, then each shared batch dim.
    const std::string sa = detail::describe_extents(a.global_extents()), sb = detail::describe_extents(b.global_extents());
    std::string why;
    if (ea[kd] != eb[RB - 2])
      why = "op(A)'s last extent (" + std::to_string(ea[kd]) + ") differs from op(B)'s rows (" + std::to_string(eb[RB - 2]) + ")";
    for (int c = shared_from; c < RC - 2; ++c)
      if (stretched(c) && ea[dims.a_dim(c)] != 1 && eb[dims.b_dim(c)] != 1)
        why += (why.empty() ? "" : "; ") + std::string("the batch dim they share as C's dim ") + std::to_string(c) + " (A's dim " +
               std::to_string(dims.a_dim(c)) + ", B's dim " + std::to_string(dims.b_dim(c)) + ", aligned from the right) is " +
               std::to_string(ea[dims.a_dim(c)]) + " in A and " + std::to_string(eb[dims.b_dim(c)]) +
               " in B (shared batch dims need equal extents, or 1 in one operand)";
    throw layout_error(std::string(who) + ": A is " + sa + (OpA == gemm_op::t ? " (read transposed)" : "") + " but B is " + sb +
                       (OpB == gemm_op::t ? " (read transposed)" : "") + ": " + why);
  }
  runtime_layout lc{};
  if constexpr (std::is_same_v<LC, dynamic_layout>) {
    const detail::layout_rule r = detail::matmul_rules(a.layout(), b.layout(), RA, RB, OpA, OpB);
    detail::expect_matmul_legal(who, r, a.layout(), b.layout(), RA, RB, OpA, OpB);
    lc = r.out;
  }
  // A stretched dim must lie whole on every rank: sharded over a mesh axis of more than one
  // rank, the operand's one index would be on one rank while C's indices are spread over all.
  // (A batch dim of both is sharded in both or in neither, so one check covers both.)
  for (int c = shared_from; c < RC - 2; ++c) {
    if (!stretched(c)) continue;
    const runtime_layout la = a.layout(), lb = b.layout();
    for (int x = 0; x < Mesh::naxes; ++x) {
      const bool in_a = la[x].is_shard() && la[x].dim == dims.a_dim(c), in_b = lb[x].is_shard() && lb[x].dim == dims.b_dim(c);
      if (a.mesh().size(x) > 1 && (in_a || in_b))
        throw layout_error(std::string(who) + ": the batch dim C's dim " + std::to_string(c) + " has extent " +
                           std::to_string(ea[dims.a_dim(c)]) + " in A and " + std::to_string(eb[dims.b_dim(c)]) +
                           " in B, so the operand of extent 1 is stretched over it, but mesh axis " + std::to_string(x) + " shards it (A " +
                           to_string(la) + ", B " + to_string(lb) + "); a stretched dim cannot be sharded: replicate it in both operands");
    }
  }
  std::array<std::int64_t, static_cast<std::size_t>(RC)> ec{};
  for (int c = 0; c < RC - 1; ++c) {
    const int da = a_own(c), db = dims.b_dim(c);  // (C's dims before n are A's or B's: one of them is >= 0)
    ec[c] = da >= 0 ? ea[da] : db >= 0 ? eb[db] : 0;
  }
  ec[RC - 1] = eb[RB - 1];
  auto c = detail::make_output<T, RC, LC>(a.mesh(), ec, lc, s);
  const box ba = detail::operand_box(a.local_box(), OpA), bb = detail::operand_box(b.local_box(), OpB);
  const box& bc = c.local_box();
  // Each of C's dims has the placement of the operand dims it comes from (the same balanced
  // split over the same axes), so the boxes line up; checked for safety.
  bool lined_up = ba.off[kd] == bb.off[RB - 2] && ba.ext[kd] == bb.ext[RB - 2];
  for (int d = 0; d < RC; ++d) {  // (a stretched operand holds its whole extent 1)
    const int da = a_own(d), db = b_own(d);
    if (da >= 0) lined_up = lined_up && ba.off[da] == bc.off[d] && ba.ext[da] == bc.ext[d];
    if (db >= 0) lined_up = lined_up && bb.off[db] == bc.off[d] && bb.ext[db] == bc.ext[d];
  }
  SHARDCAST_EXPECTS(lined_up, "shardcast::matmul: local pieces of A and B do not line up (meshes differ?)");
  if (c.local_size() == 0) return c;
  // Row strides as stored, at least 1, so a BLAS accepts an empty piece of the contracted dim
  // (k = 0 on this rank, C not empty): BLAS requires lda >= max(1, its column count).
  const std::int64_t lda = std::max<std::int64_t>(1, a.local_box().ext[RA - 1]), ldb = std::max<std::int64_t>(1, b.local_box().ext[RB - 1]);
  const std::int64_t n = bc.ext[RC - 1], k = ba.ext[kd];
  const auto call = [&](std::int64_t m, const T* pa, const T* pb, T* pc) {
    if constexpr (plain && nine)
      g(m, n, k, pa, lda, pb, ldb, pc, n);
    else
      g(OpA, OpB, m, n, k, pa, lda, pb, ldb, pc, n, false);
  };
  if constexpr (RB == 2 && OpA == gemm_op::n) {
    std::int64_t rows = 1;  // A's local row dims, flattened: they are contiguous in its piece
    for (int d = 0; d < kd; ++d) rows *= ba.ext[d];
    call(rows, a.data(), b.data(), c.data());
  } else {
    // One GEMM per batch element of C's piece, or strided batches. Per batch dim of C, each
    // operand steps by a number of its own matrices (row-major over its local batch
    // extents), or by 0 where it lacks the dim or stretches it: it reads the same matrix
    // for every index along that dim.
    constexpr int NB = RC - 2 > 0 ? RC - 2 : 1;
    std::int64_t ext[NB]{}, step_a[NB]{}, step_b[NB]{};
    std::int64_t batches = 1;
    std::int64_t na = 1, nb = 1;  // the operands' matrices in the local batch dims after d
    for (int d = RC - 3; d >= 0; --d) {
      ext[d] = bc.ext[d];
      batches *= ext[d];
      const int da = a_own(d), db = b_own(d);
      if (da >= 0) step_a[d] = na, na *= ba.ext[da];
      if (db >= 0) step_b[d] = nb, nb *= bb.ext[db];
    }
    const std::int64_t m = bc.ext[RC - 2], per_a = m * k, per_b = k * n, per_c = m * n;
    // The matrices of A and B that C's batch element i (row-major over C's local batch
    // extents) reads, as offsets in elements.
    const auto offsets = [&](std::int64_t i, std::int64_t& oa, std::int64_t& ob) {
      oa = ob = 0;
      for (int d = RC - 3; d >= 0; --d) {
        const std::int64_t j = i % ext[d];
        i /= ext[d];
        oa += j * step_a[d];
        ob += j * step_b[d];
      }
      oa *= per_a;
      ob *= per_b;
    };
    if constexpr (detail::gemm_strided_batched_v<T, G&>) {
      // Strided batches: a run is C's innermost batch dims over which both operands step
      // evenly (one matrix, or 0 for a repeated one): an operand with all of C's batch dims
      // covers them all, one with some of them (e.g. [heads, m, k] against C's [batch,
      // heads, m, n]) or stretching one only those inside it. Dims of local extent 1 do not
      // break a run.
      std::int64_t run = 1, sa = -1, sb = 0;
      for (int d = RC - 3; d >= 0; --d) {
        if (ext[d] == 1) continue;
        if (sa < 0) {
          sa = step_a[d], sb = step_b[d], run = ext[d];
          continue;
        }
        if (step_a[d] != sa * run || step_b[d] != sb * run) break;
        run *= ext[d];
      }
      const std::int64_t stride_a = sa > 0 ? sa * per_a : 0, stride_b = sb * per_b;
      for (std::int64_t i = 0; i < batches; i += run) {
        std::int64_t oa, ob;
        offsets(i, oa, ob);
        g(OpA, OpB, m, n, k, a.data() + oa, lda, stride_a, b.data() + ob, ldb, stride_b, c.data() + i * per_c, n, per_c, run, false);
      }
    } else {
      for (std::int64_t i = 0; i < batches; ++i) {
        std::int64_t oa, ob;
        offsets(i, oa, ob);
        call(m, a.data() + oa, b.data() + ob, c.data() + i * per_c);
      }
    }
  }
  return c;
}

/// C = A * B: matmul<gemm_op::n, gemm_op::n>(a, b, gemm, s) (see above).
template <class TA, class TB, int RA, int RB, class LA, class LB, class Mesh, class Gemm = host_gemm>
  requires(RA >= 2 && RB >= 2 && !std::is_same_v<std::remove_cvref_t<Gemm>, typename Mesh::stream_type>)
dtensor<std::remove_const_t<TA>, std::max(RA, RB), matmul_result_layout_t<LA, LB, RA, RB>, Mesh> matmul(const dtensor<TA, RA, LA, Mesh>& a,
                                                                                                        const dtensor<TB, RB, LB, Mesh>& b, Gemm&& gemm = Gemm{},
                                                                                                        typename Mesh::stream_type s = {}) {
  return matmul<gemm_op::n, gemm_op::n>(a, b, std::forward<Gemm>(gemm), s);
}

/// Operands of the wrong ranks: a compile-time message.
template <class TA, int RA, class LA, class TB, int RB, class LB, class Mesh, class... Rest>
  requires(RA < 2 || RB < 2)
void matmul(const dtensor<TA, RA, LA, Mesh>&, const dtensor<TB, RB, LB, Mesh>&, Rest&&...) {
  static_assert(RA >= 2 && RB >= 2,
                "shardcast::matmul: A and B must each have rank 2 or more (A [..., m, k], B [..., k, n], the leading dims broadcast "
                "by rank as in torch.matmul); a vector is a [1, n] or [n, 1] matrix.");
}
/// The same for the transposed forms (the message above).
template <gemm_op OpA, gemm_op OpB = gemm_op::n, class TA, int RA, class LA, class TB, int RB, class LB, class Mesh, class... Rest>
  requires(RA < 2 || RB < 2)
void matmul(const dtensor<TA, RA, LA, Mesh>& a, const dtensor<TB, RB, LB, Mesh>& b, Rest&&...) {
  matmul(a, b);
}

namespace detail {
/// The local GEMM of `matmul(a, b, stream)` per memory space: `static G make(stream)`.
/// The device one (cuBLAS) is defined by <shardcast/cuda/gemm.hpp>.
template <class Space>
struct default_gemm;
}  // namespace detail

/// Device meshes: C = op(A) * op(B) with the default device GEMM (cuBLAS on `stream`;
/// include <shardcast/cuda/gemm.hpp> and link CUDA::cublas). C is allocated on `stream`.
/// @throws layout_error if the inner extents differ; cuda_error if cuBLAS fails
template <gemm_op OpA, gemm_op OpB = gemm_op::n, class TA, class TB, int RA, int RB, class LA, class LB, class Mesh>
  requires(RA >= 2 && RB >= 2 && !std::is_same_v<typename Mesh::memory_space, host_memory>)
dtensor<std::remove_const_t<TA>, std::max(RA, RB), matmul_result_layout_t<LA, LB, RA, RB, OpA, OpB>, Mesh> matmul(const dtensor<TA, RA, LA, Mesh>& a,
                                                                                                                  const dtensor<TB, RB, LB, Mesh>& b,
                                                                                                                  typename Mesh::stream_type stream) {
  using space = typename Mesh::memory_space;
  static_assert(requires { detail::default_gemm<space>::make(std::declval<typename Mesh::stream_type>()); },
                "shardcast::matmul(a, b, stream): no default GEMM for this memory space; include <shardcast/cuda/gemm.hpp> "
                "(cuBLAS) for device meshes, or pass a GEMM functor: matmul(a, b, gemm, stream).");
  return matmul<OpA, OpB>(a, b, detail::default_gemm<space>::make(stream), stream);
}
/// Device meshes: C = A * B with the default device GEMM (see above).
template <class TA, class TB, int RA, int RB, class LA, class LB, class Mesh>
  requires(RA >= 2 && RB >= 2 && !std::is_same_v<typename Mesh::memory_space, host_memory>)
dtensor<std::remove_const_t<TA>, std::max(RA, RB), matmul_result_layout_t<LA, LB, RA, RB>, Mesh> matmul(const dtensor<TA, RA, LA, Mesh>& a,
                                                                                                        const dtensor<TB, RB, LB, Mesh>& b,
                                                                                                        typename Mesh::stream_type stream) {
  return matmul<gemm_op::n, gemm_op::n>(a, b, stream);
}

}  // namespace shardcast
