// What redistribute keeps between calls: the per-rank geometry of static plans (keyed by
// plan and global extents) and the staging arena. Every result is compared with the
// single-rank reference; results of earlier calls must stay intact while later calls
// reuse the arena.
#include <doctest/doctest.h>

#include <cstdint>
#include <mutex>
#include <shardcast/shardcast.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
using st::failures;

template <class To, class T, int R, class L, class Mesh>
std::string check_static(const sc::dtensor<T, R, L, Mesh>& x, const std::vector<T>& g, const char* what) {
  auto y = sc::redistribute<To>(x);
  const std::string err = st::check_against_reference(y, g);
  return err.empty() ? err : std::string(what) + ": " + err;
}
}  // namespace

TEST_CASE("contiguous_in finds regions that are one run of a box") {
  using sc::box;
  auto mk = [](std::int64_t o0, std::int64_t e0, std::int64_t o1, std::int64_t e1) {
    box b;
    b.rank = 2;
    b.off[0] = o0, b.ext[0] = e0, b.off[1] = o1, b.ext[1] = e1;
    return b;
  };
  const box outer = mk(4, 6, 10, 5);  // rows 4..9, columns 10..14
  std::size_t off = 99;
  CHECK(sc::detail::contiguous_in(mk(6, 2, 10, 5), outer, off));  // whole rows 6..7
  CHECK(off == 2 * 5);
  CHECK(sc::detail::contiguous_in(mk(7, 1, 12, 2), outer, off));  // part of one row
  CHECK(off == 3 * 5 + 2);
  CHECK(!sc::detail::contiguous_in(mk(6, 2, 10, 4), outer, off));  // two partial rows
  CHECK(sc::detail::contiguous_in(mk(6, 0, 10, 4), outer, off));  // empty
  CHECK(off == 0);
}

TEST_CASE("static redistribute keys its cached geometry by extents and stays correct on each") {
  failures f;
  using S0R = sc::layout<sc::shard<0>, sc::replicate>;
  using RS1 = sc::layout<sc::replicate, sc::shard<1>>;
  using PP = sc::layout<sc::partial<>, sc::partial<>>;
  using RR = sc::layout<sc::replicate, sc::replicate>;
  const std::vector<std::array<std::int64_t, 2>> shapes = {{8, 8}, {7, 5}, {1, 3}, {0, 4}, {9, 2}};
  sc::host::run(6, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 3});
    // Interleave extents and plans three times, so later rounds hit cached geometry of
    // other extents and must not mix them up.
    for (int round = 0; round < 3; ++round)
      for (const auto& e : shapes) {
        const auto g = st::make_global<int>(e[0] * e[1], round);
        auto x = sc::distribute<S0R>(m, g, e);
        f.add(check_static<RS1>(x, g, "S(0),R -> R,S(1)"));
        f.add(check_static<RR>(x, g, "S(0),R -> R,R"));
        auto p = sc::distribute<PP>(m, g, e);
        f.add(check_static<S0R>(p, g, "P,P -> S(0),R"));
        f.add(check_static<sc::layout<sc::shard<1>, sc::shard<0>>>(p, g, "P,P -> S(1),S(0)"));
      }
    // Four plans times five extents, each computed once.
    if (m.cache().geometry.size() != 4 * shapes.size())
      f.add("rank " + std::to_string(c.rank()) + ": " + std::to_string(m.cache().geometry.size()) + " cached geometries, expected 20");
  });
  f.report();
}

