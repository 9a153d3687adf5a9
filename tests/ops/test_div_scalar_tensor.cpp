// div(x, s) with a rank-0 dtensor divisor s, the tensor twin of div(x, c) and of mul(x, s):
// its rule (s replicated on every mesh axis; x replicate, shard<d>, and for floating-point
// types partial<sum|avg>) as compile-time tables written by hand; overload selection and
// output layout types; every layout of x built from R, S(0), S(1) and the five partials on
// 1-, 2- and 3-axis meshes (uneven, empty and zero-element pieces; float, double, int32,
// int64), x and s kept and given up, against a single-rank reference computed here, and
// every refusal (of x's layout, or of a partial s) with its reason; the compile-time API;
// an integer s of 0 refused on every rank before anything is divided; x / s computed as a
// division; lowest() / -1; an s inside the given-up piece; operands on different meshes.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;
namespace fn = shardcast::fn;
using optest::pd;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using Ps = sc::partial<sc::sum>;
using Pa = sc::partial<sc::avg>;
using Pm = sc::partial<sc::max>;
using E = sc::detail::op_rule;

// ---------------------------------------------------------------------------------------
// The rule, against tables written by hand (index i is placement P9[i])
// ---------------------------------------------------------------------------------------
constexpr pd P9[] = {pd::make_replicate(),
                     pd::make_shard(0),
                     pd::make_shard(1),
                     pd::make_shard(2),
                     pd::make_partial(sc::reduce_op::sum),
                     pd::make_partial(sc::reduce_op::avg),
                     pd::make_partial(sc::reduce_op::max),
                     pd::make_partial(sc::reduce_op::min),
                     pd::make_partial(sc::reduce_op::prod)};
constexpr E ok = E::ok, IM = E::integer_mean, ID = E::integer_division, DP = E::division_of_partial;
// x on the axis, s replicate there:  R   S0  S1  S2  Ps  Pa  Pmax Pmin Pprod
constexpr E t_float[9] = {ok, ok, ok, ok, ok, ok, DP, DP, DP};  // x / s: linear in x; s's sign unknown
constexpr E t_int[9] = {ok, ok, ok, ok, ID, IM, DP, DP, DP};    // truncating division, truncated mean

constexpr sc::runtime_layout at(int n, int pos, pd p, pd fill) {
  sc::runtime_layout l;
  l.naxes = n;
  for (int a = 0; a < n; ++a) l[a] = a == pos ? p : fill;
  return l;
}
/// scalar_div_rules<T> for x = P9[i] at axis `pos` (the other axes `fill`) and s = P9[j]
/// there (replicate elsewhere): a partial s is refused as a partial divisor whatever x is;
/// over a replicated s the table decides; an error names axis `pos`, and a legal call
/// keeps x's layout.
template <class T>
constexpr bool rule_holds(const E (&want)[9]) {
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (int i = 0; i < 9; ++i)
        for (int j : {0, 4, 5, 6, 7, 8})
          for (pd fill : {pd::make_replicate(), pd::make_shard(1)}) {
            const auto x = at(n, pos, P9[i], fill), s = at(n, pos, P9[j], pd::make_replicate());
            const auto r = sc::detail::scalar_div_rules<T>(x, s);
            const E w = j != 0 ? DP : want[i];
            if (r.err != w) return false;
            if (w != ok ? r.axis != pos : !(r.out == x)) return false;
          }
  return true;
}
static_assert(rule_holds<float>(t_float) && rule_holds<double>(t_float));
static_assert(rule_holds<int>(t_int) && rule_holds<std::int64_t>(t_int) && rule_holds<const int>(t_int));
// The first illegal axis is named: x's partial<max> on axis 0 before s's partial on axis 1.
static_assert(sc::detail::scalar_div_rules<float>(sc::runtime_layout{P9[6], P9[0]}, sc::runtime_layout{P9[0], P9[4]}).axis == 0);
static_assert(sc::detail::scalar_div_rules<float>(sc::runtime_layout{P9[4], P9[0]}, sc::runtime_layout{P9[0], P9[4]}).axis == 1);

TEST_CASE("div(x, s) rule tables hold at run time too") {
  CHECK(rule_holds<float>(t_float));
  CHECK(rule_holds<int>(t_int));
}

