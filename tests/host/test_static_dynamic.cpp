// Static and dynamic layouts meet: a static-layout tensor converts implicitly to
// dynamic_layout, and a dynamic-layout one explicitly to its static layout (checked at run
// time); redistribute<To>(dynamic x), redistribute(static x, runtime layout), plan_for and
// explain of a static x with a run-time target. Every layout pair on 1- and 2-axis meshes
// against the single-rank reference, with the input unchanged, and given-up inputs.
#include <doctest/doctest.h>

#include <array>
#include <functional>
#include <numeric>
#include <shardcast/shardcast.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using Ps = sc::partial<sc::sum>;

// Static source layouts for the run-time targets, and static targets for run-time sources.
using static_layouts_2 = std::tuple<sc::layout<R, R>, sc::layout<S0, R>, sc::layout<R, S1>, sc::layout<S1, S0>, sc::layout<Ps, R>,
                                    sc::layout<S0, Ps>, sc::layout<S0, S0>, sc::layout<Ps, Ps>>;

template <class F, class... L>
void each_layout(std::tuple<L...>*, F&& f) {
  (f(L{}), ...);
}

template <class T, std::size_t N>
void sweep(const std::array<int, N>& shape, const std::array<std::int64_t, 2>& ext, st::sweep_outcome& bad) {
  sc::host::run(std::accumulate(shape.begin(), shape.end(), 1, std::multiplies<>()), [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    using M = decltype(m);
    const auto g = st::make_global<T>(ext[0] * ext[1]);
    const auto runtime = st::all_layouts(static_cast<int>(N), 2, sc::reduce_op::sum);
    std::size_t mine = 0;
    auto fail = [&](const std::string& what) { bad.add(c.rank(), what); };
    if constexpr (N == 2) {
      each_layout(static_cast<static_layouts_2*>(nullptr), [&]<class L>(L) {
        const std::string ls = sc::to_string(L::desc);
        for (const auto& to : runtime) {
          ++mine;
          const std::string pair = ls + " -> " + sc::to_string(to) + ": ";
          // static x, run-time target
          auto x = sc::distribute<L>(m, g, ext);
          st::spread_partial_terms(x, g);
          const auto before = st::snapshot(x);
          auto y = sc::redistribute(x, to);
          static_assert(std::is_same_v<decltype(y), sc::dtensor<T, 2, sc::dynamic_layout, M>>);
          std::string err = st::check_against_reference(y, g);
          if (err.empty() && !(y.layout() == to)) err = "the result's layout is " + sc::to_string(y.layout());
          if (err.empty() && st::snapshot(x) != before) err = "the input was modified";
          // plan_for and explain: the run-time plan, as for x viewed with a dynamic layout
          const sc::dtensor<T, 2, sc::dynamic_layout, M> xd = x;
          if (err.empty() && !(sc::plan_for(x, to).dst == to && sc::plan_for(x, to).nsteps == sc::plan_for(xd, to).nsteps &&
                               sc::plan_for(x, to).elements == sc::plan_for(xd, to).elements))
            err = "plan_for differs from the dynamic view's";
          if (err.empty() && sc::explain(x, to) != sc::explain(xd, to)) err = "explain differs from the dynamic view's";
          // the same, x given up: left empty
          auto x2 = sc::distribute<L>(m, g, ext);
          st::spread_partial_terms(x2, g);
          auto y2 = sc::redistribute(std::move(x2), to);
          if (err.empty()) err = st::check_against_reference(y2, g);
          if (err.empty()) err = st::check_emptied(x2);
          // dynamic x (of layout `to`), static target L
          auto d = sc::distribute(m, to, g, ext);
          st::spread_partial_terms(d, g);
          const auto dbefore = st::snapshot(d);
          auto z = sc::redistribute<L>(d);
          static_assert(std::is_same_v<decltype(z), sc::dtensor<T, 2, L, M>>);
          if (err.empty()) err = st::check_against_reference(z, g);
          if (err.empty() && st::snapshot(d) != dbefore) err = "the dynamic input was modified";
          if (err.empty() && to == L::desc && z.local_size() > 0 && z.data() != d.data())
            err = "to its own layout, the result does not share the input's storage (as a redistribute to the same layout does)";
          auto d2 = sc::distribute(m, to, g, ext);
          st::spread_partial_terms(d2, g);
          auto z2 = sc::redistribute<L>(std::move(d2));
          if (err.empty()) err = st::check_against_reference(z2, g);
          if (err.empty()) err = st::check_emptied(d2);
          if (!err.empty()) fail(pair + err);
        }
      });
    } else {
      using L = sc::layout<S1>;
      for (const auto& to : runtime) {
        ++mine;
        auto x = sc::distribute<L>(m, g, ext);
        auto y = sc::redistribute(x, to);
        std::string err = st::check_against_reference(y, g);
        auto d = sc::distribute(m, to, g, ext);
        st::spread_partial_terms(d, g);
        auto z = sc::redistribute<L>(d);
        if (err.empty()) err = st::check_against_reference(z, g);
        if (!err.empty()) fail("S(1) <-> " + sc::to_string(to) + ": " + err);
      }
    }
    if (c.rank() == 0) bad.count(mine);
  });
}

}  // namespace

