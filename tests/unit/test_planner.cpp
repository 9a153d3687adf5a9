// Planner: the single-axis transition table exactly, and properties of every plan over
// all layout pairs on 2- and 3-axis meshes.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <shardcast/plan.hpp>
#include <vector>

#include "common/differential.hpp"

namespace sc = shardcast;
using sc::step_kind;

namespace {
std::vector<step_kind> kinds(const sc::plan& p) {
  std::vector<step_kind> k;
  for (int i = 0; i < p.nsteps; ++i) k.push_back(p[i].kind);
  return k;
}
}  // namespace

TEST_CASE("single-axis plans follow the transition table, with the expected bytes") {
  // Mesh of 4, tensor 8x12 (96 elements): a shard holds 24 elements.
  const std::array<int, 1> shape{4};
  const std::array<std::int64_t, 2> ext{8, 12};
  auto P = [](const char* s) { return sc::runtime_layout::parse(s); };
  struct row {
    const char* from;
    const char* to;
    std::vector<step_kind> k;
    double elements;
  };
  const std::vector<row> table = {
      {"R", "R", {}, 0},
      {"R", "S(0)", {step_kind::slice}, 0},
      {"R", "S(1)", {step_kind::slice}, 0},
      {"R", "P(sum)", {step_kind::identity}, 0},
      {"S(0)", "R", {step_kind::all_gather}, 3 * 24},
      {"S(1)", "R", {step_kind::all_gather}, 3 * 24},
      {"S(0)", "S(1)", {step_kind::all_to_all}, 0.75 * 24},
      {"S(1)", "S(0)", {step_kind::all_to_all}, 0.75 * 24},
      {"S(0)", "P(max)", {step_kind::pad}, 0},
      {"P(sum)", "R", {step_kind::all_reduce}, 1.5 * 96},
      {"P(min)", "S(0)", {step_kind::reduce_scatter}, 3 * 24},
      {"P(prod)", "S(1)", {step_kind::reduce_scatter}, 3 * 24},
      {"P(sum)", "P(sum)", {}, 0},
      // Reduce-scatter the sums (3 peers x 24), then pad each shard with max's identity
      // (-inf): cheaper than all_reduce (2 x 3/4 x 96) followed by a local identity.
      {"P(sum)", "P(max)", {step_kind::reduce_scatter, step_kind::pad}, 3 * 24},
      {"P(avg)", "R", {step_kind::all_reduce}, 1.5 * 96},
  };
  for (const auto& r : table) {
    const std::string from = r.from, to = r.to;
    CAPTURE(from);
    CAPTURE(to);
    const sc::plan p = sc::make_plan(P(r.from), P(r.to), shape, ext);
    CHECK(kinds(p) == r.k);
    CHECK(p.elements == doctest::Approx(r.elements));
  }
}

TEST_CASE("multi-axis steps of one kind merge into one collective over the flattened axes") {
  const std::array<int, 2> shape{2, 3};
  const std::array<std::int64_t, 2> ext{12, 12};
  auto plan = [&](const char* a, const char* b) { return sc::make_plan(sc::runtime_layout::parse(a), sc::runtime_layout::parse(b), shape, ext); };
  auto p1 = plan("S(0),S(1)", "R,R");
  REQUIRE(p1.nsteps == 1);
  CHECK(p1[0].kind == step_kind::all_gather);
  CHECK(p1[0].axes == 3u);
  CHECK(p1.elements == doctest::Approx(5 * 24));  // 5 peers, 24-element blocks
  auto p2 = plan("P(sum),P(sum)", "R,R");
  REQUIRE(p2.nsteps == 1);
  CHECK((p2[0].kind == step_kind::all_reduce && p2[0].axes == 3u));
  CHECK(p2.elements == doctest::Approx(2.0 * 5 / 6 * 144));  // 2(n-1)/n of the 144 elements, n = 6
  auto p3 = plan("S(0),S(1)", "S(1),S(0)");
  REQUIRE(p3.nsteps == 1);
  CHECK((p3[0].kind == step_kind::all_to_all && p3[0].axes == 3u));
  // The busiest rank, (1,0), holds rows 6..11 x cols 0..3 and needs rows 0..3 x cols 6..11:
  // it keeps nothing of its 24 elements.
  CHECK(p3.elements == doctest::Approx(24));
  auto p4 = plan("P(sum),P(sum)", "S(0),S(0)");
  REQUIRE(p4.nsteps == 1);
  CHECK((p4[0].kind == step_kind::reduce_scatter && p4[0].axes == 3u));
  CHECK(p4.elements == doctest::Approx(5 * 24));  // 5 peers' 24-element chunks
  // Nesting: axis 1 is inner on dim 0, so no step may move axis 0 alone while axis 1
  // still shards the dim axis 0 shards (before or after the step).
  auto p5 = plan("S(0),S(0)", "R,S(0)");
  REQUIRE(p5.nsteps > 0);  // (every step of every plan is checked the same way below, in check_all_pairs)
  for (int i = 0; i < p5.nsteps; ++i) {
    const auto& st = p5[i];
    if (st.axes != 1u || st.kind == step_kind::all_reduce || st.kind == step_kind::identity) continue;
    const int d1 = st.from[1].is_shard() ? st.from[1].dim : -1;
    CHECK(!(d1 >= 0 && (st.from[0].is_shard(d1) || st.to[0].is_shard(d1))));
  }
}