// ---------------------------------------------------------------------------------------
// Overload selection and output layout types
// ---------------------------------------------------------------------------------------
using host_mesh = decltype(sc::make_mesh(std::declval<sc::host::communicator&>(), std::array<int, 2>{}));
template <class L, class T = float>
using D = sc::dtensor<T, 2, L, host_mesh>;
template <class L, class T = float>
using D0 = sc::dtensor<T, 0, L, host_mesh>;
using RR = sc::layout<R, R>;
using DD = sc::dtensor<float, 2, sc::dynamic_layout, host_mesh>;
using DD0 = sc::dtensor<float, 0, sc::dynamic_layout, host_mesh>;
template <class A, class B>
concept can_div = requires(A a, B b) { sc::div(a, b); };
static_assert(can_div<const D<sc::layout<S0, Ps>>&, const D0<RR>&> && can_div<D<RR>, D0<RR>> && can_div<DD, const D0<RR>&> &&
              can_div<const D<RR>&, DD0>);
// y has x's layout and mutable elements of x's type, for x and s kept, given up or of const elements.
static_assert(std::is_same_v<decltype(sc::div(std::declval<const D<sc::layout<S0, Ps>>&>(), std::declval<const D0<RR>&>())), D<sc::layout<S0, Ps>>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<D<sc::layout<Pa, S1>, double>>(), std::declval<D0<RR, double>>())),
                             D<sc::layout<Pa, S1>, double>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<D<sc::layout<S1, S0>, const int>>(), std::declval<const D0<RR, const int>&>())),
                             D<sc::layout<S1, S0>, int>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<const DD&>(), std::declval<const D0<RR>&>())), DD>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<const D<RR>&>(), std::declval<DD0>())), DD>);
static_assert(std::is_same_v<sc::detail::scalar_div_layout<sc::layout<Ps, S1>, RR>::type, sc::layout<Ps, S1>>);
static_assert(std::is_same_v<sc::detail::scalar_div_layout<sc::layout<S0, S1>, RR, std::int64_t>::type, sc::layout<S0, S1>>);

// ---------------------------------------------------------------------------------------
// Every layout of x, dynamic layouts
// ---------------------------------------------------------------------------------------

/// What the refusal of div(x, s) must say, or "" when it is legal: the first mesh axis
/// where s is partial (a partial divisor) or x's placement does not go through division by
/// a replicated value (the tables above), named with both placements or with the reason.
std::string refusal(const sc::runtime_layout& x, const sc::runtime_layout& s, bool fp) {
  for (int a = 0; a < x.naxes; ++a) {
    const std::string ax = "mesh axis " + std::to_string(a);
    const std::string pair = "on " + ax + " a is " + sc::to_string(x[a]) + " and b is " + sc::to_string(s[a]) + ", which the division cannot divide";
    if (s[a].is_partial()) return pair;
    if (!x[a].is_partial()) continue;
    const auto op = x[a].op;
    if (op == sc::reduce_op::sum || op == sc::reduce_op::avg) {
      if (fp) continue;
      return op == sc::reduce_op::avg ? "partial<avg> with an integral element type on " + ax
                                      : "the numerator is P(sum) with an integral element type on " + ax + "; integer division truncates";
    }
    return pair;
  }
  return "";
}

