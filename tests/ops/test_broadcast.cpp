// broadcast_zip<D>(a, b, f), b broadcast along dim D of a: the per-axis rule against a
// hand-written predicate; differential tests against a single-rank computation for every
// layout of a (every layout pair on 1-axis meshes; on 2- and 3-axis meshes the layout b
// needs and two others) on meshes of 1 to 8 ranks, tensor ranks 1 to 3, every D, with
// uneven and empty pieces; operands given up; misuse. (A softmax along a sharded dim
// through the compile-time API is the docs snippet in test_operator_snippets.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/broadcast.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;
using optest::pd;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using Ps = sc::partial<sc::sum>;

static_assert(std::is_same_v<sc::broadcast_layout_t<sc::layout<S0, S1>, 1>, sc::layout<S0, R>>);
static_assert(std::is_same_v<sc::broadcast_layout_t<sc::layout<S1, Ps, S1>, 1>, sc::layout<R, Ps, R>>);
static_assert(std::is_same_v<sc::broadcast_zip_layout_t<sc::layout<S0, S1>, sc::layout<S0, R>, 1, sc::fn::sub_fn>, sc::layout<S0, S1>>);
static_assert(std::is_same_v<sc::broadcast_zip_layout_t<sc::layout<Ps, S1>, sc::layout<Ps, S1>, 0, sc::fn::add_fn>, sc::layout<Ps, S1>>);

/// Is broadcast_zip<d>(a, b, f) legal, and with which output layout? Written from the
/// rule, not from the library's code: where a is shard<d>, b must be replicate and y is
/// shard<d>; elsewhere zip's rule (optest::zip_legal) for a functor known to be `k`, over
/// integers when `ints`.
bool legal(const sc::runtime_layout& a, const sc::runtime_layout& b, int d, const optest::known& k, sc::runtime_layout* out = nullptr,
           bool ints = false) {
  sc::runtime_layout a2 = a, b2 = b;
  for (int i = 0; i < a.naxes; ++i)
    if (a[i].kind == sc::placement_kind::shard && a[i].dim == d) {
      if (b[i].kind != sc::placement_kind::replicate) return false;
      a2[i] = b2[i] = pd::make_replicate();
    }
  sc::runtime_layout y;
  if (!optest::zip_legal(a2, b2, k, &y, ints)) return false;
  for (int i = 0; i < a.naxes; ++i)
    if (a[i].kind == sc::placement_kind::shard && a[i].dim == d) y[i] = a[i];
  if (out) *out = y;
  return true;
}

// The rule at run time against the predicate, every placement pair at every axis position.
TEST_CASE("broadcast_zip rule: every placement pair on 1- to 3-axis meshes matches the predicate") {
  const auto ps = optest::placements(3, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::prod});
  int checked = 0;
  for (int n = 1; n <= 3; ++n)
    for (int pos = 0; pos < n; ++pos)
      for (const pd& pa : ps)
        for (const pd& pb : ps)
          for (int d = 0; d < 3; ++d)
            for (int fill = 0; fill < 3; ++fill)
              for (const optest::known& k : {optest::k_add, optest::k_sub, optest::k_mul, optest::k_div_float, optest::k_none})
                for (const bool ints : {false, true}) {
                  // The other axes hold legal pairs: (R, R), (S(e), S(e)) for e != d, (S(d), R).
                  const pd fa = fill == 0 ? pd::make_replicate() : fill == 1 ? pd::make_shard(d == 0 ? 1 : 0) : pd::make_shard(d);
                  const pd fb = fill == 1 ? fa : pd::make_replicate();
                  sc::runtime_layout a, b;
                  a.naxes = b.naxes = n;
                  for (int i = 0; i < n; ++i) a[i] = fa, b[i] = fb;
                  a[pos] = pa;
                  b[pos] = pb;
                  const auto r = sc::detail::broadcast_rules(a, b, d, optest::props(k, ints));
                  sc::runtime_layout y;
                  const bool want = legal(a, b, d, k, &y, ints);
                  CHECK_MESSAGE((r.err == sc::detail::op_rule::ok) == want, sc::to_string(a), " / ", sc::to_string(b), " along ", d);
                  if (want) CHECK(r.out == y);
                  if (!want && r.err != sc::detail::op_rule::ok) CHECK(r.axis == pos);
                  ++checked;
                }
  CHECK(checked > 0);
}

