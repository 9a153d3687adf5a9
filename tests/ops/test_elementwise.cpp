// Elementwise operators: the per-axis rule tables (compile time, every placement pair at
// every axis position of 1- to 3-axis meshes), differential tests of map/scale/zip/add/
// sub/mul/bias_add against a single-rank computation on meshes of 1 to 8 ranks with uneven
// and empty pieces (every layout on 1- to 3-axis meshes, random ones on 4- to 6-axis
// meshes), and misuse (different meshes, extents, dynamic layouts).
#include <doctest/doctest.h>

#include <cmath>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
#include <shardcast/ops/matmul.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;
using optest::pd;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using S2 = sc::shard<2>;
using Ps = sc::partial<sc::sum>;
using Pa = sc::partial<sc::avg>;
using Pm = sc::partial<sc::max>;
using E = sc::detail::op_rule;

// ---------------------------------------------------------------------------------------
// Rule tables, written out by hand: index i of each table is placement P9[i].
// ---------------------------------------------------------------------------------------
constexpr pd P9[] = {pd::make_replicate(),         pd::make_shard(0),
                     pd::make_shard(1),            pd::make_shard(2),
                     pd::make_partial(sc::reduce_op::sum), pd::make_partial(sc::reduce_op::avg),
                     pd::make_partial(sc::reduce_op::max), pd::make_partial(sc::reduce_op::min),
                     pd::make_partial(sc::reduce_op::prod)};
constexpr E ok = E::ok, NL = E::nonlinear_on_partial, NT = E::partial_not_termwise, IM = E::integer_mean, IO = E::integer_order;
//                                   R   S0  S1  S2  Ps  Pa  Pmax Pmin Pprod
constexpr E map_nonlinear[9] = {ok, ok, ok, ok, NL, NL, NT, NT, NT};
constexpr E map_linear[9] = {ok, ok, ok, ok, ok, ok, NT, NT, NT};
constexpr E map_nondecreasing[9] = {ok, ok, ok, ok, NL, NL, ok, ok, NT};
constexpr E map_affine[9] = {ok, ok, ok, ok, NL, ok, NT, NT, NT};
constexpr E map_identity[9] = {ok, ok, ok, ok, ok, ok, ok, ok, ok};  // the identity keeps everything
constexpr E map_nonincreasing[9] = {ok, ok, ok, ok, NL, NL, ok, ok, NT};  // max and min swap
// Over integers a partial<avg> (index 5) takes no map but the identity: its value is a
// truncated mean, trunc(sum / n).
constexpr E over_ints(const E (&table)[9], int i) { return i == 5 ? IM : table[i]; }

using optest::props;
constexpr bool same_props(const sc::detail::functor_props& p, const optest::known& k) {
  const auto q = props(k);
  for (int i = 0; i < 2; ++i)
    if (p.linear_in[i] != q.linear_in[i] || p.affine_in[i] != q.affine_in[i] || p.nondecreasing_in[i] != q.nondecreasing_in[i] ||
        p.nonincreasing_in[i] != q.nonincreasing_in[i])
      return false;
  return p.linear == q.linear;
}
// Integer operands are flagged for every functor but the identity.
static_assert(sc::detail::props_of<sc::fn::add_fn, int, float>().truncating_mean_in[0] &&
              !sc::detail::props_of<sc::fn::add_fn, int, float>().truncating_mean_in[1] &&
              !sc::detail::props_of<sc::fn::mul_fn, double, double>().truncating_mean_in[0] &&
              sc::detail::props_of<sc::fn::scale_fn<double>, std::int64_t>().truncating_mean_in[0] &&
              !sc::detail::props_of<sc::fn::identity_fn, int>().truncating_mean_in[0]);
// Integer addition and subtraction are flagged as wrapping when both operands are integral.
static_assert(sc::detail::props_of<sc::fn::add_fn, int, int>().wrapping_in[0] && sc::detail::props_of<sc::fn::add_fn, int, int>().wrapping_in[1] &&
              sc::detail::props_of<sc::fn::sub_fn, std::uint8_t, std::uint8_t>().wrapping_in[1] &&
              !sc::detail::props_of<sc::fn::add_fn, int, float>().wrapping_in[0] &&
              !sc::detail::props_of<sc::fn::sub_fn, double, double>().wrapping_in[0] &&
              !sc::detail::props_of<sc::fn::mul_fn, int, int>().wrapping_in[0] &&
              !sc::detail::props_of<sc::fn::relu_fn, int>().wrapping_in[0]);
// The library's traits give the properties the tests write down for each functor.
static_assert(same_props(sc::detail::props_of<sc::fn::add_fn, int, int>(), optest::k_add));
static_assert(same_props(sc::detail::props_of<sc::fn::sub_fn, float, float>(), optest::k_sub));
static_assert(same_props(sc::detail::props_of<sc::fn::mul_fn, int, int>(), optest::k_mul));
static_assert(same_props(sc::detail::props_of<sc::fn::div_fn, double, double>(), optest::k_div_float));
static_assert(same_props(sc::detail::props_of<sc::fn::div_fn, int, int>(), optest::k_none));  // integer division truncates
static_assert(same_props(sc::detail::props_of<optest::max_fn, float, float>(), optest::k_none));
inline constexpr auto ratio = [](auto n, auto d) { return n / (d + d); };
// Wrappers add their property and keep the wrapped functor's.
static_assert(same_props(sc::detail::props_of<decltype(sc::fn::linear_in<0>(ratio)), float, float>(),
                         optest::known{false, {true, false}, {true, false}, {false, false}}));
static_assert(same_props(sc::detail::props_of<decltype(sc::fn::nondecreasing_in<1>(sc::fn::affine_in<0>(ratio))), int, int>(),
                         optest::known{false, {false, false}, {true, false}, {false, true}}));
static_assert(same_props(sc::detail::props_of<decltype(sc::fn::affine_in<1>(sc::fn::mul)), int, int>(), optest::k_mul));
static_assert(sc::is_linear_v<decltype(sc::fn::nondecreasing_in<0>(sc::fn::linear(ratio)))>);
static_assert(sc::fn::linear_in<0>(ratio)(6.0, 1.5) == 2.0 && sc::fn::nondecreasing_in<1>(sc::fn::sub)(5, 2) == 3);
// bias placement x needs on an axis (rank-3 x): -1 means x's placement refuses any bias.
// (partial<avg|max|min>: every term gets the bias, right for a mean, a maximum, a minimum)
constexpr int bias_needs[9] = {0, 0, 0, 1, -1, 0, 0, 0, -1};  // index into P9: R or S0

// Puts `p` on axis `pos` of an n-axis layout and `fill` on every other axis.
constexpr sc::runtime_layout at(int n, int pos, pd p, pd fill) {
  sc::runtime_layout l;
  l.naxes = n;
  for (int a = 0; a < n; ++a) l[a] = a == pos ? p : fill;
  return l;
}