TEST_CASE("results of earlier calls stay intact while later calls reuse the staging arena") {
  failures f;
  // Plans that stage: pack for reduce_scatter along dim 1, unpack for a gather along
  // dim 1, pieces between two steps, and all_to_all in both directions.
  using P_S0 = sc::layout<sc::partial<>, sc::shard<0>>;
  using S1_R = sc::layout<sc::shard<1>, sc::replicate>;
  using R_S1 = sc::layout<sc::replicate, sc::shard<1>>;
  using R_R = sc::layout<sc::replicate, sc::replicate>;
  using S0_S1 = sc::layout<sc::shard<0>, sc::shard<1>>;
  using S1_S0 = sc::layout<sc::shard<1>, sc::shard<0>>;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{11, 13};
    const auto g = st::make_global<float>(e[0] * e[1]);
    using D = sc::dtensor<float, 2, sc::dynamic_layout, decltype(m)>;
    std::vector<D> kept;
    auto keep = [&](const auto& y) { kept.emplace_back(y.mesh(), y.global_extents(), y.owner(), y.data(), y.layout()); };
    auto a = sc::distribute<P_S0>(m, g, e);
    auto b = sc::distribute<R_S1>(m, g, e);
    auto s = sc::distribute<S0_S1>(m, g, e);
    for (int i = 0; i < 3; ++i) {
      keep(sc::redistribute<S1_R>(a));  // reduce_scatter (pack) + all_gather
      keep(sc::redistribute<R_R>(b));   // gather along dim 1 (unpack)
      keep(sc::redistribute<S1_S0>(s)); // all_to_all on both axes
      keep(sc::redistribute<S0_S1>(sc::redistribute<S1_S0>(s)));
    }
    const std::size_t arena = m.cache().arena.capacity();
    if (arena == 0) f.add("rank " + std::to_string(c.rank()) + ": the staging arena was never used");
    // Every result owns memory of its own, and all of them still hold the right values.
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (!kept[i].owns()) f.add("result " + std::to_string(i) + " does not own its memory");
      for (std::size_t j = 0; j < i; ++j)
        if (kept[i].data() == kept[j].data()) f.add("results " + std::to_string(j) + " and " + std::to_string(i) + " share memory");
    }
    for (const auto& y : kept) f.add(st::check_against_reference(y, g));
    // The inputs were never modified.
    f.add(st::check_against_reference(a, g));
    f.add(st::check_against_reference(b, g));
    f.add(st::check_against_reference(s, g));
  });
  f.report();
}

TEST_CASE("the geometry cache drops its oldest entries and recomputes them correctly") {
  failures f;
  using From = sc::layout<sc::shard<0>>;
  using To = sc::layout<sc::shard<1>>;
  sc::host::run(3, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{3});
    const std::size_t cap = sc::detail::geometry_cache::capacity;
    for (std::size_t k = 0; k < cap + 6; ++k) {
      const std::array<std::int64_t, 2> e{static_cast<std::int64_t>(k % 9), static_cast<std::int64_t>(1 + k / 9)};
      const auto g = st::make_global<std::int32_t>(e[0] * e[1], static_cast<int>(k));
      f.add(check_static<To>(sc::distribute<From>(m, g, e), g, "S(0) -> S(1), filling the cache"));
    }
    if (m.cache().geometry.size() != cap) f.add("the cache holds " + std::to_string(m.cache().geometry.size()) + " entries");
    // Which entries: the 6 oldest were dropped, the next one and the newest are kept (the
    // cache's key for a static redistribute is the address of its plan set).
    const void* key = &sc::static_plans<From, To, 2>;
    for (std::size_t k : {std::size_t{0}, std::size_t{5}, std::size_t{6}, cap + 5}) {
      const std::array<std::int64_t, 2> e{static_cast<std::int64_t>(k % 9), static_cast<std::int64_t>(1 + k / 9)};
      const bool kept = m.cache().geometry.find(key, e.data(), 2) != nullptr;
      if (kept != (k >= 6)) f.add("entry " + std::to_string(k) + (kept ? " was kept" : " was dropped"));
    }
    for (std::size_t k = 0; k < 8; ++k) {  // the first entries were dropped: computed again
      const std::array<std::int64_t, 2> e{static_cast<std::int64_t>(k % 9), static_cast<std::int64_t>(1 + k / 9)};
      const auto g = st::make_global<std::int32_t>(e[0] * e[1], 100 + static_cast<int>(k));
      f.add(check_static<To>(sc::distribute<From>(m, g, e), g, "S(0) -> S(1), after eviction"));
    }
  });
  f.report();
}

TEST_CASE("a staging lease taken while another is held gets private memory") {
  sc::detail::staging_arena a;
  auto l1 = a.acquire(1000);
  REQUIRE(l1.get() != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(l1.get()) % sc::detail::staging_arena::align == 0);
  std::byte* first = l1.get();
  {
    auto l2 = a.acquire(500);  // nested: must not alias l1
    REQUIRE(l2.get() != nullptr);
    CHECK((l2.get() + 500 <= first || l2.get() >= first + 1000));
  }
  l1 = sc::detail::staging_arena::lease{};  // released
  auto l3 = a.acquire(800);                 // fits: the same memory again
  CHECK(l3.get() == first);
  CHECK(a.capacity() >= 1000);
}

