// Division and the scalar forms of the elementwise vocabulary: div(a, b) of two tensors,
// div(x, c), and the scalar-first add(c, x), sub(c, x), mul(c, x), div(c, x); the messages
// of mul(x, c). The functors behind them (fn::div_by, fn::rsub, fn::rdiv, fn::div) at the
// edges, their layout rules as compile-time tables, overload selection, and differential
// tests on the host backend: every layout of R, S(0), S(1) and P(sum|avg|max|min) on
// meshes 3, 2x2, 1x3 and 3x1 (uneven and empty pieces, partial terms that differ from rank
// to rank), float, double, int32 and int64, kept and given-up operands, against a
// single-rank reference computed here from the global tensor; every refusal is checked
// for its message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/broadcast.hpp>
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
using Pn = sc::partial<sc::min>;
using E = sc::detail::op_rule;

// ---------------------------------------------------------------------------------------
// The functors' values
// ---------------------------------------------------------------------------------------
constexpr int imin = std::numeric_limits<int>::min();
constexpr std::int64_t lmin = std::numeric_limits<std::int64_t>::min();
// Integer division truncates toward zero; lowest() / -1, the one quotient that does not fit,
// wraps to lowest() (a constant expression would reject the overflow).
static_assert(fn::div(7, 2) == 3 && fn::div(-7, 2) == -3 && fn::div(imin, -1) == imin && fn::div(lmin, std::int64_t{-1}) == lmin);
static_assert(fn::div(std::int8_t{-128}, std::int8_t{-1}) == -128 && fn::div(6u, 4u) == 1u && fn::div(1.0, 4.0) == 0.25);
static_assert(fn::div_by(2)(7) == 3 && fn::div_by(-2)(7) == -3 && fn::div_by(-1)(imin) == imin && fn::div_by(4.0)(1.0) == 0.25);
static_assert(fn::div_by(2.0)(3.0f) == 1.5f && std::is_same_v<decltype(fn::div_by(2.0)(3.0f)), float>);
static_assert(fn::rsub(1)(3) == -2 && fn::rsub(1.5)(2.0) == -0.5 && fn::rsub(0)(imin) == imin && fn::rsub(1)(std::uint8_t{2}) == 255);
static_assert(fn::rdiv(7)(2) == 3 && fn::rdiv(imin)(-1) == imin && fn::rdiv(1.0)(4.0) == 0.25 && fn::rdiv(1.0f)(-0.5f) == -2.0f);

TEST_CASE("fn::div_by divides, not multiplies by the reciprocal; floating division by zero is IEEE's") {
  // 49 * (1 / 49) is 0.9999999999999999 in double; 49 / 49 is 1.
  CHECK(fn::div_by(49.0)(49.0) == 1.0);
  CHECK(fn::scale(1.0 / 49.0)(49.0) != 1.0);  // what a reciprocal would give
  CHECK(std::isinf(fn::div_by(0.0)(1.0f)));
  CHECK(std::isnan(fn::div_by(0.0)(0.0)));
  CHECK(std::isinf(fn::rdiv(1.0)(-0.0)));
  CHECK(fn::rdiv(1.0)(-0.0) < 0);
}

// ---------------------------------------------------------------------------------------
// Layout rules: the traits, then tables written out by hand (index i is placement P9[i])
// ---------------------------------------------------------------------------------------
static_assert(sc::is_linear_v<fn::div_by_fn<float>> && !sc::is_linear_v<fn::rsub_fn<float>> && !sc::is_linear_v<fn::rdiv_fn<float>>);
static_assert(sc::is_affine_in_v<fn::rsub_fn<double>, 0> && sc::is_nonincreasing_in_v<fn::rsub_fn<int>, 0> &&
              !sc::is_nondecreasing_in_v<fn::rsub_fn<int>, 0>);
static_assert(!sc::is_nondecreasing_in_v<fn::div_by_fn<float>, 0> && !sc::is_nonincreasing_in_v<fn::div_by_fn<float>, 0>);
static_assert(!sc::is_affine_in_v<fn::rdiv_fn<float>, 0> && !sc::is_nondecreasing_in_v<fn::rdiv_fn<float>, 0> &&
              !sc::is_nonincreasing_in_v<fn::rdiv_fn<float>, 0>);
// Over integers a division is linear in nothing, even when marked so: it truncates.
static_assert(sc::detail::props_of<fn::div_by_fn<int>, float>().linear && !sc::detail::props_of<fn::div_by_fn<int>, int>().linear &&
              !sc::detail::props_of<decltype(fn::linear(fn::div_by(2))), std::int64_t>().linear &&
              !sc::detail::props_of<decltype(fn::linear_in<0>(fn::div)), int, int>().linear_in[0]);
static_assert(sc::detail::props_of<fn::rsub_fn<int>, int>().wrapping_in[0] && !sc::detail::props_of<fn::rsub_fn<int>, float>().wrapping_in[0]);

constexpr pd P9[] = {pd::make_replicate(),
                     pd::make_shard(0),
                     pd::make_shard(1),
                     pd::make_shard(2),
                     pd::make_partial(sc::reduce_op::sum),
                     pd::make_partial(sc::reduce_op::avg),
                     pd::make_partial(sc::reduce_op::max),
                     pd::make_partial(sc::reduce_op::min),
                     pd::make_partial(sc::reduce_op::prod)};
constexpr E ok = E::ok, NL = E::nonlinear_on_partial, NT = E::partial_not_termwise, IM = E::integer_mean, IO = E::integer_order,
            ID = E::integer_division, DP = E::division_of_partial, LD = E::layouts_differ;
//                                   R   S0  S1  S2  Ps  Pa  Pmax Pmin Pprod
constexpr E t_div_by[9] = {ok, ok, ok, ok, ok, ok, DP, DP, DP};      // x / c: linear; c's sign unknown
constexpr E t_div_by_int[9] = {ok, ok, ok, ok, ID, IM, DP, DP, DP};  // truncating
constexpr E t_rsub[9] = {ok, ok, ok, ok, NL, ok, ok, ok, NT};        // c - x: affine, nonincreasing (max <-> min)
constexpr E t_rsub_int[9] = {ok, ok, ok, ok, NL, IM, IO, IO, NT};    // wraps
constexpr E t_rdiv[9] = {ok, ok, ok, ok, DP, DP, DP, DP, DP};        // c / x: nothing
constexpr E t_rdiv_int[9] = {ok, ok, ok, ok, DP, IM, DP, DP, DP};