constexpr bool verdict_is(const sc::detail::layout_rule& r, E want, int pos, const sc::runtime_layout& out_if_ok) {
  if (r.err != want) return false;
  if (want != E::ok) return r.axis == pos;
  return r.out == out_if_ok;
}

constexpr bool map_table() {
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (int i = 0; i < 9; ++i)
        for (pd fill : {pd::make_replicate(), pd::make_shard(1)}) {
          const auto x = at(n, pos, P9[i], fill);
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::gelu_fn, float>()), map_nonlinear[i], pos, x)) return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::scale_fn<float>, float>()), map_linear[i], pos, x)) return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::relu_fn, float>()), map_nondecreasing[i], pos, x)) return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::relu_fn, int>()), over_ints(map_nondecreasing, i), pos, x))
            return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::scale_fn<int>, std::int64_t>()), over_ints(map_linear, i), pos, x))
            return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<decltype(sc::fn::affine_in<0>(sc::fn::gelu)), int>()),
                          over_ints(map_affine, i), pos, x))
            return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::exp_fn, float>()), map_nondecreasing[i], pos, x)) return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<decltype(sc::fn::affine_in<0>(sc::fn::gelu)), float>()), map_affine[i],
                          pos, x))
            return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::identity_fn, float>()), map_identity[i], pos, x)) return false;
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<sc::fn::identity_fn, int>()), map_identity[i], pos, x)) return false;
          const auto swapped = at(n, pos, i == 6 ? P9[7] : i == 7 ? P9[6] : P9[i], fill);
          if (!verdict_is(sc::detail::map_rules(x, sc::detail::props_of<decltype(sc::fn::nonincreasing_in<0>(sc::fn::gelu)), float>()),
                          map_nonincreasing[i], pos, swapped))
            return false;
        }
  return true;
}

constexpr bool zip_table() {
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (int i = 0; i < 9; ++i)
        for (int j = 0; j < 9; ++j)
          for (pd fill : {pd::make_replicate(), pd::make_shard(2)}) {
            const auto a = at(n, pos, P9[i], fill), b = at(n, pos, P9[j], fill);
            // Which error an illegal pair gets: equal placements fail as a map would (not
            // linear, or not combinable term by term); a partial next to replicate fails
            // for the functor's lack of a property; anything else for the placements.
            // Over integers, a partial<avg> operand fails for that, whatever the functor.
            const bool one_replicate = (i == 0 && P9[j].is_partial()) || (j == 0 && P9[i].is_partial());
            for (const bool ints : {false, true})
              for (const optest::known& k : {optest::k_add, optest::k_sub, optest::k_mul, optest::k_div_float, optest::k_none}) {
                sc::runtime_layout y;
                const bool legal = optest::zip_legal(a, b, k, &y, ints);
                const bool int_mean = ints && (i == j || one_replicate) && (i == 5 || j == 5);
                // over integers a partial<max|min> next to replicate goes through no addition
                const bool int_order = ints && one_replicate && k.wraps && (i == 6 || i == 7 || j == 6 || j == 7);
                const E fail = int_mean    ? IM
                               : int_order ? IO
                               : i == j    ? (P9[i].op == sc::reduce_op::sum || P9[i].op == sc::reduce_op::avg ? NL : NT)
                               : one_replicate ? E::partial_with_replicate
                                               : E::layouts_differ;
                if (!verdict_is(sc::detail::zip_rules(a, b, props(k, ints)), legal ? ok : fail, pos, y)) return false;
              }
            // mul(x, s) with a rank-0 s: s must be replicate; x like a linear map
            const E smul_want = j != 0 ? E::scalar_not_replicated : map_linear[i];
            const auto s = at(n, pos, P9[j], pd::make_replicate());
            if (!verdict_is(sc::detail::scalar_mul_rules(a, s), smul_want, pos, a)) return false;
            if (!verdict_is(sc::detail::scalar_mul_rules(a, s, true), j != 0 ? smul_want : over_ints(map_linear, i), pos, a)) return false;
          }
  return true;
}

constexpr bool bias_table() {
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (int i = 0; i < 9; ++i)
        for (int j = 0; j < 9; ++j) {
          const auto x = at(n, pos, P9[i], pd::make_shard(0));
          const auto b = at(n, pos, P9[j], pd::make_replicate());  // x shard<0> of rank 3 needs bias replicate
          const E want = bias_needs[i] < 0 ? E::bias_on_partial : bias_needs[i] == j ? E::ok : E::bias_placement;
          if (!verdict_is(sc::detail::bias_rules(x, b, 3), want, pos, x)) return false;
          if (!verdict_is(sc::detail::bias_rules(x, b, 3, true), i == 5 ? IM : i == 6 || i == 7 ? IO : want, pos, x))  // integers
            return false;
          // the layout bias_layout_t names is always the accepted one when x is not partial
          if (bias_needs[i] >= 0 && !(sc::detail::bias_layout_for(x, 3) == at(n, pos, P9[bias_needs[i]], pd::make_replicate())))
            return false;
        }
  return true;
}

static_assert(map_table());
static_assert(zip_table());
// Over two axes: the product of a partial<sum> on one axis and a partial<sum> on the other
// (each operand replicate where the other is partial) is partial<sum> on both, as
// sum_i sum_j a_i b_j = (sum_i a_i)(sum_j b_j); a result that would be partial<avg> on one
// axis and partial<max> on another is refused on the second.
static_assert([] {
  const sc::runtime_layout sr{pd::make_partial(sc::reduce_op::sum), pd::make_replicate()}, rs{pd::make_replicate(), pd::make_partial(sc::reduce_op::sum)};
  const sc::runtime_layout ss{pd::make_partial(sc::reduce_op::sum), pd::make_partial(sc::reduce_op::sum)};
  const sc::runtime_layout ar{pd::make_partial(sc::reduce_op::avg), pd::make_replicate()}, rm{pd::make_replicate(), pd::make_partial(sc::reduce_op::max)};
  return verdict_is(sc::detail::zip_rules(sr, rs, props(optest::k_mul)), ok, 0, ss) &&
         verdict_is(sc::detail::zip_rules(ar, rm, props(optest::k_add)), E::mixed_partials, 1, ar) &&
         verdict_is(sc::detail::zip_rules(rm, ar, props(optest::k_add)), E::mixed_partials, 1, ar) && !optest::zip_legal(ar, rm, optest::k_add);
}());
static_assert(bias_table());

// The linearity trait.
static_assert(sc::is_linear_v<sc::fn::identity_fn> && sc::is_linear_v<sc::fn::scale_fn<double>> && sc::is_linear_v<sc::fn::add_fn> &&
              sc::is_linear_v<const sc::fn::sub_fn&>);
static_assert(!sc::is_linear_v<sc::fn::mul_fn> && !sc::is_linear_v<sc::fn::gelu_fn> && !sc::is_linear_v<sc::fn::relu_fn> &&
              !sc::is_linear_v<sc::fn::silu_fn> && !sc::is_linear_v<sc::fn::gelu_grad_fn>);
