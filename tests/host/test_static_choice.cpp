// A static redistribute runs a plan that is optimal on the real mesh, not only on the
// canonical mesh it was planned on at compile time. For every pair of rank-2 layouts on
// two mesh axes (sum partials) and on one axis (max partials), on meshes of 2x2, 4x4,
// 2x4, 3x2, 4x1, 1x3 and 1-axis 2, 3 and 4 ranks, with even and uneven extents:
//   - plan_for<To>(x) costs what make_plan, run with the real shape and extents, costs
//     (the independent optimum: the run-time search over the whole layout space);
//   - redistribute<To>(x), run through a counting communicator, makes exactly that many
//     collectives on every rank (less those of steps in which its group has nothing to
//     move: st::expected_calls), and the busiest rank sends what the plan predicts;
//   - the result matches the single-rank reference.
// The same checks for a few pairs on 5- to 8-axis meshes.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <shardcast/comm/counting.hpp>
#include <shardcast/shardcast.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/differential.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

template <int I>
using placement2 = std::conditional_t<I == 0, sc::replicate,
                                      std::conditional_t<I == 1, sc::shard<0>, std::conditional_t<I == 2, sc::shard<1>, sc::partial<sc::sum>>>>;
template <int I>
using placement1 = std::conditional_t<I == 0, sc::replicate,
                                      std::conditional_t<I == 1, sc::shard<0>, std::conditional_t<I == 2, sc::shard<1>, sc::partial<sc::max>>>>;

using counted = sc::counting_communicator<sc::host::communicator>;

struct outcome {
  std::string error;
  int nranks = 0;
  std::vector<double> bytes;
  std::vector<long> calls;
  sc::plan chosen;  ///< plan_for<To>(x) on rank 0
};

/// One host::run instantiation for every pair: the per-pair work is type-erased.
void run_ranks(int n, const std::function<void(sc::host::communicator&)>& f) { sc::host::run(n, f); }

/// Runs From -> To on a counting host mesh; records what plan_for chose, every rank's
/// traffic and any error.
template <class From, class To, std::size_t N>
outcome run_pair(const std::array<int, N>& shape, const std::array<std::int64_t, 2>& ext) {
  outcome o;
  o.nranks = 1;
  for (int s : shape) o.nranks *= s;
  o.bytes.assign(static_cast<std::size_t>(o.nranks), 0);
  o.calls.assign(static_cast<std::size_t>(o.nranks), 0);
  std::mutex mu;
  const auto g = st::make_global<float>(ext[0] * ext[1]);
  run_ranks(o.nranks, [&](sc::host::communicator& hc) {
    counted cc(hc);
    auto m = sc::make_mesh(cc, shape);
    auto x = sc::distribute<From>(m, g, ext);
    st::spread_partial_terms(x, g);  // partial terms that only the right reduce op adds up to g
    if (hc.rank() == 0) o.chosen = sc::plan_for<To>(x);  // not collective
    m.comm().reset();
    auto y = sc::redistribute<To>(x);
    const auto me = static_cast<std::size_t>(hc.rank());
    o.bytes[me] = m.comm().bytes();
    o.calls[me] = m.comm().collectives();
    std::string err = st::check_against_reference(y, g);
    if (!err.empty()) {
      std::lock_guard lk(mu);
      if (o.error.empty()) o.error = "rank " + std::to_string(hc.rank()) + ": " + err;
    }
  });
  return o;
}

