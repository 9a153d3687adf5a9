// reduce<D, Op>: the per-axis rule table at compile time, differential tests against a
// single-rank reduction of the global tensor for every layout on 1- to 3-axis meshes (1 to 8
// ranks, uneven and empty pieces, extent-0 dims) and for random layouts on 4- to 6-axis
// meshes, the host and portable local kernels, and misuse on dynamic layouts.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/reduce.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;
using optest::pd;
using sc::reduce_op;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using S2 = sc::shard<2>;
using Ps = sc::partial<sc::sum>;
using Pa = sc::partial<sc::avg>;
using Pm = sc::partial<sc::max>;
using Pn = sc::partial<sc::min>;
using Pp = sc::partial<sc::prod>;
using E = sc::detail::op_rule;

constexpr reduce_op ops5[] = {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min, reduce_op::prod};

// The rule written from the specification (docs/02_operators.md), case by case; `ints`:
// the element type is integral.
constexpr sc::detail::axis_rule expected(pd p, int D, reduce_op op, bool keep, bool ints = false) {
  using sc::detail::axis_rule;
  switch (p.kind) {
    case sc::placement_kind::replicate: return {E::ok, p};
    case sc::placement_kind::shard:
      if (p.dim == D) return {E::ok, pd::make_partial(op == reduce_op::avg ? reduce_op::sum : op)};
      if (p.dim < D || keep) return {E::ok, p};
      return {E::ok, pd::make_shard(p.dim - 1)};
    case sc::placement_kind::partial:
      if (p.op == op) return {E::ok, p};
      if (op == reduce_op::avg && p.op == reduce_op::sum) return {E::ok, p};
      if (op == reduce_op::sum && p.op == reduce_op::avg) return {ints ? E::integer_mean : E::ok, p};  // a truncated mean does not add up
      return {E::reduce_partial_op, p};
  }
  return {};
}

constexpr bool axis_table() {
  for (int D = 0; D < 3; ++D)
    for (reduce_op op : ops5)
      for (bool keep : {false, true}) {
        for (int d = 0; d < 3; ++d) {
          const auto r = sc::detail::reduce_axis_rule(pd::make_shard(d), D, op, keep), w = expected(pd::make_shard(d), D, op, keep);
          if (r.err != w.err || !(r.out == w.out)) return false;
        }
        for (pd p : {pd::make_replicate(), pd::make_partial(reduce_op::sum), pd::make_partial(reduce_op::avg), pd::make_partial(reduce_op::max),
                     pd::make_partial(reduce_op::min), pd::make_partial(reduce_op::prod)}) {
          const auto r = sc::detail::reduce_axis_rule(p, D, op, keep), w = expected(p, D, op, keep);
          if (r.err != w.err || !(r.out == w.out)) return false;
          const auto ri = sc::detail::reduce_axis_rule(p, D, op, keep, true), wi = expected(p, D, op, keep, true);
          if (ri.err != wi.err || !(ri.out == wi.out)) return false;
        }
      }
  return true;
}
static_assert(axis_table());

// Hand-picked whole-layout verdicts, including the mixed-partials refusal of avg.
constexpr bool layout_cases() {
  using sc::detail::reduce_rules;
  const sc::runtime_layout a{pd::make_shard(1), pd::make_partial(reduce_op::avg)};
  const auto ra = reduce_rules(a, 1, reduce_op::avg, false);
  if (ra.err != E::reduce_mixed_partials || ra.axis != 0) return false;
  const sc::runtime_layout b{pd::make_partial(reduce_op::sum), pd::make_shard(1)};
  const auto rb = reduce_rules(b, 1, reduce_op::avg, false);
  if (rb.err != E::ok || !(rb.out == sc::runtime_layout{pd::make_partial(reduce_op::sum), pd::make_partial(reduce_op::sum)})) return false;
  const sc::runtime_layout c{pd::make_replicate(), pd::make_partial(reduce_op::max), pd::make_shard(0)};
  const auto rc = reduce_rules(c, 0, reduce_op::sum, false);
  if (rc.err != E::reduce_partial_op || rc.axis != 1) return false;
  // sum over a partial<avg>: kept (floating point), mixed with a sharded D's partial<sum> refused
  const sc::runtime_layout d{pd::make_partial(reduce_op::avg), pd::make_shard(0)};
  const auto rd = reduce_rules(d, 1, reduce_op::sum, false);
  if (rd.err != E::ok || !(rd.out == sc::runtime_layout{pd::make_partial(reduce_op::avg), pd::make_shard(0)})) return false;
  const auto rdi = reduce_rules(d, 1, reduce_op::sum, false, true);
  if (rdi.err != E::integer_mean || rdi.axis != 0) return false;
  const auto re = reduce_rules(d, 0, reduce_op::sum, false);
  return re.err == E::reduce_mixed_partials && re.axis == 1;
}
static_assert(layout_cases());

