// The run-time plans shared by the ranks of a process (detail::shared_plan_cache): the
// rank threads of a host mesh share the search of each new conversion (one search, or at
// most one per CPU) and every rank runs it correctly; the cache returns make_plan's plan
// from many threads at once, drops its oldest plans beyond its capacity, and does not
// keep a search that threw; a rank that waited for a search that threw gets its own
// layout_error, or searches alone after any other failure; plan_for and explain take
// their search from the same cache.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <shardcast/shardcast.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
bool same_plan(const sc::plan& a, const sc::plan& b) {
  return sc::detail::same_steps(a, b) && a.src == b.src && a.dst == b.dst && a.elements == b.elements && a.collectives == b.collectives;
}

/// Sets how many searches of the process's shared plans run at once, for one scope.
struct parallel_searches {
  explicit parallel_searches(int n) { sc::detail::shared_plans().set_parallel(n); }
  ~parallel_searches() { sc::detail::shared_plans().set_parallel(0); }
};
}  // namespace

TEST_CASE("the ranks of a host mesh share the search of each new dynamic conversion, and each runs it") {
  const char* pairs[][2] = {{"S(0),S(1),P(sum)", "S(1),R,S(0)"}, {"R,S(2),S(0)", "S(0),S(0),R"}, {"P(max),P(max),S(1)", "R,S(2),P(max)"},
                            {"S(2),S(2),S(2)", "R,R,R"}};
  st::failures f;
  // parallel: 1, one search at a time, so the other ranks wait for it; 0, as many at once
  // as the process has CPUs, so at most that many ranks search.
  for (int parallel : {1, 0}) {
    parallel_searches scope(parallel);
    const std::size_t most = parallel == 1 ? 1 : static_cast<std::size_t>(std::min(8, sc::detail::available_cpus()));
    for (const auto& pr : pairs) {
      // Extents no other test of this program uses, so every conversion is new to the cache.
      const std::array<std::int64_t, 3> ext{13, 29, 7 + parallel};
      const auto src = sc::runtime_layout::parse(pr[0]), dst = sc::runtime_layout::parse(pr[1]);
      const std::size_t before = sc::detail::shared_plans().searches();
      sc::host::run(8, [&](sc::host::communicator& c) {
        auto m = sc::make_mesh(c, std::array<int, 3>{2, 2, 2});
        // Two calls: the second finds the plan in the rank's own cache.
        f.add(c.rank(), st::differential_case<float>(m, src, dst, ext, {}, 2));
      });
      const std::size_t searches = sc::detail::shared_plans().searches() - before;
      CHECK_MESSAGE((searches >= 1 && searches <= most), pr[0], " -> ", pr[1], ": ", searches, " searches, parallel ", parallel);
    }
  }
  f.report();
}

TEST_CASE("the ranks of a host mesh choose a static plan for new extents from one search") {
  using From = sc::layout<sc::partial<sc::sum>, sc::shard<0>>;
  using To = sc::layout<sc::shard<1>, sc::replicate>;
  const std::array<std::int64_t, 2> ext{11, 19};
  const auto g = st::make_global<double>(ext[0] * ext[1]);
  st::failures f;
  parallel_searches scope(1);
  const std::size_t before = sc::detail::shared_plans().searches();
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    auto x = sc::distribute<From>(m, g, ext);
    st::spread_partial_terms(x, g);
    f.add(c.rank(), st::check_against_reference(sc::redistribute<To>(x), g));
    f.add(c.rank(), st::check_against_reference(sc::redistribute<To>(x), g));  // (from the rank's geometry cache)
  });
  CHECK(sc::detail::shared_plans().searches() - before == 1);
  f.report();
}