// div(x, s) on every layout of a rank-2 x built from R, S(0), S(1), P(sum|avg|max|min|prod)
// on a mesh of shape `shape`, by a positive and a negative s replicated on every axis: a
// legal call gives x's layout and g / s computed here, with x, s, or both given up (the
// quotient then goes over x's piece, and the given-up operands are left empty); a refused
// one throws layout_error with the reason on every rank and leaves its operands as they
// were. Then s partial on each axis in turn: refused, naming the first illegal axis.
template <class T, int N>
void sweep(std::array<int, N> shape, std::array<std::int64_t, 2> e) {
  INFO("mesh " << optest::shape_name<N>(shape) << " extents " << e[0] << "x" << e[1]);
  constexpr bool fp = std::is_floating_point_v<T>;
  int nranks = 1;
  for (int v : shape) nranks *= v;
  const std::int64_t n = e[0] * e[1];
  const auto g = optest::ints<T>(n, 1);  // -3..3: every quotient below is exact in floating point
  const std::vector<T> divisors = fp ? std::vector<T>{T(4), T(-0.5)} : std::vector<T>{T(2), T(-3)};
  const auto ls = optest::layouts(optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min, sc::reduce_op::prod}), N);
  sc::testing::sweep_outcome f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    using X = sc::dtensor<T, 2, sc::dynamic_layout, decltype(m)>;
    using S = sc::dtensor<T, 0, sc::dynamic_layout, decltype(m)>;
    const sc::runtime_layout all_r = sc::detail::all_replicate<N>();
    const std::array<std::int64_t, 0> none{};
    std::size_t cases = 0;
    for (const T dv : divisors) {
      std::vector<T> want(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) want[i] = static_cast<T>(g[i] / dv);  // plain loop, T's own division
      const S s = sc::distribute(m, all_r, std::vector<T>{dv}, none);
      for (const auto& l : ls) {
        const std::string head = "div(x, s = " + std::to_string(static_cast<double>(dv)) + ") on " + sc::to_string(l) + ": ";
        const X x = optest::make_terms(m, l, g, e);
        const auto x0 = optest::local_copy(x);
        const std::string need = refusal(l, all_r, fp);
        const double tol = fp && optest::has_partial_op(l, sc::reduce_op::avg) ? 1e-6 : 0;  // the mean rounds
        for (int given = 0; given < 4; ++given) {  // bit 0: x given up, bit 1: s given up
          X xo = optest::make_terms(m, l, g, e);
          S so = sc::distribute(m, all_r, std::vector<T>{dv}, none);
          const T* const old = xo.data();
          const T* const sold = so.data();
          const std::string how = given == 0 ? "" : given == 1 ? "(x given up) " : given == 2 ? "(s given up) " : "(both given up) ";
          try {
            auto y = [&]() -> X {
              switch (given) {
                case 1: return sc::div(std::move(xo), s);
                case 2: return sc::div(x, std::move(so));
                case 3: return sc::div(std::move(xo), std::move(so));
                default: return sc::div(x, s);
              }
            }();
            if (!need.empty()) {
              f.add(comm.rank(), head + how + "accepted, but must be refused with \"" + need + "\"");
              continue;
            }
            if (comm.rank() == 0 && given == 0) ++cases;
            if (!(y.layout() == l)) f.add(comm.rank(), head + how + "layout " + sc::to_string(y.layout()));
            const std::string err = optest::compare_global(y, want, tol);
            if (!err.empty()) f.add(comm.rank(), head + how + err);
            if (given & 1) {
              if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), head + how + "a given-up x owned alone was not written over");
              f.add(comm.rank(), sc::testing::check_emptied(xo));
            }
            if (given & 2) f.add(comm.rank(), sc::testing::check_emptied(so));
          } catch (const sc::layout_error& ex) {
            const std::string msg = ex.what();
            if (need.empty()) f.add(comm.rank(), head + how + "refused: " + msg);
            else if (msg.find(need) == std::string::npos || msg.find("shardcast::div: layouts \"") != 0)
              f.add(comm.rank(), head + how + "the message lacks \"" + need + "\": " + msg);
            if (xo.data() != old || so.data() != sold || optest::local_copy(xo) != x0)
              f.add(comm.rank(), head + how + "a refused call changed its operands");
          }
        }
        // A partial s (sum on even axes, max on odd ones) on one axis: always refused.
        for (int a = 0; a < N; ++a) {
          sc::runtime_layout sl = all_r;
          sl[a] = pd::make_partial(a % 2 ? sc::reduce_op::max : sc::reduce_op::sum);
          const S sp = sc::distribute(m, sl, std::vector<T>{dv}, none);
          const std::string need_p = refusal(l, sl, fp);
          try {
            (void)sc::div(x, sp);
            f.add(comm.rank(), head + "s " + sc::to_string(sl) + " accepted, but must be refused with \"" + need_p + "\"");
          } catch (const sc::layout_error& ex) {
            const std::string msg = ex.what();
            if (msg.find(need_p) == std::string::npos) f.add(comm.rank(), head + "s " + sc::to_string(sl) + ": the message lacks \"" + need_p + "\": " + msg);
            // where the first illegal axis is s's, the message gives the partial divisor's reason
            if (need_p.find(" and b is P(") != std::string::npos && msg.find("a partial divisor is refused (1 / (b1 + b2)") == std::string::npos)
              f.add(comm.rank(), head + "s " + sc::to_string(sl) + ": the message does not give the reason: " + msg);
          }
        }
        if (optest::local_copy(x) != x0 || optest::local_copy(s) != std::vector<T>{dv}) f.add(comm.rank(), head + "a kept operand changed");
      }
    }
    if (comm.rank() == 0) f.count(cases);
  });
  f.report();
}

}  // namespace