TEST_CASE("large results reuse the blocks of released results, never those of live ones") {
  failures f;
  using From = sc::layout<sc::shard<0>, sc::replicate>;
  using To = sc::layout<sc::replicate, sc::shard<1>>;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    // 256 x 512 floats: each rank's result (256 x 256 floats = 256 KiB) is pooled.
    const std::array<std::int64_t, 2> e{256, 512};
    static_assert(256 * 256 * sizeof(float) >= sc::detail::result_pool::min_bytes);
    const auto g = st::make_global<float>(e[0] * e[1]);
    auto x = sc::distribute<From>(m, g, e);
    const float* released = nullptr;
    {
      auto y = sc::redistribute<To>(x);
      f.add(st::check_against_reference(y, g));
      released = y.data();
    }
    auto y1 = sc::redistribute<To>(x);  // reuses the released block
    if (y1.data() != released) f.add("rank " + std::to_string(c.rank()) + ": a released result block was not reused");
    auto y2 = sc::redistribute<To>(x);  // y1 is alive: fresh memory
    if (y2.data() == y1.data()) f.add("rank " + std::to_string(c.rank()) + ": a live result's block was handed out again");
    f.add(st::check_against_reference(y1, g));
    f.add(st::check_against_reference(y2, g));
    // A result may be released on another thread while this rank keeps redistributing.
    std::shared_ptr<float> moved = y2.owner();
    y2 = decltype(y2)();
    std::thread t([p = std::move(moved)]() mutable { p.reset(); });
    for (int i = 0; i < 4; ++i) f.add(st::check_against_reference(sc::redistribute<To>(x), g));
    t.join();
    if (m.cache().results.free_blocks() > sc::detail::result_pool::max_free) f.add("the pool holds too many blocks");
  });
  f.report();
}

TEST_CASE("a mesh frees its cached memory on request and keeps at most its result pool limit") {
  failures f;
  using From = sc::layout<sc::shard<0>, sc::replicate>;
  using To = sc::layout<sc::replicate, sc::shard<1>>;
  using Staged = sc::layout<sc::replicate, sc::replicate>;  // gathers along dim 1: unpacked from the arena
  sc::host::run(4, [&](sc::host::communicator& c) {
    const std::string who = "rank " + std::to_string(c.rank()) + ": ";
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{256, 512};  // each rank's To result: 256 KiB, pooled
    const std::size_t block = 256 * 256 * sizeof(float);
    const auto g = st::make_global<float>(e[0] * e[1]);
    auto x = sc::distribute<From>(m, g, e);
    if (m.result_pool_limit() != SHARDCAST_RESULT_POOL_BYTES) f.add(who + "the default limit is not SHARDCAST_RESULT_POOL_BYTES");

    f.add(st::check_against_reference(sc::redistribute<To>(x), g));  // released at once: waits in the pool
    f.add(st::check_against_reference(sc::redistribute<Staged>(sc::redistribute<To>(x)), g));
    const auto& cache = m.cache();
    // Waiting: the To block (reused by the second To result, then released) and the 512 KiB Staged result.
    if (cache.results.free_blocks() != 2 || cache.results.free_bytes() < 3 * block)
      f.add(who + "expected blocks of 256 and 512 KiB waiting, found " + std::to_string(cache.results.free_blocks()) + " blocks, " +
            std::to_string(cache.results.free_bytes()) + " bytes");
    if (cache.arena.capacity() == 0) f.add(who + "the staging arena was never used");
    if (m.cached_bytes() != cache.results.free_bytes() + cache.arena.capacity()) f.add(who + "cached_bytes() is not pool + arena");

    m.release_cached_memory();
    if (m.cached_bytes() != 0 || cache.results.free_blocks() != 0 || cache.arena.capacity() != 0)
      f.add(who + "release_cached_memory left " + std::to_string(m.cached_bytes()) + " bytes");
    f.add(st::check_against_reference(sc::redistribute<Staged>(sc::redistribute<To>(x)), g));  // allocates again

    // Room for one block: two released results leave one waiting.
    m.release_cached_memory();
    m.set_result_pool_limit(block + block / 2);
    {
      auto y1 = sc::redistribute<To>(x);
      auto y2 = sc::redistribute<To>(x);
      f.add(st::check_against_reference(y1, g));
      f.add(st::check_against_reference(y2, g));
    }
    if (cache.results.free_blocks() != 1) f.add(who + "a limit of 1.5 blocks keeps " + std::to_string(cache.results.free_blocks()) + " blocks");
    // Lowering the limit frees what no longer fits; 0 turns recycling off.
    m.set_result_pool_limit(0);
    if (cache.results.free_blocks() != 0 || m.result_pool_limit() != 0) f.add(who + "a limit of 0 kept waiting blocks");
    f.add(st::check_against_reference(sc::redistribute<To>(x), g));
    if (cache.results.free_blocks() != 0) f.add(who + "with a limit of 0 a released result was kept");
    f.add(st::check_against_reference(x, g));  // the input was never modified
  });
  f.report();
}

