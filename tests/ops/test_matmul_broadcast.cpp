// matmul with the batch dims broadcast by rank, as torch.matmul: A [..., m, k] of rank RA
// and B [..., k, n] of rank RB, their leading dims right-aligned with C's, C of rank
// max(RA, RB), an operand read alike for every index along a batch dim it lacks. The
// per-axis rule is checked against the test's own table (written from the operand dims'
// positions, not from the library's code) at compile time and at run time, and the
// products against a single-rank reference that walks C's batch indices one by one, on
// uneven shards, empty pieces, partial terms that differ from rank to rank, each
// transposition, static and dynamic layouts.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <string>
#include <tuple>
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
using S4 = sc::shard<4>;
using P = sc::partial<sc::sum>;
constexpr auto N = sc::gemm_op::n;
constexpr auto T = sc::gemm_op::t;

// ---------------------------------------------------------------------------------------
// Compile-time layouts, worked out by hand from the operand dims' places in C.
// ---------------------------------------------------------------------------------------
template <class LA, class LB, int RA, int RB, sc::gemm_op OA, sc::gemm_op OB, class LC>
constexpr bool gives = std::is_same_v<sc::matmul_layout_t<LA, LB, RA, RB, OA, OB>, LC>;
// A [x, h, m, k] @ B [h, k, n] -> C [x, h, m, n]: x is A's alone, h is both's (B's dim 0).
static_assert(gives<sc::layout<S0>, sc::layout<R>, 4, 3, N, N, sc::layout<S0>>);
static_assert(gives<sc::layout<S1>, sc::layout<S0>, 4, 3, N, N, sc::layout<S1>>);
static_assert(gives<sc::layout<S2>, sc::layout<R>, 4, 3, N, N, sc::layout<S2>>);
static_assert(gives<sc::layout<R>, sc::layout<S2>, 4, 3, N, N, sc::layout<S3>>);
static_assert(gives<sc::layout<S3>, sc::layout<S1>, 4, 3, N, N, sc::layout<P>>);
static_assert(gives<sc::layout<S0, S1, P>, sc::layout<R, S0, R>, 4, 3, N, N, sc::layout<S0, S1, P>>);
// ... B read transposed (stored [h, n, k]): its shard<1> is C's n, shard<2> the contraction.
static_assert(gives<sc::layout<R, S3>, sc::layout<S1, S2>, 4, 3, N, T, sc::layout<S3, P>>);
// A [m, k] @ B [b, k, n] -> C [b, m, n]: b is B's alone, m moves from A's dim 0 to C's dim 1.
static_assert(gives<sc::layout<R>, sc::layout<S0>, 2, 3, N, N, sc::layout<S0>>);
static_assert(gives<sc::layout<S0>, sc::layout<R>, 2, 3, N, N, sc::layout<S1>>);
static_assert(gives<sc::layout<R>, sc::layout<S2>, 2, 3, N, N, sc::layout<S2>>);
static_assert(gives<sc::layout<S1>, sc::layout<S1>, 2, 3, N, N, sc::layout<P>>);
static_assert(gives<sc::layout<P, R, S0>, sc::layout<R, P, R>, 2, 3, N, N, sc::layout<P, P, S1>>);
// ... A read transposed (stored [k, m]): its shard<1> is C's m, shard<0> the contraction.
static_assert(gives<sc::layout<S1, S0>, sc::layout<R, S1>, 2, 3, T, N, sc::layout<S1, P>>);
// A [m, k] @ B [a, b, k, n] -> C [a, b, m, n].
static_assert(gives<sc::layout<R, R, S0>, sc::layout<S0, S1, R>, 2, 4, N, N, sc::layout<S0, S1, S2>>);
static_assert(gives<sc::layout<R, S1>, sc::layout<S3, S2>, 2, 4, N, N, sc::layout<S3, P>>);
// A [h, m, k] @ B [b, h, k, n] -> C [b, h, m, n]: b is B's alone, h is both's.
static_assert(gives<sc::layout<R, S0, S1>, sc::layout<S0, S1, R>, 3, 4, N, N, sc::layout<S0, S1, S2>>);
static_assert(gives<sc::layout<S2>, sc::layout<S2>, 3, 4, N, N, sc::layout<P>>);
static_assert(gives<sc::layout<S0>, sc::layout<S1>, 3, 4, T, T, sc::layout<S1>>);
static_assert(gives<sc::layout<S2, R>, sc::layout<R, S2>, 3, 4, T, T, sc::layout<S2, S3>>);
// A [x, y, h, m, k] @ B [h, k, n] and A [m, k] @ B [a, b, c, k, n].
static_assert(gives<sc::layout<S1, S2, R>, sc::layout<R, S0, S2>, 5, 3, N, N, sc::layout<S1, S2, S4>>);
static_assert(gives<sc::layout<R, R, S0>, sc::layout<S2, S0, R>, 2, 5, N, N, sc::layout<S2, S0, S3>>);
// A transposed of rank > 2 with a matrix B: B is broadcast over A's batch dims.
static_assert(gives<sc::layout<S0, S3, S2>, sc::layout<R, R, S0>, 4, 2, T, N, sc::layout<S0, S2, P>>);
static_assert(gives<sc::layout<R, S2>, sc::layout<S1, R>, 3, 2, T, N, sc::layout<S2, S1>>);