constexpr sc::runtime_layout at(int n, int pos, pd p, pd fill) {
  sc::runtime_layout l;
  l.naxes = n;
  for (int a = 0; a < n; ++a) l[a] = a == pos ? p : fill;
  return l;
}
template <class F, class T>
constexpr bool map_table_holds(const E (&want)[9], bool swaps = false) {
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (int i = 0; i < 9; ++i)
        for (pd fill : {pd::make_replicate(), pd::make_shard(1)}) {
          const auto x = at(n, pos, P9[i], fill);
          const auto r = sc::detail::map_rules(x, sc::detail::props_of<F, T>());
          if (r.err != want[i]) return false;
          if (r.err != E::ok) {
            if (r.axis != pos) return false;
          } else if (!(r.out == at(n, pos, swaps && i == 6 ? P9[7] : swaps && i == 7 ? P9[6] : P9[i], fill))) {
            return false;
          }
        }
  return true;
}
static_assert(map_table_holds<fn::div_by_fn<float>, float>(t_div_by) && map_table_holds<fn::div_by_fn<int>, double>(t_div_by));
static_assert(map_table_holds<fn::div_by_fn<int>, int>(t_div_by_int) && map_table_holds<fn::div_by_fn<double>, std::int64_t>(t_div_by_int));
static_assert(map_table_holds<fn::rsub_fn<float>, float>(t_rsub, true) && map_table_holds<fn::rsub_fn<int>, double>(t_rsub, true));
static_assert(map_table_holds<fn::rsub_fn<int>, int>(t_rsub_int) && map_table_holds<fn::rsub_fn<double>, std::int64_t>(t_rsub_int));
static_assert(map_table_holds<fn::rdiv_fn<float>, float>(t_rdiv) && map_table_holds<fn::rdiv_fn<int>, int>(t_rdiv_int));
// A claim the caller makes still counts: a positive c keeps the order of partial<max> terms.
static_assert(sc::detail::map_rules(at(1, 0, P9[6], P9[0]), sc::detail::props_of<decltype(fn::nondecreasing_in<0>(fn::div_by(2))), int>()).err == ok);

/// The verdict of div(a, b) on one mesh axis, from the rule in docs/02_operators.md:
/// equal placements without a partial; a partial<sum|avg> a over a replicated b for
/// floating-point types; a partial<avg> of integers anywhere is an integer mean, a
/// partial<sum> a of integers over a replicated b an integer division; any other pair with
/// a partial is the division's refusal, and unequal placements without one differ.
constexpr E div_axis(int i, int j, bool ints) {
  const pd a = P9[i], b = P9[j];
  const bool one_replicate = (a.is_partial() && b.is_replicate()) || (a.is_replicate() && b.is_partial());
  if (a == b && !a.is_partial()) return ok;
  if (a == b || one_replicate) {
    if (ints && (i == 5 || j == 5)) return IM;
    if (a.is_partial() && b.is_replicate() && (i == 4 || i == 5)) return ints ? ID : ok;
    return DP;
  }
  return LD;
}
template <class T>
constexpr bool div_table_holds() {
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (int i = 0; i < 9; ++i)
        for (int j = 0; j < 9; ++j) {
          const auto a = at(n, pos, P9[i], pd::make_shard(2)), b = at(n, pos, P9[j], pd::make_shard(2));
          const auto r = sc::detail::zip_rules(a, b, sc::detail::props_of<fn::div_fn, T, T>());
          const E want = div_axis(i, j, std::is_integral_v<T>);
          if (r.err != want) return false;
          if (want == ok ? !(r.out == a) : r.axis != pos) return false;
        }
  return true;
}
static_assert(div_table_holds<float>() && div_table_holds<double>() && div_table_holds<int>() && div_table_holds<std::int64_t>());

TEST_CASE("division rule tables hold at run time too") {
  CHECK(map_table_holds<fn::div_by_fn<float>, float>(t_div_by));
  CHECK(map_table_holds<fn::div_by_fn<int>, int>(t_div_by_int));
  CHECK(map_table_holds<fn::rsub_fn<float>, float>(t_rsub, true));
  CHECK(map_table_holds<fn::rdiv_fn<int>, int>(t_rdiv_int));
  CHECK(div_table_holds<double>());
  CHECK(div_table_holds<int>());
}

// ---------------------------------------------------------------------------------------
// Overload selection and output layout types
// ---------------------------------------------------------------------------------------
using host_mesh = decltype(sc::make_mesh(std::declval<sc::host::communicator&>(), std::array<int, 2>{}));
template <class L, class T = float>
using D = sc::dtensor<T, 2, L, host_mesh>;
using DS = D<sc::layout<S0, R>>;
using DD = sc::dtensor<double, 2, sc::dynamic_layout, host_mesh>;
using DC = sc::dtensor<const float, 2, sc::layout<S0, R>, host_mesh>;
struct not_a_number {
  operator float() const { return 1.0f; }
};
template <class A, class B>
concept can_add = requires(A a, B b) { sc::add(a, b); };
template <class A, class B>
concept can_sub = requires(A a, B b) { sc::sub(a, b); };
template <class A, class B>
concept can_mul = requires(A a, B b) { sc::mul(a, b); };
template <class A, class B>
concept can_div = requires(A a, B b) { sc::div(a, b); };
// Scalar first or last, or two tensors; never a non-arithmetic scalar, never two scalars.
static_assert(can_add<float, const DS&> && can_add<int, DS> && can_sub<double, DD&> && can_mul<char, const DD&> && can_div<float, DC>);
static_assert(can_div<const DS&, float> && can_div<DS, int> && can_div<const DS&, const DS&> && can_div<DD, const DD&> && can_div<DS, DC>);
static_assert(can_add<DS, DS> && can_sub<DS, float> && can_mul<DS, DS> && can_add<const DS&, double>);
static_assert(!can_add<not_a_number, DS> && !can_sub<not_a_number, DS> && !can_mul<float*, DS> && !can_div<not_a_number, DS> &&
              !can_div<DS, not_a_number>);