// Compile-time layouts on 1- to 3-axis meshes, each placement at every position.
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S0>, 1, 0, sc::sum>, sc::layout<Ps>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S0, S1>, 2, 1, sc::max>, sc::layout<S0, Pm>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S1, S0>, 2, 0, sc::min>, sc::layout<S0, Pn>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S1, S0>, 2, 0, sc::min, sc::keep_dim>, sc::layout<S1, Pn>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S2, R, S0>, 3, 1, sc::prod>, sc::layout<S1, R, S0>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<R, S1, Pp>, 3, 1, sc::prod>, sc::layout<R, Pp, Pp>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<Ps, S2, S1>, 3, 2, sc::avg>, sc::layout<Ps, Ps, S1>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<Pa, R, R>, 3, 0, sc::avg>, sc::layout<Pa, R, R>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S0, S0, S2>, 3, 0, sc::sum>, sc::layout<Ps, Ps, S1>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<Pm, S0>, 2, 1, sc::max>, sc::layout<Pm, S0>>);
static_assert(std::is_same_v<sc::reduce_layout_t<sc::layout<S1, Pa>, 2, 0, sc::sum, false, double>, sc::layout<S0, Pa>>);

// ---------------------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------------------
template <class T>
T ident(reduce_op op) {
  switch (op) {
    case reduce_op::sum: case reduce_op::avg: return T(0);
    case reduce_op::prod: return T(1);
    case reduce_op::max: return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    case reduce_op::min: return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  return T(0);
}

/// Reduces row-major [outer, n, inner] over n, by brute force in double (then cast).
template <class T>
std::vector<T> ref_reduce3(const std::vector<T>& g, std::int64_t outer, std::int64_t n, std::int64_t inner, reduce_op op) {
  std::vector<T> r(static_cast<std::size_t>(outer * inner));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      T acc = ident<T>(op);
      double s = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const T v = g[static_cast<std::size_t>((o * n + j) * inner + i)];
        s += static_cast<double>(v);
        if (op == reduce_op::sum) acc = static_cast<T>(acc + v);
        if (op == reduce_op::prod) acc = static_cast<T>(acc * v);
        if (op == reduce_op::max) acc = std::max(acc, v);
        if (op == reduce_op::min) acc = std::min(acc, v);
      }
      if (op == reduce_op::avg) acc = static_cast<T>(s / static_cast<double>(n));
      r[static_cast<std::size_t>(o * inner + i)] = acc;
    }
  return r;
}
template <class T, std::size_t Rk>
std::vector<T> ref_reduce(const std::vector<T>& g, const std::array<std::int64_t, Rk>& e, int D, reduce_op op) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < D; ++d) outer *= e[static_cast<std::size_t>(d)];
  for (int d = D + 1; d < static_cast<int>(Rk); ++d) inner *= e[static_cast<std::size_t>(d)];
  return ref_reduce3(g, outer, e[static_cast<std::size_t>(D)], inner, op);
}