inline constexpr auto twice = [](auto v) { return v + v; };
static_assert(!sc::is_linear_v<decltype(twice)> && sc::is_linear_v<decltype(sc::fn::linear(twice))>);
static_assert(sc::fn::linear(twice)(21) == 42);

// Compile-time layouts (types) for every legal case, at every axis position.
template <class L, class F>
constexpr bool map_keeps() {
  return std::is_same_v<sc::map_layout_t<L, F>, L>;
}
template <class P>
constexpr bool map_types() {
  using F = std::conditional_t<std::is_same_v<P, Ps> || std::is_same_v<P, Pa>, sc::fn::scale_fn<int>, sc::fn::gelu_fn>;
  return map_keeps<sc::layout<P>, F>() && map_keeps<sc::layout<P, S1>, F>() && map_keeps<sc::layout<R, P>, F>() &&
         map_keeps<sc::layout<P, R, S0>, F>() && map_keeps<sc::layout<S1, P, R>, F>() && map_keeps<sc::layout<R, S0, P>, F>();
}
static_assert(map_types<R>() && map_types<S0>() && map_types<S1>() && map_types<S2>() && map_types<Ps>() && map_types<Pa>());

template <class P, class F>
constexpr bool zip_types() {
  auto same = []<class L>(L) { return std::is_same_v<sc::zip_layout_t<L, L, F>, L>; };
  return same(sc::layout<P>{}) && same(sc::layout<P, S0>{}) && same(sc::layout<R, P>{}) && same(sc::layout<P, R, S1>{}) &&
         same(sc::layout<S0, P, R>{}) && same(sc::layout<R, S1, P>{});
}
static_assert(zip_types<R, sc::fn::mul_fn>() && zip_types<S0, sc::fn::mul_fn>() && zip_types<S1, sc::fn::mul_fn>() &&
              zip_types<S2, sc::fn::add_fn>() && zip_types<Ps, sc::fn::add_fn>() && zip_types<Pa, sc::fn::sub_fn>() &&
              zip_types<Ps, sc::fn::linear_fn<sc::fn::mul_fn>>());

// One operand partial, the other replicate: the output takes the partial.
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<R, S0>, sc::layout<Ps, S0>, sc::fn::mul_fn>, sc::layout<Ps, S0>>);
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<Ps, R>, sc::layout<R, Ps>, sc::fn::mul_fn>, sc::layout<Ps, Ps>>);
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<S1, Pa>, sc::layout<S1, R>, sc::fn::div_fn, double>, sc::layout<S1, Pa>>);
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<Pm, S0>, sc::layout<R, S0>, sc::fn::sub_fn>, sc::layout<Pm, S0>>);
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<R>, sc::layout<Pa>, sc::fn::sub_fn>, sc::layout<Pa>>);
static_assert(std::is_same_v<sc::zip_layout_t<sc::layout<R, S1>, sc::layout<Pm, S1>, sc::fn::sub_fn>, sc::layout<sc::partial<sc::min>, S1>>);
static_assert(std::is_same_v<sc::map_layout_t<sc::layout<Pm, S0>, sc::fn::exp_fn>, sc::layout<Pm, S0>>);

static_assert(std::is_same_v<sc::bias_layout_t<sc::layout<S0, S1>, 2>, sc::layout<R, S0>>);
static_assert(std::is_same_v<sc::bias_layout_t<sc::layout<S2, R, S0>, 3>, sc::layout<S0, R, R>>);
static_assert(std::is_same_v<sc::bias_add_layout_t<sc::layout<S1, S1>, sc::layout<S0, S0>, 2>, sc::layout<S1, S1>>);
static_assert(std::is_same_v<sc::bias_add_layout_t<sc::layout<R, S0, S2>, sc::layout<R, R, S0>, 3>, sc::layout<R, S0, S2>>);
static_assert(std::is_same_v<sc::detail::scalar_mul_layout<sc::layout<Ps, S1>, sc::layout<R, R>>::type, sc::layout<Ps, S1>>);

// ---------------------------------------------------------------------------------------
// Single-rank references
// ---------------------------------------------------------------------------------------
template <class T>
T ref_gelu(T x) {
  const double v = static_cast<double>(x);
  return static_cast<T>(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (v + 0.044715 * v * v * v))));
}
using optest::each;
using optest::each2;
using optest::has_partial;
using optest::max_fn;
using optest::only_additive_partials;
using optest::rows_plus;

