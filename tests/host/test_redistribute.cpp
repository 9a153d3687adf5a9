// End-to-end differential tests of distribute/redistribute on the host backend against a
// single-rank reference, over all layout pairs on meshes of 1-8 ranks and 1-3 axes, and
// rank-4 pairs on a 4-axis mesh whose copies differ from their buffers in every dim.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <mutex>
#include <shardcast/shardcast.hpp>
#include <span>
#include <string>
#include <vector>

#include "common/differential.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
using st::all_reduce_ops;

template <class T, int N, std::size_t R>
void sweep(const std::array<int, N>& shape, const std::vector<std::array<std::int64_t, R>>& extents, std::size_t stride,
           std::vector<std::string>& failures, std::size_t& cases) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  std::mutex mu;
  std::size_t count = 0;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    std::size_t k = 0, mine = 0;
    for (std::size_t oi = 0; oi < std::size(all_reduce_ops); ++oi) {
      const auto layouts = st::all_layouts(N, static_cast<int>(R), all_reduce_ops[oi]);
      for (std::size_t i = 0; i < layouts.size(); ++i)
        for (std::size_t j = 0; j < layouts.size(); ++j) {
          // Each op covers a different slice of the pairs; together every pair is covered
          // (stride 1) or a deterministic sample of them.
          if (k++ % (stride * std::size(all_reduce_ops)) != oi * stride % (stride * std::size(all_reduce_ops)) && stride > 1) continue;
          if (stride == 1 && (i * layouts.size() + j) % std::size(all_reduce_ops) != oi && N > 1) continue;
          for (const auto& e : extents) {
            std::string err = st::differential_case<T>(m, layouts[i], layouts[j], e);
            ++mine;
            if (!err.empty()) {
              std::lock_guard lk(mu);
              if (failures.size() < 20) failures.push_back("rank " + std::to_string(c.rank()) + ": " + err);
            }
          }
        }
    }
    if (c.rank() == 0) count = mine;
  });
  cases += count;
}
}  // namespace

TEST_CASE_TEMPLATE("every layout pair on 1-axis meshes matches the reference", T, float, double, std::int32_t, std::int64_t) {
  std::vector<std::string> failures;
  std::size_t cases = 0;
  for (int n : {1, 2, 3, 5, 8}) {
    sweep<T, 1, 1>({n}, {{{7}}, {{2}}, {{0}}, {{16}}}, 1, failures, cases);
    sweep<T, 1, 2>({n}, {{{5, 3}}, {{2, 7}}, {{0, 4}}}, 1, failures, cases);
  }
  for (auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  CHECK(cases > 0);
  MESSAGE(cases << " cases");
}

TEST_CASE_TEMPLATE("every layout pair on 2-axis meshes matches the reference", T, float, std::int64_t) {
  std::vector<std::string> failures;
  std::size_t cases = 0;
  for (auto shape : {std::array<int, 2>{2, 2}, std::array<int, 2>{2, 3}, std::array<int, 2>{3, 1}, std::array<int, 2>{4, 2}}) {
    sweep<T, 2, 2>(shape, {{{5, 6}}, {{3, 1}}, {{0, 3}}}, 1, failures, cases);
  }
  sweep<T, 2, 3>({2, 2}, {{{3, 4, 5}}}, 1, failures, cases);
  sweep<T, 2, 1>({3, 2}, {{{11}}, {{4}}}, 1, failures, cases);
  for (auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  CHECK(cases > 0);
  MESSAGE(cases << " cases");
}

// Under ThreadSanitizer (scripts/sanitize.sh) the sample is 4 times thinner: that run looks
// for races, which the other cases reach too, and this sample took 54 s there (2 s natively).
#ifdef __SANITIZE_THREAD__
constexpr std::size_t thin = 4;
#else
constexpr std::size_t thin = 1;
#endif

TEST_CASE("layout pairs on 3-axis meshes match the reference (deterministic sample)") {
  std::vector<std::string> failures;
  std::size_t cases = 0;
  sweep<std::int32_t, 3, 2>({2, 2, 2}, {{{6, 5}}, {{1, 3}}}, 3 * thin, failures, cases);
  sweep<float, 3, 3>({2, 1, 3}, {{{4, 3, 5}}}, 11 * thin, failures, cases);
  sweep<double, 3, 3>({2, 2, 2}, {{{2, 5, 3}}}, 17 * thin, failures, cases);
  for (auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  CHECK(cases > 0);
  MESSAGE(cases << " cases");
}

namespace {
/// Integer means over several partial<avg> axes (st::integer_mean_case): every source with
/// two or more partial<avg> axes to every layout without a partial axis, with terms whose
/// sums are not multiples of the group size. The value is trunc(sum / group size), once; a
/// plan that reduces the axes in two steps must not take the mean of truncated means.
/// Returns the number of cases; `nested_differs` counts the elements where a mean of
/// per-axis means would differ.
template <class T, int N>
std::size_t integer_means(const std::array<int, N>& shape, const std::array<std::int64_t, 2>& e, std::vector<std::string>& failures,
                          std::size_t& nested_differs) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  std::vector<sc::runtime_layout> sources, targets;
  st::integer_mean_layouts(N, sources, targets);
  for (const auto& src : sources) (void)st::integer_mean_reference<T, N>(shape, src, e[0] * e[1], &nested_differs);
  std::mutex mu;
  std::size_t cases = 0;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    const std::size_t n = st::integer_mean_sweep<T>(m, e, [&](const std::string& err) {
      std::lock_guard lk(mu);
      if (failures.size() < 20) failures.push_back("rank " + std::to_string(c.rank()) + ": " + err);
    });
    if (c.rank() == 0) cases = n;
  });
  return cases;
}
}  // namespace