// A static redistribute whose chosen plan is one collective runs it directly (one
// allocation, one call) when the geometry allows: nothing staged (no unpacking, no padded
// chunks), a result neither empty nor in reach of the result pool. Every other case takes the general path. Each
// case checks the result against the reference, which way it ran (the geometry's `direct`),
// and the same conversion through redistribute_into.
namespace {
template <class From, class To, class T, class Mesh>
void check_single_path(const Mesh& m, std::array<std::int64_t, 2> e, bool want_direct, const std::string& what, failures& f) {
  const std::string who = "rank " + std::to_string(m.comm().rank()) + ", " + what + ": ";
  const auto g = st::make_global<T>(e[0] * e[1]);
  auto x = sc::distribute<From>(m, g, e);
  const std::vector<T> before(x.data(), x.data() + x.local_size());
  f.add(m.comm().rank(), check_static<To>(x, g, what.c_str()));
  const int direct = m.cache().geometry.recent().direct;
  if ((direct >= 0) != want_direct) f.add(who + "direct is " + std::to_string(direct));
  auto z = sc::empty<To, T>(m, e);
  sc::redistribute_into(x, z);
  const std::string err_into = st::check_against_reference(z, g);
  if (!err_into.empty()) f.add(who + "redistribute_into: " + err_into);
  if (!std::equal(before.begin(), before.end(), x.data())) f.add(who + "the input changed");
}
}  // namespace

TEST_CASE("a static single-collective redistribute runs directly only where its geometry allows") {
  failures f;
  using S0R = sc::layout<sc::shard<0>, sc::replicate>;
  using RR = sc::layout<sc::replicate, sc::replicate>;
  using RS1 = sc::layout<sc::replicate, sc::shard<1>>;
  using PR = sc::layout<sc::partial<>, sc::replicate>;
  using PP = sc::layout<sc::partial<>, sc::partial<>>;
  using PmaxP = sc::layout<sc::partial<sc::max>, sc::partial<sc::max>>;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    constexpr std::int64_t direct_limit = sc::detail::result_pool::min_bytes / sc::detail::plan_geometry::direct_elem_bytes;
    static_assert(direct_limit == 16384);
    check_single_path<S0R, RR, float>(m, {8, 8}, true, "all_gather 8x8", f);
    check_single_path<S0R, RR, std::int64_t>(m, {7, 5}, false, "all_gather 7x5 (uneven: padded chunks are staged)", f);
    check_single_path<S0R, RR, float>(m, {0, 8}, false, "all_gather 0x8 (empty result)", f);
    check_single_path<S0R, RR, double>(m, {128, 127}, true, "all_gather 128x127 (just under the direct limit)", f);
    check_single_path<S0R, RR, double>(m, {128, 128}, false, "all_gather 128x128 (at the direct limit)", f);
    check_single_path<S0R, RR, float>(m, {256, 256}, false, "all_gather 256x256 (a pooled result)", f);
    check_single_path<RS1, RR, float>(m, {8, 8}, false, "all_gather along dim 1 (staged)", f);
    check_single_path<PR, S0R, float>(m, {8, 8}, true, "reduce_scatter 8x8", f);
    check_single_path<PR, S0R, std::int32_t>(m, {7, 3}, false, "reduce_scatter 7x3 (uneven: padded chunks are staged)", f);
    check_single_path<PP, RR, double>(m, {5, 3}, true, "all_reduce 5x3", f);
    check_single_path<PmaxP, RR, float>(m, {4, 4}, true, "all_reduce max", f);
  });
  f.report();
}