/// The single-rank reference: y[i] = f(a[i], b[i with coordinate d set to 0]).
template <class T, std::size_t R, class F>
std::vector<T> reference(const std::vector<T>& a, const std::vector<T>& b, const std::array<std::int64_t, R>& e, int d, F f) {
  std::vector<T> y(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::array<std::int64_t, R> c{};
    std::int64_t rest = static_cast<std::int64_t>(i);
    for (int k = static_cast<int>(R) - 1; k >= 0; --k) {
      c[k] = rest % e[k];
      rest /= e[k];
    }
    c[d] = 0;
    std::int64_t j = 0;
    for (std::size_t k = 0; k < R; ++k) j = j * (static_cast<int>(k) == d ? 1 : e[k]) + c[k];
    y[i] = static_cast<T>(f(a[i], b[static_cast<std::size_t>(j)]));
  }
  return y;
}

/// Calls g(std::integral_constant<int, d>) for a run-time d < R.
template <int R, class G>
void with_dim(int d, G g) {
  [&]<int... I>(std::integer_sequence<int, I...>) { ((d == I ? (g(std::integral_constant<int, I>{}), 0) : 0), ...); }(std::make_integer_sequence<int, R>{});
}

/// One case: a of layout la and b of layout lb (dynamic), broadcast along d, functor f.
/// Legal: the result matches the reference and the inputs are unchanged; illegal: a
/// layout_error that names broadcast_zip.
template <class T, std::size_t R, class Mesh, class F>
std::string one_case(const Mesh& m, const sc::runtime_layout& la, const sc::runtime_layout& lb, int d, const std::array<std::int64_t, R>& e, F f,
                     const optest::known& k) {
  auto eb = e;
  eb[d] = 1;
  const auto ga = optest::ints<T>(optest::volume(e), 1), gb = optest::ints<T>(optest::volume(eb), 2);
  const auto a = optest::make_terms(m, la, ga, e);
  const auto b = optest::make_terms(m, lb, gb, eb);
  const auto a0 = optest::local_copy(a), b0 = optest::local_copy(b);
  sc::runtime_layout ly;
  const bool want = legal(la, lb, d, k, &ly, std::is_integral_v<T>);
  const std::string what = sc::to_string(la) + " / " + sc::to_string(lb) + " along " + std::to_string(d) + ": ";
  std::string err;
  with_dim<static_cast<int>(R)>(d, [&](auto dc) {
    constexpr int D = decltype(dc)::value;
    try {
      auto y = sc::broadcast_zip<D>(a, b, f);
      if (!want) {
        err = "accepted an illegal pair";
        return;
      }
      if (!(y.layout() == ly)) err = "layout " + sc::to_string(y.layout()) + ", predicted " + sc::to_string(ly) + "; ";
      err += optest::compare_global(y, reference(ga, gb, e, d, f));  // collective: legality is the same on every rank
    } catch (const sc::layout_error& ex) {
      if (want) err = std::string("refused a legal pair: ") + ex.what();
      else if (std::string(ex.what()).find("shardcast::broadcast_zip") == std::string::npos) err = std::string("message: ") + ex.what();
    }
  });
  if (err.empty() && (optest::local_copy(a) != a0 || optest::local_copy(b) != b0)) err = "an input was modified";
  return err.empty() ? err : what + err;
}

/// Every layout of a (placements R, S(0..R-1), P(sum), P(avg), P(max)) with: every b layout
/// (`all_b`), or the one it needs, a's own and all-replicate; every d; `sub` (linear;
/// affine in both arguments, nondecreasing in the first), `mul` (linear in each argument)
/// and `max` (none of these).
template <class T, int N, std::size_t R>
void sweep(const std::array<int, N>& shape, const std::vector<std::array<std::int64_t, R>>& extents, bool all_b) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  optest::failures f;
  const auto ls = optest::layouts(optest::placements(static_cast<int>(R), {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max}), N);
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    for (const auto& e : extents)
      for (const auto& la : ls)
        for (int d = 0; d < static_cast<int>(R); ++d) {
          std::vector<sc::runtime_layout> bs = ls;
          if (!all_b) {
            sc::runtime_layout all_r;
            all_r.naxes = N;
            for (int i = 0; i < N; ++i) all_r[i] = pd::make_replicate();
            bs = {sc::detail::broadcast_layout_for(la, d), la, all_r};
          }
          for (const auto& lb : bs) {
            f.add(one_case<T>(m, la, lb, d, e, sc::fn::sub, optest::k_sub));
            f.add(one_case<T>(m, la, lb, d, e, sc::fn::mul, optest::k_mul));
            f.add(one_case<T>(m, la, lb, d, e, optest::max_fn{}, optest::k_none));
          }
        }
  });
  f.report();
}

}  // namespace

