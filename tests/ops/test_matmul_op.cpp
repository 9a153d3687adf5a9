// matmul of a batched A ([..., m, k] @ [k, n]), of two batched operands ([b..., m, k] @
// [b..., k, n]) and of transposed operands (matmul<gemm_op::t / n, gemm_op::t / n>): the
// per-axis rule on op(A) and op(B), checked against the test's own table, and
// differential tests against a single-rank global computation on the explicitly
// transposed operands, on uneven shards, empty pieces, partial terms that differ from rank
// to rank, static and dynamic layouts.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <random>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;

namespace {
using optest::ints;
using optest::ref_gemm;
using optest::transposed;
using pd = sc::placement_desc;
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using S2 = sc::shard<2>;
using S3 = sc::shard<3>;
using P = sc::partial<sc::sum>;
constexpr auto N = sc::gemm_op::n;
constexpr auto T = sc::gemm_op::t;

// ---------------------------------------------------------------------------------------
// Compile-time layouts (from the table in docs/02_operators.md).
// ---------------------------------------------------------------------------------------
template <class LA, class LB, int RA, int RB, sc::gemm_op OA, sc::gemm_op OB, class LC>
constexpr bool gives = std::is_same_v<sc::matmul_layout_t<LA, LB, RA, RB, OA, OB>, LC>;
// Batched A [b, m, k]: batch and row shards carry over, B's column shard lands on C's last dim.
static_assert(gives<sc::layout<S0>, sc::layout<R>, 3, 2, N, N, sc::layout<S0>>);
static_assert(gives<sc::layout<S1>, sc::layout<R>, 3, 2, N, N, sc::layout<S1>>);
static_assert(gives<sc::layout<R>, sc::layout<S1>, 3, 2, N, N, sc::layout<S2>>);
static_assert(gives<sc::layout<S2>, sc::layout<S0>, 3, 2, N, N, sc::layout<P>>);
static_assert(gives<sc::layout<S0, S2, R>, sc::layout<R, S0, S1>, 3, 2, N, N, sc::layout<S0, P, S2>>);
static_assert(gives<sc::layout<S2, S1, P>, sc::layout<R, R, R>, 4, 2, N, N, sc::layout<S2, S1, P>>);
static_assert(gives<sc::layout<R, S3>, sc::layout<P, S0>, 4, 2, N, N, sc::layout<P, P>>);
// B read transposed (stored [n, k]): its shard<0> is op(B)'s column shard, shard<1> the contracted one.
static_assert(gives<sc::layout<R>, sc::layout<S0>, 2, 2, N, T, sc::layout<S1>>);
static_assert(gives<sc::layout<S1>, sc::layout<S1>, 2, 2, N, T, sc::layout<P>>);
static_assert(gives<sc::layout<R>, sc::layout<S0>, 3, 2, N, T, sc::layout<S2>>);
static_assert(gives<sc::layout<S2, S0>, sc::layout<S1, R>, 3, 2, N, T, sc::layout<P, S0>>);
// A read transposed (stored [k, m]): its shard<1> is op(A)'s row shard, shard<0> the contracted one.
static_assert(gives<sc::layout<S1>, sc::layout<R>, 2, 2, T, N, sc::layout<S0>>);
static_assert(gives<sc::layout<S0>, sc::layout<S0>, 2, 2, T, N, sc::layout<P>>);
static_assert(gives<sc::layout<S0, R>, sc::layout<S1, S0>, 2, 2, T, T, sc::layout<P, S1>>);
// Two batched operands [b, h, m, k] @ [b, h, k, n]: a batch dim is sharded in both alike.
static_assert(gives<sc::layout<S1>, sc::layout<S1>, 4, 4, N, N, sc::layout<S1>>);
static_assert(gives<sc::layout<S0, R>, sc::layout<S0, S3>, 4, 4, N, N, sc::layout<S0, S3>>);
// A batch dim sharded in one operand only is refused (the pieces would not nest over several axes).
static_assert(sc::detail::matmul_axis_rule(pd::make_shard(0), pd::make_replicate(), 4, 4).err == sc::detail::op_rule::matmul_pair);
static_assert(sc::detail::matmul_axis_rule(pd::make_replicate(), pd::make_shard(1), 4, 4).err == sc::detail::op_rule::matmul_pair);
static_assert(gives<sc::layout<S2, S3>, sc::layout<R, S2>, 4, 4, N, N, sc::layout<S2, P>>);
static_assert(gives<sc::layout<R>, sc::layout<S3>, 4, 4, N, N, sc::layout<S3>>);
// ... with the last two dims transposed: attention's Q K^T with heads sharded, and P^T V.
static_assert(gives<sc::layout<S1, S2>, sc::layout<S1, R>, 4, 4, N, T, sc::layout<S1, S2>>);
static_assert(gives<sc::layout<R>, sc::layout<S2>, 4, 4, N, T, sc::layout<S3>>);
static_assert(gives<sc::layout<S0, S1>, sc::layout<S0, S1>, 3, 3, T, N, sc::layout<S0, P>>);
// The plain rank-2 table is unchanged.
static_assert(gives<sc::layout<S0, S1, R>, sc::layout<R, S0, S1>, 2, 2, N, N, sc::layout<S0, P, S1>>);
static_assert(std::is_same_v<sc::matmul_layout_t<sc::layout<S0, S1, R>, sc::layout<R, S0, S1>>, sc::layout<S0, P, S1>>);

// ---------------------------------------------------------------------------------------
// The test's own table, on op(A) and op(B).
// ---------------------------------------------------------------------------------------
/// op(X)'s placement for X of rank r: transposing swaps the shards of the last two dims.
pd op_of(const pd& p, int r, sc::gemm_op o) {
  if (o == N) return p;
  if (p == pd::make_shard(r - 1)) return pd::make_shard(r - 2);
  if (p == pd::make_shard(r - 2)) return pd::make_shard(r - 1);
  return p;
}

/// C's placement on an axis, or false when the pair is illegal. A = [b..., m, k] of rank
/// ra, B = [k, n] (rb = 2) or [b..., k, n] (rb = ra), after transposition.
bool table_pair(const pd& sa, const pd& sb, int ra, int rb, sc::gemm_op oa, sc::gemm_op ob, pd& c) {
  const pd a = op_of(sa, ra, oa), b = op_of(sb, rb, ob);
  const pd r = pd::make_replicate(), p = pd::make_partial(sc::reduce_op::sum);
  const int batch = rb - 2;  // batch dims shared with B
  for (int d = 0; d < batch; ++d)  // a batch dim: sharded alike in both
    if (a == pd::make_shard(d) && b == a) return c = a, true;
  for (int d = batch; d + 1 < ra; ++d)  // rows of A (m, and A's own leading dims for a matrix B)
    if (a == pd::make_shard(d) && b == r) return c = a, true;
  if (a == r && b == pd::make_shard(rb - 1)) return c = pd::make_shard(ra - 1), true;       // n
  if (a == pd::make_shard(ra - 1) && b == pd::make_shard(rb - 2)) return c = p, true;      // k
  if (a == r && b == r) return c = r, true;
  if (a == p && b == r) return c = p, true;
  if (a == r && b == p) return c = p, true;
  return false;
}

int table_layout(const sc::runtime_layout& a, const sc::runtime_layout& b, int ra, int rb, sc::gemm_op oa, sc::gemm_op ob,
                 sc::runtime_layout& c) {
  c.naxes = a.naxes;
  for (int i = 0; i < a.naxes; ++i)
    if (!table_pair(a[i], b[i], ra, rb, oa, ob, c[i])) return i;
  return -1;
}

// ---------------------------------------------------------------------------------------
// The reference: op(A) and op(B) written out, one global GEMM per batch element (A's row
// dims flattened for a matrix B).
// ---------------------------------------------------------------------------------------
/// The shapes of one product: op(A) is [lead..., m, k]; op(B) is [k, n] (RB = 2) or
/// [lead..., k, n] (RB = RA).
template <int RA, int RB>
struct shapes {
  std::array<std::int64_t, RA> opa;  // op(A)'s extents
  std::int64_t n;
  std::int64_t k() const { return opa[RA - 1]; }
  std::int64_t m() const { return opa[RA - 2]; }
  std::int64_t batch() const {  // the batch elements (RB = RA) or 1
    std::int64_t b = 1;
    for (int d = 0; d < RB - 2; ++d) b *= opa[static_cast<std::size_t>(d)];
    return b;
  }
  std::int64_t rows() const {  // op(A)'s rows per batch element
    std::int64_t r = 1;
    for (int d = RB - 2; d + 1 < RA; ++d) r *= opa[static_cast<std::size_t>(d)];
    return r;
  }
  std::array<std::int64_t, RA> stored_a(sc::gemm_op oa) const {
    auto e = opa;
    if (oa == T) std::swap(e[RA - 2], e[RA - 1]);
    return e;
  }
  std::array<std::int64_t, RB> stored_b(sc::gemm_op ob) const {
    std::array<std::int64_t, RB> e{};
    for (int d = 0; d < RB - 2; ++d) e[static_cast<std::size_t>(d)] = opa[static_cast<std::size_t>(d)];
    e[RB - 2] = ob == T ? n : k();
    e[RB - 1] = ob == T ? k() : n;
    return e;
  }
  std::array<std::int64_t, RA> c() const {
    auto e = opa;
    e[RA - 1] = n;
    return e;
  }
  std::string name() const {
    std::string s = "op(A) [";
    for (int d = 0; d < RA; ++d) s += (d ? ", " : "") + std::to_string(opa[static_cast<std::size_t>(d)]);
    return s + "], n " + std::to_string(n) + (RB > 2 ? " (batched B)" : "");
  }
};

/// The global values of A and B as stored and the reference C.
template <class V, int RA, int RB>
struct operands {
  std::vector<V> a, b, c;
  operands(const shapes<RA, RB>& s, sc::gemm_op oa, sc::gemm_op ob) {
    const std::int64_t nb = s.batch(), rows = s.rows(), k = s.k(), n = s.n;
    const auto opa = ints<V>(nb * rows * k, 1), opb = ints<V>(nb * k * n, 4);
    a = oa == T ? transposed(opa, s.m(), k, nb * rows / std::max<std::int64_t>(1, s.m())) : opa;
    b = ob == T ? transposed(opb, k, n, nb) : opb;
    for (std::int64_t i = 0; i < nb; ++i) {
      const auto off_a = opa.begin() + i * rows * k, off_b = opb.begin() + i * k * n;
      const auto ci = ref_gemm(std::vector<V>(off_a, off_a + rows * k), std::vector<V>(off_b, off_b + k * n), rows, k, n);
      c.insert(c.end(), ci.begin(), ci.end());
    }
  }
};

/// matmul<OA, OB> of dynamic-layout A and B (partial terms that differ from rank to rank)
/// against the reference, or the layout_error an illegal pair must throw. "" when all is well.
template <sc::gemm_op OA, sc::gemm_op OB, int RA, int RB, class Mesh>
std::string dynamic_case(const Mesh& mesh, const sc::runtime_layout& la, const sc::runtime_layout& lb, const shapes<RA, RB>& s) {
  const operands<std::int64_t, RA, RB> g(s, OA, OB);
  auto a = optest::make_terms(mesh, la, g.a, s.stored_a(OA));
  auto b = optest::make_terms(mesh, lb, g.b, s.stored_b(OB));
  const auto a_before = optest::local_copy(a), b_before = optest::local_copy(b);
  sc::runtime_layout want;
  const int bad_axis = table_layout(la, lb, RA, RB, OA, OB, want);
  const std::string what = std::string("matmul<") + (OA == T ? "t" : "n") + ", " + (OB == T ? "t" : "n") + "> A " + sc::to_string(la) +
                           ", B " + sc::to_string(lb) + ", " + s.name() + ": ";
  if (bad_axis >= 0) return optest::refused_naming_axis([&] { return sc::matmul<OA, OB>(a, b); }, what, bad_axis, la, lb);
  auto c = sc::matmul<OA, OB>(a, b);
  static_assert(std::is_same_v<typename decltype(c)::layout_type, sc::dynamic_layout>);
  static_assert(decltype(c)::rank == RA);
  if (!(c.layout() == want)) return what + "C's layout is " + sc::to_string(c.layout()) + ", the table says " + sc::to_string(want);
  if (optest::local_copy(a) != a_before || optest::local_copy(b) != b_before) return what + "an input changed";
  if (c.global_extents() != s.c()) return what + "C's extents are wrong";
  const std::string diff = optest::compare_global(c, g.c);
  return diff.empty() ? "" : what + diff;
}

/// Every pair of layouts (A's from R, S(0..RA-1), P(sum), P(max); B's from R,
/// S(0..RB-1), P(sum), P(max)) on `shape`, for each of the shapes in `ss`.
template <sc::gemm_op OA, sc::gemm_op OB, int RA, int RB, int NAX>
void dynamic_sweep(std::array<int, NAX> shape, const std::vector<shapes<RA, RB>>& ss) {
  INFO("mesh " << optest::shape_name<NAX>(shape));
  const auto la = optest::layouts(optest::placements(RA, {sc::reduce_op::sum, sc::reduce_op::max}), NAX);
  const auto lb = optest::layouts(optest::placements(RB, {sc::reduce_op::sum, sc::reduce_op::max}), NAX);
  int nranks = 1;
  for (int x : shape) nranks *= x;
  optest::failures bad;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    for (const auto& a : la)
      for (const auto& b : lb)
        for (const auto& s : ss) bad.add(comm.rank(), dynamic_case<OA, OB, RA, RB>(mesh, a, b, s));
  });
  bad.report();
}
}  // namespace