TEST_CASE_TEMPLATE("div(x, s) with a rank-0 s on every layout of x", T, float, double, std::int32_t, std::int64_t) {
  sweep<T, 1>({3}, {2, 5});           // dim 0 splits 1, 1, 0: an empty piece
  sweep<T, 2>({2, 2}, {3, 5});        // uneven
  sweep<T, 2>({1, 3}, {5, 2});        // dim 1 splits 1, 1, 0
  sweep<T, 2>({3, 1}, {4, 3});
  sweep<T, 2>({2, 2}, {0, 3});        // no elements at all
  sweep<T, 3>({2, 1, 2}, {3, 5});
  sweep<T, 3>({1, 3, 2}, {2, 3});     // 3 ranks over an extent of 2: an empty piece
}

TEST_CASE_TEMPLATE("div(x, s) through the compile-time API", T, float, double, std::int32_t, std::int64_t) {
  constexpr bool fp = std::is_floating_point_v<T>;
  const std::array<std::int64_t, 2> e{5, 3};
  const auto g = optest::ints<T>(15, 3);
  const T dv = fp ? T(-0.5) : T(-2);
  const auto want = optest::each(g, [dv](T v) { return static_cast<T>(v / dv); });
  optest::failures f;
  auto run = [&]<std::size_t N>(std::array<int, N> shape) {
    int nranks = 1;
    for (int v : shape) nranks *= v;
    sc::host::run(nranks, [&](sc::host::communicator& comm) {
      auto m = sc::make_mesh(comm, shape);
      using LS = typename sc::detail::layout_from<sc::detail::all_replicate<static_cast<int>(N)>()>::type;
      const auto s = sc::distribute<LS>(m, std::vector<T>{dv}, std::array<std::int64_t, 0>{});
      auto make = [&]<class L>(L) { return optest::as_static<L>(optest::make_terms(m, L::desc, g, e)); };
      auto expect = [&]<class L>(L, const char* what, const auto& y) {
        static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>, sc::dtensor<T, 2, L, decltype(m)>>);
        const std::string err = optest::compare_global(y, want, 1e-6);
        if (!err.empty()) f.add(comm.rank(), std::string(what) + ": " + err);
      };
      // Every layout here keeps x's layout: partial<sum|avg> for floating-point types only.
      auto both = [&]<class L>(L, const char* what) {
        const auto x = make(L{});
        expect(L{}, what, sc::div(x, s));
        auto own = make(L{});
        const T* const old = own.data();
        auto y = sc::div(std::move(own), s);
        expect(L{}, what, y);
        if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), std::string(what) + " (given up): new storage");
        f.add(comm.rank(), sc::testing::check_emptied(own));
        // a static s with a dynamic x, and the reverse: checked at run time, y dynamic
        const auto xd = optest::make_terms(m, L::desc, g, e);
        const auto sd = sc::distribute(m, LS::desc, std::vector<T>{dv}, std::array<std::int64_t, 0>{});
        auto y1 = sc::div(xd, s);
        auto y2 = sc::div(x, sd);
        using XD = std::remove_const_t<decltype(xd)>;
        static_assert(std::is_same_v<decltype(y1), XD> && std::is_same_v<decltype(y2), XD>);
        if (!(y1.layout() == L::desc) || !(y2.layout() == L::desc)) f.add(comm.rank(), std::string(what) + ": a mixed call's layout");
        f.add(comm.rank(), optest::compare_global(y1, want, 1e-6));
        f.add(comm.rank(), optest::compare_global(y2, want, 1e-6));
      };
      if constexpr (N == 1) {
        both(sc::layout<S0>{}, "S(0)");
        if constexpr (fp) both(sc::layout<Pa>{}, "P(avg)");
      } else if constexpr (N == 2) {
        both(sc::layout<S1, S0>{}, "S(1),S(0)");
        both(sc::layout<R, R>{}, "R,R");
        if constexpr (fp) both(sc::layout<S0, Ps>{}, "S(0),P(sum)");
      } else {
        both(sc::layout<S0, R, S1>{}, "S(0),R,S(1)");
        if constexpr (fp) both(sc::layout<Ps, S1, Ps>{}, "P(sum),S(1),P(sum)");
      }
    });
  };
  run(std::array<int, 1>{3});
  run(std::array<int, 2>{2, 2});
  run(std::array<int, 2>{3, 1});
  run(std::array<int, 3>{2, 1, 2});
  f.report();
}