TEST_CASE("plan_for and explain take the plan a redistribute searched, and the ranks share the search of a new one") {
  // New extents for each part, so that every conversion is new to the shared plans.
  const std::array<std::int64_t, 3> ext{17, 5, 23};
  const auto src = sc::runtime_layout::parse("S(2),P(sum)"), dst = sc::runtime_layout::parse("R,S(0)");
  const std::array<int, 2> shape{2, 2};
  const sc::plan ref = sc::make_plan(src, dst, shape, ext);
  const std::string ref_text = sc::explain<float>(ref, shape, ext);
  const auto g = st::make_global<float>(ext[0] * ext[1] * ext[2]);
  st::failures f;
  parallel_searches scope(1);
  std::size_t before = sc::detail::shared_plans().searches();
  std::size_t counts[3]{};  // searches: by plan_for and explain, then redistribute, then both again
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    auto x = sc::distribute(m, src, g, ext);
    auto note = [&](int i) {
      c.barrier();
      if (c.rank() == 0) counts[i] = sc::detail::shared_plans().searches() - before, before += counts[i];
      c.barrier();
    };
    auto check = [&](const char* when) {
      if (!same_plan(sc::plan_for(x, dst), ref)) f.add(c.rank(), std::string("plan_for differs from make_plan's plan ") + when);
      if (sc::explain(x, dst) != ref_text) f.add(c.rank(), std::string("explain differs from make_plan's plan's ") + when);
    };
    check("before the redistribute");
    note(0);
    f.add(c.rank(), st::check_against_reference(sc::redistribute(x, dst), g));
    note(1);
    check("after it");
    note(2);
  });
  f.report();
  CHECK(counts[0] == 1);  // the four ranks' plan_for and explain: one search
  CHECK(counts[1] == 0);  // the redistribute finds it
  CHECK(counts[2] == 0);

  // A static plan_for for new extents: one search for the four ranks, which the
  // redistribute then finds; the plan is the one choose_plan makes with its own search.
  using From = sc::layout<sc::partial<sc::sum>, sc::shard<1>>;
  using To = sc::layout<sc::shard<1>, sc::shard<0>>;
  const std::array<std::int64_t, 2> ext2{13, 31};
  const sc::plan sref = sc::detail::choose_plan(sc::static_plans<From, To, 2>, shape.data(), ext2.data(), 2).p;
  const auto g2 = st::make_global<double>(ext2[0] * ext2[1]);
  before = sc::detail::shared_plans().searches();
  std::size_t static_counts[2]{};  // searches: by plan_for and explain, then by redistribute
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    auto x = sc::distribute<From>(m, g2, ext2);
    st::spread_partial_terms(x, g2);
    if (!same_plan(sc::plan_for<To>(x), sref)) f.add(c.rank(), "the static plan_for differs from choose_plan's plan");
    if (sc::explain<To>(x) != sc::explain<double>(sref, shape, ext2)) f.add(c.rank(), "the static explain differs from choose_plan's plan's");
    c.barrier();
    if (c.rank() == 0) static_counts[0] = sc::detail::shared_plans().searches() - before;
    c.barrier();
    f.add(c.rank(), st::check_against_reference(sc::redistribute<To>(x), g2));
  });
  f.report();
  static_counts[1] = sc::detail::shared_plans().searches() - before - static_counts[0];
  CHECK(static_counts[0] == 1);
  CHECK(static_counts[1] == 0);
}

TEST_CASE("shared_plan_cache::get returns make_plan's plan from many threads, and drops its oldest plans") {
  static_assert(sc::detail::shared_plan_cache::capacity == 256, "the counts below assume a capacity of 256");
  const auto layouts = st::all_layouts(3, 2, sc::reduce_op::sum);  // 5^3 layouts
  const int shape[3] = {2, 3, 2};
  // Key k: a layout pair and extents {5 + k, 7}.
  auto key_src = [&](int k) { return layouts[static_cast<std::size_t>(k * 7) % layouts.size()]; };
  auto key_dst = [&](int k) { return layouts[static_cast<std::size_t>(k * 11 + 3) % layouts.size()]; };
  auto key_ext = [](int k) { return std::array<std::int64_t, 2>{5 + k, 7}; };
  auto cache = std::make_unique<sc::detail::shared_plan_cache>(1);
  st::failures f;
  auto check = [&](int k) {
    const auto e = key_ext(k);
    const sc::plan got = cache->get(key_src(k), key_dst(k), shape, e.data(), 2);
    if (!same_plan(got, sc::make_plan(key_src(k), key_dst(k), shape, e.data(), 2)))
      f.add("key " + std::to_string(k) + ": the cached plan differs from make_plan's");
  };
  // Four threads ask for the same 200 keys at once, in different orders. One search at a
  // time: each key is searched once. Four at a time: a key is searched by up to four
  // threads, the first to end publishing its plan.
  for (int parallel : {1, 4}) {
    cache = std::make_unique<sc::detail::shared_plan_cache>(parallel);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) check(t % 2 ? 199 - i : (i + 50 * t) % 200);
      });
    for (auto& th : threads) th.join();
    f.report();
    if (parallel == 1) CHECK(cache->searches() == 200);
    else CHECK((cache->searches() >= 200 && cache->searches() <= 800));
  }
  // One thread, 300 keys in order on a new cache: the first 44 are dropped (256 kept), the
  // others are still there.
  cache = std::make_unique<sc::detail::shared_plan_cache>(1);
  for (int k = 0; k < 300; ++k) check(k);
  CHECK(cache->searches() == 300);
  check(299);
  check(44);
  CHECK(cache->searches() == 300);
  check(0);
  CHECK(cache->searches() == 301);
  f.report();
}

