// matmul: the per-axis rule table (checked at compile time, and at run time for dynamic
// layouts) and differential tests against a single-rank global GEMM, including uneven
// shards, empty pieces, and dynamic layouts on meshes of up to 6 axes.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
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
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using P = sc::partial<sc::sum>;

// Rule table on every axis of 1-, 2- and 3-axis meshes, each legal pair in every position.
template <int Axis, class A, class B>
constexpr bool rule_is(auto c) {
  return std::is_same_v<typename sc::detail::matmul_rule<Axis, A, B>::type, decltype(c)>;
}
template <int Axis>
constexpr bool table_on_axis() {
  return rule_is<Axis, S0, R>(S0{}) && rule_is<Axis, R, S1>(S1{}) && rule_is<Axis, S1, S0>(P{}) && rule_is<Axis, R, R>(R{}) &&
         rule_is<Axis, P, R>(P{}) && rule_is<Axis, R, P>(P{});
}
static_assert(table_on_axis<0>() && table_on_axis<1>() && table_on_axis<2>() && table_on_axis<7>());

template <class X, class Y, class Z>
struct legal3 {};
template <class... X>
struct list {};
// Every combination of legal pairs on a 2-axis mesh gives the per-axis results.
template <class PA0, class PB0, class PC0, class PA1, class PB1, class PC1>
constexpr bool pair2() {
  return std::is_same_v<sc::matmul_layout_t<sc::layout<PA0, PA1>, sc::layout<PB0, PB1>>, sc::layout<PC0, PC1>>;
}
template <class T0>
struct row;
template <class A0, class B0, class C0>
struct row<legal3<A0, B0, C0>> {
  template <class A1, class B1, class C1>
  static constexpr bool with(legal3<A1, B1, C1>) {
    return pair2<A0, B0, C0, A1, B1, C1>();
  }
};
// (cross product of the 6 legal triples on axis 0 with the 6 on axis 1)
template <class... L>
constexpr bool cross(list<L...>) {
  return (([]<class L0>(L0) { return (row<L0>::with(L{}) && ...); }(L{})) && ...);
}
using legal = list<legal3<S0, R, S0>, legal3<R, S1, S1>, legal3<S1, S0, P>, legal3<R, R, R>, legal3<P, R, P>, legal3<R, P, P>>;
static_assert(cross(legal{}));


// Distributes A and B, multiplies, gathers C on every rank, compares with the reference.
template <class T, class LA, class LB, int N>
void check(std::array<int, N> shape, std::int64_t m, std::int64_t k, std::int64_t n) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const auto a = ints<T>(m * k, 1), b = ints<T>(k * n, 4);
  const auto ref = ref_gemm(a, b, m, k, n);
  std::mutex mu;
  std::vector<std::string> bad;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    auto da = sc::distribute<LA>(mesh, a, std::array<std::int64_t, 2>{m, k});
    auto db = sc::distribute<LB>(mesh, b, std::array<std::int64_t, 2>{k, n});
    auto dc = sc::matmul(da, db);
    static_assert(std::is_same_v<typename decltype(dc)::layout_type, sc::matmul_layout_t<LA, LB>>);
    auto g = sc::to_global(dc);
    if (g != ref) {
      std::lock_guard lk(mu);
      bad.push_back("rank " + std::to_string(comm.rank()) + " layout " + sc::to_string(dc.layout()));
    }
  });
  for (auto& s : bad) FAIL_CHECK(s);
  CHECK(bad.empty());
}

template <class T, class LA, class LB>
void check2(std::int64_t m, std::int64_t k, std::int64_t n) {
  INFO("A " << sc::to_string(LA::desc) << " B " << sc::to_string(LB::desc) << " " << m << "x" << k << "x" << n);
  check<T, LA, LB, 2>({2, 2}, m, k, n);
  check<T, LA, LB, 2>({3, 1}, m, k, n);
  check<T, LA, LB, 2>({1, 3}, m, k, n);
}

template <class T, class A0, class B0, class A1, class B1>
void cell(legal3<A0, B0, void>*, legal3<A1, B1, void>*) {
  using LA = sc::layout<A0, A1>;
  using LB = sc::layout<B0, B1>;
  check2<T, LA, LB>(5, 7, 3);
  check2<T, LA, LB>(4, 6, 2);
  check2<T, LA, LB>(2, 1, 2);  // pieces of extent 0 on some ranks
}
}  // namespace