/// sum and avg accept each other's partials (floating-point types), as long as a sharded D
/// (which gives partial<sum>) does not meet a partial<avg>.
bool legal(const sc::runtime_layout& l, int D, reduce_op op, bool ints) {
  bool shards_d = false, has_avg = false;
  const bool linear = op == reduce_op::sum || op == reduce_op::avg;
  for (int a = 0; a < l.naxes; ++a) {
    if (l[a].is_shard(D)) shards_d = true;
    if (l[a].is_partial()) {
      if (l[a].op == reduce_op::avg) has_avg = true;
      const bool linear_pair = linear && (l[a].op == reduce_op::sum || l[a].op == reduce_op::avg);
      if (!(l[a].op == op || linear_pair)) return false;
      if (ints && l[a].op == reduce_op::avg) return false;
    }
  }
  return !(linear && shards_d && has_avg);
}

template <int D, class Op, bool Keep, class T, class X>
void one(optest::failures& f, const X& x, const std::vector<T>& ref, double tol) {
  const auto& l = x.layout();
  const bool ok = legal(l, D, Op::value, std::is_integral_v<T>);
  std::string what = "reduce<" + std::to_string(D) + ", " + sc::to_string(Op::value) + (Keep ? ", keep_dim" : "") + "> on " + sc::to_string(l);
  try {
    const auto y = sc::reduce<D, Op, Keep>(x);
    static_assert(std::remove_cvref_t<decltype(y)>::rank == (Keep ? X::rank : X::rank - 1));
    if (!ok) return f.add(what + ": expected layout_error");
    sc::runtime_layout want = l;  // the test's own table, axis by axis (not the library's reduce_rules)
    for (int a = 0; a < l.naxes; ++a) want[a] = expected(l[a], D, Op::value, Keep, std::is_integral_v<T>).out;
    if (!(y.layout() == want)) f.add(what + ": layout " + sc::to_string(y.layout()));
    const std::string err = optest::compare_global(y, ref, tol);
    if (!err.empty()) f.add(what + ": " + err);
  } catch (const sc::layout_error& e) {
    if (ok) f.add(what + ": unexpected " + e.what());
  }
}

// Every layout built from R, S(d) and two partial ops, for every D and reduce op (or, when
// `sample` > 0, that many random ones per op, drawn from `seed`).
template <class T, int N, std::size_t Rk>
void all_layouts(std::array<int, N> shape, std::array<std::int64_t, Rk> e, bool with_avg, int sample = 0, std::uint64_t seed = 0) {
  constexpr int Rank = static_cast<int>(Rk);
  INFO("mesh " << optest::shape_name<N>(shape) << " rank " << Rank << " extents " << e[0] << "x" << e[Rk - 1]);
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = optest::volume(e);
  const auto g = optest::ints<T>(n, 3), gu = optest::units<T>(n, 1);
  const double tol = std::is_integral_v<T> ? 0 : 1e-5;
  std::vector<std::vector<T>> refs[5];  // [op][D]
  for (int oi = 0; oi < 5; ++oi)
    for (int D = 0; D < Rank; ++D) refs[oi].push_back(ref_reduce(ops5[oi] == reduce_op::prod ? gu : g, e, D, ops5[oi]));
  optest::failures f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    for (int oi = 0; oi < 5; ++oi) {
      const reduce_op op = ops5[oi];
      if (op == reduce_op::avg && !with_avg) continue;
      const reduce_op other = op == reduce_op::max ? reduce_op::sum : reduce_op::max;
      // the partial<sum> that avg accepts, the partial<avg> that sum accepts (refused over integers)
      const reduce_op also = op == reduce_op::avg ? reduce_op::sum : op == reduce_op::sum ? reduce_op::avg : op;
      const auto ps = optest::placements(Rank, {op, other, also});
      for (const auto& l : sample > 0 ? optest::random_layouts(ps, N, sample, seed + static_cast<std::uint64_t>(oi)) : optest::layouts(ps, N)) {
        const auto x = optest::make_terms(m, l, op == reduce_op::prod ? gu : g, e);
        const auto before = optest::local_copy(x);
        [&]<int... D>(std::integer_sequence<int, D...>) {
          auto run = [&]<class Op>(Op) {
            ((one<D, Op, false>(f, x, refs[oi][D], tol), one<D, Op, true>(f, x, refs[oi][D], tol)), ...);
          };
          switch (op) {
            case reduce_op::sum: run(sc::sum{}); break;
            case reduce_op::max: run(sc::max{}); break;
            case reduce_op::min: run(sc::min{}); break;
            case reduce_op::prod: run(sc::prod{}); break;
            case reduce_op::avg:
              if constexpr (!std::is_integral_v<T>) run(sc::avg{});
              break;
          }
        }(std::make_integer_sequence<int, Rank>{});
        if (optest::local_copy(x) != before) f.add("reduce modified its input on " + sc::to_string(l));
      }
    }
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
}  // namespace