TEST_CASE("matmul's run-time rule for batched and transposed operands gives the table's placement, or refuses") {
  const std::initializer_list<sc::reduce_op> il = {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min,
                                                   sc::reduce_op::prod};
  int legal_count = 0, configs = 0, expected = 0;
  for (int ra = 2; ra <= 5; ++ra)
    for (int rb : {2, ra}) {
      for (auto oa : {N, T})
        for (auto ob : {N, T}) {
          if (oa == T && rb == 2 && ra != 2) continue;
          ++configs;
          // ra - 1 - (rb - 2) row shards, one per batch dim, the column shard, the contraction, R x R, P x R, R x P.
          expected += (ra - 1 - (rb - 2)) + (rb - 2) + 5;
          for (const auto& a : optest::placements(ra, il))
            for (const auto& b : optest::placements(rb, il)) {
              INFO("A rank " << ra << std::string(oa == T ? " read transposed, " : ", ") << sc::to_string(a) << "; B rank " << rb
                             << std::string(ob == T ? " read transposed, " : ", ") << sc::to_string(b));
              pd want{};
              const bool legal = table_pair(a, b, ra, rb, oa, ob, want);
              legal_count += legal;
              const auto r = sc::detail::matmul_axis_rule(a, b, ra, rb, oa, ob);
              CHECK((r.err == sc::detail::op_rule::ok) == legal);
              if (legal) CHECK(r.out == want);
            }
        }
      if (rb == ra) break;
    }
  CHECK(configs == 4 + 2 * 3 + 4 * 3);  // rank-2 pair; ranks 3-5 with a matrix B (n, t) and batched (4 transpositions)
  CHECK(legal_count == expected);
}