TEST_CASE_TEMPLATE("matmul on 1-axis meshes matches a global GEMM", T, std::int64_t, double) {
  for (int n : {1, 2, 3, 4}) {
    check<T, sc::layout<S0>, sc::layout<R>, 1>({n}, 5, 7, 3);
    check<T, sc::layout<R>, sc::layout<S1>, 1>({n}, 5, 7, 3);
    check<T, sc::layout<S1>, sc::layout<S0>, 1>({n}, 5, 7, 3);
    check<T, sc::layout<R>, sc::layout<R>, 1>({n}, 5, 7, 3);
    check<T, sc::layout<P>, sc::layout<R>, 1>({n}, 5, 7, 3);
    check<T, sc::layout<R>, sc::layout<P>, 1>({n}, 5, 7, 3);
  }
}

TEST_CASE("matmul: every pair of legal per-axis rules on 2x2, 3x1 and 1x3 meshes, uneven shards") {
  using pairs = list<legal3<S0, R, void>, legal3<R, S1, void>, legal3<S1, S0, void>, legal3<R, R, void>, legal3<P, R, void>,
                           legal3<R, P, void>>;
  []<class... X>(list<X...>) {
    (([]<class Y>(Y*) { (cell<std::int64_t>(static_cast<Y*>(nullptr), static_cast<X*>(nullptr)), ...); }(static_cast<X*>(nullptr))), ...);
  }(pairs{});
}

TEST_CASE("matmul: nested shards of one dim over two axes") {
  check2<std::int64_t, sc::layout<S0, S0>, sc::layout<R, R>>(7, 5, 3);
  check2<std::int64_t, sc::layout<S1, S1>, sc::layout<S0, S0>>(3, 7, 5);
  check2<std::int64_t, sc::layout<R, R>, sc::layout<S1, S1>>(3, 4, 9);
}

TEST_CASE("matmul: mismatched inner extents throw layout_error") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    auto a = sc::distribute<sc::layout<R>>(mesh, ints<int>(6, 0), std::array<std::int64_t, 2>{2, 3});
    auto b = sc::distribute<sc::layout<R>>(mesh, ints<int>(8, 0), std::array<std::int64_t, 2>{4, 2});
    CHECK_THROWS_AS(sc::matmul(a, b), sc::layout_error);
  });
}

TEST_CASE("matmul: a custom local GEMM hook is used") {
  int calls = 0;
  std::mutex mu;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    auto a = sc::distribute<sc::layout<S0>>(mesh, ints<int>(6, 0), std::array<std::int64_t, 2>{2, 3});
    auto b = sc::distribute<sc::layout<R>>(mesh, ints<int>(6, 2), std::array<std::int64_t, 2>{3, 2});
    auto hook = [&](auto... args) {
      { std::lock_guard lk(mu); ++calls; }
      sc::host_gemm{}(args...);
    };
    auto c = sc::matmul(a, b, hook);
    CHECK(sc::to_global(c) == ref_gemm(ints<int>(6, 0), ints<int>(6, 2), 2, 3, 2));
  });
  CHECK(calls == 2);
}

// The hook gets BLAS-valid arguments (row-major: lda >= max(1, k), ldb >= max(1, n), ldc >=
// max(1, n)) on a rank whose piece of the contracted dim is empty while its C piece is not:
// A [2, 1] split along k over 2 ranks. It once passed lda = 0 there, which cblas_dgemm
// refuses ("Parameter 9 ... was incorrect") by ending the process.
TEST_CASE("matmul: the GEMM hook gets BLAS-valid leading dimensions when a rank's k is 0") {
  std::atomic<int> bad{0}, empty_k{0};
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    auto a = sc::distribute<sc::layout<S1>>(mesh, std::vector<double>{1, 2}, std::array<std::int64_t, 2>{2, 1});
    auto b = sc::distribute<sc::layout<S0>>(mesh, std::vector<double>{3, 4}, std::array<std::int64_t, 2>{1, 2});
    auto hook = [&](std::int64_t m, std::int64_t n, std::int64_t k, const double* pa, std::int64_t lda, const double* pb, std::int64_t ldb,
                    double* pc, std::int64_t ldc) {
      if (k == 0) ++empty_k;
      if (lda < std::max<std::int64_t>(1, k) || ldb < std::max<std::int64_t>(1, n) || ldc < std::max<std::int64_t>(1, n)) ++bad;
      sc::host_gemm{}(m, n, k, pa, lda, pb, ldb, pc, ldc);
    };
    auto c = sc::matmul(a, b, hook);
    CHECK(sc::to_global(c) == std::vector<double>{3, 4, 6, 8});
  });
  CHECK(empty_k == 1);
  CHECK(bad == 0);
}