TEST_CASE_TEMPLATE("broadcast_zip: every layout pair on 1-axis meshes (1 to 8 ranks)", T, int, double) {
  for (int r : {1, 2, 3, 5}) sweep<T, 1, 2>({r}, {{{5, 3}}, {{2, 7}}}, true);
  sweep<T, 1, 2>({8}, {{{3, 2}}, {{0, 4}}}, true);  // empty pieces
  sweep<T, 1, 1>({3}, {{{5}}, {{2}}}, true);
}

TEST_CASE("broadcast_zip: every layout of a on 2- and 3-axis meshes") {
  sweep<int, 2, 2>({2, 2}, {{{5, 3}}, {{1, 4}}}, false);
  sweep<std::int64_t, 2, 3>({2, 3}, {{{4, 3, 5}}}, false);
  sweep<int, 3, 3>({2, 2, 2}, {{{3, 2, 5}}}, false);
}

TEST_CASE("broadcast_zip: given-up operands") {
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    using LA = sc::layout<S0, S1>;
    using LB = sc::broadcast_layout_t<LA, 1>;
    const std::array<std::int64_t, 2> e{5, 7}, eb{5, 1};
    const auto ga = optest::ints<int>(35, 1), gb = optest::ints<int>(5, 2);
    const auto ref = reference(ga, gb, e, 1, sc::fn::sub);
    {  // a owned alone: the result is written over it
      auto a = sc::distribute<LA>(m, ga, e);
      const auto b = sc::distribute<LB>(m, gb, eb);
      const int* const old = a.data();
      auto y = sc::broadcast_zip<1>(std::move(a), b, sc::fn::sub);
      if (a.local_size() > 0 && y.data() != old) f.add("a owned alone: the result did not take its storage");
      if (!sc::testing::check_emptied(a).empty()) f.add("a owned alone: not left empty");
      f.add(optest::compare_global(y, ref));
    }
    {  // a held by a copy as well: new storage, the copy unchanged
      auto a = sc::distribute<LA>(m, ga, e);
      const auto keep = a;
      const auto before = optest::local_copy(keep);
      const auto b = sc::distribute<LB>(m, gb, eb);
      auto y = sc::broadcast_zip<1>(std::move(a), b, sc::fn::sub);
      if (y.local_size() > 0 && y.data() == keep.data()) f.add("a shared: wrote into storage a copy holds");
      if (optest::local_copy(keep) != before) f.add("a shared: the copy changed");
      if (!sc::testing::check_emptied(a).empty()) f.add("a shared: not left empty");
      f.add(optest::compare_global(y, ref));
    }
    {  // b given up: only emptied; the result has other element types' storage rules
      const auto a = sc::distribute<LA>(m, ga, e);
      auto b = sc::distribute<LB>(m, gb, eb);
      auto y = sc::broadcast_zip<1>(a, std::move(b), sc::fn::sub);
      if (!sc::testing::check_emptied(b).empty()) f.add("b given up: not left empty");
      f.add(optest::compare_global(y, ref));
    }
    {  // b is a view over a's own piece: writing over a would change b before it is read
      using L1 = sc::layout<R, R>;
      const std::array<std::int64_t, 2> e2{3, 4}, eb2{3, 1};
      const auto g2 = optest::ints<int>(12, 3);
      auto a = sc::distribute<L1>(m, g2, e2);
      // b's [3, 1] piece is a's elements 0..2 (rows of b read as a's first three values)
      const auto b = sc::make_view<L1>(m, a.data(), eb2);
      const std::vector<int> gb2(g2.begin(), g2.begin() + 3);
      const auto ref2 = reference(g2, gb2, e2, 1, sc::fn::sub);
      const int* const old = a.data();
      auto y = sc::broadcast_zip<1>(std::move(a), b, sc::fn::sub);
      if (y.data() == old) f.add("b over a's piece: the result was written over a");
      f.add(optest::compare_global(y, ref2));
    }
  });
  f.report();
}

TEST_CASE("fn::div and fn::exp, the functors a softmax needs") {
  CHECK(sc::fn::div(7, 2) == 3);
  CHECK(sc::fn::div(-7.0, 2.0) == -3.5);
  CHECK(sc::fn::exp(0.0) == 1.0);
  CHECK(sc::fn::exp(1.0) == std::exp(1.0));
  CHECK(sc::fn::exp(-2.5f) == std::exp(-2.5f));
  static_assert(!sc::is_linear_v<sc::fn::div_fn> && !sc::is_linear_v<sc::fn::exp_fn>);
}