TEST_CASE("reduce rule table holds at run time too") {
  CHECK(axis_table());
  CHECK(layout_cases());
}

TEST_CASE_TEMPLATE("local reduction kernels (host loops and the portable halving tree) match a brute-force reduction", T, int, double) {
  for (std::int64_t outer : {0, 1, 2, 3})
    for (std::int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 13})
      for (std::int64_t inner : {0, 1, 3}) {
        const auto g = optest::units<T>(outer * n * inner, static_cast<int>(n));
        for (reduce_op op : ops5) {
          if (op == reduce_op::avg && std::is_integral_v<T>) continue;
          INFO("outer " << outer << " n " << n << " inner " << inner << " op " << std::string(sc::to_string(op)));
          const auto want = ref_reduce3(g, outer, n, inner, op);
          std::vector<T> host(want.size()), port(want.size());
          sc::detail::reduce_exec<sc::host_memory>::run(g.data(), host.data(), static_cast<std::size_t>(outer), static_cast<std::size_t>(n),
                                                        static_cast<std::size_t>(inner), op, n);
          sc::detail::portable_reduce<sc::host_memory>::run(g.data(), port.data(), static_cast<std::size_t>(outer), static_cast<std::size_t>(n),
                                                            static_cast<std::size_t>(inner), op, n, sc::host_stream{});
          for (std::size_t i = 0; i < want.size(); ++i) {
            if (op == reduce_op::avg && n == 0) {
              CHECK(std::isnan(static_cast<double>(host[i])));
              CHECK(std::isnan(static_cast<double>(port[i])));
            } else {
              // small integers: every order of summation is exact, and avg divides the same sum by n
              CHECK(host[i] == want[i]);
              CHECK(port[i] == want[i]);
            }
          }
        }
      }
}

TEST_CASE_TEMPLATE("reduce on every layout of 1-axis meshes (1 to 8 ranks)", T, int, double) {
  const bool avg = !std::is_integral_v<T>;
  for (int r : {1, 2, 3, 8}) all_layouts<T, 1>({r}, std::array<std::int64_t, 2>{5, 3}, avg);
  all_layouts<T, 1>({4}, std::array<std::int64_t, 1>{3}, avg);         // rank 1 -> rank 0, an empty piece
  all_layouts<T, 1>({3}, std::array<std::int64_t, 2>{0, 4}, avg);      // reduced dim of extent 0
  all_layouts<T, 1>({2}, std::array<std::int64_t, 3>{3, 2, 5}, avg);
}

TEST_CASE("reduce on every layout of 2- and 3-axis meshes") {
  all_layouts<int, 2>({2, 2}, std::array<std::int64_t, 2>{5, 3}, false);
  all_layouts<double, 2>({3, 2}, std::array<std::int64_t, 2>{4, 7}, true);
  all_layouts<float, 2>({1, 3}, std::array<std::int64_t, 3>{2, 5, 3}, true);
  all_layouts<int, 3>({2, 2, 2}, std::array<std::int64_t, 2>{3, 5}, false);
  all_layouts<double, 3>({2, 1, 3}, std::array<std::int64_t, 2>{7, 2}, true);
}

