// A collective step whose group is a single rank (every axis of the step has size 1, as
// the second axis of a 4x1 mesh) leaves that rank's piece as it is: the executor copies it
// and calls nothing, the planner does not count it as a collective, and explain marks it.
// Checked through a counting communicator against the single-rank reference: static and
// dynamic redistribute, redistribute_into, an all_reduce given up in place, and integer
// means whose dividing (last) or summing (earlier) reduction is such a step.
// (Every static pair on 4x1 and 1x3 meshes runs in host_static_choice_test, every dynamic
// one step by step in host_plan_table_test.)
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <shardcast/comm/counting.hpp>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#include "common/differential.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

using counted = sc::counting_communicator<sc::host::communicator>;

/// What every rank saw: its collectives and its first error ("" when none).
struct per_rank {
  std::vector<long> calls;
  std::vector<std::string> errors;
  explicit per_rank(int n) : calls(static_cast<std::size_t>(n)), errors(static_cast<std::size_t>(n)) {}
  void require_clean() const {
    for (std::size_t r = 0; r < errors.size(); ++r) {
      CAPTURE(r);
      REQUIRE(errors[r].empty());
    }
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("static redistribute on a 4x1 mesh: a step over the size-1 axis calls nothing") {
  using namespace sc;
  const std::array<int, 2> shape{4, 1};
  const std::array<std::int64_t, 2> ext{10, 6};  // 10 rows over 4 ranks: pieces of 3, 3, 2, 2
  const auto g = st::make_global<float>(ext[0] * ext[1]);

  SUBCASE("S(0),S(0) -> S(0),R: one step, a local copy, no collective") {
    using From = layout<shard<0>, shard<0>>;
    using To = layout<shard<0>, replicate>;
    per_rank out(4);
    std::string text;
    host::run(4, [&](host::communicator& hc) {
      counted cc(hc);
      auto m = make_mesh(cc, shape);
      auto x = distribute<From>(m, g, ext);
      const plan p = plan_for<To>(x);
      if (hc.rank() == 0) text = explain(p, shape, ext);
      m.comm().reset();
      auto y = redistribute<To>(x);
      const auto me = static_cast<std::size_t>(hc.rank());
      out.calls[me] = m.comm().collectives();
      out.errors[me] = st::check_against_reference(y, g);
      if (out.errors[me].empty() && (p.nsteps != 1 || p.collectives != 0)) out.errors[me] = "plan: " + explain(p, shape, ext);
    });
    out.require_clean();
    for (long c : out.calls) CHECK(c == 0);
    CAPTURE(text);
    CHECK(contains(text, "1 step(s), 0 collective(s)"));
    CHECK(contains(text, "all_gather (one rank: a local copy) over axes {1}: S(0),S(0) -> S(0),R, 0 bytes/rank"));
  }

  SUBCASE("P(sum),S(0) -> S(0),R: one collective (the reduce_scatter over axis 0)") {
    using From = layout<partial<sum>, shard<0>>;
    using To = layout<shard<0>, replicate>;
    per_rank out(4);
    host::run(4, [&](host::communicator& hc) {
      counted cc(hc);
      auto m = make_mesh(cc, shape);
      auto x = distribute<From>(m, g, ext);
      st::spread_partial_terms(x, g);
      m.comm().reset();
      auto y = redistribute<To>(x);
      const auto me = static_cast<std::size_t>(hc.rank());
      out.calls[me] = m.comm().collectives();
      out.errors[me] = st::check_against_reference(y, g);
      if (out.errors[me].empty() && plan_for<To>(x).collectives != 1) out.errors[me] = "plan_for counts " + std::to_string(plan_for<To>(x).collectives);
    });
    out.require_clean();
    for (long c : out.calls) CHECK(c == 1);
  }

  SUBCASE("R,P(sum) -> R,R given up: the all_reduce over one rank is skipped, in place") {
    using From = layout<replicate, partial<sum>>;
    using To = layout<replicate, replicate>;
    per_rank out(4);
    host::run(4, [&](host::communicator& hc) {
      counted cc(hc);
      auto m = make_mesh(cc, shape);
      auto x = distribute<From>(m, g, ext);
      const float* before = x.data();
      m.comm().reset();
      auto y = redistribute<To>(std::move(x));
      const auto me = static_cast<std::size_t>(hc.rank());
      out.calls[me] = m.comm().collectives();
      out.errors[me] = st::check_against_reference(y, g);
      if (out.errors[me].empty() && y.data() != before) out.errors[me] = "the result does not hold the input's storage";
    });
    out.require_clean();
    for (long c : out.calls) CHECK(c == 0);
  }

  SUBCASE("redistribute_into: S(1),S(0) -> S(1),R writes the copy into the caller's output") {
    using From = layout<shard<1>, shard<0>>;
    using To = layout<shard<1>, replicate>;
    per_rank out(4);
    host::run(4, [&](host::communicator& hc) {
      counted cc(hc);
      auto m = make_mesh(cc, shape);
      auto x = distribute<From>(m, g, ext);
      auto y = empty<To, float>(m, ext);
      m.comm().reset();
      redistribute_into(x, y);
      const auto me = static_cast<std::size_t>(hc.rank());
      out.calls[me] = m.comm().collectives();
      out.errors[me] = st::check_against_reference(y, g);
    });
    out.require_clean();
    for (long c : out.calls) CHECK(c == 0);
  }
}

TEST_CASE("dynamic redistribute on a 1x4 mesh: steps over axis 0 call nothing") {
  using sc::runtime_layout;
  const std::array<int, 2> shape{1, 4};
  const std::array<std::int64_t, 2> ext{5, 7};
  const auto g = st::make_global<std::int64_t>(ext[0] * ext[1]);
  struct conversion {
    const char *from, *to;
    long calls;  // on every rank: the collectives over axis 1 (size 4)
  };
  for (const conversion& c : {conversion{"S(1),S(0)", "R,S(0)", 0}, conversion{"P(max),S(1)", "R,R", 1}, conversion{"S(0),P(sum)", "R,S(1)", 1},
                              conversion{"S(1),R", "S(0),R", 0},
                              // Axis 0 is outer to axis 1 on dim 0, but splits nothing: no all_to_all to move it.
                              conversion{"S(0),S(0)", "R,S(0)", 0}, conversion{"R,S(0)", "S(0),S(0)", 0},
                              conversion{"P(sum),S(0)", "S(0),S(0)", 0}, conversion{"S(0),S(1)", "R,S(0)", 1}}) {
    const std::string from = c.from, to = c.to;
    CAPTURE(from);
    CAPTURE(to);
    per_rank out(4);
    sc::host::run(4, [&](sc::host::communicator& hc) {
      counted cc(hc);
      auto m = sc::make_mesh(cc, shape);
      auto x = sc::distribute(m, runtime_layout::parse(c.from), g, ext);
      st::spread_partial_terms(x, g);
      (void)sc::redistribute(x, runtime_layout::parse(c.to));  // the first call also compares the conversion across the ranks
      m.comm().reset();
      auto y = sc::redistribute(x, runtime_layout::parse(c.to));
      const auto me = static_cast<std::size_t>(hc.rank());
      out.calls[me] = m.comm().collectives();
      out.errors[me] = st::check_against_reference(y, g);
    });
    out.require_clean();
    for (long n : out.calls) CHECK(n == c.calls);
  }
}

// Integer means truncate once: of two reductions with avg, the first sums and the last
// divides by both groups' sizes. Either may be the one over a single rank; the terms here
// differ from rank to rank so that their mean is not whole (a sum left undivided, or a mean
// of means, gives other values).
TEST_CASE("integer P(avg),P(avg) -> S(0),R on 4x1: the one-rank step sums or divides as its place in the plan says") {
  using sc::runtime_layout;
  using sc::step_kind;
  const std::array<int, 2> shape{4, 1};
  const std::array<std::int64_t, 2> ext{6, 3};
  const std::int64_t vol = ext[0] * ext[1];
  // Rank r's term at element i; the reference is the sum over the 4 ranks divided once
  // (C++ integer division truncates toward zero, as the executor's divide does).
  auto term = [](std::int64_t i, int r) { return static_cast<std::int32_t>((i * 5 + r * 3) % 7 - 3); };
  std::vector<std::int32_t> want(static_cast<std::size_t>(vol));
  for (std::int64_t i = 0; i < vol; ++i) {
    std::int32_t s = 0;
    for (int r = 0; r < 4; ++r) s += term(i, r);
    want[static_cast<std::size_t>(i)] = s / 4;
  }
  const runtime_layout pp = runtime_layout::parse("P(avg),P(avg)");
  const runtime_layout sp = runtime_layout::parse("S(0),P(avg)");
  const runtime_layout pr = runtime_layout::parse("P(avg),R");
  const runtime_layout sr = runtime_layout::parse("S(0),R");
  auto make = [&](sc::step a, sc::step b) {
    sc::plan p;
    p.src = pp;
    p.dst = sr;
    p.steps[0] = a;
    p.steps[1] = b;
    p.nsteps = 2;
    return p;
  };
  // The one-rank all_reduce last (it divides by 4) or first (it sums).
  const sc::plan last = make(sc::step{step_kind::reduce_scatter, 1u, sc::reduce_op::avg, pp, sp},
                             sc::step{step_kind::all_reduce, 2u, sc::reduce_op::avg, sp, sr});
  const sc::plan first = make(sc::step{step_kind::all_reduce, 2u, sc::reduce_op::avg, pp, pr},
                              sc::step{step_kind::reduce_scatter, 1u, sc::reduce_op::avg, pr, sr});
  for (const sc::plan* p : {&last, &first}) {
    CAPTURE(sc::explain<std::int32_t>(*p, shape, ext));
    per_rank out(4);
    std::vector<std::vector<std::int32_t>> got(4);
    sc::host::run(4, [&](sc::host::communicator& hc) {
      counted cc(hc);
      auto m = sc::make_mesh(cc, shape);
      auto x = sc::distribute(m, pp, std::vector<std::int32_t>(static_cast<std::size_t>(vol), 0), ext);
      for (std::int64_t i = 0; i < vol; ++i) x.data()[i] = term(i, hc.rank());  // every rank holds the whole tensor's terms
      m.comm().reset();
      auto y = sc::execute(*p, x);
      const auto me = static_cast<std::size_t>(hc.rank());
      out.calls[me] = m.comm().collectives();
      got[me] = sc::to_global(y);
    });
    out.require_clean();
    for (long c : out.calls) CHECK(c == 1);
    for (const auto& v : got) CHECK(v == want);
  }
}