static_assert(!can_add<int, int> && !can_div<int, int> && !can_div<double, float>);
// Result types: the layout the rules give, mutable elements, the input's element type.
static_assert(std::is_same_v<decltype(sc::add(1, std::declval<const DS&>())), DS> && std::is_same_v<decltype(sc::mul(2.0, std::declval<DS>())), DS>);
static_assert(std::is_same_v<decltype(sc::add(1, std::declval<DC>())), DS> && std::is_same_v<decltype(sc::div(1.0f, std::declval<const DC&>())), DS>);
static_assert(std::is_same_v<decltype(sc::sub(1.0f, std::declval<const D<sc::layout<Pm, S1>>&>())), D<sc::layout<Pn, S1>>>);
static_assert(std::is_same_v<decltype(sc::sub(1, std::declval<D<sc::layout<Pn, Pn>>>())), D<sc::layout<Pm, Pm>>>);
static_assert(std::is_same_v<decltype(sc::sub(1, std::declval<D<sc::layout<Pa, S0>>>())), D<sc::layout<Pa, S0>>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<const D<sc::layout<S0, Ps>>&>(), 4)), D<sc::layout<S0, Ps>>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<D<sc::layout<S0, Pa>, double>>(), std::declval<D<sc::layout<S0, R>, double>>())),
                             D<sc::layout<S0, Pa>, double>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<D<sc::layout<S1, S0>, int>>(), std::declval<const D<sc::layout<S1, S0>, int>&>())),
                             D<sc::layout<S1, S0>, int>>);
static_assert(std::is_same_v<decltype(sc::div(std::declval<DD>(), 2)), DD> && std::is_same_v<decltype(sc::sub(2, std::declval<const DD&>())), DD>);
static_assert(std::is_same_v<sc::map_layout_t<sc::layout<Ps, S0>, fn::div_by_fn<int>>, sc::layout<Ps, S0>>);
static_assert(std::is_same_v<sc::map_layout_t<sc::layout<R, Pm>, fn::rsub_fn<float>>, sc::layout<R, Pn>>);
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<Ps, S1>, sc::layout<R, S1>, fn::div_fn, double>, sc::layout<Ps, S1>>);

// ---------------------------------------------------------------------------------------
// Differential tests
// ---------------------------------------------------------------------------------------
bool has_op(const sc::runtime_layout& l, sc::reduce_op op) { return optest::has_partial_op(l, op); }
int first_partial_axis(const sc::runtime_layout& l) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial()) return a;
  return -1;
}
sc::runtime_layout swap_max_min(sc::runtime_layout l) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial() && (l[a].op == sc::reduce_op::max || l[a].op == sc::reduce_op::min))
      l[a] = pd::make_partial(l[a].op == sc::reduce_op::max ? sc::reduce_op::min : sc::reduce_op::max);
  return l;
}
/// What a refusal's message must hold, or "" when the call is legal.
struct verdict {
  std::string need;  // a substring of the message; "" = legal
  sc::runtime_layout out{};
};