/// An illegal pair of placements (matmul_rule's type is then the error struct's).
template <class PA, class PB, int RA, int RB, sc::gemm_op OA = N, sc::gemm_op OB = N>
constexpr bool refused = sc::detail::matmul_axis_rule(PA::desc, PB::desc, RA, RB, OA, OB).err != sc::detail::op_rule::ok;
static_assert(refused<S1, R, 4, 3>);   // h, a dim of both, sharded in A only
static_assert(refused<R, S0, 4, 3>);   // ... in B only
static_assert(refused<S0, S0, 4, 3>);  // A's x against B's h
static_assert(refused<P, S0, 2, 3>);   // a partial A with B sharding the dim A lacks
static_assert(refused<S0, S0, 2, 3>);  // A's m against B's b
static_assert(refused<S0, P, 4, 3>);   // B partial, A sharding the dim B lacks

// ---------------------------------------------------------------------------------------
// The test's own table: the legal (op(A), op(B)) -> C triples of one product, listed from
// the operands' dims counted from the right.
// ---------------------------------------------------------------------------------------
struct triple {
  pd a, b, c;
};
std::vector<triple> legal_triples(int ra, int rb) {
  const int rc = std::max(ra, rb);
  const pd r = pd::make_replicate(), p = pd::make_partial(sc::reduce_op::sum);
  std::vector<triple> t;
  for (int j = 1; j <= rc - 2; ++j) {  // the batch dim j places left of m: C's rc-2-j, A's ra-2-j, B's rb-2-j
    const int da = ra - 2 - j, db = rb - 2 - j;
    t.push_back({da >= 0 ? pd::make_shard(da) : r, db >= 0 ? pd::make_shard(db) : r, pd::make_shard(rc - 2 - j)});
  }
  t.push_back({pd::make_shard(ra - 2), r, pd::make_shard(rc - 2)});           // m
  t.push_back({r, pd::make_shard(rb - 1), pd::make_shard(rc - 1)});           // n
  t.push_back({pd::make_shard(ra - 1), pd::make_shard(rb - 2), p});           // k
  t.push_back({r, r, r});
  t.push_back({p, r, p});
  t.push_back({r, p, p});
  return t;
}
/// op(X)'s placement for X's placement as stored, X of rank r: transposing swaps the shards
/// of the last two dims.
pd op_of(const pd& x, int r, sc::gemm_op o) {
  if (o == N) return x;
  if (x == pd::make_shard(r - 1)) return pd::make_shard(r - 2);
  if (x == pd::make_shard(r - 2)) return pd::make_shard(r - 1);
  return x;
}
/// C's placement for stored placements (sa, sb), or false when the table has no such pair.
bool table_pair(const pd& sa, const pd& sb, int ra, int rb, sc::gemm_op oa, sc::gemm_op ob, pd& c) {
  const pd a = op_of(sa, ra, oa), b = op_of(sb, rb, ob);
  for (const auto& t : legal_triples(ra, rb))
    if (t.a == a && t.b == b) return c = t.c, true;
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
// The reference: C's batch indices walked one by one, each reading the A and B matrices at
// the indices of the batch dims each operand has (its last RX-2 of C's).
// ---------------------------------------------------------------------------------------
/// One product: C's batch extents, m, k, n; op(A) is [batch[RC-RA..], m, k] and op(B)
/// [batch[RC-RB..], k, n].
template <int RA, int RB>
struct shapes {
  static constexpr int RC = RA > RB ? RA : RB;
  std::array<std::int64_t, RC - 2> batch;
  std::int64_t m, k, n;
  std::int64_t count(int from) const {  // the matrices of batch dims from..RC-3
    std::int64_t v = 1;
    for (int d = from; d < RC - 2; ++d) v *= batch[static_cast<std::size_t>(d)];
    return v;
  }
  template <int R>
  std::array<std::int64_t, R> stored(std::int64_t rows, std::int64_t cols, sc::gemm_op o) const {
    std::array<std::int64_t, R> e{};
    for (int d = 0; d < R - 2; ++d) e[static_cast<std::size_t>(d)] = batch[static_cast<std::size_t>(d + RC - R)];
    e[R - 2] = o == T ? cols : rows;
    e[R - 1] = o == T ? rows : cols;
    return e;
  }
  std::array<std::int64_t, RA> stored_a(sc::gemm_op o) const { return stored<RA>(m, k, o); }
  std::array<std::int64_t, RB> stored_b(sc::gemm_op o) const { return stored<RB>(k, n, o); }
  std::array<std::int64_t, RC> c() const { return stored<RC>(m, n, N); }
  std::string name() const {
    std::string s = "C batch [";
    for (int d = 0; d < RC - 2; ++d) s += (d ? ", " : "") + std::to_string(batch[static_cast<std::size_t>(d)]);
    return s + "], m " + std::to_string(m) + ", k " + std::to_string(k) + ", n " + std::to_string(n) + ", ranks " + std::to_string(RA) +
           " and " + std::to_string(RB);
  }
};

template <int RA, int RB>
struct operands {
  std::vector<double> a, b, c;  // A and B as stored, the reference C
  operands(const shapes<RA, RB>& s, sc::gemm_op oa, sc::gemm_op ob) {
    constexpr int RC = shapes<RA, RB>::RC;
    const std::int64_t na = s.count(RC - RA), nb = s.count(RC - RB), nc = s.count(0);
    const auto opa = ints<double>(na * s.m * s.k, 1), opb = ints<double>(nb * s.k * s.n, 4);
    a = oa == T ? transposed(opa, s.m, s.k, na) : opa;
    b = ob == T ? transposed(opb, s.k, s.n, nb) : opb;
    for (std::int64_t i = 0; i < nc; ++i) {
      std::array<std::int64_t, RC - 2> idx{};  // C's batch index i as a multi-index
      for (std::int64_t d = RC - 3, rest = i; d >= 0; --d) {
        idx[static_cast<std::size_t>(d)] = rest % s.batch[static_cast<std::size_t>(d)];
        rest /= s.batch[static_cast<std::size_t>(d)];
      }
      std::int64_t ia = 0, ib = 0;  // the operands' matrices: their own dims of that index, row-major
      for (int d = RC - RA; d < RC - 2; ++d) ia = ia * s.batch[static_cast<std::size_t>(d)] + idx[static_cast<std::size_t>(d)];
      for (int d = RC - RB; d < RC - 2; ++d) ib = ib * s.batch[static_cast<std::size_t>(d)] + idx[static_cast<std::size_t>(d)];
      const auto pa = opa.begin() + ia * s.m * s.k, pb = opb.begin() + ib * s.k * s.n;
      const auto ci = ref_gemm(std::vector<double>(pa, pa + s.m * s.k), std::vector<double>(pb, pb + s.k * s.n), s.m, s.k, s.n);
      c.insert(c.end(), ci.begin(), ci.end());
    }
  }
};

/// matmul<OA, OB> of dynamic-layout A and B (partial terms that differ from rank to rank)
/// against the reference, or the layout_error an illegal pair must throw. "" when all is well.
template <sc::gemm_op OA, sc::gemm_op OB, int RA, int RB, class Mesh>
std::string dynamic_case(const Mesh& mesh, const sc::runtime_layout& la, const sc::runtime_layout& lb, const shapes<RA, RB>& s,
                         const operands<RA, RB>& g) {
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
  static_assert(decltype(c)::rank == shapes<RA, RB>::RC);
  if (!(c.layout() == want)) return what + "C's layout is " + sc::to_string(c.layout()) + ", the table says " + sc::to_string(want);
  if (optest::local_copy(a) != a_before || optest::local_copy(b) != b_before) return what + "an input changed";
  if (c.global_extents() != s.c()) return what + "C's extents are wrong";
  const std::string diff = optest::compare_global(c, g.c);
  return diff.empty() ? "" : what + diff;
}

/// Every pair of layouts (each operand's from R, S(every dim), P(sum), P(max)) on a mesh
/// of `shape`, for each of the shapes in `ss`.
template <sc::gemm_op OA, sc::gemm_op OB, int RA, int RB, int NAX>
void dynamic_sweep(std::array<int, NAX> shape, const std::vector<shapes<RA, RB>>& ss) {
  INFO("mesh " << optest::shape_name<NAX>(shape));
  const auto la = optest::layouts(optest::placements(RA, {sc::reduce_op::sum, sc::reduce_op::max}), NAX);
  const auto lb = optest::layouts(optest::placements(RB, {sc::reduce_op::sum, sc::reduce_op::max}), NAX);
  std::vector<operands<RA, RB>> gs;
  for (const auto& s : ss) gs.emplace_back(s, OA, OB);
  int nranks = 1;
  for (int x : shape) nranks *= x;
  optest::failures bad;
  int legal = 0;
  std::mutex mu;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    int mine = 0;
    for (const auto& a : la)
      for (const auto& b : lb) {
        sc::runtime_layout c;
        mine += table_layout(a, b, RA, RB, OA, OB, c) < 0;
        for (std::size_t i = 0; i < ss.size(); ++i) bad.add(comm.rank(), dynamic_case<OA, OB, RA, RB>(mesh, a, b, ss[i], gs[i]));
      }
    if (comm.rank() == 0) {
      std::lock_guard lk(mu);
      legal = mine;
    }
  });
  bad.report();
  CHECK(legal > 0);  // the sweep multiplied, not only refused
}