TEST_CASE("broadcast_zip misuse: extents, meshes, dynamic layouts") {
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    auto m2 = sc::make_mesh(c, std::array<int, 2>{2, 2});
    using L = sc::layout<S0, R>;
    const auto a = sc::distribute<L>(m, optest::ints<int>(12, 1), std::array<std::int64_t, 2>{3, 4});
    auto expect_error = [&](const char* what, const char* needle, auto call) {
      try {
        call();
        f.add(std::string(what) + ": no error");
      } catch (const sc::layout_error& ex) {
        if (std::string(ex.what()).find(needle) == std::string::npos) f.add(std::string(what) + ": message " + ex.what());
      }
    };
    const auto b_wrong = sc::distribute<L>(m, optest::ints<int>(4, 2), std::array<std::int64_t, 2>{1, 4});  // extent 1 on dim 0, not 1
    expect_error("extents", "b must have a's extents with 1 on dim 1, [3, 1]", [&] { (void)sc::broadcast_zip<1>(a, b_wrong, sc::fn::sub); });
    const auto b_other_mesh = sc::distribute<L>(m2, optest::ints<int>(3, 2), std::array<std::int64_t, 2>{3, 1});
    expect_error("meshes", "mesh", [&] { (void)sc::broadcast_zip<1>(a, b_other_mesh, sc::fn::sub); });
    // Dynamic: a S(1),R and b S(1),R along dim 1: b must be R on axis 0.
    const auto ad = sc::distribute(m, sc::runtime_layout::parse("S(1),R"), optest::ints<int>(12, 1), std::array<std::int64_t, 2>{3, 4});
    const auto bd = sc::distribute(m, sc::runtime_layout::parse("S(1),R"), optest::ints<int>(3, 2), std::array<std::int64_t, 2>{3, 1});
    expect_error("dynamic", "on mesh axis 0 a is S(1) and b is S(1)", [&] { (void)sc::broadcast_zip<1>(ad, bd, sc::fn::sub); });
  });
  f.report();
}

// broadcast_layout_t names a layout broadcast_zip accepts for b: replicate where a is
// partial<max|min|prod> (two such partials never combine term by term; it once named a's
// partial, which broadcast_zip then refused), a's partial<sum|avg> where a has one.
TEST_CASE("broadcast_layout_t names an accepted layout for b, partial a included") {
  using Pm = sc::partial<sc::max>;
  using Pn = sc::partial<sc::min>;
  using Pp = sc::partial<sc::prod>;
  static_assert(std::is_same_v<sc::broadcast_layout_t<sc::layout<Pm, S1>, 1>, sc::layout<R, R>>);
  static_assert(std::is_same_v<sc::broadcast_layout_t<sc::layout<S0, Pn>, 1>, sc::layout<S0, R>>);
  static_assert(std::is_same_v<sc::broadcast_layout_t<sc::layout<Pp, S0>, 1>, sc::layout<R, S0>>);
  static_assert(std::is_same_v<sc::broadcast_layout_t<sc::layout<Ps, S1>, 1>, sc::layout<Ps, R>>);
  optest::failures f;
  const std::vector<double> ga = {1, 2, 3, 4, 5, 6}, gb = {10, 20};
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    // a: P(max) on axis 0 (rank (0, .) holds the whole tensor, (1, .) the identity), S(1) on axis 1.
    using LA = sc::layout<Pm, S1>;
    auto a = sc::distribute<LA>(m, ga, std::array<std::int64_t, 2>{2, 3});
    auto b = sc::distribute<sc::broadcast_layout_t<LA, 1>>(m, gb, std::array<std::int64_t, 2>{2, 1});
    auto y = sc::broadcast_zip<1>(a, b, sc::fn::sub);  // x - b[row]: nondecreasing in a, so it commutes with max
    static_assert(std::is_same_v<decltype(y)::layout_type, LA>);
    const std::vector<double> want = {-9, -8, -7, -16, -15, -14};
    if (sc::to_global(y) != want) f.add("P(max),S(1) minus a broadcast replicated b");
    // The same through dynamic layouts.
    auto ad = sc::distribute(m, sc::runtime_layout(LA::desc), ga, std::array<std::int64_t, 2>{2, 3});
    auto bd = sc::distribute(m, sc::runtime_layout(sc::broadcast_layout_t<LA, 1>::desc), gb, std::array<std::int64_t, 2>{2, 1});
    if (sc::to_global(sc::broadcast_zip<1>(ad, bd, sc::fn::sub)) != want) f.add("dynamic P(max),S(1)");
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