// Every scalar form on every layout of a rank-2 tensor on a mesh of shape `shape`: a legal
// call must give the predicted layout and the single-rank reference, also when x is given
// up (the result then goes over x's piece, and x is left empty); a refused one must throw
// layout_error with the reason, and leave a given-up x as it was. Kept inputs are unchanged.
template <class T, int N>
void scalar_forms(std::array<int, N> shape, std::array<std::int64_t, 2> e) {
  INFO("mesh " << optest::shape_name<N>(shape) << " extents " << e[0] << "x" << e[1]);
  constexpr bool fp = std::is_floating_point_v<T>;
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = e[0] * e[1];
  const auto g = optest::ints<T>(n, 1);    // -3..3
  const auto gu = optest::units<T>(n, 2);  // -2, -1, 1, 2: divisors
  // Scalars whose quotients and products of small integers are exact in floating point.
  const double c_add = fp ? 2.5 : 3, c_mul = fp ? 1.5 : -2, c_sub = fp ? 1.5 : 3, c_rdiv = fp ? 1 : 6;
  const double c_div_pos = fp ? 4 : 2, c_div_neg = fp ? -0.5 : -3;
  // The references, in the element type's own arithmetic (integer division truncates).
  auto ref = [](const std::vector<T>& v, auto f) {
    std::vector<T> r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<T>(f(v[i]));
    return r;
  };
  const auto r_add = ref(g, [&](T v) { return static_cast<T>(c_add) + v; });
  const auto r_mul = ref(g, [&](T v) { return static_cast<T>(c_mul) * v; });
  const auto r_sub = ref(g, [&](T v) { return static_cast<T>(c_sub) - v; });
  const auto r_rdiv = ref(gu, [&](T v) { return static_cast<T>(c_rdiv) / v; });
  const auto r_div_pos = ref(g, [&](T v) { return v / static_cast<T>(c_div_pos); });
  const auto r_div_neg = ref(g, [&](T v) { return v / static_cast<T>(c_div_neg); });
  const auto ls = optest::layouts(optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min}), N);
  sc::testing::sweep_outcome f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    std::size_t cases = 0;
    for (const auto& l : ls) {
      using X = sc::dtensor<T, 2, sc::dynamic_layout, decltype(m)>;
      const X x = optest::make_terms(m, l, g, e), xu = optest::make_terms(m, l, gu, e);
      const auto x0 = optest::local_copy(x), xu0 = optest::local_copy(xu);
      const bool part = optest::has_partial(l), sum = has_op(l, sc::reduce_op::sum), avg = has_op(l, sc::reduce_op::avg);
      const bool max_min = has_op(l, sc::reduce_op::max) || has_op(l, sc::reduce_op::min);
      const std::string ax = "mesh axis " + std::to_string(first_partial_axis(l));
      const std::string int_mean = "partial<avg> with an integral element type on " + ax;
      const std::string int_order = "partial<max|min> with an integral element type on " + ax;
      const double tol = fp && avg ? 1e-6 : 0;  // the mean of 3 terms rounds
      // Runs op on a kept x (from `src`) and on a given-up copy of it.
      auto one = [&](const char* what, const verdict& v, auto&& op, const std::vector<T>& src_g, const std::vector<T>& want) {
        const std::string head = std::string(what) + " on " + sc::to_string(l) + ": ";
        const X& src = &src_g == &g ? x : xu;
        for (const bool given : {false, true}) {
          X own = optest::make_terms(m, l, src_g, e);
          const T* const old = own.data();
          const std::string how = given ? "(given up) " : "";
          try {
            auto y = given ? op(std::move(own)) : op(src);
            static_assert(std::is_same_v<decltype(y), X>);
            if (!v.need.empty()) {
              f.add(comm.rank(), head + how + "accepted, but must be refused with \"" + v.need + "\"");
              continue;
            }
            if (comm.rank() == 0 && !given) ++cases;
            if (!(y.layout() == v.out)) f.add(comm.rank(), head + how + "layout " + sc::to_string(y.layout()) + ", predicted " + sc::to_string(v.out));
            const std::string err = optest::compare_global(y, want, tol);
            if (!err.empty()) f.add(comm.rank(), head + how + err);
            if (given) {
              if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), head + "a given-up x owned alone was not written over");
              f.add(comm.rank(), sc::testing::check_emptied(own));
            }
          } catch (const sc::layout_error& ex) {
            const std::string msg = ex.what();
            if (v.need.empty()) f.add(comm.rank(), head + how + "refused: " + msg);
            else if (msg.find(v.need) == std::string::npos) f.add(comm.rank(), head + how + "the message lacks \"" + v.need + "\": " + msg);
            if (given && (own.data() != old || optest::local_copy(own) != optest::local_copy(src)))
              f.add(comm.rank(), head + "a refused call changed its given-up operand");
          }
        }
      };
      // x / c: floating point keeps partial<sum|avg>; a partial<max|min> is refused whatever
      // c's sign; integer division keeps no partial.
      const verdict v_div{!part ? ""
                          : fp  ? (max_min ? "dividing by a negative number swaps max and min" : "")
                          : avg ? int_mean
                          : sum ? "integer division truncates"
                                : "dividing by a negative number swaps max and min",
                          l};
      one("div(x, c > 0)", v_div, [&](auto&& t) { return sc::div(std::forward<decltype(t)>(t), static_cast<T>(c_div_pos)); }, g, r_div_pos);
      one("div(x, c < 0)", v_div, [&](auto&& t) { return sc::div(std::forward<decltype(t)>(t), c_div_neg); }, g, r_div_neg);
      // c * x: linear (partial<sum|avg>; over integers partial<sum> only)
      const verdict v_mul{!part || sum || (avg && fp) ? "" : avg ? int_mean : "partial<max|min|prod> terms cannot be", l};
      one("mul(c, x)", v_mul, [&](auto&& t) { return sc::mul(static_cast<T>(c_mul), std::forward<decltype(t)>(t)); }, g, r_mul);
      one("mul(x, c)", v_mul, [&](auto&& t) { return sc::mul(std::forward<decltype(t)>(t), c_mul); }, g, r_mul);
      // c + x: affine, nondecreasing; c once per term of a partial sum is refused
      const std::string once = "on " + ax + ", so c would enter the sum once per partial term";
      const verdict v_add{!part ? "" : sum ? once : !fp ? (avg ? int_mean : int_order) : "", l};
      one("add(c, x)", v_add, [&](auto&& t) { return sc::add(c_add, std::forward<decltype(t)>(t)); }, g, r_add);
      // c - x: affine, nonincreasing (max <-> min)
      const verdict v_sub{v_add.need, swap_max_min(l)};
      one("sub(c, x)", v_sub, [&](auto&& t) { return sc::sub(c_sub, std::forward<decltype(t)>(t)); }, g, r_sub);
      // c / x: no partial
      const verdict v_rdiv{!part ? "" : !fp && avg ? int_mean : "x is " + sc::to_string(l[first_partial_axis(l)]) + ", which the division cannot divide",
                           l};
      one("div(c, x)", v_rdiv, [&](auto&& t) { return sc::div(static_cast<T>(c_rdiv), std::forward<decltype(t)>(t)); }, gu, r_rdiv);
      if (optest::local_copy(x) != x0 || optest::local_copy(xu) != xu0) f.add(comm.rank(), "a kept x changed on " + sc::to_string(l));
    }
    if (comm.rank() == 0) f.count(cases);
  });
  f.report();
}