/// matmul<OA, OB> of compile-time layouts LA and LB (partial terms that differ from rank to
/// rank): C's layout type is LC and C equals the reference; the same with a dynamic B.
template <sc::gemm_op OA, sc::gemm_op OB, class LA, class LB, class LC, int RA, int RB, std::size_t NAX>
void static_case(std::array<int, NAX> shape, const shapes<RA, RB>& s) {
  INFO("A " << sc::to_string(LA::desc) << ", B " << sc::to_string(LB::desc) << ", " << s.name() << ", mesh "
            << optest::shape_name<static_cast<int>(NAX)>(shape));
  const operands<RA, RB> g(s, OA, OB);
  int nranks = 1;
  for (int x : shape) nranks *= x;
  optest::failures bad;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    const auto a = optest::as_static<LA>(optest::make_terms(mesh, sc::runtime_layout(LA::desc), g.a, s.stored_a(OA)));
    const auto b = optest::as_static<LB>(optest::make_terms(mesh, sc::runtime_layout(LB::desc), g.b, s.stored_b(OB)));
    auto c = sc::matmul<OA, OB>(a, b);
    static_assert(std::is_same_v<typename decltype(c)::layout_type, LC>);
    static_assert(decltype(c)::rank == shapes<RA, RB>::RC);
    bad.add(comm.rank(), optest::compare_global(c, g.c));
    auto c2 = sc::matmul<OA, OB>(a, sc::dtensor<double, RB, sc::dynamic_layout, decltype(mesh)>(b));
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

TEST_CASE("matmul's run-time rule with operands of different ranks gives the test's table's placement, or refuses") {
  const std::initializer_list<sc::reduce_op> ops = {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min,
                                                    sc::reduce_op::prod};
  const std::array<std::array<int, 2>, 11> ranks = {
      {{4, 3}, {2, 3}, {2, 4}, {3, 4}, {4, 2}, {5, 3}, {3, 5}, {2, 5}, {5, 4}, {3, 3}, {2, 2}}};
  for (const auto& [ra, rb] : ranks)
    for (auto oa : {N, T})
      for (auto ob : {N, T}) {
        int legal = 0;
        for (const auto& a : optest::placements(ra, ops))
          for (const auto& b : optest::placements(rb, ops)) {
            INFO("A rank " << ra << (oa == T ? " read transposed, " : ", ") << sc::to_string(a) << "; B rank " << rb
                           << (ob == T ? " read transposed, " : ", ") << sc::to_string(b));
            pd want{};
            const bool ok = table_pair(a, b, ra, rb, oa, ob, want);
            legal += ok;
            const auto r = sc::detail::matmul_axis_rule(a, b, ra, rb, oa, ob);
            CHECK((r.err == sc::detail::op_rule::ok) == ok);
            if (ok) CHECK(r.out == want);
          }
        // One pair per batch dim of C, m, n, k, and R x R, P x R, R x P.
        CHECK(legal == std::max(ra, rb) + 4);
      }
}

TEST_CASE("matmul: the run-time message lists the broadcast product's pairs in stored placements") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    const auto dist = [&](const char* l, auto ext) { return sc::distribute(mesh, sc::runtime_layout::parse(l), ints<double>(optest::volume(ext), 1), ext); };
    // A [3, 4] @ B [2, 4, 5]: B's batch dim is C's dim 0, A's m is C's dim 1.
    auto a = dist("S(0)", std::array<std::int64_t, 2>{3, 4});
    auto b = dist("S(0)", std::array<std::int64_t, 3>{2, 4, 5});
    CHECK_THROWS_WITH_AS(sc::matmul(a, b),
                         doctest::Contains("on mesh axis 0 A is S(0) and B is S(0) (as stored), which matmul does not take; the legal (A, B) -> C "
                                           "pairs on each axis are (R, S(0)) -> S(0), (S(0), R) -> S(1), (R, S(2)) -> S(2), (S(1), S(1)) -> P(sum), "
                                           "(R, R) -> R, (P(sum), R) -> P(sum) and (R, P(sum)) -> P(sum)"),
                         sc::layout_error);
    // A [2, 3, 4, 5] @ B [3, 5, 6] with both read transposed (stored [2, 3, 5, 4] and [3, 6, 5]).
    auto at = dist("S(1)", std::array<std::int64_t, 4>{2, 3, 5, 4});
    auto bt = dist("R", std::array<std::int64_t, 3>{3, 6, 5});
    CHECK_THROWS_WITH_AS((sc::matmul<T, T>(at, bt)),
                         doctest::Contains("(S(0), R) -> S(0), (S(1), S(0)) -> S(1), (S(3), R) -> S(2), (R, S(1)) -> S(3), (S(2), S(2)) -> "
                                           "P(sum)"),
                         sc::layout_error);
    CHECK_THROWS_WITH_AS((sc::matmul<T, T>(at, bt)), doctest::Contains("a batch dim of both sharded in one operand only"), sc::layout_error);
  });
}

