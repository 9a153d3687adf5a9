// matmul: the per-axis rule table (checked at compile time) and differential tests
// against a single-rank global GEMM, including uneven shards and empty pieces.
#include <doctest/doctest.h>

#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace sc = shardcast;

namespace {
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

template <class T>
std::vector<T> ints(std::int64_t n, int salt) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<T>((i * 5 + salt) % 7 - 3);
  return g;
}
template <class T>
std::vector<T> ref_gemm(const std::vector<T>& a, const std::vector<T>& b, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::vector<T> c(static_cast<std::size_t>(m * n), T{});
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T s{};
      for (std::int64_t p = 0; p < k; ++p) s += a[static_cast<std::size_t>(i * k + p)] * b[static_cast<std::size_t>(p * n + j)];
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  return c;
}

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