TEST_CASE("batched A [..., m, k] @ [k, n] on dynamic layouts: every pair of layouts on 2x2, 3x1, 1x3 and 3-rank meshes") {
  const std::vector<shapes<3, 2>> s3 = {{{3, 5, 7}, 3}, {{2, 1, 1}, 2}, {{1, 2, 2}, 1}};  // the last two leave empty pieces
  dynamic_sweep<N, N, 3, 2, 2>({2, 2}, s3);
  dynamic_sweep<N, N, 3, 2, 2>({3, 1}, s3);
  dynamic_sweep<N, N, 3, 2, 2>({1, 3}, s3);
  dynamic_sweep<N, N, 3, 2, 1>({3}, s3);
  dynamic_sweep<N, N, 4, 2, 1>({3}, std::vector<shapes<4, 2>>{{{2, 3, 5, 4}, 5}, {{1, 2, 1, 2}, 1}});
  dynamic_sweep<N, N, 4, 2, 2>({2, 1}, std::vector<shapes<4, 2>>{{{3, 2, 3, 4}, 3}});
}

TEST_CASE("batched A @ batched B [b..., k, n] on dynamic layouts: every pair of layouts on 2x2, 1x3 and 3-rank meshes, each transposition") {
  const std::vector<shapes<3, 3>> s3 = {{{3, 5, 4}, 3}, {{2, 1, 2}, 1}, {{1, 2, 1}, 2}};
  dynamic_sweep<N, N, 3, 3, 2>({2, 2}, s3);
  dynamic_sweep<N, N, 3, 3, 2>({1, 3}, s3);
  dynamic_sweep<N, T, 3, 3, 2>({2, 2}, s3);
  dynamic_sweep<T, N, 3, 3, 1>({3}, s3);
  dynamic_sweep<T, T, 3, 3, 2>({2, 1}, s3);
  dynamic_sweep<N, T, 4, 4, 1>({3}, std::vector<shapes<4, 4>>{{{2, 3, 4, 2}, 3}, {{1, 2, 1, 1}, 2}});
  dynamic_sweep<N, N, 4, 4, 2>({2, 2}, std::vector<shapes<4, 4>>{{{2, 3, 2, 3}, 2}});
}