TEST_CASE("matmul: a shared batch dim of different extents throws unless one is 1 (stretched: test_matmul_stretch.cpp)") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    using L = sc::layout<R>;
    auto a = sc::distribute<L>(mesh, ints<double>(120, 1), std::array<std::int64_t, 4>{2, 3, 4, 5});
    auto b = sc::distribute<L>(mesh, ints<double>(120, 2), std::array<std::int64_t, 3>{4, 5, 6});
    CHECK_THROWS_WITH_AS(sc::matmul(a, b), doctest::Contains("A is [2, 3, 4, 5] but B is [4, 5, 6]"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::matmul(a, b), doctest::Contains("[2, 3, 4, 5] but B is [4, 5, 6]: the batch dim they share as C's dim 1 (A's dim 1, B's dim 0, aligned from the right) is 3 in A and 4 in B"), sc::layout_error);
    try {  // no extent 1 among the mismatched ones: no word of stretching
      (void)sc::matmul(a, b);
    } catch (const sc::layout_error& e) {
      CHECK(std::string(e.what()).find("stretch") == std::string::npos);
    }
    // An extent 1 is stretched, as in torch.matmul.
    auto b1 = sc::distribute<L>(mesh, ints<double>(30, 2), std::array<std::int64_t, 3>{1, 5, 6});
    CHECK(sc::matmul(a, b1).global_extents() == std::array<std::int64_t, 4>{2, 3, 4, 6});
    auto a1 = sc::distribute<L>(mesh, ints<double>(20, 1), std::array<std::int64_t, 3>{1, 4, 5});
    auto b4 = sc::distribute<L>(mesh, ints<double>(240, 2), std::array<std::int64_t, 4>{2, 4, 5, 6});
    CHECK(sc::matmul(a1, b4).global_extents() == std::array<std::int64_t, 4>{2, 4, 4, 6});
    // The same extents broadcast by rank: A [4, 5] against B [2, 4, 5, 6] is fine (k 5).
    auto a2 = sc::distribute<L>(mesh, ints<double>(20, 1), std::array<std::int64_t, 2>{4, 5});
    CHECK(sc::matmul(a2, b4).global_extents() == std::array<std::int64_t, 4>{2, 4, 4, 6});
  });
}