namespace {
// An upper bound from the planner itself (a consistency check, not an independent
// reference): gather/reduce everything to R on every axis, then go to the target locally.
double via_replicate_cost(const sc::runtime_layout& src, const sc::runtime_layout& dst, const int* shape, const std::int64_t* ext, int rank) {
  sc::runtime_layout r;
  r.naxes = src.naxes;
  const sc::plan up = sc::make_plan(src, r, shape, ext, rank);
  const sc::plan down = sc::make_plan(r, dst, shape, ext, rank);
  CHECK(down.elements == 0);  // from R everything is local
  return up.elements + down.elements;
}

void check_all_pairs(int naxes, const int* shape, const std::int64_t* ext, int rank, std::size_t& n) {
  for (auto op : {sc::reduce_op::sum, sc::reduce_op::max}) {
    const auto ls = sc::testing::all_layouts(naxes, rank, op);
    for (const auto& a : ls)
      for (const auto& b : ls) {
        const sc::plan p = sc::make_plan(a, b, shape, ext, rank);
        ++n;
        // The steps chain from a to b, each changing the axes it names and no other; an
        // all_to_all may also name an axis that stays S(d), but only when an earlier axis of
        // the step leaves or joins dim d (so that axis' interval is split anew).
        sc::runtime_layout cur = a;
        for (int i = 0; i < p.nsteps; ++i) {
          REQUIRE(p[i].from == cur);
          for (int ax = 0; ax < naxes; ++ax) {
            const bool named = (p[i].axes >> ax & 1u) != 0, changed = !(p[i].from[ax] == p[i].to[ax]);
            if (!named) REQUIRE(!changed);
            if (named && !changed) {
              REQUIRE(p[i].kind == step_kind::all_to_all);
              REQUIRE(p[i].from[ax].is_shard());
              const int d = p[i].from[ax].dim;
              bool split_anew = false;
              for (int b = 0; b < ax; ++b)
                split_anew = split_anew || ((p[i].axes >> b & 1u) && p[i].from[b].is_shard(d) != p[i].to[b].is_shard(d));
              REQUIRE(split_anew);
            }
          }
          cur = p[i].to;
        }
        REQUIRE(cur == b);
        if (a == b) REQUIRE(p.nsteps == 0);
        REQUIRE(p.elements <= via_replicate_cost(a, b, shape, ext, rank) + 1e-9);
        // Never two collectives of the same kind on the same axes back to back.
        for (int i = 1; i < p.nsteps; ++i)
          REQUIRE(!(sc::is_collective(p[i].kind) && p[i].kind == p[i - 1].kind && p[i].axes == p[i - 1].axes));
        // Nesting (axes sharding one dim nest in increasing axis order): a step that moves data
        // along an axis (all but all_reduce and identity) only gathers, scatters, slices, pads
        // or all-to-alls an axis that is innermost, among the axes the step leaves alone, for
        // the dims it shards before or after the step.
        for (int i = 0; i < p.nsteps; ++i) {
          const auto& st = p[i];
          if (st.kind == step_kind::all_reduce || st.kind == step_kind::identity) continue;
          for (int ax = 0; ax < naxes; ++ax) {
            if (!(st.axes >> ax & 1u)) continue;
            for (const auto& pl : {st.from[ax], st.to[ax]}) {
              if (!pl.is_shard()) continue;
              for (int later = ax + 1; later < naxes; ++later)
                if (!(st.axes >> later & 1u)) REQUIRE(!st.from[later].is_shard(pl.dim));
            }
          }
        }
      }
  }
}
}  // namespace