/// The checks, out of the templates (one copy of the assertions for every pair).
void verify(const outcome& o, const sc::runtime_layout& from, const sc::runtime_layout& to, const std::vector<int>& shape,
            const std::array<std::int64_t, 2>& ext) {
  const sc::plan& p = o.chosen;
  const sc::plan opt = sc::make_plan(from, to, shape.data(), ext.data(), 2);
  std::string mesh_text;
  for (int s : shape) mesh_text += (mesh_text.empty() ? "" : "x") + std::to_string(s);
  CAPTURE(mesh_text);
  CAPTURE(ext[0]);
  CAPTURE(ext[1]);
  CAPTURE(sc::to_string(from));
  CAPTURE(sc::to_string(to));
  // Optimal on the real mesh: the run-time planner's cost (elements, then collectives).
  REQUIRE(p.elements == doctest::Approx(opt.elements).epsilon(1e-12));
  REQUIRE(p.collectives == opt.collectives);
  double predicted = 0;
  for (int i = 0; i < p.nsteps; ++i) predicted += sc::detail::step_cost(p[i], shape.data(), ext.data(), 2);
  REQUIRE(predicted == doctest::Approx(p.elements).epsilon(1e-12));

  REQUIRE(o.error.empty());
  double busiest = 0;
  for (int r = 0; r < o.nranks; ++r) {
    int calls = 0;  // p.collectives, less the steps in which r's group has nothing to move
    for (int i = 0; i < p.nsteps; ++i) calls += st::expected_calls(p[i], shape.data(), ext.data(), 2, r);
    REQUIRE(o.calls[static_cast<std::size_t>(r)] == calls);
    busiest = std::max(busiest, o.bytes[static_cast<std::size_t>(r)]);
  }
  // Each step's busiest rank sends what the plan predicts; over several steps the busiest
  // rank of the whole plan sends at most their sum (exactly, with a single collective).
  REQUIRE(busiest <= p.elements * sizeof(float) * (1 + 1e-12));
  if (p.collectives == 1) REQUIRE(busiest == doctest::Approx(p.elements * sizeof(float)).epsilon(1e-12));
}

/// How many runs took the first compile-time candidate, the second, or the run-time plan.
struct tally {
  std::size_t cases = 0, first = 0, second = 0, runtime = 0;
};

template <class From, class To, std::size_t N>
void check_pair(const std::array<int, N>& shape, const std::array<std::int64_t, 2>& ext, tally& t) {
  const outcome o = run_pair<From, To>(shape, ext);
  verify(o, From::desc, To::desc, std::vector<int>(shape.begin(), shape.end()), ext);
  constexpr const sc::plan_set& ps = sc::static_plans<From, To, 2>;
  if (sc::detail::same_steps(o.chosen, ps[0])) ++t.first;
  else if (ps.size() > 1 && sc::detail::same_steps(o.chosen, ps[1])) ++t.second;
  else {
    // The run-time plan (verify then compared make_plan with itself): it must cost strictly
    // less than every compile-time candidate on this mesh (elements, then collectives, then
    // steps), each candidate's cost summed here step by step.
    ++t.runtime;
    for (int i = 0; i < ps.size(); ++i) {
      double elements = 0;
      int collectives = 0;  // on this mesh: a step over one rank (axes of size 1) calls none
      for (int j = 0; j < ps[i].nsteps; ++j) {
        elements += sc::detail::step_cost(ps[i][j], shape.data(), ext.data(), 2);
        int group = 1;
        for (std::size_t a = 0; a < N; ++a)
          if (ps[i][j].axes >> a & 1u) group *= shape[a];
        collectives += sc::is_collective(ps[i][j].kind) && group > 1 ? 1 : 0;
      }
      CAPTURE(i);
      CAPTURE(elements);
      CAPTURE(o.chosen.elements);
      const double tol = 1e-12 * std::max(1.0, elements);
      const bool fewer = o.chosen.elements < elements - tol;
      const bool same = std::abs(o.chosen.elements - elements) <= tol;
      CAPTURE(collectives);
      REQUIRE((fewer || (same && (o.chosen.collectives < collectives ||
                                   (o.chosen.collectives == collectives && o.chosen.nsteps < ps[i].nsteps)))));
    }
  }
  ++t.cases;
}

template <std::size_t N, int... I>
void all_pairs_2axis(const std::array<int, N>& shape, const std::array<std::int64_t, 2>& ext, tally& cases,
                     std::integer_sequence<int, I...>) {
  (check_pair<sc::layout<placement2<I / 16 / 4>, placement2<I / 16 % 4>>, sc::layout<placement2<I % 16 / 4>, placement2<I % 4>>>(shape, ext,
                                                                                                                                     cases),
   ...);
}

template <int... I>
void all_pairs_1axis(int ranks, const std::array<std::int64_t, 2>& ext, tally& cases, std::integer_sequence<int, I...>) {
  (check_pair<sc::layout<placement1<I / 4>>, sc::layout<placement1<I % 4>>>(std::array<int, 1>{ranks}, ext, cases), ...);
}

}  // namespace