// ---------------------------------------------------------------------------------------
// Dynamic layouts: the same table applied at run time.
// ---------------------------------------------------------------------------------------
namespace {
using pd = sc::placement_desc;

/// The test's own table: C's placement on an axis for (A, B), or false when illegal.
bool table_pair(const pd& a, const pd& b, pd& c) {
  const pd r = pd::make_replicate(), s0 = pd::make_shard(0), s1 = pd::make_shard(1), p = pd::make_partial(sc::reduce_op::sum);
  if (a == s0 && b == r) return c = s0, true;
  if (a == r && b == s1) return c = s1, true;
  if (a == s1 && b == s0) return c = p, true;
  if (a == r && b == r) return c = r, true;
  if (a == p && b == r) return c = p, true;
  if (a == r && b == p) return c = p, true;
  return false;
}

/// C's layout by the table, or the first illegal axis (-1 when legal).
int table_layout(const sc::runtime_layout& a, const sc::runtime_layout& b, sc::runtime_layout& c) {
  c.naxes = a.naxes;
  for (int i = 0; i < a.naxes; ++i)
    if (!table_pair(a[i], b[i], c[i])) return i;
  return -1;
}

/// matmul of dynamic-layout A and B (partial terms that differ from rank to rank) against
/// the global GEMM, or the layout_error an illegal pair must throw. "" when all is well.
template <class Mesh>
std::string dynamic_case(const Mesh& mesh, const sc::runtime_layout& la, const sc::runtime_layout& lb, std::int64_t m, std::int64_t k,
                         std::int64_t n) {
  const auto ga = ints<std::int64_t>(m * k, 1), gb = ints<std::int64_t>(k * n, 4);
  auto a = optest::make_terms(mesh, la, ga, std::array<std::int64_t, 2>{m, k});
  auto b = optest::make_terms(mesh, lb, gb, std::array<std::int64_t, 2>{k, n});
  const auto a_before = optest::local_copy(a), b_before = optest::local_copy(b);
  sc::runtime_layout want;
  const int bad_axis = table_layout(la, lb, want);
  const std::string what = "A " + sc::to_string(la) + ", B " + sc::to_string(lb) + ", " + std::to_string(m) + "x" + std::to_string(k) +
                           "x" + std::to_string(n) + ": ";
  if (bad_axis >= 0) return optest::refused_naming_axis([&] { return sc::matmul(a, b); }, what, bad_axis, la, lb);
  auto c = sc::matmul(a, b);
  static_assert(std::is_same_v<typename decltype(c)::layout_type, sc::dynamic_layout>);
  if (!(c.layout() == want)) return what + "C's layout is " + sc::to_string(c.layout()) + ", the table says " + sc::to_string(want);
  if (optest::local_copy(a) != a_before || optest::local_copy(b) != b_before) return what + "an input changed";
  const std::string diff = optest::compare_global(c, ref_gemm(ga, gb, m, k, n));
  return diff.empty() ? "" : what + diff;
}

template <int N>
void dynamic_sweep(std::array<int, N> shape, const std::vector<sc::runtime_layout>& ls) {
  INFO("mesh " << optest::shape_name<N>(shape));
  int nranks = 1;
  for (int s : shape) nranks *= s;
  optest::failures bad;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    for (const auto& la : ls)
      for (const auto& lb : ls) {
        bad.add(comm.rank(), dynamic_case(mesh, la, lb, 5, 7, 3));
        bad.add(comm.rank(), dynamic_case(mesh, la, lb, 2, 1, 2));  // pieces of extent 0 on some ranks
      }
  });
  bad.report();
}
}  // namespace

TEST_CASE("matmul's run-time rule gives the table's placement, or refuses, for every placement pair") {
  const auto ps = optest::placements(3, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min, sc::reduce_op::prod});
  for (const auto& a : ps)
    for (const auto& b : ps) {
      INFO(sc::to_string(a) << ", " << sc::to_string(b));
      pd want{};
      const bool legal = table_pair(a, b, want);
      const auto r = sc::detail::matmul_axis_rule(a, b);
      CHECK((r.err == sc::detail::op_rule::ok) == legal);
      if (legal) CHECK(r.out == want);
    }
}