TEST_CASE("a reordering of nested shards is one all_to_all over both axes on up to 4 axes (docs/01)") {
  // 64x64 floats on 4x4. S(0),S(0): rank (c0, c1) holds rows 16 c0 + 4 c1 .. +4, all 64
  // columns; S(1),S(0): rows 16 c1 .. +16, columns 16 c0 .. +16. Rank (1, 0) keeps none of
  // its 4 x 64 elements: 1024 bytes, the busiest rank's.
  const auto p = sc::make_plan(sc::runtime_layout::parse("S(0),S(0)"), sc::runtime_layout::parse("S(1),S(0)"), std::array<int, 2>{4, 4},
                               std::array<std::int64_t, 2>{64, 64});
  REQUIRE(p.nsteps == 1);
  CHECK(p[0].kind == step_kind::all_to_all);
  CHECK(p[0].axes == 3u);
  CHECK(p.elements * 4 == doctest::Approx(1024));
  // R,S(0) -> S(0),S(0): a local slice to S(1),S(0), then that all_to_all back.
  const auto q = sc::make_plan(sc::runtime_layout::parse("R,S(0)"), sc::runtime_layout::parse("S(0),S(0)"), std::array<int, 2>{4, 4},
                               std::array<std::int64_t, 2>{64, 64});
  CHECK(q.collectives == 1);
  CHECK(q.elements * 4 == doctest::Approx(1024));
  // The same reordering on 5 axes keeps the nesting rule as it was: two all_to_alls.
  const auto r = sc::make_plan(sc::runtime_layout::parse("S(0),S(0),R,R,R"), sc::runtime_layout::parse("S(1),S(0),R,R,R"),
                               std::array<int, 5>{4, 4, 1, 1, 1}, std::array<std::int64_t, 2>{64, 64});
  CHECK(r.collectives == 2);
  CHECK(r.elements * 4 == doctest::Approx(1728));
}

TEST_CASE("every layout pair on 2- and 3-axis meshes has a consistent, no-worse-than-naive plan") {
  std::size_t n = 0;
  const int s2[2] = {2, 3};
  const std::int64_t e2[2] = {12, 7};
  check_all_pairs(2, s2, e2, 2, n);
  const int s3[3] = {2, 2, 3};
  const std::int64_t e3[3] = {6, 5, 4};
  check_all_pairs(3, s3, e3, 2, n);
  MESSAGE(n << " plans checked");
}

// Compile-time plans: a static plan is a constant expression.
using L1 = sc::layout<sc::partial<>, sc::shard<0>>;
using L2 = sc::layout<sc::shard<0>, sc::replicate>;
static_assert(sc::static_plan<L1, L2, 2>.nsteps == 3);
static_assert(sc::static_plan<L1, L1, 2>.nsteps == 0);
static_assert(sc::static_plan<sc::layout<sc::shard<0>, sc::shard<1>>, sc::layout<sc::replicate, sc::replicate>, 2>.collectives == 1);