TEST_CASE("broadcast matmul with compile-time layouts: C's layout type and values, partial terms that differ per rank") {
  // A [x, h, m, k] @ B [h, k, n]: per-head matrices shared over x.
  const shapes<4, 3> s43{{3, 5}, 4, 3, 5}, s43e{{1, 2}, 1, 3, 2};  // the second leaves empty pieces
  static_case<N, N, sc::layout<S0, S1>, sc::layout<R, S0>, sc::layout<S0, S1>>(std::array<int, 2>{2, 2}, s43);
  static_case<N, N, sc::layout<S1, S3>, sc::layout<S0, S1>, sc::layout<S1, P>>(std::array<int, 2>{3, 1}, s43);
  static_case<N, N, sc::layout<P, S2>, sc::layout<R, R>, sc::layout<P, S2>>(std::array<int, 2>{1, 3}, s43e);
  static_case<N, T, sc::layout<S2, R>, sc::layout<R, S1>, sc::layout<S2, S3>>(std::array<int, 2>{2, 2}, s43);
  static_case<T, N, sc::layout<S3>, sc::layout<R>, sc::layout<S2>>(std::array<int, 1>{3}, s43e);
  // A [m, k] @ B [b, k, n]: one A shared by B's batch.
  const shapes<2, 3> s23{{5}, 3, 4, 3}, s23e{{1}, 2, 1, 1};
  static_case<N, N, sc::layout<R, S0>, sc::layout<S0, R>, sc::layout<S0, S1>>(std::array<int, 2>{2, 2}, s23);
  static_case<N, N, sc::layout<S1, R>, sc::layout<S1, P>, sc::layout<P, P>>(std::array<int, 2>{3, 1}, s23);
  static_case<T, T, sc::layout<R, S0>, sc::layout<S0, S2>, sc::layout<S0, P>>(std::array<int, 2>{1, 3}, s23e);
  static_case<N, N, sc::layout<R>, sc::layout<S2>, sc::layout<S2>>(std::array<int, 1>{3}, s23);
  // A [m, k] @ B [a, b, k, n] and A [h, m, k] @ B [b, h, k, n].
  static_case<N, N, sc::layout<R, S0>, sc::layout<S1, R>, sc::layout<S1, S2>>(std::array<int, 2>{2, 2}, shapes<2, 4>{{3, 2}, 3, 2, 2});
  static_case<N, T, sc::layout<S0, S1>, sc::layout<S1, R>, sc::layout<S1, S2>>(std::array<int, 2>{3, 1}, shapes<3, 4>{{2, 3}, 4, 2, 3});
  // A [b, s, k] read transposed against a matrix B: B broadcast over A's batch.
  static_case<T, N, sc::layout<S0, S2>, sc::layout<R, R>, sc::layout<S0, S1>>(std::array<int, 2>{2, 2}, shapes<3, 2>{{3}, 5, 2, 3});
  static_case<T, N, sc::layout<S2, R>, sc::layout<S0, S1>, sc::layout<P, S3>>(std::array<int, 2>{1, 3}, shapes<4, 2>{{2, 2}, 2, 3, 4});
}