TEST_CASE("matmul with a transposed matrix operand on dynamic layouts: every pair of layouts on 2x2, 3x1, 1x3 and 3-rank meshes") {
  const std::vector<shapes<2, 2>> s2 = {{{5, 7}, 3}, {{2, 1}, 2}, {{1, 2}, 4}};
  dynamic_sweep<N, T, 2, 2, 2>({2, 2}, s2);
  dynamic_sweep<T, N, 2, 2, 2>({2, 2}, s2);
  dynamic_sweep<T, T, 2, 2, 2>({2, 2}, s2);
  dynamic_sweep<N, T, 2, 2, 2>({3, 1}, s2);
  dynamic_sweep<T, N, 2, 2, 2>({1, 3}, s2);
  dynamic_sweep<T, T, 2, 2, 1>({3}, s2);
  const std::vector<shapes<3, 2>> s3 = {{{3, 5, 7}, 3}, {{2, 1, 1}, 2}};
  dynamic_sweep<N, T, 3, 2, 2>({2, 2}, s3);
  dynamic_sweep<N, T, 3, 2, 1>({3}, s3);
}

namespace {
/// matmul<OA, OB> of compile-time layouts LA, LB: C's layout type is LC, and C equals the
/// reference on every rank; the same through const elements and a dynamic B.
template <sc::gemm_op OA, sc::gemm_op OB, class LA, class LB, class LC, int RA, int RB, class V = double>
void static_case(std::array<int, 2> mesh_shape, const shapes<RA, RB>& s) {
  INFO("A " << sc::to_string(LA::desc) << ", B " << sc::to_string(LB::desc) << ", " << s.name());
  const operands<V, RA, RB> g(s, OA, OB);
  optest::failures bad;
  sc::host::run(mesh_shape[0] * mesh_shape[1], [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, mesh_shape);
    auto a = sc::distribute<LA>(mesh, g.a, s.stored_a(OA));
    auto b = sc::distribute<LB>(mesh, g.b, s.stored_b(OB));
    auto c = sc::matmul<OA, OB>(a, b);
    static_assert(std::is_same_v<typename decltype(c)::layout_type, LC>);
    static_assert(std::is_same_v<typename decltype(c)::value_type, V>);
    bad.add(comm.rank(), optest::compare_global(c, g.c));
    const sc::dtensor<const V, RA, LA, decltype(mesh)> ca = a;
    auto c2 = sc::matmul<OA, OB>(ca, sc::dtensor<V, RB, sc::dynamic_layout, decltype(mesh)>(b));
    if (!(c2.layout() == sc::runtime_layout(LC::desc))) bad.add(comm.rank(), "dynamic B: layout " + sc::to_string(c2.layout()));
    bad.add(comm.rank(), optest::compare_global(c2, g.c));
    if constexpr (OA == N && OB == N) {  // the plain call is the same product
      auto c3 = sc::matmul(a, b);
      static_assert(std::is_same_v<typename decltype(c3)::layout_type, LC>);
      bad.add(comm.rank(), optest::compare_global(c3, g.c));
    }
  });
  bad.report();
}
}  // namespace