TEST_CASE("a search that throws throws on every thread that asks for it, and is not kept") {
  // Partial placements with different ops in one layout: make_plan refuses them.
  const auto src = sc::runtime_layout::parse("P(sum),P(max)"), dst = sc::runtime_layout::parse("R,R");
  const int shape[2] = {2, 2};
  const std::int64_t ext[1] = {8};
  sc::detail::shared_plan_cache cache;
  std::atomic<int> thrown{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      try {
        (void)cache.get(src, dst, shape, ext, 1);
      } catch (const sc::layout_error& e) {
        if (std::string(e.what()).find("must share one reduce op") != std::string::npos) ++thrown;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(thrown == 4);
  const std::size_t before = cache.searches();
  CHECK_THROWS_AS((void)cache.get(src, dst, shape, ext, 1), sc::layout_error);
  CHECK(cache.searches() == before + 1);
  CHECK_THROWS_AS((void)cache.get(src, dst, shape, ext, 1), sc::layout_error);
  CHECK(cache.searches() == before + 2);
}

namespace {
/// Two threads ask for one key of a cache that runs one search at a time: the first's
/// search (`first`) starts, waits until the second is waiting for it, then runs `then`;
/// the second's search is make_plan, marked in `second_searched` when it runs.
struct two_askers {
  sc::detail::shared_plan_cache cache{1};
  sc::runtime_layout src = sc::runtime_layout::parse("S(0),P(sum)"), dst = sc::runtime_layout::parse("R,S(1)");
  int shape[2] = {2, 2};
  std::int64_t ext[2] = {6, 5};
  std::atomic<bool> started{false}, second_searched{false};
  std::string first_error, second_error;
  sc::plan second_plan;

  template <class Then>
  void run(Then then) {
    std::thread first([&] {
      try {
        (void)cache.get_with(
            [&]() -> sc::plan {
              started = true;
              for (int i = 0; i < 20000 && cache.waiting() == 0; ++i) std::this_thread::sleep_for(std::chrono::microseconds(500));
              if (cache.waiting() == 0) throw std::runtime_error("the second thread never waited");
              return then();
            },
            src, dst, shape, ext, 2);
        first_error = "none";
      } catch (const std::exception& e) {
        first_error = e.what();
      }
    });
    while (!started) std::this_thread::yield();
    std::thread second([&] {
      try {
        second_plan = cache.get_with(
            [&] {
              second_searched = true;
              return sc::make_plan(src, dst, shape, ext, 2);
            },
            src, dst, shape, ext, 2);
        second_error = "none";
      } catch (const sc::layout_error& e) {
        second_error = e.what();
      }
    });
    first.join();
    second.join();
  }
};
}  // namespace

TEST_CASE("a rank that waited for a search that threw layout_error throws one with its message, without searching") {
  two_askers t;
  t.run([]() -> sc::plan { throw sc::layout_error("shardcast::make_plan: refused for the test"); });
  CHECK(t.first_error == "shardcast::make_plan: refused for the test");
  CHECK(t.second_error == "shardcast::make_plan: refused for the test");
  CHECK_FALSE(t.second_searched);
  CHECK(t.cache.searches() == 1);
}

TEST_CASE("a rank that waited for a search that failed otherwise searches alone") {
  two_askers t;
  t.run([]() -> sc::plan { throw std::bad_alloc(); });
  CHECK(t.first_error == std::bad_alloc().what());
  CHECK(t.second_error == "none");
  CHECK(t.second_searched);
  CHECK(same_plan(t.second_plan, sc::make_plan(t.src, t.dst, t.shape, t.ext, 2)));
  CHECK(t.cache.searches() == 2);
  // Not kept: the next call searches again.
  (void)t.cache.get(t.src, t.dst, t.shape, t.ext, 2);
  CHECK(t.cache.searches() == 3);
}