TEST_CASE("A [x, h, m, k] @ B [h, k, n] on dynamic layouts: every pair of layouts on 2x2, 3x1, 1x3 and 3-rank meshes") {
  const std::vector<shapes<4, 3>> ss = {{{3, 2}, 3, 2, 3}, {{1, 2}, 1, 1, 2}};  // the second leaves empty pieces
  dynamic_sweep<N, N, 4, 3, 2>({2, 2}, ss);
  dynamic_sweep<N, N, 4, 3, 2>({3, 1}, ss);
  dynamic_sweep<N, N, 4, 3, 2>({1, 3}, ss);
  dynamic_sweep<N, T, 4, 3, 1>({3}, ss);
  dynamic_sweep<T, N, 4, 3, 1>({3}, ss);
  dynamic_sweep<T, T, 4, 3, 1>({2}, ss);
}

TEST_CASE("A [m, k] @ B [b..., k, n] and A [h, m, k] @ B [b, h, k, n] on dynamic layouts: every pair of layouts") {
  const std::vector<shapes<2, 3>> s23 = {{{3}, 5, 3, 2}, {{2}, 1, 2, 1}, {{1}, 2, 1, 3}};
  dynamic_sweep<N, N, 2, 3, 2>({2, 2}, s23);
  dynamic_sweep<N, N, 2, 3, 2>({3, 1}, s23);
  dynamic_sweep<N, N, 2, 3, 2>({1, 3}, s23);
  dynamic_sweep<T, N, 2, 3, 2>({2, 2}, s23);
  dynamic_sweep<N, T, 2, 3, 1>({3}, s23);
  dynamic_sweep<T, T, 2, 3, 1>({3}, s23);
  const std::vector<shapes<2, 4>> s24 = {{{2, 3}, 3, 2, 2}, {{1, 2}, 1, 1, 1}};
  dynamic_sweep<N, N, 2, 4, 2>({2, 2}, s24);
  dynamic_sweep<N, T, 2, 4, 1>({3}, s24);
  const std::vector<shapes<3, 4>> s34 = {{{3, 2}, 2, 3, 2}, {{1, 2}, 1, 2, 1}};
  dynamic_sweep<N, N, 3, 4, 2>({1, 3}, s34);
  dynamic_sweep<T, N, 3, 4, 1>({3}, s34);
}