// div(a, b) of every pair of layouts: the rule (div_axis, above) decides, per mesh axis, and
// the first illegal axis names the reason in the message. Legal pairs match a / b computed
// on the global tensors, kept and with either operand given up.
template <class T, int N>
void tensor_div(std::array<int, N> shape, std::array<std::int64_t, 2> e) {
  INFO("mesh " << optest::shape_name<N>(shape) << " extents " << e[0] << "x" << e[1]);
  constexpr bool fp = std::is_floating_point_v<T>;
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = e[0] * e[1];
  const auto ga = optest::ints<T>(n, 1), gb = optest::units<T>(n, 2);
  const auto want = optest::each2(ga, gb, [](T u, T v) { return static_cast<T>(u / v); });
  const auto ls = optest::layouts(optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min}), N);
  auto index_of = [](const pd& p) {
    for (int i = 0; i < 9; ++i)
      if (P9[i] == p) return i;
    return -1;
  };
  sc::testing::sweep_outcome f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    using X = sc::dtensor<T, 2, sc::dynamic_layout, decltype(m)>;
    std::vector<X> as, bs;
    for (const auto& l : ls) {
      as.push_back(optest::make_terms(m, l, ga, e));
      bs.push_back(optest::make_terms(m, l, gb, e));
    }
    std::size_t cases = 0;
    for (std::size_t i = 0; i < ls.size(); ++i)
      for (std::size_t j = 0; j < ls.size(); ++j) {
        const std::string head = "div of " + sc::to_string(ls[i]) + " and " + sc::to_string(ls[j]) + ": ";
        // the rule's verdict: the first axis that is not ok
        std::string need;
        for (int a = 0; a < N && need.empty(); ++a) {
          const std::string ax = "mesh axis " + std::to_string(a);
          switch (div_axis(index_of(ls[i][a]), index_of(ls[j][a]), !fp)) {
            case E::ok: break;
            case E::integer_mean: need = "partial<avg> with an integral element type on " + ax; break;
            case E::integer_division: need = "integral element type on " + ax + "; integer division truncates"; break;
            case E::layouts_differ: need = "differ on " + ax + " (" + sc::to_string(ls[i][a]) + " vs " + sc::to_string(ls[j][a]) + ")"; break;
            default:
              need = "on " + ax + " a is " + sc::to_string(ls[i][a]) + " and b is " + sc::to_string(ls[j][a]) + ", which the division cannot divide";
          }
        }
        const auto a0 = optest::local_copy(as[i]), b0 = optest::local_copy(bs[j]);
        for (int given = 0; given < 3; ++given) {  // 0: both kept, 1: a given up, 2: b given up
          X ga_own = optest::make_terms(m, ls[i], ga, e), gb_own = optest::make_terms(m, ls[j], gb, e);
          const T* const old = given == 1 ? ga_own.data() : gb_own.data();
          const std::string how = given == 1 ? "(a given up) " : given == 2 ? "(b given up) " : "";
          try {
            auto y = given == 1 ? sc::div(std::move(ga_own), bs[j]) : given == 2 ? sc::div(as[i], std::move(gb_own)) : sc::div(as[i], bs[j]);
            if (!need.empty()) {
              f.add(comm.rank(), head + how + "accepted, but must be refused with \"" + need + "\"");
              continue;
            }
            if (comm.rank() == 0 && given == 0) ++cases;
            if (!(y.layout() == ls[i])) f.add(comm.rank(), head + how + "layout " + sc::to_string(y.layout()));
            const std::string err = optest::compare_global(y, want, fp && has_op(ls[i], sc::reduce_op::avg) ? 1e-6 : 0);
            if (!err.empty()) f.add(comm.rank(), head + how + err);
            if (given > 0) {
              if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), head + how + "not written over the given-up piece");
              f.add(comm.rank(), sc::testing::check_emptied(given == 1 ? ga_own : gb_own));
            }
          } catch (const sc::layout_error& ex) {
            const std::string msg = ex.what();
            if (need.empty()) f.add(comm.rank(), head + how + "refused: " + msg);
            else if (msg.find(need) == std::string::npos || msg.find("shardcast::div: ") != 0)
              f.add(comm.rank(), head + how + "the message lacks \"" + need + "\": " + msg);
            if ((given == 1 && ga_own.data() != old) || (given == 2 && gb_own.data() != old))
              f.add(comm.rank(), head + how + "a refused call emptied its given-up operand");
          }
        }
        if (optest::local_copy(as[i]) != a0 || optest::local_copy(bs[j]) != b0) f.add(comm.rank(), head + "a kept operand changed");
      }
    if (comm.rank() == 0) f.count(cases);
  });
  f.report();
}

}  // namespace

TEST_CASE_TEMPLATE("div(x, c), add(c, x), sub(c, x), mul(c, x), mul(x, c), div(c, x) on every layout", T, float, double, std::int32_t, std::int64_t) {
  scalar_forms<T, 1>({3}, {2, 5});       // dim 0 splits 1, 1, 0: an empty piece
  scalar_forms<T, 2>({2, 2}, {3, 5});    // uneven
  scalar_forms<T, 2>({1, 3}, {5, 2});    // dim 1 splits 1, 1, 0
  scalar_forms<T, 2>({3, 1}, {4, 3});
  scalar_forms<T, 2>({2, 2}, {0, 3});    // no elements at all
}

TEST_CASE_TEMPLATE("div(a, b) of every pair of layouts", T, float, double, std::int32_t, std::int64_t) {
  tensor_div<T, 1>({3}, {2, 5});
  tensor_div<T, 2>({2, 2}, {3, 5});
  tensor_div<T, 2>({1, 3}, {5, 2});
  tensor_div<T, 2>({3, 1}, {4, 3});
}

TEST_CASE_TEMPLATE("division and the scalar-first forms through the compile-time API", T, float, double) {
  const std::array<std::int64_t, 2> e{5, 3};
  const auto g = optest::ints<T>(15, 3), gu = optest::units<T>(15, 1);
  const auto quot = optest::each2(g, gu, [](T u, T v) { return static_cast<T>(u / v); });
  optest::failures f;
  auto run = [&]<std::size_t N>(std::array<int, N> shape) {
    sc::host::run(shape[0] * (N > 1 ? shape[N - 1] : 1), [&](sc::host::communicator& comm) {
      auto m = sc::make_mesh(comm, shape);
      auto make = [&]<class L>(L, const std::vector<T>& v) { return optest::as_static<L>(optest::make_terms(m, L::desc, v, e)); };
      auto expect = [&]<class L>(L, const char* what, const auto& y, const std::vector<T>& want) {
        static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(y)>::layout_type, L>);
        const std::string err = optest::compare_global(y, want, 1e-6);
        if (!err.empty()) f.add(comm.rank(), std::string(what) + ": " + err);
      };
      if constexpr (N == 2) {
        using LP = sc::layout<S0, Ps>;
        using LR = sc::layout<S0, R>;
        using LM = sc::layout<Pm, S1>;
        using LN = sc::layout<Pn, S1>;
        const auto p = make(LP{}, g), r = make(LR{}, gu), mx = make(LM{}, g);
        expect(LP{}, "div(P(sum), c)", sc::div(p, 4), optest::each(g, [](T v) { return static_cast<T>(v / T(4)); }));
        expect(LP{}, "div(P(sum), R)", sc::div(p, r), quot);
        expect(LP{}, "mul(c, P(sum))", sc::mul(-2, p), optest::each(g, [](T v) { return static_cast<T>(T(-2) * v); }));
        expect(LN{}, "sub(c, P(max))", sc::sub(T(1.5), mx), optest::each(g, [](T v) { return static_cast<T>(T(1.5) - v); }));
        expect(LM{}, "add(c, P(max))", sc::add(0.5, mx), optest::each(g, [](T v) { return static_cast<T>(T(0.5) + v); }));
        expect(LR{}, "div(c, R)", sc::div(1, r), optest::each(gu, [](T v) { return static_cast<T>(T(1) / v); }));
        // given up: the result goes over the operand's piece
        auto own = make(LP{}, g);
        const T* const old = own.data();
        auto y = sc::div(std::move(own), r);
        expect(LP{}, "div(P(sum) given up, R)", y, quot);
        if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), "div(given up, R): new storage");
        f.add(comm.rank(), sc::testing::check_emptied(own));
        auto own2 = make(LM{}, g);
        const T* const old2 = own2.data();
        auto z = sc::sub(2, std::move(own2));
        expect(LN{}, "sub(c, P(max) given up)", z, optest::each(g, [](T v) { return static_cast<T>(T(2) - v); }));
        if (z.local_size() > 0 && z.data() != old2) f.add(comm.rank(), "sub(c, given up): new storage");
      } else {
        using LA = sc::layout<Pa>;
        using L1 = sc::layout<S1>;
        const auto pa = make(LA{}, g), s1 = make(L1{}, gu);
        expect(LA{}, "div(P(avg), c)", sc::div(pa, -0.5), optest::each(g, [](T v) { return static_cast<T>(v / T(-0.5)); }));
        expect(LA{}, "sub(c, P(avg))", sc::sub(3, pa), optest::each(g, [](T v) { return static_cast<T>(T(3) - v); }));
        expect(LA{}, "add(c, P(avg))", sc::add(3, pa), optest::each(g, [](T v) { return static_cast<T>(T(3) + v); }));
        expect(L1{}, "div(S(1), S(1))", sc::div(s1, s1), optest::each(gu, [](T) { return T(1); }));
        expect(L1{}, "div(c, S(1))", sc::div(2.0, s1), optest::each(gu, [](T v) { return static_cast<T>(T(2) / v); }));
      }
    });
  };
  run(std::array<int, 2>{2, 2});
  run(std::array<int, 2>{3, 1});
  run(std::array<int, 1>{3});
  f.report();
}