TEST_CASE("static redistribute runs a plan that is optimal on the real mesh (every 2-axis and 1-axis pair)") {
  tally cases;
  const auto pairs2 = std::make_integer_sequence<int, 256>{};
  all_pairs_2axis(std::array<int, 2>{2, 2}, {8, 12}, cases, pairs2);
  all_pairs_2axis(std::array<int, 2>{2, 2}, {7, 5}, cases, pairs2);
  all_pairs_2axis(std::array<int, 2>{4, 4}, {16, 32}, cases, pairs2);
  all_pairs_2axis(std::array<int, 2>{2, 4}, {8, 8}, cases, pairs2);
  all_pairs_2axis(std::array<int, 2>{3, 2}, {5, 3}, cases, pairs2);
  // An axis of size 1: steps over it alone are local copies and call nothing.
  all_pairs_2axis(std::array<int, 2>{4, 1}, {10, 6}, cases, pairs2);
  all_pairs_2axis(std::array<int, 2>{1, 3}, {5, 7}, cases, pairs2);
  const auto pairs1 = std::make_integer_sequence<int, 16>{};
  for (int ranks : {2, 3, 4}) {
    all_pairs_1axis(ranks, {12, 8}, cases, pairs1);
    all_pairs_1axis(ranks, {5, 2}, cases, pairs1);
  }
  MESSAGE(cases.cases << " static redistributes ran an optimal plan: " << cases.first << " the first compile-time candidate, "
                      << cases.second << " the second, " << cases.runtime << " the run-time plan");
  // Every way of running a static redistribute was exercised.
  CHECK(cases.first > 0);
  CHECK(cases.second > 0);
  CHECK(cases.runtime > 0);
}

TEST_CASE("P(sum),R -> S(0),R: one reduce_scatter on 2x2; reduce_scatter on a slice, then all_gather, on 4x4") {
  using From = sc::layout<sc::partial<>, sc::replicate>;
  using To = sc::layout<sc::shard<0>, sc::replicate>;
  const outcome o2 = run_pair<From, To>(std::array<int, 2>{2, 2}, {8, 8});
  const outcome o4 = run_pair<From, To>(std::array<int, 2>{4, 4}, {16, 16});
  REQUIRE(o2.error.empty());
  REQUIRE(o4.error.empty());
  const sc::plan& small = o2.chosen;
  REQUIRE(small.nsteps == 1);
  CHECK(small[0].kind == sc::step_kind::reduce_scatter);
  CHECK(small.elements == doctest::Approx(32));  // (2-1) x a 4x8 piece
  const sc::plan& big = o4.chosen;
  // One reduce_scatter over axis 0 would send (4-1) x 64 = 192 elements; the chosen plan
  // reduce-scatters a quarter (3 x 16) and gathers it back along axis 1 (3 x 16).
  CHECK(big.collectives == 2);
  CHECK(big.elements == doctest::Approx(96));
  // What ran: one collective per collective step, on every rank.
  for (long c : o2.calls) CHECK(c == 1);
  for (long c : o4.calls) CHECK(c == 2);
}

// 5 and 6 axes, several of them larger than 1: a static plan made for the canonical
// meshes (axes of size 4 and 2) is chosen on the real mesh only where it is optimal there,
// else the run-time plan runs; each result matches the reference.
TEST_CASE("static redistribute on 5- and 6-axis meshes with several axes larger than 1") {
  using namespace sc;
  tally t;
  check_pair<layout<shard<0>, partial<sum>, replicate, shard<1>, shard<0>>, layout<replicate, shard<1>, shard<0>, partial<sum>, replicate>>(
      std::array<int, 5>{2, 3, 1, 2, 2}, {12, 10}, t);
  check_pair<layout<replicate, shard<1>, shard<0>, replicate, shard<0>>, layout<shard<1>, shard<0>, replicate, shard<0>, shard<1>>>(
      std::array<int, 5>{2, 2, 2, 1, 3}, {7, 13}, t);
  check_pair<layout<partial<max>, partial<max>, shard<0>, replicate, shard<1>, partial<max>>,
             layout<shard<0>, replicate, shard<1>, shard<0>, replicate, replicate>>(std::array<int, 6>{2, 2, 1, 2, 1, 3}, {9, 16}, t);
  check_pair<layout<shard<1>, shard<0>, replicate, shard<1>, replicate, shard<0>>,
             layout<replicate, replicate, shard<0>, shard<0>, shard<1>, replicate>>(std::array<int, 6>{1, 2, 2, 2, 2, 1}, {5, 0}, t);
  CHECK(t.cases == 4);
  MESSAGE("5/6-axis static pairs: " << t.first << " ran the first compile-time plan, " << t.second << " the second, " << t.runtime
                                    << " the run-time plan");
}