TEST_CASE_TEMPLATE("integer means over several partial<avg> axes truncate once, whatever the plan", T, std::int32_t, std::int64_t) {
  std::vector<std::string> failures;
  std::size_t cases = 0, nested_differs = 0;
  cases += integer_means<T, 2>({2, 2}, {6, 7}, failures, nested_differs);
  cases += integer_means<T, 2>({2, 3}, {5, 8}, failures, nested_differs);
  cases += integer_means<T, 3>({2, 1, 2}, {7, 3}, failures, nested_differs);
  cases += integer_means<T, 3>({2, 2, 2}, {9, 1}, failures, nested_differs);  // uneven pieces
  for (auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  CHECK(cases > 0);
  CHECK(nested_differs > 0);
  MESSAGE(cases << " cases; a mean of per-axis means would differ in " << nested_differs << " elements");
}

// Steps whose local copies differ from a buffer in all four dims of a rank-4 piece: the
// copy keeps the innermost dim as its contiguous run and needs three outer loops (slicing
// R on every axis, gathering those pieces back, all-to-alls between them). None of the
// 2,000 cases of fuzz_redistribute_wide makes such a copy.
TEST_CASE("rank-4 tensors whose copies differ from their buffers in every dim match the reference") {
  const char* pairs[][2] = {{"R,R,R,R", "S(0),S(1),S(2),S(3)"},
                            {"S(0),S(1),S(2),S(3)", "R,R,R,R"},
                            {"S(3),S(2),S(1),S(0)", "S(0),S(1),S(2),S(3)"},
                            {"S(0),S(1),S(2),S(3)", "S(1),S(0),S(3),S(2)"},
                            {"P(sum),R,R,R", "S(0),S(1),S(2),S(3)"}};
  std::vector<std::string> failures;
  std::mutex mu;
  sc::host::run(16, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 4>{2, 2, 2, 2});
    for (const auto& p : pairs)
      for (const auto& e : {std::array<std::int64_t, 4>{5, 6, 3, 7}, std::array<std::int64_t, 4>{4, 4, 4, 4}}) {
        const auto from = sc::runtime_layout::parse(p[0]), to = sc::runtime_layout::parse(p[1]);
        std::string err = st::differential_case<std::int32_t>(m, from, to, e, {}, 2);
        const std::string into = st::differential_into_case<double>(m, from, to, e);
        if (err.empty()) err = into;
        if (!err.empty()) {
          std::lock_guard lk(mu);
          failures.push_back("rank " + std::to_string(c.rank()) + ": " + err);
        }
      }
  });
  for (auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

namespace {
template <class From, class To, class T, int N, std::size_t R>
void static_case(const std::array<int, N>& shape, const std::array<std::int64_t, R>& ext, std::vector<std::string>& failures) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  std::mutex mu;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    std::int64_t n = 1;
    for (auto v : ext) n *= v;
    const auto g = st::make_global<T>(n);
    auto x = sc::distribute<From>(m, g, ext);
    st::spread_partial_terms(x, g);  // partial terms that only the right reduce op adds up to g
    auto y = sc::redistribute<To>(x);
    static_assert(std::same_as<typename decltype(y)::layout_type, To>);
    std::string err = st::check_against_reference(y, g);
    // to_global reduces partials and gathers shards.
    if (err.empty() && sc::to_global(y) != g) err = "to_global differs from the global tensor";
    if (!err.empty()) {
      std::lock_guard lk(mu);
      failures.push_back(sc::to_string(From::desc) + " -> " + sc::to_string(To::desc) + ": " + err);
    }
  });
}
}  // namespace