TEST_CASE_TEMPLATE("static and dynamic layouts meet: every pair against the reference, kept and given up", T, float, std::int64_t) {
  st::sweep_outcome bad;
  sweep<T, 2>({2, 2}, {5, 3}, bad);
  sweep<T, 2>({1, 3}, {2, 4}, bad);  // empty pieces
  sweep<T, 1>({3}, {4, 2}, bad);
  bad.report();
  CHECK(bad.cases == 8 * 16 * 2 + 4);  // 8 static layouts by 16 run-time ones on two 2-axis meshes, 4 on one axis
}

TEST_CASE("dtensor converts from a static to a dynamic layout implicitly, and back explicitly when the layout matches") {
  sc::host::run(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    using M = decltype(m);
    using L = sc::layout<S0, S1>;
    const auto g = st::make_global<double>(15);
    auto x = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{5, 3});
    const sc::dtensor<double, 2, sc::dynamic_layout, M> d = x;
    CHECK(d.layout() == L::desc);
    CHECK(d.data() == x.data());
    CHECK(d.owner() == x.owner());
    CHECK(d.local_box() == x.local_box());
    const sc::dtensor<const double, 2, sc::dynamic_layout, M> cd = x;  // and to const elements at once
    CHECK(cd.data() == x.data());

    const auto back = sc::dtensor<double, 2, L, M>(d);
    CHECK(back.data() == x.data());
    CHECK(back.local_box() == x.local_box());
    static_assert(!std::is_convertible_v<sc::dtensor<double, 2, sc::dynamic_layout, M>, sc::dtensor<double, 2, L, M>>,
                  "dynamic to static is explicit: it is checked at run time");
    using Other = sc::layout<S1, S0>;
    std::string msg;
    try {
      (void)sc::dtensor<double, 2, Other, M>(d);
    } catch (const sc::layout_error& e) {
      msg = e.what();
    }
    CHECK(msg.find("\"S(0),S(1)\"") != std::string::npos);
    CHECK(msg.find("\"S(1),S(0)\"") != std::string::npos);
    CHECK(msg.find("redistribute<L>(x)") != std::string::npos);
    // An rvalue hands its handles over; a refused one is left as it was.
    auto moved = d;
    try {
      (void)sc::dtensor<double, 2, Other, M>(std::move(moved));
    } catch (const sc::layout_error&) {
    }
    CHECK(moved.data() == x.data());
    auto taken = sc::dtensor<double, 2, L, M>(std::move(moved));
    CHECK(taken.data() == x.data());
    CHECK(st::check_emptied(moved) == "");
    sc::dtensor<double, 2, sc::dynamic_layout, M> from_rvalue = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{5, 3});
    CHECK(sc::to_global(from_rvalue) == g);
  });
}

TEST_CASE("given up across the bridge: partial -> replicate runs in place; a refused target leaves the input as it was") {
  sc::host::run(2, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 1});
    using M = decltype(m);
    using PR = sc::layout<Ps, R>;
    using RR = sc::layout<R, R>;
    const std::array<std::int64_t, 2> ext{4, 3};
    const auto g = st::make_global<float>(12);
    {  // static x, run-time target: one all_reduce, in x's storage (x owns it alone)
      auto x = sc::distribute<PR>(m, g, ext);
      st::spread_partial_terms(x, g);
      const float* p = x.data();
      auto y = sc::redistribute(std::move(x), sc::runtime_layout::parse("R,R"));
      CHECK(st::check_against_reference(y, g) == "");
      CHECK(y.data() == p);
      CHECK(st::check_emptied(x) == "");
    }
    {  // dynamic d, static target
      auto d = sc::distribute(m, sc::runtime_layout::parse("P(sum),R"), g, ext);
      st::spread_partial_terms(d, g);
      const float* p = d.data();
      auto y = sc::redistribute<RR>(std::move(d));
      static_assert(std::is_same_v<decltype(y), sc::dtensor<float, 2, RR, M>>);
      CHECK(st::check_against_reference(y, g) == "");
      CHECK(y.data() == p);
      CHECK(st::check_emptied(d) == "");
    }
    {  // a target the dynamic form refuses: x is left as it was
      auto x = sc::distribute<PR>(m, g, ext);
      const float* p = x.data();
      const auto before = st::snapshot(x);
      CHECK_THROWS_AS((void)sc::redistribute(std::move(x), sc::runtime_layout::parse("S(0),S(2)")), sc::layout_error);
      CHECK(x.data() == p);
      CHECK(x.owns());
      CHECK(st::snapshot(x) == before);
      CHECK(st::check_against_reference(sc::redistribute<RR>(x), g) == "");  // still a working tensor
    }
    {  // plan_for<To>(d) and explain<To>(d): what redistribute<To>(d) runs
      const auto d = sc::distribute(m, sc::runtime_layout::parse("P(sum),R"), g, ext);
      const sc::plan p = sc::plan_for<RR>(d);
      CHECK(p.dst == RR::desc);
      CHECK(p.nsteps == 1);
      CHECK(p.steps[0].kind == sc::step_kind::all_reduce);
      CHECK(sc::explain<RR>(d) == sc::explain(d, sc::runtime_layout(RR::desc)));
    }
    {  // an empty dynamic tensor converts to an empty static one
      const sc::dtensor<float, 2, sc::dynamic_layout, M> empty_d;
      const auto empty_s = sc::dtensor<float, 2, RR, M>(empty_d);
      CHECK(st::check_emptied(empty_s) == "");
    }
  });
}