TEST_CASE_TEMPLATE("an integer s of 0 is refused on every rank before anything is divided", T, std::int32_t, std::int64_t) {
  optest::failures f;
  std::vector<int> threw(4, 0);
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 0> none{};
    const auto message = [](auto&& op) { return optest::layout_error_of(op); };
    const std::string want = "shardcast::div: x has integer elements and the rank-0 divisor s is 0 (on every rank, as s is replicated)";
    int refused = 0;
    auto expect_refused = [&](const char* what, const std::string& got) {
      if (got.find(want) != 0 || got.find("integer division by zero is undefined, so nothing was divided") == std::string::npos)
        f.add(comm.rank(), std::string(what) + ": " + got);
      else
        ++refused;
    };
    const auto zero = sc::distribute<sc::layout<R, R>>(m, std::vector<T>{0}, none);
    const auto zero_dyn = sc::distribute(m, sc::runtime_layout::parse("R,R"), std::vector<T>{0}, none);
    // x's layouts: sharded, replicated, and one where most ranks hold no element (the check
    // reads s, which every rank holds, so those throw too)
    const auto xs = sc::distribute<sc::layout<S0, S1>>(m, std::vector<T>{7, -7, 1, 0, 5, 6}, std::array<std::int64_t, 2>{2, 3});
    const auto xr = sc::distribute(m, sc::runtime_layout::parse("R,R"), std::vector<T>{7, -7, 1, 0, 5, 6}, std::array<std::int64_t, 2>{3, 2});
    const auto x1 = sc::distribute(m, sc::runtime_layout::parse("S(0),S(1)"), std::vector<T>{7}, std::array<std::int64_t, 2>{1, 1});
    expect_refused("static x, static s", message([&] { return sc::div(xs, zero); }));
    expect_refused("static x, dynamic s", message([&] { return sc::div(xs, zero_dyn); }));
    expect_refused("dynamic x, static s", message([&] { return sc::div(xr, zero); }));
    expect_refused("one element", message([&] { return sc::div(x1, zero_dyn); }));
    // given up: x and s stay as they were
    auto gx = sc::distribute<sc::layout<S0, S1>>(m, std::vector<T>{7, -7, 1, 0, 5, 6}, std::array<std::int64_t, 2>{2, 3});
    auto gs = sc::distribute<sc::layout<R, R>>(m, std::vector<T>{0}, none);
    const auto gx0 = optest::local_copy(gx);
    const T* const gxd = gx.data();
    const T* const gsd = gs.data();
    expect_refused("both given up", message([&] { return sc::div(std::move(gx), std::move(gs)); }));
    if (gx.data() != gxd || gs.data() != gsd || optest::local_copy(gx) != gx0 || optest::local_copy(gs) != std::vector<T>{0})
      f.add(comm.rank(), "a refused div(given up, given up) changed its operands");
    // a layout refusal comes first (an integer partial<sum> over a zero s)
    const auto ps = sc::redistribute(xr, sc::runtime_layout::parse("P(sum),R"));
    if (message([&] { return sc::div(ps, zero_dyn); }).find("integer division truncates") == std::string::npos)
      f.add(comm.rank(), "div(int P(sum), 0): not refused for its layout");
    // nonzero: divides; lowest() / -1 wraps to lowest()
    f.add(comm.rank(), optest::compare_global(sc::div(xs, sc::distribute<sc::layout<R, R>>(m, std::vector<T>{-2}, none)),
                                              std::vector<T>{-3, 3, 0, 0, -2, -3}));
    const T lo = std::numeric_limits<T>::lowest();
    const auto xl = sc::distribute(m, sc::runtime_layout::parse("S(0),R"), std::vector<T>{lo, 4, -1, lo}, std::array<std::int64_t, 2>{4, 1});
    f.add(comm.rank(), optest::compare_global(sc::div(xl, sc::distribute(m, sc::runtime_layout::parse("R,R"), std::vector<T>{-1}, none)),
                                              std::vector<T>{lo, -4, 1, lo}));
    if (refused == 5) threw[static_cast<std::size_t>(comm.rank())] = 1;
  });
  f.report();
  CHECK(threw == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("floating-point div(x, s): s = 0 gives inf or NaN; x / s is a division, not x * (1 / s)") {
  optest::failures f;
  sc::host::run(3, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{3});
    const std::array<std::int64_t, 0> none{};
    const auto x = sc::distribute<sc::layout<S0>>(m, std::vector<double>{1, -1, 0, 49, 98, 3}, std::array<std::int64_t, 1>{6});
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    f.add(comm.rank(), optest::compare_global(sc::div(x, sc::distribute<sc::layout<R>>(m, std::vector<double>{0}, none)),
                                              std::vector<double>{inf, -inf, nan, inf, inf, inf}));
    f.add(comm.rank(), optest::compare_global(sc::div(x, sc::distribute<sc::layout<R>>(m, std::vector<double>{-0.0}, none)),
                                              std::vector<double>{-inf, inf, nan, -inf, -inf, -inf}));
    // 49 * (1 / 49) is 0.9999999999999999 in double; 49 / 49 is 1
    const auto q = sc::to_global(sc::div(x, sc::distribute<sc::layout<R>>(m, std::vector<double>{49}, none)));
    const auto by_reciprocal = sc::to_global(sc::scale(x, 1.0 / 49));
    if (q[3] != 1.0 || q[4] != 2.0 || q[5] != 3.0 / 49) f.add(comm.rank(), "x / 49 is not a division");
    if (by_reciprocal[3] == 1.0) f.add(comm.rank(), "the reciprocal would not tell the two apart");
  });
  f.report();
}