// Every layout of a rank-2 tensor (placements R, S0, S1, P(sum), P(avg), P(max)) on a mesh of
// shape `shape`: each operator either matches the reference or, where the test's own rule
// says it is illegal, throws layout_error on every rank.
// (When `sample` > 0: that many random layouts drawn from `seed` instead of every one.)
template <class T, int N>
void all_layouts(std::array<int, N> shape, std::array<std::int64_t, 2> e, int sample = 0, std::uint64_t seed = 0) {
  INFO("mesh " << optest::shape_name<N>(shape) << " extents " << e[0] << "x" << e[1]);
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = e[0] * e[1];
  const auto a = optest::ints<T>(n, 1), b = optest::ints<T>(n, 4), bias = optest::ints<T>(e[1], 2);
  const std::vector<T> scalar{T(3)};
  const auto r_relu = each(a, [](T v) { return v > T(0) ? v : T(0); });
  const auto r_scale = each(a, [](T v) { return static_cast<T>(v * T(3)); });
  const auto r_twice = each(a, [](T v) { return static_cast<T>(v + v); });
  const auto r_negate = each(a, [](T v) { return static_cast<T>(-v); });
  const auto r_add = each2(a, b, [](T u, T v) { return static_cast<T>(u + v); });
  const auto r_sub = each2(a, b, [](T u, T v) { return static_cast<T>(u - v); });
  const auto r_mul = each2(a, b, [](T u, T v) { return static_cast<T>(u * v); });
  const auto r_max = each2(a, b, [](T u, T v) { return u > v ? u : v; });
  const auto r_bias = rows_plus(a, bias);
  const auto ps = optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max});
  const auto ls = sample > 0 ? optest::random_layouts(ps, N, sample, seed) : optest::layouts(ps, N);
  optest::failures f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    sc::runtime_layout all_r;
    all_r.naxes = N;
    auto s0 = sc::distribute(m, all_r, scalar, std::array<std::int64_t, 0>{});
    for (std::size_t li = 0; li < ls.size(); ++li) {
      const auto& l = ls[li];
      const auto x = optest::make_terms(m, l, a, e), y = optest::make_terms(m, l, b, e);
      const auto x_before = optest::local_copy(x), y_before = optest::local_copy(y), s0_before = optest::local_copy(s0);
      const bool partial = has_partial(l);
      // over integers a partial<avg> takes nothing but the identity (its mean truncates)
      const bool int_avg = std::is_integral_v<T> && optest::has_partial_op(l, sc::reduce_op::avg);
      const bool additive = only_additive_partials(l) && !int_avg;
      // over integers a partial<max|min> goes through no addition (integer sums wrap around)
      const bool int_order = std::is_integral_v<T> && (optest::has_partial_op(l, sc::reduce_op::max) || optest::has_partial_op(l, sc::reduce_op::min));
      auto check = [&](const char* what, bool legal, auto&& op, const std::vector<T>& ref) {
        if (legal) {
          const std::string err = optest::compare_global(op(), ref);
          if (!err.empty()) f.add(std::string(what) + " on " + sc::to_string(l) + ": " + err);
        } else {
          try {
            (void)op();
            f.add(std::string(what) + " on " + sc::to_string(l) + ": expected layout_error");
          } catch (const sc::layout_error&) {
          }
        }
      };
      check("map relu", optest::only_max_min_partials(l), [&] { return sc::map(x, sc::fn::relu); }, r_relu);
      check("map identity", true, [&] { return sc::map(x, sc::fn::identity); }, a);
      check("scale 3", additive, [&] { return sc::scale(x, 3); }, r_scale);
      check("map linear", additive, [&] { return sc::map(x, sc::fn::linear([](T v) { return static_cast<T>(v + v); })); }, r_twice);
      check("map twice (not marked linear)", !partial, [&] { return sc::map(x, [](T v) { return static_cast<T>(v + v); }); }, r_twice);
      // marked nonincreasing: partial<max> becomes partial<min>
      check("map negate", optest::only_max_min_partials(l),
            [&] { return sc::map(x, sc::fn::nonincreasing_in<0>([](T v) { return static_cast<T>(-v); })); }, r_negate);
      check("add", additive, [&] { return sc::add(x, y); }, r_add);
      check("sub", additive, [&] { return sc::sub(x, y); }, r_sub);
      check("mul", !partial, [&] { return sc::mul(x, y); }, r_mul);
      check("zip max", !partial, [&] { return sc::zip(x, y, max_fn{}); }, r_max);
      check("mul by rank-0", additive, [&] { return sc::mul(x, s0); }, r_scale);
      const auto bl = sc::detail::bias_layout_for(l, 2);
      const auto bt = sc::distribute(m, bl, bias, std::array<std::int64_t, 1>{e[1]});
      const auto bt_before = optest::local_copy(bt);
      check("bias_add", !optest::has_partial_op(l, sc::reduce_op::sum) && !int_avg && !int_order, [&] { return sc::bias_add(x, bt); }, r_bias);
      // Misuse on the same layouts: unequal operand layouts, a bias in the wrong layout.
      const auto& other = ls[(li + 1) % ls.size()];
      if (!(other == l)) {
        const auto z = sc::distribute(m, other, b, e);
        check("add of unequal layouts", optest::zip_legal(l, other, optest::k_add, nullptr, std::is_integral_v<T>), [&] { return sc::add(x, z); },
              r_add);
      }
      const auto wrong_bias = sc::distribute(m, l[0].is_shard(1) ? all_r : sc::runtime_layout(at(N, 0, pd::make_shard(0), pd::make_replicate())),
                                             bias, std::array<std::int64_t, 1>{e[1]});
      if (!(wrong_bias.layout() == bl)) check("bias_add with a misplaced bias", false, [&] { return sc::bias_add(x, wrong_bias); }, r_bias);
      if (optest::local_copy(x) != x_before || optest::local_copy(y) != y_before || optest::local_copy(s0) != s0_before ||
          optest::local_copy(bt) != bt_before)
        f.add("an operator modified an input (x, y, the rank-0 factor or the bias) on " + sc::to_string(l));
    }
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

