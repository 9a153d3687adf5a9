// Meshes of more axes than the default SHARDCAST_MAX_AXES (8): the macro may be raised, and
// the run-time planner then refuses a search space of more than 2^24 layouts with a
// layout_error that says what to do, where its state count once overflowed int (3^20
// layouts) or asked for more memory than there is (std::bad_array_new_length, 2.7 GB at 3^16).
#define SHARDCAST_MAX_AXES 20
#include <doctest/doctest.h>

#include <shardcast/plan.hpp>
#include <string>

namespace sc = shardcast;

namespace {
// Every one of n axes of size 1 goes from S(0) to P(sum): 3 candidates per axis.
sc::plan plan_over(int n) {
  std::string a, b;
  for (int i = 0; i < n; ++i) {
    a += i ? ",S(0)" : "S(0)";
    b += i ? ",P" : "P";
  }
  int shape[SHARDCAST_MAX_AXES];
  for (int i = 0; i < n; ++i) shape[i] = 1;
  const std::int64_t ext[1] = {8};
  return sc::make_plan(sc::runtime_layout::parse(a), sc::runtime_layout::parse(b), shape, ext, 1);
}
}  // namespace

TEST_CASE("make_plan on up to 20 axes: a search of more than 2^24 layouts is refused") {
  const sc::plan p = plan_over(10);  // 3^10 layouts: searched
  CHECK(p.dst == sc::runtime_layout::parse("P,P,P,P,P,P,P,P,P,P"));
  CHECK(p.collectives == 0);  // a pad into the partial, on every axis at once (no data moves)
  for (int n : {16, 20}) {
    CAPTURE(n);
    CHECK_THROWS_WITH_AS((void)plan_over(n), doctest::Contains("more than 2^24 layouts"), sc::layout_error);
  }
}
