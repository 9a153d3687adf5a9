// distribute is collective: ranks that disagree on the global extents or the layout, or a
// rank whose own arguments are wrong, make every rank throw layout_error (nobody hangs,
// nobody reads out of bounds). The reference for the message is the disagreeing values
// the test itself passed.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <mutex>
#include <shardcast/shardcast.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "rank_outcomes.hpp"

namespace sc = shardcast;

using outcome_testing::contains;
using outcome_testing::outcomes;

TEST_CASE("ranks passing different extents to distribute all throw layout_error naming the dim and both values") {
  using L = sc::layout<sc::shard<0>, sc::shard<1>>;
  const auto got = outcomes(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> ext{6, c.rank() == 2 ? 9 : 8};  // rank 2 disagrees on dim 1
    std::vector<float> g(static_cast<std::size_t>(ext[0] * ext[1]), 1.0f);  // each rank's span fits its own extents
    (void)sc::distribute<L>(m, g, ext);
  });
  for (std::size_t r = 0; r < got.size(); ++r) {
    CAPTURE(r);
    CHECK(contains(got[r], "layout_error: shardcast::distribute: the ranks passed different global extents: dim 1 is 8 on some ranks and 9 on others"));
    CHECK(contains(got[r], "(rank " + std::to_string(r) + " passed " + (r == 2 ? "6x9" : "6x8") + ")"));
  }
}

TEST_CASE("the dynamic-layout distribute checks extents and layouts across ranks") {
  SUBCASE("extents differ on dim 0") {
    const auto got = outcomes(3, [](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 1>{3});
      const std::array<std::int64_t, 1> ext{c.rank() == 0 ? 5 : 7};
      std::vector<int> g(static_cast<std::size_t>(ext[0]), 1);
      (void)sc::distribute(m, sc::runtime_layout::parse("S(0)"), g, ext);
    });
    for (const auto& w : got) CHECK(contains(w, "layout_error: shardcast::distribute: the ranks passed different global extents: dim 0 is 5 on some ranks and 7 on others"));
  }
  SUBCASE("layouts differ") {
    const auto got = outcomes(4, [](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
      const std::array<std::int64_t, 2> ext{4, 4};
      std::vector<int> g(16, 1);
      (void)sc::distribute(m, sc::runtime_layout::parse(c.rank() == 3 ? "S(1),R" : "S(0),R"), g, ext);
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CHECK(contains(got[r], "layout_error: shardcast::distribute: the ranks passed different layouts (rank " + std::to_string(r) +
                                 " passed \"" + (r == 3 ? "S(1),R" : "S(0),R") + "\")"));
    }
  }
  SUBCASE("partial ops differ") {
    const auto got = outcomes(2, [](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 1>{2});
      std::vector<int> g(3, 1);
      (void)sc::distribute(m, sc::runtime_layout::parse(c.rank() == 0 ? "P(sum)" : "P(max)"), g, std::array<std::int64_t, 1>{3});
    });
    for (const auto& w : got) CHECK(contains(w, "layout_error: shardcast::distribute: the ranks passed different layouts"));
  }
}

TEST_CASE("a bad argument on one rank makes every rank throw, the others naming that rank") {
  using L = sc::layout<sc::shard<0>>;
  const auto got = outcomes(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{4});
    std::vector<double> g(c.rank() == 1 ? 11 : 12, 1.0);  // rank 1's span is one element short
    (void)sc::distribute<L>(m, g, std::array<std::int64_t, 2>{3, 4});
  });
  CHECK(contains(got[1], "layout_error: shardcast::distribute: the global span has 11 elements but the extents describe 12"));
  for (std::size_t r : {0u, 2u, 3u}) {
    CAPTURE(r);
    CHECK(contains(got[r], "layout_error: shardcast::distribute: rank 1 rejected its arguments"));
  }
}

TEST_CASE("a negative extent on one rank is reported on every rank") {
  const auto got = outcomes(2, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    std::vector<int> g;
    (void)sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 1>{c.rank() == 0 ? -1 : 0});
  });
  CHECK(contains(got[0], "layout_error: shardcast::distribute: extent -1 of dim 0 is negative"));
  CHECK(contains(got[1], "layout_error: shardcast::distribute: rank 0 rejected its arguments"));
}

TEST_CASE("check_same_extents: silent when ranks agree, layout_error on every rank when they do not") {
  const auto agree = outcomes(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    sc::check_same_extents(m, std::array<std::int64_t, 3>{2, 0, 5});
  });
  for (const auto& w : agree) CHECK(w == "");
  const auto differ = outcomes(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    sc::check_same_extents(m, std::array<std::int64_t, 3>{2, 0, 5 + c.rank()});  // 5, 6, 7, 8
  });
  for (const auto& w : differ)
    CHECK(contains(w, "layout_error: shardcast::check_same_extents: the ranks passed different global extents: dim 2 is 5 on some ranks and 8 on others"));
}

TEST_CASE("extents that agree: distribute still gives each rank its piece of the global tensor") {
  // The check must not disturb the normal path: compare every rank's piece with the global tensor.
  const auto got = outcomes(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    std::vector<int> g(5 * 3);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<int>(i);
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{5, 3});
    const auto& b = x.local_box();
    // numpy's array_split: 5 rows over axis 0 as 3, 2; 3 columns over axis 1 as 2, 1.
    const std::int64_t row_off[] = {0, 3}, rows[] = {3, 2}, col_off[] = {0, 2}, cols[] = {2, 1};
    const int r = m.coord(0), k = m.coord(1);
    if (b.off[0] != row_off[r] || b.ext[0] != rows[r] || b.off[1] != col_off[k] || b.ext[1] != cols[k] ||
        x.local_size() != static_cast<std::size_t>(rows[r] * cols[k]))
      throw std::runtime_error("rank " + std::to_string(c.rank()) + " has the wrong box");
    for (std::int64_t i = 0; i < b.ext[0]; ++i)
      for (std::int64_t j = 0; j < b.ext[1]; ++j)
        if (x.data()[i * b.ext[1] + j] != g[static_cast<std::size_t>((b.off[0] + i) * 3 + b.off[1] + j)]) throw std::runtime_error("piece differs");
  });
  for (const auto& w : got) CHECK(w == "");
}