// Meshes of 4 to 6 axes (sizes 1 to 3, up to 16 ranks): random layouts of rank-3 and
// rank-4 tensors, nested shards of one dim over several axes included.
TEST_CASE("reduce on random layouts of random 4- to 6-axis meshes") {
  for (std::uint64_t s = 1; s <= static_cast<std::uint64_t>(optest::random_rounds); ++s) {
    all_layouts<double, 4>(optest::random_shape<4>(s, 16), optest::random_extents<3>(s), true, 3, s);
    all_layouts<double, 5>(optest::random_shape<5>(s + 10, 16), optest::random_extents<3>(s + 10), true, 3, s + 10);
    all_layouts<std::int64_t, 6>(optest::random_shape<6>(s + 20, 16), optest::random_extents<4>(s + 20), false, 2, s + 20);
  }
}

TEST_CASE("reduce through the compile-time API") {
  optest::failures f;
  sc::host::run(8, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 3>{2, 2, 2});
    const std::array<std::int64_t, 3> e{5, 3, 7};
    const auto g = optest::ints<double>(optest::volume(e), 1);
    auto x = optest::as_static<sc::layout<S0, S2, S2>>(sc::distribute(m, sc::runtime_layout::parse("S(0),S(2),S(2)"), g, e));
    auto a = sc::reduce<2, sc::avg>(x);  // the mean over a dim split in 4 uneven parts (2,2,2,1)
    static_assert(std::is_same_v<decltype(a)::layout_type, sc::layout<S0, Ps, Ps>>);
    static_assert(decltype(a)::rank == 2);
    auto err = optest::compare_global(a, ref_reduce(g, e, 2, reduce_op::avg), 1e-12);
    if (!err.empty()) f.add("avg: " + err);
    auto mx = sc::reduce<0, sc::max, sc::keep_dim>(x);
    static_assert(std::is_same_v<decltype(mx)::layout_type, sc::layout<Pm, S2, S2>>);
    CHECK(mx.global_extents() == std::array<std::int64_t, 3>{1, 3, 7});
    err = optest::compare_global(mx, ref_reduce(g, e, 0, reduce_op::max));
    if (!err.empty()) f.add("max keep_dim: " + err);
    // sum of a sum: reduce a partial<sum> result again, down to rank 0
    auto s1 = sc::reduce<1, sc::sum>(a);
    auto s0 = sc::reduce<0, sc::sum>(s1);
    static_assert(std::is_same_v<decltype(s0)::layout_type, sc::layout<Ps, Ps, Ps>> && decltype(s0)::rank == 0);
    double total = 0;
    for (double v : ref_reduce(g, e, 2, reduce_op::avg)) total += v;
    err = optest::compare_global(s0, std::vector<double>{total}, 1e-12);
    if (!err.empty()) f.add("sum to rank 0: " + err);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

TEST_CASE("reduce misuse on dynamic layouts names the axis") {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const auto g = optest::ints<double>(12, 0);
    auto x = sc::distribute(m, sc::runtime_layout::parse("S(0),P(sum)"), g, std::array<std::int64_t, 2>{3, 4});
    try {
      (void)sc::reduce<1, sc::max>(x);
      FAIL("expected layout_error");
    } catch (const sc::layout_error& e) {
      const std::string w = e.what();
      CHECK(w.find("mesh axis 1") != std::string::npos);
      CHECK(w.find("reduce<1, max>") != std::string::npos);
    }
    auto y = sc::distribute(m, sc::runtime_layout::parse("S(1),P(avg)"), g, std::array<std::int64_t, 2>{3, 4});
    CHECK_THROWS_AS(((void)sc::reduce<1, sc::avg>(y)), sc::layout_error);
  });
}