TEST_CASE("explain names every step, its axes and bytes") {
  const std::array<int, 2> shape{2, 2};
  const std::array<std::int64_t, 2> ext{4, 4};
  // Blocks of 2x2 floats gathered over both axes at once: 3 peers x 4 floats x 4 bytes.
  const auto p = sc::make_plan(sc::runtime_layout::parse("S(0),S(1)"), sc::runtime_layout::parse("R,R"), shape, ext);
  const std::string s = sc::explain(p, shape, ext, 4);
  CHECK(s.find("1 step(s), 1 collective(s)") != std::string::npos);
  CHECK(s.find("all_gather over axes {0,1}: S(0),S(1) -> R,R, 48 bytes/rank") != std::string::npos);
  CHECK(s.find("total: 48 bytes") != std::string::npos);

  // docs/01_layouts.md's example. P(sum),S(0) holds 2 rows x 4 columns (8 floats) per rank.
  // Three collectives of 4 floats each are enough, e.g. reduce-scattering the columns
  // along axis 0 (the other rank's 2x2), gathering the rows along axis 1 (4 floats), and
  // turning the column shard into a row shard along axis 0 (the 2x2 that leaves): 12
  // floats, 48 bytes, where the obvious route (all_gather along axis 1, then
  // reduce_scatter along axis 0) sends 64. Several routes cost that; each line of the
  // description names its step, and each step sends 16 bytes.
  const auto q = sc::make_plan(sc::runtime_layout::parse("P(sum),S(0)"), sc::runtime_layout::parse("S(0),R"), shape, ext);
  const std::string t = sc::explain(q, shape, ext, 4);
  REQUIRE(q.nsteps == 3);
  CHECK(q.collectives == 3);
  // The steps form one route from the source to the target.
  CHECK(q[0].from == sc::runtime_layout::parse("P(sum),S(0)"));
  CHECK(q[1].from == q[0].to);
  CHECK(q[2].from == q[1].to);
  CHECK(q[2].to == sc::runtime_layout::parse("S(0),R"));
  for (int i = 0; i < q.nsteps; ++i) {
    std::string axes;
    for (int a = 0; a < 2; ++a)
      if (q[i].axes >> a & 1u) axes += (axes.empty() ? "" : ",") + std::to_string(a);
    std::string kind = sc::to_string(q[i].kind);
    if (q[i].kind == sc::step_kind::reduce_scatter || q[i].kind == sc::step_kind::all_reduce) kind += "(sum)";
    const std::string line = std::to_string(i + 1) + ". " + kind + " over axes {" + axes + "}: " + sc::to_string(q[i].from) + " -> " +
                             sc::to_string(q[i].to) + ", 16 bytes/rank";
    CHECK_MESSAGE(t.find(line) != std::string::npos, line, " in\n", t);
  }
  CHECK(t.find("total: 48 bytes") != std::string::npos);
}

TEST_CASE("explain's total is the sum of its steps on the shape it is given, for a compile-time plan too") {
  // static_plan is made on a canonical mesh; explain prices it on this one. Gathering 2x2
  // blocks of a 4x4 float tensor on a 2x2 mesh: each rank receives 12 floats, 48 bytes.
  const std::array<int, 2> shape{2, 2};
  const std::array<std::int64_t, 2> ext{4, 4};
  const sc::plan& p = sc::static_plan<sc::layout<sc::shard<0>, sc::shard<1>>, sc::layout<sc::replicate, sc::replicate>, 2>;
  const std::string s = sc::explain(p, shape, ext, 4);
  CHECK_MESSAGE(s.find("48 bytes/rank") != std::string::npos, s);
  CHECK_MESSAGE(s.find("total: 48 bytes") != std::string::npos, s);
  // The total is a sum over steps whose busiest ranks may differ: the line says so, and does
  // not claim one rank sends it all.
  CHECK_MESSAGE(s.find("total: 48 bytes, the sum over the steps of each step's busiest rank") != std::string::npos, s);
  CHECK_MESSAGE(s.find("per rank (busiest rank)") == std::string::npos, s);
  // Every candidate of a static plan set: the total line is the sum of the step lines.
  const sc::plan_set& ps = sc::static_plans<sc::layout<sc::partial<>, sc::replicate>, sc::layout<sc::shard<0>, sc::replicate>, 2>;
  for (int c = 0; c < ps.n; ++c) {
    const std::string t = sc::explain(ps.p[c], shape, std::array<std::int64_t, 2>{6, 5}, 8);
    long long sum = 0, total = -1;
    std::size_t at = 0;
    while ((at = t.find(", ", at)) != std::string::npos) {
      at += 2;
      if (t.find(" bytes/rank", at) == t.find_first_not_of("0123456789", at)) sum += std::stoll(t.substr(at));
    }
    if (const auto k = t.find("total: "); k != std::string::npos) total = std::stoll(t.substr(k + 7));
    CHECK_MESSAGE(total == sum, t);
  }
}