TEST_CASE("an s inside the given-up piece keeps the quotient out of it; operands on different meshes") {
  optest::failures f;
  sc::host::run(1, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{1});
    using L = sc::layout<R>;
    using DX = sc::dtensor<int, 1, L, decltype(m)>;
    const std::array<std::int64_t, 1> ext{6};
    const std::array<std::int64_t, 0> none{};
    auto storage = [] {
      std::shared_ptr<int> p(new int[7], std::default_delete<int[]>());
      const int v[7] = {8, 4, 2, 6, -8, 10, 2};
      for (int i = 0; i < 7; ++i) p.get()[i] = v[i];
      return p;
    };
    {  // s is a view over x's element 2 (2): written in place, later elements would be divided by 1
      auto st = storage();
      int* base = st.get();
      DX x(m, ext, std::move(st), base);
      auto sv = sc::make_view<L>(m, base + 2, none);
      auto y = sc::div(std::move(x), sv);
      if (optest::local_copy(y) != std::vector<int>{4, 2, 1, 3, -4, 5}) f.add("s inside x's piece: wrong quotient");
      if (y.data() == base) f.add("s inside x's piece: the quotient went over x's piece");
      f.add(sc::testing::check_emptied(x));
    }
    {  // s is a view just past x's piece: the quotient goes over x's piece
      auto st = storage();
      int* base = st.get();
      DX x(m, ext, st, base);
      auto sv = sc::make_view<L>(m, base + 6, none);
      st.reset();
      auto y = sc::div(std::move(x), sv);
      if (optest::local_copy(y) != std::vector<int>{4, 2, 1, 3, -4, 5}) f.add("s past x's piece: wrong quotient");
      if (y.data() != base) f.add("s past x's piece: the quotient did not go over x's piece");
    }
    {  // another mesh object: refused, naming x and s
      auto other = sc::make_mesh(comm, std::array<int, 1>{1});
      const auto x = sc::distribute<L>(m, std::vector<int>{1, 2, 3, 4, 5, 6}, ext);
      const auto s = sc::distribute<L>(other, std::vector<int>{2}, none);
      try {
        (void)sc::div(x, s);
        f.add("operands on different meshes: accepted");
      } catch (const sc::layout_error& ex) {
        if (std::string(ex.what()).find("shardcast::div: the operands live on different meshes (x on a mesh 1, s on another") != 0)
          f.add(std::string("operands on different meshes: ") + ex.what());
      }
    }
  });
  f.report();
}