// The compile-time API on chosen layouts: output layout types and values.
template <class T, class L, int N>
void static_layout(std::array<int, N> shape, std::array<std::int64_t, 2> e) {
  INFO("layout " << sc::to_string(L::desc) << " mesh " << optest::shape_name<N>(shape));
  constexpr bool partial = [] {
    for (int a = 0; a < L::naxes; ++a)
      if (L::desc[a].is_partial()) return true;
    return false;
  }();
  using LB = sc::bias_layout_t<L, 2>;
  using LS = typename sc::detail::layout_from<sc::detail::all_replicate<N>()>::type;
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = e[0] * e[1];
  const auto a = optest::ints<T>(n, 2), b = optest::ints<T>(n, 5), bias = optest::ints<T>(e[1], 3);
  optest::failures f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    const auto x = optest::as_static<L>(optest::make_terms(m, L::desc, a, e));
    const auto y = optest::as_static<L>(optest::make_terms(m, L::desc, b, e));
    auto expect = [&](const char* what, const auto& z, const std::vector<T>& ref, double tol = 0) {
      static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(z)>::layout_type, L>);
      const std::string err = optest::compare_global(z, ref, tol);
      if (!err.empty()) f.add(std::string(what) + ": " + err);
    };
    const auto s = sc::distribute<LS>(m, std::vector<T>{T(-2)}, std::array<std::int64_t, 0>{});
    expect("scale", sc::scale(x, -2), each(a, [](T v) { return static_cast<T>(-2 * v); }));
    expect("add", sc::add(x, y), each2(a, b, [](T u, T v) { return static_cast<T>(u + v); }));
    expect("sub", sc::sub(x, y), each2(a, b, [](T u, T v) { return static_cast<T>(u - v); }));
    expect("mul by rank-0", sc::mul(x, s), each(a, [](T v) { return static_cast<T>(-2 * v); }));
    if constexpr (!partial) {
      expect("gelu", sc::map(x, sc::fn::gelu), each(a, [](T v) { return ref_gelu(v); }), 1e-5);  // float: a few ulp
      expect("mul", sc::mul(x, y), each2(a, b, [](T u, T v) { return static_cast<T>(u * v); }));
      expect("zip", sc::zip(x, y, max_fn{}), each2(a, b, max_fn{}));
      const auto bt = sc::distribute<LB>(m, bias, std::array<std::int64_t, 1>{e[1]});
      expect("bias_add", sc::bias_add(x, bt), rows_plus(a, bias));
    }
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
// zip of operands with different layouts: every pair of layouts built from R, S(0), S(1)
// and the partials `ops` on a mesh of shape `shape`, for add, sub, mul, div, a functor
// with no declared property, one marked affine and nondecreasing in both arguments and one
// marked nonincreasing in its first (partial<max> becomes partial<min> there). optest::zip_legal (the rule, written down in the test) says whether a pair is
// legal and what the output layout is: a legal pair must give that layout and the
// single-rank reference, an illegal one layout_error on every rank. Partial operands hold
// terms that differ from rank to rank; b's values are never 0 (it divides).
template <class T, int N>
void mixed_pairs(std::array<int, N> shape, std::array<std::int64_t, 2> e, std::initializer_list<sc::reduce_op> ops) {
  INFO("mesh " << optest::shape_name<N>(shape) << " extents " << e[0] << "x" << e[1]);
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = e[0] * e[1];
  const auto ga = optest::ints<T>(n, 1), gb = optest::units<T>(n, 2);
  const auto ls = optest::layouts(optest::placements(2, ops), N);
  constexpr bool fp = std::is_floating_point_v<T>;
  const auto twice_plus = sc::fn::affine_in<0>(sc::fn::affine_in<1>(sc::fn::nondecreasing_in<0>(sc::fn::nondecreasing_in<1>(
      [](T u, T v) { return static_cast<T>(u + u + v); }))));
  constexpr optest::known k_twice_plus{false, {false, false}, {true, true}, {true, true}};
  const auto v_minus_twice = sc::fn::affine_in<0>(sc::fn::affine_in<1>(sc::fn::nonincreasing_in<0>(sc::fn::nondecreasing_in<1>(
      [](T u, T v) { return static_cast<T>(v - u - u); }))));
  constexpr optest::known k_v_minus_twice{false, {false, false}, {true, true}, {false, true}, {true, false}};
  optest::failures f;
  int legal_count = 0;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    std::vector<sc::dtensor<T, 2, sc::dynamic_layout, decltype(m)>> xs, ys;
    for (const auto& l : ls) {
      xs.push_back(optest::make_terms(m, l, ga, e));
      ys.push_back(optest::make_terms(m, l, gb, e));
    }
    int legal_here = 0;
    for (std::size_t i = 0; i < ls.size(); ++i)
      for (std::size_t j = 0; j < ls.size(); ++j) {
        const auto &x = xs[i], &y = ys[j];
        const auto x0 = optest::local_copy(x), y0 = optest::local_copy(y);
        auto one = [&](const char* what, const optest::known& k, auto&& op, auto g) {
          const std::string pair = std::string(what) + " of " + sc::to_string(ls[i]) + " and " + sc::to_string(ls[j]) + ": ";
          sc::runtime_layout want;
          const bool legal = optest::zip_legal(ls[i], ls[j], k, &want, std::is_integral_v<T>);
          try {
            auto z = op();
            if (!legal) return f.add(comm.rank(), pair + "accepted an illegal pair");
            ++legal_here;
            if (!(z.layout() == want)) f.add(comm.rank(), pair + "layout " + sc::to_string(z.layout()) + ", predicted " + sc::to_string(want));
            const std::string err = optest::compare_global(z, each2(ga, gb, g), fp ? 1e-12 : 0);
            if (!err.empty()) f.add(comm.rank(), pair + err);
          } catch (const sc::layout_error& ex) {
            if (legal) f.add(comm.rank(), pair + "refused a legal pair: " + ex.what());
          }
        };
        one("add", optest::k_add, [&] { return sc::add(x, y); }, [](T u, T v) { return static_cast<T>(u + v); });
        one("sub", optest::k_sub, [&] { return sc::sub(x, y); }, [](T u, T v) { return static_cast<T>(u - v); });
        one("mul", optest::k_mul, [&] { return sc::mul(x, y); }, [](T u, T v) { return static_cast<T>(u * v); });
        one("div", fp ? optest::k_div_float : optest::k_none, [&] { return sc::zip(x, y, sc::fn::div); },
            [](T u, T v) { return static_cast<T>(u / v); });
        one("max", optest::k_none, [&] { return sc::zip(x, y, optest::max_fn{}); }, optest::max_fn{});
        one("2u + v", k_twice_plus, [&] { return sc::zip(x, y, twice_plus); }, [](T u, T v) { return static_cast<T>(u + u + v); });
        one("v - 2u", k_v_minus_twice, [&] { return sc::zip(x, y, v_minus_twice); }, [](T u, T v) { return static_cast<T>(v - u - u); });
        if (optest::local_copy(x) != x0 || optest::local_copy(y) != y0)
          f.add(comm.rank(), "an input changed: " + sc::to_string(ls[i]) + ", " + sc::to_string(ls[j]));
      }
    if (comm.rank() == 0) legal_count = legal_here;
  });
  f.report();
  CHECK(legal_count > 0);
}

}  // namespace

TEST_CASE_TEMPLATE("zip of different layouts: one operand partial, the other replicate (1-axis meshes)", T, int, double) {
  using sc::reduce_op;
  for (int r : {1, 2, 3, 5}) mixed_pairs<T, 1>({r}, {3, 4}, {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min, reduce_op::prod});
  mixed_pairs<T, 1>({4}, {2, 3}, {reduce_op::sum, reduce_op::max});  // empty pieces
}

TEST_CASE_TEMPLATE("zip of different layouts: one operand partial, the other replicate (2- and 3-axis meshes)", T, std::int64_t, float) {
  using sc::reduce_op;
  mixed_pairs<T, 2>({2, 2}, {3, 5}, {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min});
  mixed_pairs<T, 2>({3, 2}, {4, 3}, {reduce_op::sum, reduce_op::max});
  mixed_pairs<T, 3>({2, 1, 2}, {2, 3}, {reduce_op::sum, reduce_op::avg});
}

TEST_CASE("zip of a partial and a replicated operand through the compile-time API, operands given up") {
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{5, 3};
    const auto ga = optest::ints<double>(15, 1), gb = optest::units<double>(15, 2);
    using LP = sc::layout<Ps, S0>;
    using LR = sc::layout<R, S0>;
    const auto p = optest::as_static<LP>(optest::make_terms(m, LP::desc, ga, e));
    const auto r = sc::distribute<LR>(m, gb, e);
    const auto prod = each2(ga, gb, [](double u, double v) { return u * v; });
    const auto quot = each2(ga, gb, [](double u, double v) { return u / v; });
    auto y1 = sc::mul(r, p);
    static_assert(std::is_same_v<decltype(y1)::layout_type, LP>);
    f.add(comm.rank(), optest::compare_global(y1, prod));
    auto y2 = sc::zip(p, r, sc::fn::div);
    static_assert(std::is_same_v<decltype(y2)::layout_type, LP>);
    f.add(comm.rank(), optest::compare_global(y2, quot));
    {  // the replicated operand given up, owned alone: the partial product goes over its piece
      auto rr = sc::distribute<LR>(m, gb, e);
      const double* const old = rr.data();
      auto y = sc::mul(std::move(rr), p);
      static_assert(std::is_same_v<decltype(y)::layout_type, LP>);
      if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), "mul(given-up replicate, partial): new storage");
      f.add(comm.rank(), sc::testing::check_emptied(rr));
      f.add(comm.rank(), optest::compare_global(y, prod));
    }
    {  // the partial operand given up: the quotient goes over its piece, the terms divided one by one
      auto pp = optest::as_static<LP>(optest::make_terms(m, LP::desc, ga, e));
      const double* const old = pp.data();
      auto y = sc::zip(std::move(pp), r, sc::fn::div);
      if (y.local_size() > 0 && y.data() != old) f.add(comm.rank(), "zip(given-up partial, replicate): new storage");
      f.add(comm.rank(), sc::testing::check_emptied(pp));
      f.add(comm.rank(), optest::compare_global(y, quot));
    }
    // a row-parallel output (partial<sum>) scaled by a replicated per-element gate, then reduced
    auto g = sc::redistribute<sc::layout<R, S0>>(sc::mul(p, r));
    f.add(comm.rank(), optest::compare_global(g, prod));
  });
  f.report();
}