TEST_CASE("make_plan refuses negative shard dims, mesh axes below size 1 and negative extents") {
  const auto f = sc::runtime_layout::parse("S(0),R"), t = sc::runtime_layout::parse("R,S(1)");
  const sc::runtime_layout neg{sc::placement_desc::make_shard(-1), sc::placement_desc::make_replicate()};
  const std::array<int, 2> shape{2, 2};
  const std::array<std::int64_t, 2> ext{4, 4};
  CHECK_THROWS_WITH_AS((void)sc::make_plan(neg, t, shape, ext), doctest::Contains("places S(-1) on mesh axis 0"), sc::layout_error);
  CHECK_THROWS_WITH_AS((void)sc::make_plan(f, neg, shape, ext), doctest::Contains("use a shard dim from 0 to 1"), sc::layout_error);
  // The pointer form, which the std::array form calls after its own check.
  CHECK_THROWS_WITH_AS((void)sc::make_plan(neg, t, shape.data(), ext.data(), 2), doctest::Contains("shard dim is negative"), sc::layout_error);
  CHECK_THROWS_WITH_AS((void)sc::make_plan(f, t, std::array<int, 2>{0, 2}, std::array<std::int64_t, 2>{8, 4}),
                       doctest::Contains("mesh axis has size below 1"), sc::layout_error);
  CHECK_THROWS_WITH_AS((void)sc::make_plan(f, t, std::array<int, 2>{2, 2}, std::array<std::int64_t, 2>{-8, 4}),
                       doctest::Contains("global extent is negative"), sc::layout_error);
}

TEST_CASE("explain<T> describes integer means as they run") {
  const std::array<int, 2> shape{2, 3};
  const std::array<std::int64_t, 2> ext{6, 5};
  // Both axes' means are finished, by two reductions: on integers the first sums, and the
  // last divides by all 6 ranks (the mean of truncated means would not be the mean).
  const auto p = sc::make_plan(sc::runtime_layout::parse("P(avg),P(avg)"), sc::runtime_layout::parse("S(0),R"), shape, ext);
  std::vector<int> avg_steps;
  for (int i = 0; i < p.nsteps; ++i)
    if ((p[i].kind == sc::step_kind::reduce_scatter || p[i].kind == sc::step_kind::all_reduce) && p[i].op == sc::reduce_op::avg)
      avg_steps.push_back(i);
  REQUIRE(avg_steps.size() == 2);
  const auto line = [&](const std::string& s, int i) {
    const std::string head = "  " + std::to_string(i + 1) + ". " + sc::to_string(p[i].kind);
    const auto at = s.find(head);
    REQUIRE(at != std::string::npos);
    return s.substr(at + head.size(), s.find('\n', at) - at - head.size());
  };
  const std::string f = sc::explain<float>(p, shape, ext), d = sc::explain(p, shape, ext, 4);
  CHECK(f == d);  // floats: the plain description
  for (int i : avg_steps) CHECK(line(f, i).rfind("(avg) over", 0) == 0);
  const std::string n = sc::explain<std::int32_t>(p, shape, ext);
  CHECK(line(n, avg_steps[0]).rfind("(avg: sums) over", 0) == 0);
  CHECK(line(n, avg_steps[1]).rfind("(avg: divides by 6) over", 0) == 0);
  CHECK(n.find("total: " + std::to_string(static_cast<long long>(p.elements * 4 + 0.5)) + " bytes") != std::string::npos);
  CHECK(sc::explain<std::int64_t>(p, shape, ext).find("total: " + std::to_string(static_cast<long long>(p.elements * 8 + 0.5)) + " bytes") !=
        std::string::npos);
  // One reduction with avg: nothing to split, integers or not.
  const auto q = sc::make_plan(sc::runtime_layout::parse("P(avg),P(avg)"), sc::runtime_layout::parse("R,R"), shape, ext);
  CHECK(sc::explain<std::int32_t>(q, shape, ext) == sc::explain<float>(q, shape, ext));
}

namespace {
/// What the busiest rank sends in an all-to-all from `f` to `t`, rank by rank: its piece
/// minus the part of it that it holds afterwards (the reference for the planner's pricing).
double a2a_reference(const sc::runtime_layout& f, const sc::runtime_layout& t, const int* shape, const std::int64_t* ext, int rank) {
  int n = 1;
  for (int a = 0; a < f.naxes; ++a) n *= shape[a];
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    int coord[SHARDCAST_MAX_AXES]{};
    sc::rank_to_coord(r, shape, f.naxes, coord);
    const sc::box bf = sc::local_box(f, shape, coord, ext, rank), bt = sc::local_box(t, shape, coord, ext, rank);
    worst = std::max(worst, static_cast<double>(bf.volume() - sc::intersect(bf, bt).volume()));
  }
  return worst;
}
}  // namespace