// max and min let a NaN win whatever the order the terms meet in, as torch.amax and
// numpy.max do: the same global tensor gives the same result under every layout, and a
// partial<max|min> term that is NaN on any rank reaches the result. (`b > a ? b : a` kept a
// NaN already in the accumulator but dropped one arriving as the new value, so [[NaN, NaN],
// [1, 1]] reduced over dim 0 gave NaN on one rank and 1 with the columns split.)
TEST_CASE("reduce max/min and partial<max|min> propagate NaN under every layout") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::array<std::int64_t, 2> e{3, 4};
  // NaN in row 0 of column 0, row 2 of column 1, rows 1 and 2 of column 3; column 2 clean.
  const std::vector<double> g = {nan, 5, 2, 7, 4, 1, 3, nan, 6, nan, 9, nan};
  auto ref = [&](int d, reduce_op op) {  // NaN if the line holds one, else its max or min
    std::vector<double> r(static_cast<std::size_t>(e[static_cast<std::size_t>(1 - d)]));
    for (std::size_t j = 0; j < r.size(); ++j) {
      bool any_nan = false;
      double v = op == reduce_op::max ? -INFINITY : INFINITY;
      for (std::int64_t i = 0; i < e[static_cast<std::size_t>(d)]; ++i) {
        const double x = d == 0 ? g[static_cast<std::size_t>(i) * 4 + j] : g[j * 4 + static_cast<std::size_t>(i)];
        any_nan = any_nan || std::isnan(x);
        v = op == reduce_op::max ? std::max(v, x) : std::min(v, x);
      }
      r[j] = any_nan ? nan : v;
    }
    return r;
  };
  auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
    return true;
  };
  optest::failures f;
  for (int ranks : {1, 2, 3}) {
    sc::host::run(ranks, [&](sc::host::communicator& comm) {
      auto m = sc::make_mesh(comm, std::array<int, 1>{ranks});
      for (const char* l : {"R", "S(0)", "S(1)"}) {
        auto x = sc::distribute(m, sc::runtime_layout::parse(l), g, e);
        for (int d : {0, 1})
          for (reduce_op op : {reduce_op::max, reduce_op::min}) {
            auto r = d == 0 ? sc::to_global(op == reduce_op::max ? sc::reduce<0, sc::max>(x) : sc::reduce<0, sc::min>(x))
                            : sc::to_global(op == reduce_op::max ? sc::reduce<1, sc::max>(x) : sc::reduce<1, sc::min>(x));
            if (!same(r, ref(d, op)))
              f.add(std::to_string(ranks) + " ranks, " + l + ", dim " + std::to_string(d) + ", " + sc::to_string(op));
          }
      }
      // partial<max> / partial<min> terms: rank r holds row r % 3 of g (the others the identity
      // on 1 and 2 ranks: every row is some rank's term only on 3). The reduction over the
      // ranks, through to_global (all_reduce) and a reduce_scatter, has the rows' NaNs.
      for (reduce_op op : {reduce_op::max, reduce_op::min}) {
        const double id = op == reduce_op::max ? -INFINITY : INFINITY;
        std::vector<double> term(4, id), want(4, id);
        for (int q = 0; q < ranks; ++q)
          for (std::size_t j = 0; j < 4; ++j) {
            const double v = g[static_cast<std::size_t>(q % 3) * 4 + j];
            if (q == comm.rank()) term[j] = v;
            want[j] = std::isnan(want[j]) || std::isnan(v) ? nan : op == reduce_op::max ? std::max(want[j], v) : std::min(want[j], v);
          }
        sc::runtime_layout p{sc::placement_desc::make_partial(op)};
        auto t = sc::make_view(m, p, term.data(), std::array<std::int64_t, 1>{4});
        if (!same(sc::to_global(t), want)) f.add(std::to_string(ranks) + " ranks: to_global of P(" + sc::to_string(op) + ")");
        if (!same(sc::to_global(sc::redistribute(t, sc::runtime_layout::parse("S(0)"))), want))
          f.add(std::to_string(ranks) + " ranks: P(" + std::string(sc::to_string(op)) + ") -> S(0)");
      }
    });
  }
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