TEST_CASE("static redistribute (compile-time plans) matches the reference") {
  using namespace sc;
  std::vector<std::string> f;
  static_case<layout<shard<0>, shard<1>>, layout<replicate, replicate>, float, 2, 2>({2, 2}, {5, 7}, f);
  static_case<layout<shard<0>, shard<1>>, layout<shard<1>, shard<0>>, std::int32_t, 2, 2>({2, 3}, {7, 5}, f);
  static_case<layout<shard<0>, shard<0>>, layout<replicate, shard<0>>, double, 2, 2>({2, 2}, {9, 2}, f);
  static_case<layout<partial<>, shard<0>>, layout<shard<0>, replicate>, std::int64_t, 2, 2>({2, 2}, {6, 3}, f);
  static_case<layout<partial<max>, partial<max>>, layout<shard<1>, shard<0>>, float, 2, 2>({2, 2}, {3, 5}, f);
  static_case<layout<replicate, shard<1>>, layout<partial<avg>, replicate>, double, 2, 2>({3, 2}, {4, 4}, f);
  static_case<layout<shard<2>, replicate, partial<prod>>, layout<replicate, shard<0>, shard<2>>, std::int32_t, 3, 3>({2, 2, 2}, {3, 4, 5}, f);
  static_case<layout<shard<0>>, layout<shard<0>>, float, 1, 1>({4}, {3}, f);
  static_case<layout<partial<min>>, layout<shard<0>>, float, 1, 1>({5}, {3}, f);  // empty shards
  for (auto& s : f) FAIL_CHECK(s);
  CHECK(f.empty());
}