TEST_CASE("matmul with compile-time layouts: batched projections, the transposed forms of a Linear layer, attention products") {
  const shapes<3, 2> bsh{{3, 5, 7}, 6}, tiny{{2, 1, 1}, 2};
  // Column parallel: x [b, s, h] replicated, W sharded over its outputs; row parallel: x
  // sharded over h, W over its rows (partial sums); data parallel over the batch on the other axis.
  static_case<N, N, sc::layout<R, S0>, sc::layout<S1, R>, sc::layout<S2, S0>>({2, 2}, bsh);
  static_case<N, N, sc::layout<S2, S0>, sc::layout<S0, R>, sc::layout<P, S0>>({2, 2}, bsh);
  static_case<N, N, sc::layout<S1, S2>, sc::layout<R, S0>, sc::layout<S1, P>>({3, 1}, bsh);
  static_case<N, N, sc::layout<S2, S0>, sc::layout<S0, R>, sc::layout<P, S0>>({1, 3}, tiny);
  // y = x W^T with W stored [out, in] (PyTorch's Linear): W's row shard is C's column shard.
  static_case<N, T, sc::layout<R, S0>, sc::layout<S0, R>, sc::layout<S2, S0>>({2, 2}, bsh);
  static_case<N, T, sc::layout<S2, S1>, sc::layout<S1, R>, sc::layout<P, S1>>({2, 2}, bsh);
  static_case<N, T, sc::layout<S2, R>, sc::layout<S1, S0>, sc::layout<P, S2>>({1, 3}, tiny);
  // The weight gradient dW = X^T dY (contracting over the rows) and its transposes.
  const shapes<2, 2> m2{{5, 7}, 4}, m2t{{2, 1}, 3};
  static_case<T, N, sc::layout<S0, R>, sc::layout<S0, S1>, sc::layout<P, S1>>({2, 2}, m2);
  static_case<T, N, sc::layout<S1, S0>, sc::layout<R, S0>, sc::layout<S0, P>>({2, 2}, m2);
  static_case<T, T, sc::layout<S1, S0>, sc::layout<R, S1>, sc::layout<S0, P>>({3, 1}, m2);
  static_case<T, T, sc::layout<S0, R>, sc::layout<S1, S0>, sc::layout<P, S1>>({1, 3}, m2t);
  static_case<N, T, sc::layout<S0, S1>, sc::layout<R, S1>, sc::layout<S0, P>, 2, 2, std::int64_t>({2, 2}, m2);
  // Attention with heads sharded on axis 1 and the batch on axis 0: scores = Q K^T
  // [b, h, s, s], out = scores V [b, h, s, dh]; and the gradient dV = P^T dO.
  const shapes<4, 4> qk{{3, 4, 5, 6}, 5}, pv{{3, 4, 5, 5}, 6}, tiny4{{1, 3, 2, 1}, 2};
  static_case<N, T, sc::layout<S0, S1>, sc::layout<S0, S1>, sc::layout<S0, S1>>({2, 2}, qk);
  static_case<N, N, sc::layout<S0, S1>, sc::layout<S0, S1>, sc::layout<S0, S1>>({2, 2}, pv);
  static_case<T, N, sc::layout<S0, S1>, sc::layout<S0, S1>, sc::layout<S0, S1>>({2, 2}, pv);
  static_case<N, T, sc::layout<S2, S1>, sc::layout<R, S1>, sc::layout<S2, S1>>({1, 3}, tiny4);
  static_case<N, N, sc::layout<S1, S3>, sc::layout<S1, S2>, sc::layout<S1, P>>({3, 1}, pv);
}