TEST_CASE("integer division by zero is refused before dividing; lowest() / -1 wraps; floating division by zero is inf or NaN") {
  optest::failures f;
  std::vector<int> threw(3, 0);
  sc::host::run(3, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{3});
    const sc::runtime_layout s0{pd::make_shard(0)};
    const auto message = [](auto&& op) { return optest::layout_error_of(op); };
    // div(x, c): the same c on every rank, so every rank refuses it alike.
    const auto x = sc::distribute(m, s0, std::vector<int>{7, -7, 1, 0, 5, 6}, {6});
    const std::string zero = message([&] { return sc::div(x, 0); });
    if (zero.find("shardcast::div: x has integer elements and the divisor c is 0") != 0 || zero.find("the same c on every rank") == std::string::npos)
      f.add(comm.rank(), "div(x, 0): " + zero);
    if (message([&] { return sc::div(x, 0.0); }).find("the divisor c is 0") == std::string::npos) f.add(comm.rank(), "div(x, 0.0) of ints");
    const std::string half = message([&] { return sc::div(x, 0.5); });
    if (half.find("shardcast::div: x has integer elements and the divisor 0.5 is not a whole number") != 0) f.add(comm.rank(), "div(x, 0.5): " + half);
    if (message([&] { return sc::div(x, 3e9); }).find("is not a whole number in their range") == std::string::npos) f.add(comm.rank(), "div(x, 3e9)");
    auto given = sc::distribute(m, s0, std::vector<int>{7, -7, 1, 0, 5, 6}, {6});
    const int* const old = given.data();
    (void)message([&] { return sc::div(std::move(given), 0); });
    if (given.data() != old) f.add(comm.rank(), "a refused div(given up, 0) emptied x");
    f.add(comm.rank(), optest::compare_global(sc::div(x, 2), std::vector<int>{3, -3, 0, 0, 2, 3}));
    f.add(comm.rank(), optest::compare_global(sc::div(x, -2.0), std::vector<int>{-3, 3, 0, 0, -2, -3}));
    // lowest() / -1 wraps to lowest() (it would overflow), as fn::neg does
    const auto lo = sc::distribute(m, s0, std::vector<std::int64_t>{lmin, 4, -1}, {3});
    f.add(comm.rank(), optest::compare_global(sc::div(lo, -1), std::vector<std::int64_t>{lmin, -4, 1}));
    f.add(comm.rank(), optest::compare_global(sc::div(lo, sc::distribute(m, s0, std::vector<std::int64_t>{-1, 2, -1}, {3})),
                                              std::vector<std::int64_t>{lmin, 2, 1}));
    f.add(comm.rank(), optest::compare_global(sc::div(lmin, sc::distribute(m, s0, std::vector<std::int64_t>{-1, 2, 1}, {3})),
                                              std::vector<std::int64_t>{lmin, lmin / 2, lmin}));
    // div(a, b) and div(c, x): a zero in this rank's piece of the divisor; rank 1 holds it.
    const auto a = sc::distribute(m, s0, std::vector<int>{6, 6, 6, 6, 6, 6}, {6});
    const auto b = sc::distribute(m, s0, std::vector<int>{1, 2, 3, 0, 6, -6}, {6});
    auto b_given = sc::distribute(m, s0, std::vector<int>{1, 2, 3, 0, 6, -6}, {6});
    const int* const b_old = b_given.data();
    const std::string ab = message([&] { return sc::div(a, b); }), cb = message([&] { return sc::div(12, b); });
    const std::string ab_given = message([&] { return sc::div(a, std::move(b_given)); });
    if (comm.rank() == 1) {
      ++threw[1];
      if (ab.find("shardcast::div: b has integer elements, and its local piece on the rank at mesh coordinates (1) holds 0 at local element 1") != 0)
        f.add(comm.rank(), "div(a, b) with a zero in b: " + ab);
      if (cb.find("shardcast::div: x has integer elements, and its local piece on the rank at mesh coordinates (1) holds 0") != 0)
        f.add(comm.rank(), "div(c, x) with a zero in x: " + cb);
      if (ab_given.find("holds 0") == std::string::npos || b_given.data() != b_old)
        f.add(comm.rank(), "div(a, given-up b) with a zero in b: " + ab_given + " (b must stay as it was)");
    } else {
      // the other ranks' pieces divide (no collective follows, so they need not agree)
      for (const std::string* s : {&ab, &cb, &ab_given})
        if (*s != "no exception") f.add(comm.rank(), "a rank without a zero divisor threw: " + *s);
    }
    // floating point: x / 0 as C++ gives it, no check
    const auto xf = sc::distribute(m, s0, std::vector<double>{1, -1, 0}, {3});
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    f.add(comm.rank(), optest::compare_global(sc::div(xf, 0), std::vector<double>{inf, -inf, nan}));
    f.add(comm.rank(), optest::compare_global(sc::div(xf, sc::distribute(m, s0, std::vector<double>{0, -0.0, 0}, {3})), std::vector<double>{inf, inf, nan}));
    f.add(comm.rank(), optest::compare_global(sc::div(2.0f, sc::distribute(m, s0, std::vector<float>{0, -0.0f, 4}, {3})),
                                              std::vector<float>{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.5f}));
  });
  f.report();
  CHECK(threw[1] == 1);
}