// An integer partial<avg> is the truncated mean of its terms. Terms whose sum is odd make
// every operation but the identity differ from the same operation on the mean, so map,
// scale, mul, add and bias_add refuse it (layout_error here, a compile error for static
// layouts); redistributing to replicate first gives the reference.
TEST_CASE_TEMPLATE("partial<avg> of integers takes only the identity", T, int, std::int64_t) {
  const std::vector<T> t0{1, -1, 3, 5, -7, 0}, t1{0, 0, 0, 2, 2, 0};  // rank 0's and rank 1's terms
  std::vector<T> mean(6);
  for (std::size_t i = 0; i < 6; ++i) mean[i] = static_cast<T>((t0[i] + t1[i]) / 2);  // trunc: {0, 0, 1, 3, -2, 0}
  const auto twice = each(mean, [](T v) { return static_cast<T>(2 * v); });
  const auto plus_bias = rows_plus(mean, std::vector<T>{1, 1, 1});
  // what running the terms through would give: trunc((2 t0 + 2 t1) / 2) = t0 + t1, ...
  CHECK(each2(t0, t1, [](T u, T v) { return static_cast<T>(u + v); }) != twice);
  optest::failures f;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    const sc::runtime_layout pa{pd::make_partial(sc::reduce_op::avg)}, r{pd::make_replicate()};
    auto x = sc::distribute(m, pa, std::vector<T>(6), std::array<std::int64_t, 2>{2, 3});
    std::copy_n((comm.rank() == 0 ? t0 : t1).data(), 6, x.data());
    const auto y = sc::distribute(m, pa, std::vector<T>(6, T(1)), std::array<std::int64_t, 2>{2, 3});
    const auto s = sc::distribute(m, r, std::vector<T>{T(2)}, std::array<std::int64_t, 0>{});
    const auto bias = sc::distribute(m, r, std::vector<T>{1, 1, 1}, std::array<std::int64_t, 1>{3});
    const auto before = optest::local_copy(x);
    auto refused = [&](const char* what, auto&& op) {
      try {
        (void)op();
        f.add(comm.rank(), std::string(what) + ": accepted an integer partial<avg>");
      } catch (const sc::layout_error& e) {
        if (std::string(e.what()).find("integral element type on mesh axis 0") == std::string::npos)
          f.add(comm.rank(), std::string(what) + ": unexpected message: " + e.what());
      }
    };
    refused("scale", [&] { return sc::scale(x, 2); });
    refused("map linear", [&] { return sc::map(x, sc::fn::linear([](T v) { return static_cast<T>(v + v); })); });
    refused("mul by rank-0", [&] { return sc::mul(x, s); });
    refused("add", [&] { return sc::add(x, y); });
    refused("add a replicated operand", [&] { return sc::add(x, sc::redistribute(y, r)); });
    refused("bias_add", [&] { return sc::bias_add(x, bias); });
    f.add(comm.rank(), optest::compare_global(sc::map(x, sc::fn::identity), mean));
    const auto xr = sc::redistribute(x, r);  // the mean, then the operation
    f.add(comm.rank(), optest::compare_global(sc::scale(xr, 2), twice));
    f.add(comm.rank(), optest::compare_global(sc::bias_add(xr, bias), plus_bias));
    if (optest::local_copy(x) != before) f.add(comm.rank(), "x changed");
  });
  f.report();
}

// A partial<max|min> of integers goes through no addition or subtraction: integer sums wrap
// around, so the maximum of the transformed terms need not be the transformed maximum. The
// terms here are a shard reduced to partial<max> (reduce<0, max>), where a rank with an
// empty piece holds the identity, lowest(); for uint32 the terms alone wrap (1 - 3).
// Over floating-point types the same calls run term by term and match the reference.
TEST_CASE_TEMPLATE("partial<max> of integers goes through no addition; of floats it does", T, std::uint32_t, int, std::int64_t, double) {
  // x: S(0) on 2 ranks, 3 rows x 2 columns, rows split (2, 1); with extent 1 rank 1's
  // piece is empty and its term of reduce<0, max> is lowest().
  for (const std::int64_t rows : {3, 1}) {
    const std::vector<T> g = rows == 3 ? std::vector<T>{1, 7, 5, 2, 4, 9} : std::vector<T>{7, 2};
    std::vector<T> colmax(2, g[0]);
    colmax[1] = g[1];
    for (std::int64_t r = 1; r < rows; ++r)
      for (std::size_t c = 0; c < 2; ++c) colmax[c] = std::max(colmax[c], g[static_cast<std::size_t>(r * 2) + c]);
    const std::vector<T> b{3, 1};  // subtracted (and added as a bias)
    const auto minus = each2(colmax, b, [](T u, T v) { return static_cast<T>(u - v); });
    const auto plus = each2(colmax, b, [](T u, T v) { return static_cast<T>(u + v); });
    optest::failures f;
    sc::host::run(2, [&](sc::host::communicator& comm) {
      auto m = sc::make_mesh(comm, std::array<int, 1>{2});
      const sc::runtime_layout s0{pd::make_shard(0)}, r{pd::make_replicate()};
      const auto x = sc::distribute(m, s0, g, std::array<std::int64_t, 2>{rows, 2});
      const auto p = sc::reduce<0, sc::max>(x);  // partial<max>, rank-1 tensor of 2
      if (!(p.layout() == sc::runtime_layout{pd::make_partial(sc::reduce_op::max)})) f.add(comm.rank(), "reduce<0, max> is not P(max)");
      const auto bt = sc::distribute(m, r, b, std::array<std::int64_t, 1>{2});
      auto run = [&](const char* what, auto&& op, const std::vector<T>& want) {
        const std::string head = std::string(what) + " (rows " + std::to_string(rows) + "): ";
        if constexpr (std::is_floating_point_v<T>) {
          f.add(comm.rank(), optest::compare_global(op(), want));
        } else {
          try {
            (void)op();
            f.add(comm.rank(), head + "accepted an integer partial<max>");
          } catch (const sc::layout_error& e) {
            if (std::string(e.what()).find("partial<max|min> with an integral element type on mesh axis 0") == std::string::npos)
              f.add(comm.rank(), head + "unexpected message: " + e.what());
          }
        }
      };
      run("sub", [&] { return sc::sub(p, bt); }, minus);
      run("add", [&] { return sc::add(p, bt); }, plus);
      run("b - p", [&] { return sc::sub(bt, p); }, each2(b, colmax, [](T u, T v) { return static_cast<T>(u - v); }));
      run("bias_add", [&] { return sc::bias_add(p, bt); }, plus);
      // The way that works for every type: the maximum first, then the arithmetic.
      const auto pr = sc::redistribute(p, r);
      f.add(comm.rank(), optest::compare_global(sc::sub(pr, bt), minus));
      f.add(comm.rank(), optest::compare_global(sc::bias_add(pr, bt), plus));
      // What no arithmetic touches still runs term by term: relu, identity.
      f.add(comm.rank(), optest::compare_global(sc::map(p, sc::fn::identity), colmax));
    });
    f.report();
  }
}