TEST_CASE("explain<To>(x) and explain(x, to) describe the plan redistribute runs, for x's element type") {
  using namespace sc;
  using From = layout<partial<avg>, partial<avg>>;
  using To = layout<shard<0>, replicate>;
  const std::array<int, 2> shape{2, 3};
  const std::array<std::int64_t, 2> ext{6, 5};
  std::string stat, dyn_int, dyn_float;
  plan chosen;
  host::run(6, [&](host::communicator& c) {
    auto m = make_mesh(c, shape);
    auto x = distribute<From>(m, st::make_global<int>(30), ext);
    auto xd = distribute(m, From::desc, st::make_global<int>(30), ext);
    auto xf = distribute(m, From::desc, st::make_global<float>(30), ext);
    if (c.rank() == 0) {  // not collective: rank 0 alone asks
      stat = sc::explain<To>(x);
      chosen = plan_for<To>(x);
      dyn_int = sc::explain(xd, To::desc);
      dyn_float = sc::explain(xf, To::desc);
    }
  });
  // The dynamic forms: the run-time plan for the mesh and extents, described for the type.
  const plan p = make_plan(From::desc, To::desc, shape, ext);
  CHECK(dyn_int == sc::explain<int>(p, shape, ext));
  CHECK(dyn_float == sc::explain(p, shape, ext, sizeof(float)));
  CHECK(dyn_int != dyn_float);  // two reductions with avg: integers sum, then divide once
  // The static form: the chosen plan, its steps and bytes, with integer means as they run.
  CHECK(stat.rfind("plan P(avg),P(avg) -> S(0),R: " + std::to_string(chosen.nsteps) + " step(s)", 0) == 0);
  CHECK(stat.find(std::to_string(chosen.nsteps) + ". ") != std::string::npos);
  CHECK(stat.find(std::to_string(chosen.nsteps + 1) + ". ") == std::string::npos);
  CHECK(stat.find("(avg: divides by 6)") != std::string::npos);
  CHECK(stat.find("total: " + std::to_string(static_cast<long long>(chosen.elements * sizeof(int) + 0.5)) + " bytes") != std::string::npos);
}

TEST_CASE("redistribute to the same layout is free and shares storage; local() views the piece") {
  sc::host::run(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const auto g = st::make_global<int>(4 * 6);
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{4, 6});
    auto y = sc::redistribute<sc::layout<sc::shard<0>, sc::shard<1>>>(x);
    REQUIRE(y.data() == x.data());
    auto v = x.local();
    REQUIRE(v.extent(0) == 2);
    REQUIRE(v.extent(1) == 3);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) REQUIRE(v(i, j) == g[static_cast<std::size_t>((m.coord(0) * 2 + i) * 6 + m.coord(1) * 3 + j)]);
  });
}

TEST_CASE("a view over caller memory redistributes without copying the input") {
  sc::host::run(2, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    std::vector<float> mine = {float(c.rank() * 2), float(c.rank() * 2 + 1)};  // rows of a 4x1 tensor
    auto v = sc::make_view<sc::layout<sc::shard<0>>>(m, mine.data(), std::array<std::int64_t, 2>{4, 1});
    REQUIRE(!v.owns());
    auto r = sc::redistribute<sc::layout<sc::replicate>>(v);
    for (int i = 0; i < 4; ++i) REQUIRE(r.data()[i] == float(i));
    REQUIRE(mine[0] == float(c.rank() * 2));
  });
}

// make_mesh compares the shapes of all ranks (one small all_reduce): ranks that passed
// different shapes with the same product once built meshes whose axis groups did not
// match, and to_global then returned garbage on some ranks with no error anywhere.
TEST_CASE("make_mesh throws on every rank when the ranks pass different shapes, or one rank a bad shape") {
  std::atomic<int> differ{0}, rejected{0}, own{0}, overflow{0};
  sc::host::run(4, [&](sc::host::communicator& c) {
    try {
      (void)sc::make_mesh(c, c.rank() == 0 ? std::array<int, 2>{4, 1} : std::array<int, 2>{1, 4});
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("the ranks passed different mesh shapes: axis 0 is 1 on some ranks and 4 on others") != std::string::npos)
        ++differ;
    }
    try {  // rank 2 alone passes a shape of the wrong size: it names it, the others name rank 2
      (void)sc::make_mesh(c, c.rank() == 2 ? std::array<int, 2>{3, 2} : std::array<int, 2>{2, 2});
    } catch (const sc::layout_error& e) {
      const std::string w = e.what();
      if (c.rank() == 2 && w.find("has 6 ranks but the communicator has 4") != std::string::npos) ++own;
      if (c.rank() != 2 && w.find("rank 2 rejected its mesh shape") != std::string::npos) ++rejected;
    }
    try {  // a product beyond any communicator (it once wrapped: 2^64 + 1 ranks passed as 1)
      (void)sc::make_mesh(c, std::array<int, 6>{3, 11, 131, 2731, 409891, 7623851});
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("has more than 2^31 - 1 ranks") != std::string::npos) ++overflow;
    }
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});  // the communicator still works
    const std::vector<int> g = {0, 1, 2, 3, 4, 5, 6, 7};
    CHECK(sc::to_global(sc::distribute(m, sc::runtime_layout::parse("S(0),R"), g, std::array<std::int64_t, 1>{8})) == g);
  });
  CHECK(differ == 4);
  CHECK(own == 1);
  CHECK(rejected == 3);
  CHECK(overflow == 4);
}