// The same divisions written with the functors: zip(a, b, fn::div), broadcast_zip<D>(a, b,
// fn::div) (the documented e / sum(e) normalisation), map(x, fn::div_by(c)) and map(x,
// fn::rdiv(c)) refuse an integer zero divisor as shardcast::div does, instead of ending the
// process (SIGFPE); the rank whose piece holds the zero throws, before anything is divided.
TEST_CASE_TEMPLATE("integer division by zero through fn::div, fn::div_by and fn::rdiv is refused as by div", T, int, std::int64_t) {
  optest::failures f;
  sc::host::run(3, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{3});
    const sc::runtime_layout s0{pd::make_shard(0)};
    const auto message = [](auto&& op) { return optest::layout_error_of(op); };
    const auto a = sc::distribute(m, s0, std::vector<T>{6, 6, 6, 6, 6, 6}, {6});
    const auto b = sc::distribute(m, s0, std::vector<T>{1, 2, 3, 0, 6, -6}, {6});  // rank 1 holds the 0
    // e [3, 2] by rows, and its row sums [3, 1]: the second row sums to 0 (rank 1's row).
    const auto e = sc::distribute(m, s0, std::vector<T>{1, 1, 1, -1, 2, 2}, {3, 2});
    const auto rows = sc::distribute(m, s0, std::vector<T>{2, 0, 4}, {3, 1});
    const std::string zip = message([&] { return sc::zip(a, b, sc::fn::div); });
    const std::string bz = message([&] { return sc::broadcast_zip<1>(e, rows, sc::fn::div); });
    const std::string rd = message([&] { return sc::map(b, sc::fn::rdiv(12)); });
    // The same divisions marked with a property (a mark changes no arithmetic).
    const std::string zip_marked = message([&] { return sc::zip(a, b, sc::fn::nondecreasing_in<0>(sc::fn::div)); });
    const std::string rd_marked = message([&] { return sc::map(b, sc::fn::nonincreasing_in<0>(sc::fn::rdiv(12))); });
    if (comm.rank() == 1) {
      if (zip.find("shardcast::zip: b (the divisor of fn::div) has integer elements, and its local piece on the rank at mesh coordinates (1) "
                   "holds 0 at local element 1") != 0)
        f.add(comm.rank(), "zip(a, b, fn::div): " + zip);
      if (bz.find("shardcast::broadcast_zip: b (the divisor of fn::div) has integer elements, and its local piece on the rank at mesh "
                  "coordinates (1) holds 0 at local element 0") != 0)
        f.add(comm.rank(), "broadcast_zip<1>(e, rows, fn::div): " + bz);
      if (rd.find("shardcast::map: x (the divisor of fn::rdiv) has integer elements") != 0) f.add(comm.rank(), "map(b, fn::rdiv(12)): " + rd);
      if (zip_marked.find("shardcast::zip: b (the divisor of fn::div) has integer elements") != 0) f.add(comm.rank(), "marked fn::div: " + zip_marked);
      if (rd_marked.find("shardcast::map: x (the divisor of fn::rdiv) has integer elements") != 0) f.add(comm.rank(), "marked fn::rdiv: " + rd_marked);
    } else {
      for (const std::string* s : {&zip, &bz, &rd, &zip_marked, &rd_marked})
        if (*s != "no exception") f.add(comm.rank(), "a rank without a zero divisor threw: " + *s);
    }
    // fn::div_by(c): c converted to T is 0 on every rank, so every rank throws.
    for (const std::string& s : {message([&] { return sc::map(a, sc::fn::div_by(0)); }), message([&] { return sc::map(a, sc::fn::div_by(0.5)); }),
                                 message([&] { return sc::map(a, sc::fn::nondecreasing_in<0>(sc::fn::div_by(0))); })})
      if (s.find("shardcast::map: fn::div_by(c) divides integer elements by c converted to their type, which is 0") != 0)
        f.add(comm.rank(), "map(a, fn::div_by(0 or 0.5)): " + s);
    // Nonzero divisors divide as before.
    const auto b2 = sc::distribute(m, s0, std::vector<T>{1, 2, 3, 4, 6, -6}, {6});
    f.add(comm.rank(), optest::compare_global(sc::zip(a, b2, sc::fn::div), std::vector<T>{6, 3, 2, 1, 1, -1}));
    f.add(comm.rank(), optest::compare_global(sc::map(a, sc::fn::div_by(4)), std::vector<T>{1, 1, 1, 1, 1, 1}));
    f.add(comm.rank(), optest::compare_global(sc::map(b2, sc::fn::rdiv(12)), std::vector<T>{12, 6, 4, 3, 2, -2}));
    const auto rows2 = sc::distribute(m, s0, std::vector<T>{2, -1, 4}, {3, 1});
    f.add(comm.rank(), optest::compare_global(sc::broadcast_zip<1>(e, rows2, sc::fn::div), std::vector<T>{0, 0, -1, 1, 0, 0}));
  });
  f.report();
}

TEST_CASE("div(x, c) computes x / c, not x * (1 / c)") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    const auto x = sc::distribute<sc::layout<S0>>(m, std::vector<double>{49, 98, 3}, std::array<std::int64_t, 1>{3});
    const auto q = sc::to_global(sc::div(x, 49));
    const auto by_reciprocal = sc::to_global(sc::scale(x, 1.0 / 49));
    if (comm.rank() == 0) {
      CHECK(q == std::vector<double>{1, 2, 3.0 / 49});
      CHECK(by_reciprocal[0] != 1.0);  // what the reciprocal gives: the test tells the two apart
    }
  });
}