// fn::identity keeps every placement: partial<prod>, which takes no other map, included.
TEST_CASE_TEMPLATE("map with fn::identity keeps partial<prod>", T, int, double) {
  optest::failures f;
  const auto g = optest::units<T>(12, 1);
  sc::host::run(3, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{3, 1});
    for (const char* text : {"P(prod),R", "P(prod),S(1)", "R,P(prod)"}) {
      const auto l = sc::runtime_layout::parse(text);
      const auto x = optest::make_terms(m, l, g, std::array<std::int64_t, 2>{4, 3});
      const auto y = sc::map(x, sc::fn::identity);
      if (!(y.layout() == l)) f.add(comm.rank(), std::string(text) + ": layout " + sc::to_string(y.layout()));
      f.add(comm.rank(), optest::compare_global(y, g));
      try {
        (void)sc::map(x, sc::fn::relu);
        f.add(comm.rank(), std::string(text) + ": relu accepted");
      } catch (const sc::layout_error&) {
      }
    }
  });
  f.report();
}

TEST_CASE("elementwise rule tables hold at run time too") {
  CHECK(map_table());
  CHECK(zip_table());
  CHECK(bias_table());
}

TEST_CASE("host elementwise_exec: map, zip, zip_rows, in place") {
  using X = sc::detail::elementwise_exec<sc::host_memory>;
  std::vector<int> a{1, -2, 3, -4, 5, -6}, b{10, 20, 30, 40, 50, 60}, row{100, 200, 300};
  std::vector<double> out(6);
  X::map(a.data(), out.data(), a.size(), [](int v) { return v * 0.5; });
  CHECK(out == std::vector<double>{0.5, -1, 1.5, -2, 2.5, -3});
  std::vector<int> c = a;
  X::zip(c.data(), b.data(), c.data(), c.size(), sc::fn::add);  // out aliases a
  CHECK(c == std::vector<int>{11, 18, 33, 36, 55, 54});
  std::vector<int> d = a;
  X::zip_rows(d.data(), row.data(), d.data(), 2, 3, sc::fn::sub);
  CHECK(d == std::vector<int>{-99, -202, -297, -104, -195, -306});
  X::map(a.data(), a.data(), 0, sc::fn::relu);  // n = 0 touches nothing
  CHECK(a[0] == 1);
}

TEST_CASE_TEMPLATE("elementwise on every layout of 1-axis meshes (1 to 8 ranks)", T, int, double) {
  for (int r : {1, 2, 3, 5, 8}) all_layouts<T, 1>({r}, {3, 5});
  all_layouts<T, 1>({4}, {2, 3});  // empty pieces
}

TEST_CASE_TEMPLATE("elementwise on every layout of 2-axis meshes", T, int, float) {
  all_layouts<T, 2>({2, 2}, {3, 5});
  all_layouts<T, 2>({1, 3}, {4, 2});
  all_layouts<T, 2>({3, 2}, {2, 5});
}

TEST_CASE("elementwise on every layout of 3-axis meshes") {
  all_layouts<int, 3>({2, 2, 2}, {3, 5});
  all_layouts<std::int64_t, 3>({1, 3, 2}, {5, 2});
}

TEST_CASE_TEMPLATE("elementwise through the compile-time API", T, float, double) {
  static_layout<T, sc::layout<S0, S1>, 2>({2, 2}, {3, 5});
  static_layout<T, sc::layout<S1, S1>, 2>({2, 3}, {2, 7});
  static_layout<T, sc::layout<R, R>, 2>({1, 2}, {3, 2});
  static_layout<T, sc::layout<Ps, S0>, 2>({2, 2}, {3, 5});
  static_layout<T, sc::layout<Pa>, 1>({3}, {2, 4});
  static_layout<T, sc::layout<S1, Ps, S0>, 3>({2, 2, 2}, {5, 3});
}

TEST_CASE("elementwise misuse: different meshes, extents, extent of the bias") {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m1 = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    auto m2 = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    using L = sc::layout<S0, R>;
    const auto g = optest::ints<int>(6, 0);
    auto a = sc::distribute<L>(m1, g, std::array<std::int64_t, 2>{2, 3});
    auto b = sc::distribute<L>(m2, g, std::array<std::int64_t, 2>{2, 3});
    auto c = sc::distribute<L>(m1, g, std::array<std::int64_t, 2>{3, 2});
    auto bias = sc::distribute<sc::layout<R, R>>(m2, std::vector<int>{1, 2, 3}, std::array<std::int64_t, 1>{3});
    auto bias2 = sc::distribute<sc::layout<R, R>>(m1, std::vector<int>{1, 2}, std::array<std::int64_t, 1>{2});
    auto s = sc::distribute<sc::layout<R, R>>(m2, std::vector<int>{2}, std::array<std::int64_t, 0>{});
    const auto msg = [](auto&& op) { return optest::layout_error_of(op); };
    const std::string diff_mesh = msg([&] { return sc::add(a, b); });
    CHECK(diff_mesh.find("different meshes") != std::string::npos);
    CHECK(diff_mesh.find("mesh 2x2") != std::string::npos);
    CHECK(msg([&] { return sc::zip(a, b, max_fn{}); }).find("different meshes") != std::string::npos);
    CHECK(msg([&] { return sc::mul(a, s); }).find("different meshes") != std::string::npos);
    CHECK(msg([&] { return sc::bias_add(a, bias); }).find("different meshes") != std::string::npos);
    const std::string ext = msg([&] { return sc::sub(a, c); });
    CHECK(ext.find("[2, 3]") != std::string::npos);
    CHECK(ext.find("[3, 2]") != std::string::npos);
    CHECK(msg([&] { return sc::bias_add(a, bias2); }).find("last extent 3") != std::string::npos);
    // matmul: operands on different meshes (the extents would fit)
    auto ma = sc::distribute<sc::layout<R, R>>(m1, g, std::array<std::int64_t, 2>{2, 3});
    auto mb = sc::distribute<sc::layout<R, R>>(m2, g, std::array<std::int64_t, 2>{3, 2});
    const std::string mm = msg([&] { return sc::matmul(ma, mb); });
    CHECK(mm.find("different meshes") != std::string::npos);
    // the same mesh object through a copy is fine
    auto m1_copy = m1;
    auto d = sc::distribute<L>(m1_copy, g, std::array<std::int64_t, 2>{2, 3});
    CHECK(sc::to_global(sc::add(a, d)) == each2(g, g, [](int u, int v) { return u + v; }));
  });
}