TEST_CASE("all-to-all pricing matches a rank-by-rank count on any mesh, with uneven and empty pieces") {
  std::mt19937 rng(20261204);
  int checked = 0, enumerated = 0;
  for (int it = 0; it < 4000; ++it) {
    const int naxes = 1 + static_cast<int>(rng() % 5), rank = 1 + static_cast<int>(rng() % 4);
    int shape[SHARDCAST_MAX_AXES]{};
    std::int64_t ext[SHARDCAST_MAX_RANK]{};
    const bool uniform = rng() % 3 == 0;  // one size on every axis: the closed form's domain
    for (int a = 0; a < naxes; ++a) shape[a] = uniform ? 3 : 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < rank; ++d) ext[d] = rng() % 4 == 0 ? static_cast<std::int64_t>(rng() % 3) : static_cast<std::int64_t>(1 + rng() % 40);
    sc::runtime_layout f, t;
    f.naxes = t.naxes = naxes;
    for (int a = 0; a < naxes; ++a) {  // all-to-all moves: shard to another shard, or keep the placement
      const int d = static_cast<int>(rng() % (rank + 1));
      f[a] = d == rank ? sc::placement_desc::make_replicate() : sc::placement_desc::make_shard(d);
      t[a] = f[a];
      if (f[a].is_shard() && rank > 1 && rng() % 2) t[a] = sc::placement_desc::make_shard((d + 1 + static_cast<int>(rng() % (rank - 1))) % rank);
    }
    int fd[SHARDCAST_MAX_AXES]{}, td[SHARDCAST_MAX_AXES]{};
    for (int a = 0; a < naxes; ++a) fd[a] = f[a].is_shard() ? f[a].dim : -1, td[a] = t[a].is_shard() ? t[a].dim : -1;
    double closed = 0;
    if (!sc::detail::all_to_all_closed_form(fd, td, naxes, shape, ext, rank, closed)) ++enumerated;
    const double want = a2a_reference(f, t, shape, ext, rank);
    CAPTURE(sc::to_string(f));
    CAPTURE(sc::to_string(t));
    REQUIRE(sc::detail::all_to_all_busiest(f, t, shape, ext, rank) == want);
    REQUIRE(sc::detail::all_to_all_enumerate(fd, td, naxes, shape, ext, rank) == want);
    REQUIRE(sc::detail::all_to_all_rank0(fd, td, naxes, shape, ext, rank) <= want);  // the search's lower bound
    ++checked;
  }
  CHECK(enumerated > 1000);  // the enumeration, not only the closed form, was exercised
  MESSAGE(checked << " all-to-alls priced as counted, " << enumerated << " of them by enumeration");
}

// The enumeration also runs during constant evaluation (static plans on meshes whose axes
// differ in size): S(0),S(1) -> S(1),S(0) on a 2x3 mesh, 5x7, uneven on both dims.
TEST_CASE("all-to-all pricing by enumeration is a constant expression") {
  constexpr int shape[2] = {2, 3};
  constexpr std::int64_t ext[2] = {5, 7};
  constexpr int fd[2] = {0, 1}, td[2] = {1, 0};
  constexpr double sent = sc::detail::all_to_all_enumerate(fd, td, 2, shape, ext, 2);
  const sc::runtime_layout f = sc::runtime_layout::parse("S(0),S(1)"), t = sc::runtime_layout::parse("S(1),S(0)");
  CHECK(sent == a2a_reference(f, t, shape, ext, 2));
}

TEST_CASE("make_plan refuses a tensor rank above SHARDCAST_MAX_RANK") {
  const auto r = sc::runtime_layout::parse("R"), s = sc::runtime_layout::parse("S(0)");
  const int shape[1] = {2};
  std::int64_t ext[SHARDCAST_MAX_RANK + 1];
  std::fill(std::begin(ext), std::end(ext), 2);
  CHECK_NOTHROW((void)sc::make_plan(r, s, shape, ext, SHARDCAST_MAX_RANK));
  CHECK_THROWS_WITH_AS((void)sc::make_plan(r, s, shape, ext, SHARDCAST_MAX_RANK + 1), doctest::Contains("SHARDCAST_MAX_RANK"), sc::layout_error);
  CHECK_THROWS_AS((void)sc::make_plan(r, s, shape, ext, -1), sc::layout_error);
}