TEST_CASE("matmul: mismatched inner or batch extents throw layout_error naming both shapes") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    auto a3 = sc::distribute<sc::layout<S0>>(mesh, ints<double>(24, 1), std::array<std::int64_t, 3>{2, 3, 4});
    auto b = sc::distribute<sc::layout<R>>(mesh, ints<double>(15, 1), std::array<std::int64_t, 2>{3, 5});
    CHECK_THROWS_WITH_AS(sc::matmul(a3, b), doctest::Contains("A is [2, 3, 4] but B is [3, 5]"), sc::layout_error);
    CHECK_THROWS_WITH_AS((sc::matmul<N, T>(a3, b)), doctest::Contains("op(A)'s last extent (4) differs from op(B)'s rows (5)"), sc::layout_error);
    auto bt = sc::distribute<sc::layout<R>>(mesh, ints<double>(20, 1), std::array<std::int64_t, 2>{5, 4});
    CHECK(sc::to_global(sc::matmul<N, T>(a3, bt)).size() == 30);  // the shapes that fit
    auto a2 = sc::distribute<sc::layout<R>>(mesh, ints<double>(12, 1), std::array<std::int64_t, 2>{3, 4});
    CHECK_THROWS_WITH_AS((sc::matmul<T, N>(a2, bt)), doctest::Contains("A is [3, 4] (read transposed) but B is [5, 4]"), sc::layout_error);
    auto b3 = sc::distribute<sc::layout<S0>>(mesh, ints<double>(60, 1), std::array<std::int64_t, 3>{3, 4, 5});
    CHECK_THROWS_WITH_AS(sc::matmul(a3, b3), doctest::Contains("A is [2, 3, 4] but B is [3, 4, 5]: the batch dim they share as C's dim 0 (A's dim 0, B's dim 0, aligned from the right) is 2 in A and 3 in B"), sc::layout_error);
    // A dynamic pair that is illegal names the stored placements and lists this product's pairs.
    auto da = sc::distribute(mesh, sc::runtime_layout::parse("S(2)"), ints<double>(24, 1), std::array<std::int64_t, 3>{2, 3, 4});
    auto db = sc::distribute(mesh, sc::runtime_layout::parse("S(1)"), ints<double>(20, 1), std::array<std::int64_t, 2>{4, 5});
    CHECK_THROWS_WITH_AS(sc::matmul(da, db), doctest::Contains("(S(0), R) -> S(0), (S(1), R) -> S(1), (R, S(1)) -> S(2), (S(2), S(0)) -> P(sum)"),
                         sc::layout_error);
    auto dbt = sc::distribute(mesh, sc::runtime_layout::parse("S(0)"), ints<double>(20, 1), std::array<std::int64_t, 2>{5, 4});
    CHECK_THROWS_WITH_AS((sc::matmul<N, T>(da, dbt)), doctest::Contains("B read transposed"), sc::layout_error);
    auto db3 = sc::distribute(mesh, sc::runtime_layout::parse("S(0)"), ints<double>(40, 1), std::array<std::int64_t, 3>{2, 5, 4});
    CHECK_THROWS_WITH_AS((sc::matmul<N, T>(da, db3)),
                         doctest::Contains("(S(0), S(0)) -> S(0), (S(1), R) -> S(1), (R, S(1)) -> S(2), (S(2), S(2)) -> P(sum)"),
                         sc::layout_error);
  });
}

