// A dynamic redistribute is collective: the first time the ranks of a mesh meet a
// conversion (source layout, target layout, global extents), they compare it before any of
// them runs a plan. Ranks that pass different targets, hold pieces of different tensors, or
// one of which rejects its target, all throw layout_error; none hangs and none gets wrong
// values from an exchange whose sizes happened to match. Ranks that agree compare once per
// conversion. The references are the values the test itself passed, and a single-rank
// global computation for the results.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shardcast/comm/counting.hpp>
#include <shardcast/shardcast.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "rank_outcomes.hpp"

namespace sc = shardcast;

namespace {
using outcome_testing::contains;
using outcome_testing::opts;
using outcome_testing::outcomes;

/// The global 4x4 tensor g[i][j] = 4 i + j.
std::vector<double> square() {
  std::vector<double> g(16);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<double>(i);
  return g;
}
}  // namespace

TEST_CASE("ranks passing different targets whose exchanges have equal sizes all throw instead of mixing pieces") {
  // A partial sum of a 4x4 tensor on 2 ranks to S(0) or to S(1): both are one reduce_scatter
  // of 8 elements per rank, so without the comparison the ranks would reduce rows with
  // columns and return wrong values.
  const auto g = square();
  const auto got = outcomes(2, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    const auto x = sc::distribute(m, sc::runtime_layout::parse("P(sum)"), g, {4, 4});
    (void)sc::redistribute(x, sc::runtime_layout::parse(c.rank() == 0 ? "S(0)" : "S(1)"));
  });
  for (std::size_t r = 0; r < got.size(); ++r) {
    CAPTURE(r);
    CAPTURE(got[r]);
    CHECK(contains(got[r], std::string("layout_error: shardcast::redistribute: the ranks passed different target layouts (rank ") +
                               std::to_string(r) + " passed \"" + (r == 0 ? "S(0)" : "S(1)") + "\"); pass the same target layout on every rank"));
  }
}

TEST_CASE("ranks passing targets that need different collectives all throw layout_error") {
  const auto g = square();
  for (const bool into : {false, true}) {
    CAPTURE(into);
    const auto got = outcomes(4, [&](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, {2, 2});
      const auto x = sc::distribute(m, sc::runtime_layout::parse("S(0),R"), g, {4, 4});
      const auto to = sc::runtime_layout::parse(c.rank() == 3 ? "R,R" : "S(1),R");
      if (into) {
        auto y = sc::distribute(m, to, g, {4, 4});  // (its own layout on each rank: the check is redistribute_into's)
        sc::redistribute_into(x, y);
      } else {
        (void)sc::redistribute(x, to);
      }
    });
    const std::string who = into ? "shardcast::redistribute_into" : "shardcast::redistribute";
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      if (into) {
        // distribute of y already compares its layout: the ranks disagree there first.
        CHECK(contains(got[r], "layout_error: shardcast::distribute: the ranks passed different layouts"));
      } else {
        CHECK(contains(got[r], "layout_error: " + who + ": the ranks passed different target layouts"));
      }
    }
  }
}

TEST_CASE("a rank whose target is its tensor's own layout compares it too: a peer that passed another target does not wait for it") {
  // Rank 0's target is x's layout (no step to run), rank 1's needs an all_gather: both throw
  // instead of rank 1 waiting in the comparison until the timeout.
  const auto g = square();
  for (const int form : {0, 1, 2}) {  // redistribute, of const elements, redistribute_into
    CAPTURE(form);
    const auto got = outcomes(2, [&](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 1>{2});
      const auto x = sc::distribute(m, sc::runtime_layout::parse("S(0)"), g, {4, 4});
      const auto to = sc::runtime_layout::parse(c.rank() == 0 ? "S(0)" : "R");
      if (form == 0) {
        (void)sc::redistribute(x, to);
      } else if (form == 1) {
        const sc::dtensor<const double, 2, sc::dynamic_layout, decltype(m)> cx = x;
        (void)sc::redistribute(cx, to);
      } else {
        // y's layout is each rank's own target; made without distribute's comparison.
        std::vector<double> mem(16);
        sc::redistribute_into(x, sc::make_view(m, to, mem.data(), {4, 4}));
      }
    });
    const std::string who = form == 2 ? "shardcast::redistribute_into" : "shardcast::redistribute";
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], "layout_error: " + who + ": the ranks passed different target layouts (rank " + std::to_string(r) + " passed \"" +
                                 (r == 0 ? "S(0)" : "R") + "\")"));
    }
  }
}

TEST_CASE("a target that one rank rejects makes every rank throw, the others naming that rank") {
  const auto g = square();
  const auto got = outcomes(3, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{3});
    const auto x = sc::distribute(m, sc::runtime_layout::parse("S(1)"), g, {4, 4});
    // Rank 1 names dim 2 of a rank-2 tensor; the others a valid target.
    (void)sc::redistribute(x, sc::runtime_layout::parse(c.rank() == 1 ? "S(2)" : "S(0)"));
  });
  REQUIRE(got.size() == 3);
  CHECK(contains(got[1], "layout_error: shardcast::redistribute"));
  CHECK(!contains(got[1], "rejected its arguments"));
  for (const std::size_t r : {std::size_t{0}, std::size_t{2}}) {
    CAPTURE(r);
    CAPTURE(got[r]);
    CHECK(contains(got[r], "layout_error: shardcast::redistribute: rank 1 rejected its arguments"));
  }
}