TEST_CASE("scale of integer elements: a factor the element type cannot hold exactly throws; a whole one scales") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    using L = sc::layout<S0>;
    const std::vector<int> g{3, -5, 7, 1, 0};
    const auto x = sc::distribute<L>(m, g, std::array<std::int64_t, 1>{5});
    auto throws = [](auto&& op) {
      try {
        (void)op();
      } catch (const sc::layout_error& e) {
        return std::string(e.what()).find("not a whole number in their range") != std::string::npos;
      }
      return false;
    };
    CHECK(throws([&] { return sc::scale(x, 0.5f); }));  // was: the factor became 0, and so did every element
    CHECK(throws([&] { return sc::scale(x, -2.5); }));
    CHECK(throws([&] { return sc::scale(x, std::nan("")); }));
    CHECK(throws([&] { return sc::scale(x, 3e9); }));    // outside int
    CHECK(throws([&] { return sc::scale(x, -3e9); }));
    CHECK(throws([&] { return sc::scale(x, 2147483648.0); }));  // 2^31: one past int's largest
    CHECK(throws([&] { return sc::scale(x, 4294967296LL); }));
    std::string tiny;
    try {
      (void)sc::scale(x, 1e-9);
    } catch (const sc::layout_error& e) {
      tiny = e.what();
    }
    CHECK(tiny.find("factor 1.0000000000000001e-09 ") != std::string::npos);  // not "0.000000"
    CHECK(throws([&] { return sc::scale(sc::distribute<L>(m, g, std::array<std::int64_t, 1>{5}), 0.25); }));  // given up
    const auto x8 = sc::distribute<L>(m, std::vector<std::int8_t>{1, 2, 3}, std::array<std::int64_t, 1>{3});
    CHECK(throws([&] { return sc::scale(x8, 1000); }));  // would wrap in int8
    CHECK(throws([&] { return sc::scale(x8, -129.0); }));
    CHECK(sc::to_global(sc::scale(x8, -128.0)) == std::vector<std::int8_t>{-128, 0, -128});  // -2^7 fits; products wrap mod 2^8
    const auto xu = sc::distribute<L>(m, std::vector<std::uint8_t>{1, 2, 3}, std::array<std::int64_t, 1>{3});
    CHECK(throws([&] { return sc::scale(xu, -1); }));
    CHECK(throws([&] { return sc::scale(xu, -1.0); }));
    CHECK(throws([&] { return sc::scale(xu, 256.0); }));
    CHECK(sc::to_global(sc::scale(xu, 255.0)) == std::vector<std::uint8_t>{255, 254, 253});  // 255 * {1, 2, 3} mod 256
    CHECK(sc::to_global(sc::scale(x, static_cast<char>(2))) == std::vector<int>{6, -10, 14, 2, 0});  // a character-type factor
    CHECK(sc::to_global(sc::scale(x, 2.0)) == std::vector<int>{6, -10, 14, 2, 0});
    CHECK(sc::to_global(sc::scale(x, -3)) == std::vector<int>{-9, 15, -21, -3, 0});
    CHECK(sc::to_global(sc::scale(x8, 40)) == std::vector<std::int8_t>{40, 80, 120});
    const auto xf = sc::distribute<L>(m, std::vector<float>{3, -5, 1}, std::array<std::int64_t, 1>{3});
    CHECK(sc::to_global(sc::scale(xf, 0.5f)) == std::vector<float>{1.5f, -2.5f, 0.5f});
  });
}

TEST_CASE("elementwise misuse on dynamic layouts names the axis and placements") {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const auto g = optest::ints<float>(12, 0);
    const std::array<std::int64_t, 2> e{3, 4};
    auto x = sc::distribute(m, sc::runtime_layout::parse("S(0),P(sum)"), g, e);
    auto y = sc::distribute(m, sc::runtime_layout::parse("S(0),S(1)"), g, e);
    const auto msg = [](auto&& op) { return optest::layout_error_of(op); };
    const std::string differ = msg([&] { return sc::add(x, y); });
    CHECK(differ.find("mesh axis 1") != std::string::npos);
    CHECK(differ.find("P(sum) vs S(1)") != std::string::npos);
    CHECK(msg([&] { return sc::map(x, sc::fn::gelu); }).find("not linear") != std::string::npos);
    CHECK(msg([&] { return sc::mul(x, x); }).find("not linear") != std::string::npos);
    // Two partial<max> operands: the message speaks of combining two operands, not of maps.
    auto xm = sc::distribute(m, sc::runtime_layout::parse("S(0),P(max)"), g, e);
    const std::string two_max = msg([&] { return sc::zip(xm, xm, sc::fn::max); });
    CHECK(two_max.find("both operands are P(max) on mesh axis 1; two partial<max|min|prod> operands are not combined term by term") !=
          std::string::npos);
    CHECK(two_max.find("fn::sqrt") == std::string::npos);
    CHECK(msg([&] { return sc::map(xm, sc::fn::sqrt); }).find("fn::sqrt and fn::log are neither") != std::string::npos);
    // mul(x, s) with a replicated rank-0 s: one partial operand, the map's wording.
    const auto s2 = sc::distribute(m, sc::runtime_layout::parse("R,R"), std::vector<float>{2.f}, std::array<std::int64_t, 0>{});
    const std::string by_s = msg([&] { return sc::mul(xm, s2); });
    CHECK(by_s.find("the tensor is P(max) on mesh axis 1") != std::string::npos);
    CHECK(by_s.find("both operands") == std::string::npos);
    auto bias = sc::distribute(m, sc::runtime_layout::parse("R,R"), optest::ints<float>(4, 1), std::array<std::int64_t, 1>{4});
    CHECK(msg([&] { return sc::bias_add(x, bias); }).find("once per partial term") != std::string::npos);
    const std::string wrong_bias = msg([&] { return sc::bias_add(y, bias); });
    CHECK(wrong_bias.find("\"R,S(0)\"") != std::string::npos);  // names the bias layout x needs
    // a static operand with a dynamic one: the rules are checked at run time
    auto xs = optest::as_static<sc::layout<S0, Ps>>(x);
    CHECK(msg([&] { return sc::add(xs, y); }).find("mesh axis 1") != std::string::npos);
    auto sum = sc::add(xs, x);
    static_assert(std::is_same_v<decltype(sum)::layout_type, sc::dynamic_layout>);
    CHECK(sum.layout() == sc::runtime_layout::parse("S(0),P(sum)"));
  });
}

TEST_CASE("elementwise on random layouts of random 4- to 6-axis meshes") {
  for (std::uint64_t s = 1; s <= static_cast<std::uint64_t>(optest::random_rounds + 1); ++s) {
    all_layouts<std::int64_t, 4>(optest::random_shape<4>(s, 16), optest::random_extents<2>(s), 12, s);
    all_layouts<float, 5>(optest::random_shape<5>(s + 10, 16), optest::random_extents<2>(s + 10), 12, s + 10);
    all_layouts<int, 6>(optest::random_shape<6>(s + 20, 16), optest::random_extents<2>(s + 20), 12, s + 20);
  }
}