TEST_CASE("matmul: a transposed operand reaches the GEMM hook's transposed form with the stored row strides, once per batch element") {
  std::mutex mu;
  std::vector<std::string> calls;
  auto hook = [&](sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* pa, std::int64_t lda,
                  const double* pb, std::int64_t ldb, double* pc, std::int64_t ldc, bool acc) {
    {
      std::lock_guard lk(mu);
      calls.push_back(std::string(ta == T ? "t" : "n") + (tb == T ? "t" : "n") + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k) + " ld " + std::to_string(lda) + "," + std::to_string(ldb) + "," + std::to_string(ldc) +
                      (acc ? " acc" : ""));
    }
    sc::host_gemm{}(ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, acc);
  };
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    // A stored [k=3, m=4] split over its columns (op(A)'s rows), B stored [n=5, k=3] replicated.
    const auto ga = ints<double>(12, 2), gb = ints<double>(15, 3);
    auto a = sc::distribute<sc::layout<S1>>(mesh, ga, std::array<std::int64_t, 2>{3, 4});
    auto b = sc::distribute<sc::layout<R>>(mesh, gb, std::array<std::int64_t, 2>{5, 3});
    auto c = sc::matmul<T, T>(a, b, hook);
    CHECK(sc::to_global(c) == ref_gemm(transposed(ga, 3, 4), transposed(gb, 5, 3), 4, 3, 5));
  });
  REQUIRE(calls.size() == 2);
  CHECK(calls[0] == "tt 2x5x3 ld 2,3,5");
  CHECK(calls[1] == "tt 2x5x3 ld 2,3,5");
  calls.clear();
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    // Q [3, 2, 4] and K [3, 5, 4] with the batch split 2 + 1: Q K^T per batch element.
    auto q = sc::distribute<sc::layout<S0>>(mesh, ints<double>(24, 1), std::array<std::int64_t, 3>{3, 2, 4});
    auto k = sc::distribute<sc::layout<S0>>(mesh, ints<double>(60, 2), std::array<std::int64_t, 3>{3, 5, 4});
    (void)sc::to_global(sc::matmul<N, T>(q, k, hook));
  });
  REQUIRE(calls.size() == 3);
  for (const auto& s : calls) CHECK(s == "nt 2x5x4 ld 4,4,5");
}