TEST_CASE("matmul on dynamic layouts: every pair of layouts from R, S(0), S(1), P(sum), P(max) on 2x2, 3x1 and 1x3 meshes") {
  const auto ls = optest::layouts(optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::max}), 2);
  dynamic_sweep<2>({2, 2}, ls);
  dynamic_sweep<2>({3, 1}, ls);
  dynamic_sweep<2>({1, 3}, ls);
  dynamic_sweep<1>({3}, optest::layouts(optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::max}), 1));
}

TEST_CASE("matmul with one dynamic and one compile-time operand") {
  optest::failures bad;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const auto ga = ints<std::int64_t>(5 * 7, 1), gb = ints<std::int64_t>(7 * 3, 4);
    const auto ref = ref_gemm(ga, gb, 5, 7, 3);
    auto sa = sc::distribute<sc::layout<S1, S0>>(mesh, ga, std::array<std::int64_t, 2>{5, 7});
    auto da = sc::distribute(mesh, sc::runtime_layout::parse("S(1),S(0)"), ga, std::array<std::int64_t, 2>{5, 7});
    auto sb = sc::distribute<sc::layout<S0, R>>(mesh, gb, std::array<std::int64_t, 2>{7, 3});
    auto db = sc::distribute(mesh, sc::runtime_layout::parse("S(0),R"), gb, std::array<std::int64_t, 2>{7, 3});
    auto c1 = sc::matmul(sa, db);
    auto c2 = sc::matmul(da, sb);
    static_assert(std::is_same_v<typename decltype(c1)::layout_type, sc::dynamic_layout>);
    static_assert(std::is_same_v<typename decltype(c2)::layout_type, sc::dynamic_layout>);
    for (const auto* c : {&c1, &c2}) {
      if (!(c->layout() == sc::runtime_layout::parse("P(sum),S(0)"))) bad.add(comm.rank(), "layout " + sc::to_string(c->layout()));
      bad.add(comm.rank(), optest::compare_global(*c, ref));
    }
    auto wrong = sc::distribute(mesh, sc::runtime_layout::parse("R,S(0)"), gb, std::array<std::int64_t, 2>{7, 3});
    try {
      (void)sc::matmul(sa, wrong);
      bad.add(comm.rank(), "S(1),S(0) x R,S(0) did not throw");
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("on mesh axis 0 A is S(1) and B is R") == std::string::npos) bad.add(comm.rank(), e.what());
    }
  });
  bad.report();
}

// Meshes of up to 6 axes and 16 ranks (sizes 1 to 3, shuffled), random legal pairs on
// every axis: nested shards of m, k and n over several axes, partial sums over several.
TEST_CASE("matmul on dynamic layouts over random meshes of 1 to 6 axes") {
  std::mt19937_64 g(20261205);
  const pd r = pd::make_replicate(), s0 = pd::make_shard(0), s1 = pd::make_shard(1), p = pd::make_partial(sc::reduce_op::sum);
  const pd pairs[6][2] = {{s0, r}, {r, s1}, {s1, s0}, {r, r}, {p, r}, {r, p}};
  const std::int64_t exts[] = {0, 1, 2, 3, 5, 7, 11};
  auto batch = [&]<int N>() {
    const auto shape = optest::random_shape<N>(g(), 16);
    int nranks = 1;
    for (int s : shape) nranks *= s;
    struct spec {
      sc::runtime_layout a, b;
      std::int64_t m, k, n;
    };
    std::vector<spec> cases(8);
    for (auto& c : cases) {
      c.a.naxes = c.b.naxes = N;
      for (int i = 0; i < N; ++i) {
        const auto& q = pairs[g() % 6];
        c.a[i] = q[0];
        c.b[i] = q[1];
      }
      c.m = exts[g() % 7], c.k = exts[g() % 7], c.n = exts[g() % 7];
    }
    INFO("mesh " << optest::shape_name<N>(shape));
    optest::failures bad;
    sc::host::run(nranks, [&](sc::host::communicator& comm) {
      auto mesh = sc::make_mesh(comm, shape);
      for (const auto& c : cases) bad.add(comm.rank(), dynamic_case(mesh, c.a, c.b, c.m, c.k, c.n));
    });
    bad.report();
  };
  for (int round = 0; round < 6 * optest::random_rounds; ++round) {  // 12 rounds (6 in the sanitizer builds)
    batch.template operator()<1>();
    batch.template operator()<2>();
    batch.template operator()<3>();
    batch.template operator()<4>();
    batch.template operator()<5>();
    batch.template operator()<6>();
  }
}