TEST_CASE("runtime misuse throws layout_error naming the problem") {
  sc::host::run(4, [](sc::host::communicator& c) {
    CHECK_THROWS_WITH_AS(sc::make_mesh(c, std::array<int, 2>{3, 2}), doctest::Contains("has 6 ranks but the communicator has 4"), sc::layout_error);
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    std::vector<float> g(10);
    using L = sc::layout<sc::shard<0>, sc::replicate>;
    CHECK_THROWS_WITH_AS(sc::distribute<L>(m, g, std::array<std::int64_t, 2>{3, 4}),
                         doctest::Contains("has 10 elements but the extents describe 12"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::distribute(m, sc::runtime_layout::parse("S(0)"), g, std::array<std::int64_t, 1>{10}),
                         doctest::Contains("has 1 placements but the mesh has 2 axes"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::distribute(m, sc::runtime_layout::parse("S(1),R"), g, std::array<std::int64_t, 1>{10}),
                         doctest::Contains("tensor has rank 1"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::distribute(m, sc::runtime_layout::parse("R,R"), g, std::array<std::int64_t, 1>{-10}),
                         doctest::Contains("negative"), sc::layout_error);
    // A layout that does not fit names the call it was passed to.
    CHECK_THROWS_WITH_AS(sc::distribute(m, sc::runtime_layout::parse("S(1),R"), g, std::array<std::int64_t, 1>{10}),
                         doctest::Contains("shardcast::distribute: layout \"S(1),R\" places S(1)"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::empty<float>(m, sc::runtime_layout::parse("R"), std::array<std::int64_t, 1>{10}),
                         doctest::Contains("shardcast::empty: layout \"R\" has 1 placements"), sc::layout_error);
    auto x = sc::distribute(m, sc::runtime_layout::parse("S(0),R"), std::span<float>(g), std::array<std::int64_t, 1>{10});  // a span of non-const
    CHECK_THROWS_WITH_AS(sc::redistribute(x, sc::runtime_layout::parse("S(1),R")), doctest::Contains("shardcast::redistribute: layout"),
                         sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::plan_for(x, sc::runtime_layout::parse("S(1),R")), doctest::Contains("shardcast::plan_for: layout"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::explain(x, sc::runtime_layout::parse("S(1),R")), doctest::Contains("shardcast::explain: layout"), sc::layout_error);
    // A target with mixed partial ops names the call and the layout (not the planner).
    CHECK_THROWS_WITH_AS(sc::redistribute(x, sc::runtime_layout::parse("P(sum),P(max)")),
                         doctest::Contains("shardcast::redistribute: layout \"P(sum),P(max)\" mixes partial reduce ops"), sc::layout_error);
    CHECK_THROWS_WITH_AS(sc::plan_for(x, sc::runtime_layout::parse("P(max),P(sum)")),
                         doctest::Contains("shardcast::plan_for: layout \"P(max),P(sum)\" mixes partial reduce ops"), sc::layout_error);
    CHECK(sc::to_global(x) == g);
  });
}