// Static plans for meshes of up to SHARDCAST_MAX_AXES axes are searched by constexpr
// evaluation within the budgets the shardcast::shardcast target sets (the compilers'
// default budgets hold fewer axes: docs/01_layouts.md, "Compile-time budgets and
// compilers"). Axes of size 1 keep the number of ranks small; the layouts change on
// nearly every axis, the most expensive kind of static pair.
TEST_CASE("static redistribute on 7- and 8-axis meshes") {
  using namespace sc;
  tally t;
  check_pair<layout<shard<0>, shard<1>, partial<sum>, replicate, shard<0>, shard<1>, replicate>,
             layout<shard<1>, replicate, shard<0>, partial<sum>, shard<1>, shard<0>, shard<0>>>(std::array<int, 7>{2, 1, 1, 2, 1, 1, 1},
                                                                                               {6, 5}, t);
  check_pair<layout<shard<0>, shard<1>, partial<sum>, replicate, shard<0>, shard<1>, replicate, shard<0>>,
             layout<shard<1>, replicate, shard<0>, partial<sum>, shard<1>, shard<0>, shard<0>, replicate>>(
      std::array<int, 8>{1, 2, 1, 1, 2, 1, 1, 2}, {7, 4}, t);
  CHECK(t.cases == 2);
}

// Static plans of higher-rank tensors on many axes: the canonical mesh the compile-time
// search prices them on gives each dim an extent of s^(N+1), whose product overflowed
// int64 in constant evaluation (a compile error) from (N+1)·rank >= 32 on: rank 4 on 7 or 8
// axes, rank 8 on 3. Each runs and round-trips to the input here.
template <class From, class To, std::size_t N, std::size_t R>
void round_trip(const std::array<int, N>& shape, const std::array<std::int64_t, R>& ext) {
  std::int64_t n = 1;
  for (auto e : ext) n *= e;
  std::vector<double> g(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<double>(i % 97) + 0.5;
  int ranks = 1;
  for (int s : shape) ranks *= s;
  std::atomic<int> wrong{0};
  sc::host::run(ranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    auto x = sc::distribute<From>(m, g, ext);
    auto y = sc::redistribute<To>(x);
    if (sc::to_global(y) != g) ++wrong;
    if (sc::to_global(sc::redistribute<From>(y)) != g) ++wrong;
  });
  CHECK(wrong == 0);
}

TEST_CASE("static redistribute of rank-4 tensors on 7 and 8 axes and of a rank-8 tensor on 3 axes") {
  using namespace sc;
  using R_ = replicate;
  round_trip<layout<R_, R_, R_, R_, R_, R_, R_>, layout<shard<0>, R_, R_, R_, R_, R_, shard<3>>>(std::array<int, 7>{2, 1, 1, 1, 1, 1, 2},
                                                                                               std::array<std::int64_t, 4>{2, 3, 4, 5});
  round_trip<layout<shard<1>, R_, R_, R_, R_, R_, R_, shard<2>>, layout<R_, R_, R_, R_, R_, R_, shard<0>, shard<3>>>(
      std::array<int, 8>{2, 1, 1, 1, 1, 1, 1, 2}, std::array<std::int64_t, 4>{3, 3, 4, 5});
  round_trip<layout<shard<0>, shard<7>, R_>, layout<R_, shard<6>, shard<0>>>(std::array<int, 3>{2, 2, 1},
                                                                             std::array<std::int64_t, 8>{2, 1, 3, 1, 1, 1, 2, 3});
}