TEST_CASE("A [..., k, m] read transposed @ a matrix B on dynamic layouts: B broadcast over A's batch dims") {
  const std::vector<shapes<4, 2>> s42 = {{{2, 3}, 3, 2, 3}, {{1, 2}, 1, 1, 2}};
  dynamic_sweep<T, N, 4, 2, 2>({3, 1}, s42);
  dynamic_sweep<T, T, 4, 2, 1>({3}, s42);
  dynamic_sweep<N, T, 4, 2, 1>({3}, s42);
  const std::vector<shapes<3, 2>> s32 = {{{3}, 4, 3, 2}, {{2}, 1, 1, 1}};
  dynamic_sweep<T, N, 3, 2, 2>({2, 2}, s32);
  dynamic_sweep<T, N, 3, 2, 2>({1, 3}, s32);
}

TEST_CASE("broadcast matmul calls the GEMM hook once per batch element of C's piece, the broadcast operand's matrix each time") {
  std::mutex mu;
  std::vector<std::string> calls;
  std::vector<const double*> a_ptrs;
  auto hook = [&](sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* pa, std::int64_t lda,
                  const double* pb, std::int64_t ldb, double* pc, std::int64_t ldc, bool acc) {
    {
      std::lock_guard lk(mu);
      calls.push_back(std::string(ta == T ? "t" : "n") + (tb == T ? "t" : "n") + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k) + " ld " + std::to_string(lda) + "," + std::to_string(ldb) + "," + std::to_string(ldc));
      a_ptrs.push_back(pa);
    }
    sc::host_gemm{}(ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, acc);
  };
  const auto ga = ints<double>(6, 1), gb = ints<double>(60, 2);
  std::vector<double> got;
  sc::host::run(1, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{1});
    // A [2, 3] read transposed (stored [3, 2]) against B [4, 3, 5]: four GEMMs, all reading A.
    auto a = sc::distribute<sc::layout<R>>(mesh, ga, std::array<std::int64_t, 2>{3, 2});
    auto b = sc::distribute<sc::layout<R>>(mesh, gb, std::array<std::int64_t, 3>{4, 3, 5});
    got = sc::to_global(sc::matmul<T, N>(a, b, hook));
  });
  REQUIRE(calls.size() == 4);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i] == "tn 2x5x3 ld 2,5,5");
    CHECK(a_ptrs[i] == a_ptrs[0]);
  }
  std::vector<double> want;
  for (std::int64_t i = 0; i < 4; ++i) {
    const auto ci = ref_gemm(transposed(ga, 3, 2, 1), std::vector<double>(gb.begin() + i * 15, gb.begin() + (i + 1) * 15), 2, 3, 5);
    want.insert(want.end(), ci.begin(), ci.end());
  }
  CHECK(got == want);
}

// A GEMM functor with the strided-batch form (ops/gemm.hpp) as well as the transposed one:
// records each call and computes it with host_gemm's transposed form matrix by matrix.
struct batch_call {
  int rank;
  std::int64_t batch, stride_a, stride_b, stride_c;
  std::ptrdiff_t off_a, off_b, off_c;  // from the start of the rank's local pieces
  const double *a, *b, *c;
  bool operator==(const batch_call& o) const {
    return std::tie(rank, batch, stride_a, stride_b, stride_c, off_a, off_b, off_c) ==
           std::tie(o.rank, o.batch, o.stride_a, o.stride_b, o.stride_c, o.off_a, o.off_b, o.off_c);
  }
};
std::ostream& operator<<(std::ostream& os, const batch_call& x) {
  return os << "rank " << x.rank << ": batch " << x.batch << ", strides " << x.stride_a << "," << x.stride_b << "," << x.stride_c
            << ", offsets " << x.off_a << "," << x.off_b << "," << x.off_c;
}

struct batch_recorder {
  std::mutex* mu;
  std::vector<batch_call>* calls;
  int* single;  // calls of the one-matrix form
  int rank;
  void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
                  const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool acc) const {
    {
      std::lock_guard lk(*mu);
      ++*single;
    }
    sc::host_gemm{}(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
  }
  void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
                  std::int64_t sa, const double* b, std::int64_t ldb, std::int64_t sb, double* c, std::int64_t ldc, std::int64_t scc,
                  std::int64_t batch, bool acc) const {
    {
      std::lock_guard lk(*mu);
      calls->push_back({rank, batch, sa, sb, scc, 0, 0, 0, a, b, c});
    }
    for (std::int64_t i = 0; i < batch; ++i) sc::host_gemm{}(ta, tb, m, n, k, a + i * sa, lda, b + i * sb, ldb, c + i * scc, ldc, acc);
  }
};