TEST_CASE("pieces of different tensors (views of other layouts or extents) are refused on every rank") {
  SUBCASE("layouts differ") {
    const auto got = outcomes(2, [](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 1>{2});
      std::vector<float> mem(8, 1.0f);
      const auto to = sc::runtime_layout::parse("R");
      if (c.rank() == 0) (void)sc::redistribute(sc::make_view<sc::layout<sc::shard<0>>>(m, mem.data(), {4, 4}), to);
      else (void)sc::redistribute(sc::make_view<sc::layout<sc::shard<1>>>(m, mem.data(), {4, 4}), to);
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], std::string("layout_error: shardcast::redistribute: the ranks' tensors have different layouts (rank ") +
                                 std::to_string(r) + " holds a tensor of layout \"" + (r == 0 ? "S(0)" : "S(1)") + "\")"));
    }
  }
  SUBCASE("extents differ") {
    const auto got = outcomes(2, [](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 1>{2});
      std::vector<float> mem(12, 1.0f);
      const std::int64_t rows = c.rank() == 0 ? 4 : 6;  // 2 x 4 or 3 x 4 elements on each rank
      (void)sc::redistribute(sc::make_view<sc::layout<sc::shard<0>>>(m, mem.data(), {rows, 4}), sc::runtime_layout::parse("R"));
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], std::string("layout_error: shardcast::redistribute: the ranks' tensors have different global extents: dim 0 "
                                         "is 4 on some ranks and 6 on others (rank ") +
                                 std::to_string(r) + " holds a tensor of extents " + (r == 0 ? "4x4" : "6x4") + ")"));
    }
  }
}

TEST_CASE("ranks that agree compare a conversion once: later redistributes of it run the plan's collectives only") {
  using counted = sc::counting_communicator<sc::host::communicator>;
  const auto g = square();
  std::mutex mu;
  std::vector<std::string> errors;
  sc::host::run(4, [&](sc::host::communicator& hc) {
    counted cc(hc);
    auto m = sc::make_mesh(cc, {2, 2});
    const auto x = sc::distribute(m, sc::runtime_layout::parse("S(0),S(1)"), g, {4, 4});
    const auto to = sc::runtime_layout::parse("R,R");  // one all_gather over both axes
    std::vector<long> calls;
    for (int i = 0; i < 3; ++i) {
      m.comm().reset();
      const auto y = sc::redistribute(x, to);
      calls.push_back(m.comm().collectives());
      // Against the global tensor: every rank holds all of it.
      const auto v = y.local();
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b)
          if (v(a, b) != g[static_cast<std::size_t>(4 * a + b)]) {
            std::lock_guard lk(mu);
            errors.push_back("rank " + std::to_string(hc.rank()) + " call " + std::to_string(i) + ": wrong value at (" +
                             std::to_string(a) + ", " + std::to_string(b) + ")");
          }
    }
    // To x's own layout: compared once, then nothing; the result shares x's piece.
    for (int i = 0; i < 3; ++i) {
      m.comm().reset();
      const auto same = sc::redistribute(x, x.layout());
      calls.push_back(m.comm().collectives());
      if (same.data() != x.data()) {
        std::lock_guard lk(mu);
        errors.push_back("rank " + std::to_string(hc.rank()) + ": a redistribute to x's own layout did not share x's piece");
      }
    }
    // The same conversion on other extents is another conversion: compared again.
    const auto x2 = sc::distribute(m, sc::runtime_layout::parse("S(0),S(1)"), g, {2, 8});
    m.comm().reset();
    (void)sc::redistribute(x2, to);
    calls.push_back(m.comm().collectives());
    std::lock_guard lk(mu);
    if (calls != std::vector<long>{2, 1, 1, 1, 0, 0, 2}) {
      std::string s = "rank " + std::to_string(hc.rank()) + " collectives per call:";
      for (long n : calls) s += " " + std::to_string(n);
      errors.push_back(s);
    }
  });
  for (const auto& e : errors) CHECK_MESSAGE(false, e);
}

TEST_CASE("after a refused conversion the ranks go on: a redistribute they agree on gives the reference") {
  const auto g = square();
  std::mutex mu;
  std::vector<std::string> errors;
  sc::host::run(
      2,
      [&](sc::host::communicator& c) {
        auto m = sc::make_mesh(c, std::array<int, 1>{2});
        const auto x = sc::distribute(m, sc::runtime_layout::parse("P(sum)"), g, {4, 4});
        bool refused = false;
        try {
          (void)sc::redistribute(x, sc::runtime_layout::parse(c.rank() == 0 ? "S(0)" : "S(1)"));
        } catch (const sc::layout_error&) {
          refused = true;
        }
        const auto y = sc::to_global(sc::redistribute(x, sc::runtime_layout::parse("S(1)")));
        std::lock_guard lk(mu);
        if (!refused) errors.push_back("rank " + std::to_string(c.rank()) + ": the disagreeing targets were not refused");
        // distribute of a partial sum gives rank 0 the values and rank 1 zeros: the sum is g.
        if (y != g) errors.push_back("rank " + std::to_string(c.rank()) + ": the agreed redistribute differs from the global tensor");
      },
      opts);
  for (const auto& e : errors) CHECK_MESSAGE(false, e);
}