// Meshes of up to 5 axes and 16 ranks, random legal pairs on every axis for batched and
// transposed products: nested shards of a batch dim, a row dim, k or n over several axes.
TEST_CASE("batched and transposed matmul on dynamic layouts over random meshes of 1 to 5 axes") {
  std::mt19937_64 g(20261207);
  const std::int64_t exts[] = {0, 1, 2, 3, 5, 7};
  auto batch = [&]<int NAX, sc::gemm_op OA, sc::gemm_op OB, int RA, int RB>() {
    const auto shape = optest::random_shape<NAX>(g(), 16);
    int nranks = 1;
    for (int x : shape) nranks *= x;
    // The legal stored pairs of this configuration, from the test's table.
    std::vector<std::pair<pd, pd>> legal;
    for (const auto& a : optest::placements(RA, {sc::reduce_op::sum}))
      for (const auto& b : optest::placements(RB, {sc::reduce_op::sum})) {
        pd c{};
        if (table_pair(a, b, RA, RB, OA, OB, c)) legal.emplace_back(a, b);
      }
    struct spec {
      sc::runtime_layout a, b;
      shapes<RA, RB> s;
    };
    std::vector<spec> cases(6);
    for (auto& c : cases) {
      c.a.naxes = c.b.naxes = NAX;
      for (int i = 0; i < NAX; ++i) {
        const auto& q = legal[g() % legal.size()];
        c.a[i] = q.first;
        c.b[i] = q.second;
      }
      for (auto& e : c.s.opa) e = exts[g() % 6];
      c.s.n = exts[g() % 6];
    }
    INFO("mesh " << optest::shape_name<NAX>(shape));
    optest::failures bad;
    sc::host::run(nranks, [&](sc::host::communicator& comm) {
      auto mesh = sc::make_mesh(comm, shape);
      for (const auto& c : cases) bad.add(comm.rank(), dynamic_case<OA, OB, RA, RB>(mesh, c.a, c.b, c.s));
    });
    bad.report();
  };
  for (int round = 0; round < optest::random_rounds; ++round) {
    batch.template operator()<3, N, N, 3, 2>();
    batch.template operator()<4, N, T, 3, 2>();
    batch.template operator()<5, N, N, 4, 2>();
    batch.template operator()<3, T, N, 2, 2>();
    batch.template operator()<4, T, T, 2, 2>();
    batch.template operator()<2, N, T, 2, 2>();
    batch.template operator()<4, N, T, 4, 4>();
    batch.template operator()<3, T, N, 3, 3>();
    batch.template operator()<5, N, N, 3, 3>();
  }
}

TEST_CASE("matmul takes its GEMM functor by reference: a move-only, stateful one is called, not copied") {
  struct counting {
    int calls = 0;
    counting() = default;
    counting(counting&&) = default;
    counting(const counting&) = delete;
    void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
                    const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool acc) {
      ++calls;
      sc::host_gemm{}(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
    }
  };
  std::vector<int> calls(2);
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, {2});
    const auto ga = ints<double>(24, 1), gb = ints<double>(24, 2);
    auto a = sc::distribute<sc::layout<S0>>(mesh, ga, {3, 2, 4});
    auto b = sc::distribute<sc::layout<S0>>(mesh, gb, {3, 4, 2});
    counting g;
    auto c = sc::matmul(a, b, g);  // one call per local batch element: 2 on rank 0, 1 on rank 1
    auto ct = sc::matmul<T, N>(sc::distribute<sc::layout<R>>(mesh, ga, {6, 4}), sc::distribute<sc::layout<R>>(mesh, gb, {6, 4}), g);
    calls[static_cast<std::size_t>(comm.rank())] = g.calls;
    CHECK(sc::to_global(ct) == ref_gemm(transposed(ga, 6, 4), gb, 4, 6, 4));
    (void)c;
  });
  CHECK(calls == std::vector<int>{3, 2});
}

TEST_CASE("matmul with a const GEMM functor whose call operator is not const: called on a copy, as before") {
  struct plain_hook {
    int calls = 0;
    void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda, const double* b, std::int64_t ldb,
                    double* c, std::int64_t ldc) {
      ++calls;
      sc::host_gemm{}(m, n, k, a, lda, b, ldb, c, ldc);
    }
  };
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, {2});
    const auto ga = ints<double>(12, 1), gb = ints<double>(8, 2);
    auto a = sc::distribute<sc::layout<S0>>(mesh, ga, {6, 2});
    auto b = sc::distribute<sc::layout<R>>(mesh, gb, {2, 4});
    const plain_hook h;
    CHECK(sc::to_global(sc::matmul(a, b, h)) == ref_gemm(ga, gb, 6, 2, 4));
    CHECK(h.calls == 0);
  });
}