TEST_CASE("refusals of division and of the scalar-first forms name the operator, the axis and the reason (dynamic layouts)") {
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{3, 4};
    const auto g = optest::units<float>(12, 0);
    const auto msg = [](auto&& op) { return optest::layout_error_of(op); };
    auto need = [&](const char* what, const std::string& got, std::initializer_list<const char*> parts) {
      for (const char* p : parts)
        if (got.find(p) == std::string::npos) f.add(comm.rank(), std::string(what) + ": the message lacks \"" + p + "\": " + got);
    };
    auto make = [&](const char* l) { return optest::make_terms(m, sc::runtime_layout::parse(l), g, e); };
    const auto rr = make("S(0),R"), ps = make("S(0),P(sum)"), pm = make("S(0),P(max)"), pa = make("P(avg),S(1)");
    need("div(R, P(sum))", msg([&] { return sc::div(rr, ps); }),
         {"shardcast::div: layouts \"S(0),R\" and \"S(0),P(sum)\"", "on mesh axis 1 a is R and b is P(sum)", "a partial divisor is refused",
          "1 / (b1 + b2) is not a sum", "redistribute the partial operand to replicate"});
    need("div(P(max), R)", msg([&] { return sc::div(pm, rr); }),
         {"on mesh axis 1 a is P(max) and b is R", "dividing by a negative number swaps max and min", "fn::nondecreasing_in<0>(fn::div_by(c))"});
    need("div(P(sum), P(sum))", msg([&] { return sc::div(ps, ps); }), {"on mesh axis 1 a is P(sum) and b is P(sum)"});
    need("div(x P(max), c)", msg([&] { return sc::div(pm, 2.0f); }), {"shardcast::div: layout \"S(0),P(max)\"", "on mesh axis 1 x is P(max)", "swaps max and min"});
    need("div(c, x P(avg))", msg([&] { return sc::div(1.0f, pa); }), {"shardcast::div: ", "on mesh axis 0 x is P(avg)", "a partial divisor is refused"});
    need("sub(c, x P(sum))", msg([&] { return sc::sub(1.0f, ps); }), {"shardcast::sub: ", "on mesh axis 1, so c would enter the sum once per partial term"});
    need("add(c, x P(sum))", msg([&] { return sc::add(1.0f, ps); }), {"shardcast::add: ", "on mesh axis 1, so c would enter the sum once per partial term"});
    // mul(x, c) and mul(c, x) name mul, not scale (they share scale's checks)
    need("mul(x P(max), c)", msg([&] { return sc::mul(pm, 2.0f); }), {"shardcast::mul: layout \"S(0),P(max)\"", "partial<max|min|prod> terms"});
    need("mul(c, x P(max))", msg([&] { return sc::mul(2.0f, pm); }), {"shardcast::mul: layout \"S(0),P(max)\""});
    if (msg([&] { return sc::mul(pm, 2.0f); }).find("scale") != std::string::npos) f.add(comm.rank(), "mul(x, c)'s message names scale");
    const auto xi = sc::distribute(m, sc::runtime_layout::parse("S(0),S(1)"), optest::ints<int>(12, 1), e);
    need("mul(int x, 0.5)", msg([&] { return sc::mul(xi, 0.5); }), {"shardcast::mul: x has integer elements and the factor 0.5 is not a whole number"});
    need("mul(0.5, int x)", msg([&] { return sc::mul(0.5, xi); }), {"shardcast::mul: x has integer elements and the factor 0.5"});
    need("sub(0.5, int x)", msg([&] { return sc::sub(0.5, xi); }), {"shardcast::sub: x has integer elements and the scalar 0.5"});
    need("div(0.5, int x)", msg([&] { return sc::div(0.5, xi); }), {"shardcast::div: x has integer elements and the numerator 0.5"});
    // Each form's hint fits it: sub(c, x)'s is about c - x, sub(x, c)'s about x - c.
    const auto xu8 = sc::distribute(m, sc::runtime_layout::parse("S(0),S(1)"), std::vector<std::uint8_t>(12, 1), e);
    const std::string from_neg = msg([&] { return sc::sub(-1, xu8); });
    need("sub(-1, uint8 x)", from_neg,
         {"shardcast::sub: x has integer elements and the scalar -1 is not a whole number in their range", "-1 - x is sub(std::numeric_limits<T>::max(), x)"});
    if (from_neg.find("add(x, -1)") != std::string::npos) f.add(comm.rank(), "sub(-1, uint8 x) gives sub(x, c)'s hint: " + from_neg);
    need("sub(uint8 x, -1)", msg([&] { return sc::sub(xu8, -1); }), {"add(x, 1) rather than sub(x, -1)"});
    need("add(uint8 x, -1)", msg([&] { return sc::add(xu8, -1); }), {"sub(x, 1) rather than add(x, -1)"});
    need("scale(int x, 0.5)", msg([&] { return sc::scale(xi, 0.5); }), {"shardcast::scale: x has integer elements and the factor 0.5"});
    // integer partials
    const auto pi = sc::redistribute(xi, sc::runtime_layout::parse("S(0),P(sum)"));
    need("div(int P(sum), c)", msg([&] { return sc::div(pi, 2); }),
         {"shardcast::div: layout \"S(0),P(sum)\"", "the numerator is P(sum) with an integral element type on mesh axis 1", "integer division truncates"});
    const auto ri = sc::distribute(m, sc::runtime_layout::parse("S(0),R"), optest::units<int>(12, 1), e);
    need("div(int P(sum), R)", msg([&] { return sc::div(pi, ri); }), {"integral element type on mesh axis 1; integer division truncates"});
    const auto pmi = sc::redistribute(xi, sc::runtime_layout::parse("S(0),P(max)"));
    need("sub(c, int P(max))", msg([&] { return sc::sub(1, pmi); }), {"partial<max|min> with an integral element type on mesh axis 1"});
    // a static operand with a dynamic one: checked at run time
    auto rs = optest::as_static<sc::layout<S0, R>>(rr);
    need("div(static R, dynamic P(sum))", msg([&] { return sc::div(rs, ps); }), {"on mesh axis 1 a is R and b is P(sum)"});
    auto q = sc::div(ps, rs);
    static_assert(std::is_same_v<decltype(q)::layout_type, sc::dynamic_layout>);
    if (!(q.layout() == ps.layout())) f.add(comm.rank(), "div(dynamic P(sum), static R): layout " + sc::to_string(q.layout()));
    f.add(comm.rank(), optest::compare_global(q, optest::each2(g, g, [](float u, float v) { return u / v; })));
  });
  f.report();
}