/// matmul<OA, OB> of `s` on a 1-axis mesh of `ranks` with a batch_recorder: checks C against
/// the reference and returns the calls by rank, in C's order.
template <sc::gemm_op OA, sc::gemm_op OB, class LA, class LB, int RA, int RB>
std::vector<batch_call> batched_calls(int ranks, const shapes<RA, RB>& s, int& single) {
  std::mutex mu;
  std::vector<batch_call> calls;
  const operands<RA, RB> o(s, OA, OB);
  std::vector<double> got;
  sc::host::run(ranks, [&](sc::host::communicator& comm) {
    const int r = comm.rank();
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{ranks});
    auto a = sc::distribute<LA>(mesh, o.a, s.stored_a(OA));
    auto b = sc::distribute<LB>(mesh, o.b, s.stored_b(OB));
    auto c = sc::matmul<OA, OB>(a, b, batch_recorder{&mu, &calls, &single, r});
    {
      std::lock_guard lk(mu);
      for (auto& x : calls)
        if (x.rank == r) {
          x.off_a = x.a - a.data();
          x.off_b = x.b - b.data();
          x.off_c = x.c - c.data();
        }
    }
    auto g = sc::to_global(c);
    if (r == 0) got = g;
  });
  CHECK(got == o.c);
  std::sort(calls.begin(), calls.end(), [](const batch_call& x, const batch_call& y) { return std::tie(x.rank, x.off_c) < std::tie(y.rank, y.off_c); });
  return calls;
}

void same_calls(const std::vector<batch_call>& got, const std::vector<batch_call>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i]);
}

TEST_CASE("matmul calls a GEMM functor's strided-batch form once per run of evenly spaced matrices, stride 0 for a broadcast operand") {
  int single = 0;
  // A [x=3, h=2, m=2, k=3] @ B [h=2, k=3, n=4], x split 2 + 1: rank 0 has 4 of C's matrices,
  // B's 2 repeat, so two calls of 2 (B from its start each time); rank 1 one call of 2.
  const shapes<4, 3> s43{{3, 2}, 2, 3, 4};
  std::vector<batch_call> want = {{0, 2, 6, 12, 8, 0, 0, 0, nullptr, nullptr, nullptr},
                                  {0, 2, 6, 12, 8, 12, 0, 16, nullptr, nullptr, nullptr},
                                  {1, 2, 6, 12, 8, 0, 0, 0, nullptr, nullptr, nullptr}};
  same_calls(batched_calls<N, N, sc::layout<S0>, sc::layout<R>>(2, s43, single), want);
  // The same with B read transposed (stored [h, n, k]): the strides are the matrices' sizes.
  same_calls(batched_calls<N, T, sc::layout<S0>, sc::layout<R>>(2, s43, single), want);
  // A [m=2, k=3] read transposed @ B [4, k=3, n=5] on one rank: one call of 4, A's stride 0.
  const shapes<2, 3> s23{{4}, 2, 3, 5};
  want = {{0, 4, 0, 15, 10, 0, 0, 0, nullptr, nullptr, nullptr}};
  same_calls(batched_calls<T, N, sc::layout<R>, sc::layout<R>>(1, s23, single), want);
  // A [h=3, m=2, k=2] @ B [b=2, h=3, k=2, n=3], h split 2 + 1 in both: rank 0 has C [2, 2, 2, 3],
  // A's 2 matrices repeat (two calls of 2, A from its start each time); rank 1 has C [2, 1, 2, 3]
  // and one matrix of A (stride 0, one call of 2).
  const shapes<3, 4> s34{{2, 3}, 2, 2, 3};
  want = {{0, 2, 4, 6, 6, 0, 0, 0, nullptr, nullptr, nullptr},
          {0, 2, 4, 6, 6, 0, 12, 12, nullptr, nullptr, nullptr},
          {1, 2, 0, 6, 6, 0, 0, 0, nullptr, nullptr, nullptr}};
  same_calls(batched_calls<N, N, sc::layout<S0>, sc::layout<S1>>(2, s34, single), want);
  // Q K^T, Q [3, 2, 4] and K [3, 5, 4] with the batch split 2 + 1: one call per rank (rank 1's
  // batch of one reads one matrix of each: strides 0).
  const shapes<3, 3> s33{{3}, 2, 4, 5};
  want = {{0, 2, 8, 20, 10, 0, 0, 0, nullptr, nullptr, nullptr}, {1, 1, 0, 0, 10, 0, 0, 0, nullptr, nullptr, nullptr}};  // one matrix each
  same_calls(batched_calls<N, T, sc::layout<S0>, sc::layout<S0>>(2, s33, single), want);
  // A matrix B with A not transposed stays one call of the transposed form over A's rows.
  const shapes<3, 2> s32{{3}, 2, 3, 4};
  CHECK(batched_calls<N, N, sc::layout<S0>, sc::layout<R>>(2, s32, single).empty());
  CHECK(single == 2);
}
