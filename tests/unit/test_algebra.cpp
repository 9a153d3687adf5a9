// The placement algebra and split rule, checked at compile time and at run time.
#include <doctest/doctest.h>

#include <numeric>
#include <shardcast/layout.hpp>
#include <shardcast/split.hpp>
#include <utility>
#include <vector>

namespace sc = shardcast;

// Independent reference for numpy.array_split: deal elements out one at a time to the
// first n%k parts, then sizes are n/k (+1 for those).
static std::vector<std::pair<std::int64_t, std::int64_t>> array_split(std::int64_t n, std::int64_t k) {
  std::vector<std::int64_t> size(static_cast<std::size_t>(k), 0);
  for (std::int64_t i = 0, p = 0; i < n; ++i) {
    // Round-robin over sizes sorted by part index gives the same counts as array_split.
    size[static_cast<std::size_t>(p)]++;
    p = (p + 1) % k;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  std::int64_t off = 0;
  for (auto s : size) {
    out.emplace_back(off, s);
    off += s;
  }
  return out;
}

constexpr bool split_facts() {
  // n = 10, k = 4: sizes 3,3,2,2 at offsets 0,3,6,8.
  return sc::split_size(10, 4, 0) == 3 && sc::split_size(10, 4, 3) == 2 && sc::split_offset(10, 4, 2) == 6 &&
         sc::split_offset(10, 4, 3) == 8 && sc::split_size(2, 5, 4) == 0 && sc::split_offset(2, 5, 4) == 2;
}
static_assert(split_facts());

TEST_CASE("balanced split equals numpy array_split, empty parts included") {
  CHECK(split_facts());
  for (std::int64_t n = 0; n <= 40; ++n)
    for (std::int64_t k = 1; k <= 9; ++k) {
      auto ref = array_split(n, k);
      for (std::int64_t i = 0; i < k; ++i) {
        REQUIRE(sc::split_offset(n, k, i) == ref[static_cast<std::size_t>(i)].first);
        REQUIRE(sc::split_size(n, k, i) == ref[static_cast<std::size_t>(i)].second);
      }
    }
}

TEST_CASE("several axes on one dim nest in increasing axis order") {
  // layout<shard<0>, shard<0>> on a 2x3 mesh, dim of 14: first 2 parts (7,7), then each in 3 (3,2,2).
  constexpr sc::runtime_layout l{sc::placement_desc::make_shard(0), sc::placement_desc::make_shard(0)};
  const int shape[2] = {2, 3};
  const std::int64_t ext[1] = {14};
  std::vector<std::int64_t> covered(14, 0);
  for (int r = 0; r < 6; ++r) {
    int c[2];
    sc::rank_to_coord(r, shape, 2, c);
    REQUIRE(sc::coord_to_rank(c, shape, 2) == r);
    const sc::box b = sc::local_box(l, shape, c, ext, 1);
    const std::int64_t outer_off = sc::split_offset(14, 2, c[0]), outer = sc::split_size(14, 2, c[0]);
    CHECK(b.off[0] == outer_off + sc::split_offset(outer, 3, c[1]));
    CHECK(b.ext[0] == sc::split_size(outer, 3, c[1]));
    for (std::int64_t i = 0; i < b.ext[0]; ++i) covered[static_cast<std::size_t>(b.off[0] + i)]++;
  }
  for (auto v : covered) CHECK(v == 1);  // the pieces tile the dim exactly once
}

TEST_CASE("row-major rank <-> coordinate, axis 0 outermost") {
  const int shape[3] = {2, 3, 4};
  int c[3];
  sc::rank_to_coord(23, shape, 3, c);
  CHECK((c[0] == 1 && c[1] == 2 && c[2] == 3));
  sc::rank_to_coord(5, shape, 3, c);
  CHECK((c[0] == 0 && c[1] == 1 && c[2] == 1));
}

TEST_CASE("runtime_layout parses, prints and rejects bad text") {
  using sc::runtime_layout;
  auto l = runtime_layout::parse(" S(0), R ,P(max),partial(prod), shard(2), replicate, P");
  CHECK(sc::to_string(l) == "S(0),R,P(max),P(prod),S(2),R,P(sum)");
  CHECK(runtime_layout::parse(sc::to_string(l)) == l);
  CHECK(runtime_layout(sc::layout<sc::shard<1>, sc::partial<sc::avg>>{}) == runtime_layout::parse("S(1),P(avg)"));
  // Each bad text with the part of the message that names its fault.
  const std::pair<const char*, const char*> bad_texts[] = {
      {"", "empty layout text"},
      {"S", "'S': shard needs a dim"},
      {"S()", "'S()': shard needs a dim"},
      {"S(x)", "'S(x)': shard dim must be a non-negative integer"},
      {"Q", "unknown placement 'Q'"},
      {"R,", "trailing comma"},
      {",R", "empty placement at position 0"},
      {"P(foo)", "'P(foo)': unknown reduce op 'foo'"},
      {"S(0", "unbalanced parenthesis in 'S(0'"},
      {"R(1)", "'R(1)': replicate takes no argument"},
      {"S(-1)", "'S(-1)': shard dim must be a non-negative integer"},
      {"S(99)", "'S(99)': shard dim exceeds the largest supported tensor rank"},
  };
  for (const auto& [bad, why] : bad_texts) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(runtime_layout::parse(bad), doctest::Contains(why), sc::layout_error);
  }
  CHECK_THROWS_WITH(runtime_layout::parse("R,X"), doctest::Contains("unknown placement 'X'"));
  CHECK_THROWS_WITH(runtime_layout::parse("S(0),R").validate(3, 2), doctest::Contains("mesh has 3 axes"));
  CHECK_THROWS_WITH(runtime_layout::parse("S(2),R").validate(2, 2), doctest::Contains("tensor has rank 2"));
  // Whitespace separates tokens only: inside a name or a number it is refused, where it
  // was once dropped ("S(0 1)" read as S(1), "R R" reported as the unknown 'RR').
  for (const char* bad : {"S(0 1)", "S(0\t1),R", "sh ard(0)", "P(s u m)", "R R", "repli cate"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(runtime_layout::parse(bad), doctest::Contains("whitespace inside a name or number"), sc::layout_error);
  }
  CHECK(runtime_layout::parse("\tS ( 0 ) ,\nP ( max )\r\n") == runtime_layout::parse("S(0),P(max)"));
}

TEST_CASE("runtime_layout refuses negative shard dims and more placements than SHARDCAST_MAX_AXES") {
  using sc::runtime_layout;
  runtime_layout neg{sc::placement_desc::make_shard(-1), sc::placement_desc::make_replicate()};
  CHECK_THROWS_WITH_AS(neg.validate(2, 2), doctest::Contains("places S(-1) on mesh axis 0"), sc::layout_error);
  const auto r = sc::placement_desc::make_replicate();
  std::initializer_list<sc::placement_desc> too_many = {r, r, r, r, r, r, r, r, r};
  static_assert(SHARDCAST_MAX_AXES == 8);
  CHECK_THROWS_WITH_AS(runtime_layout{too_many}, doctest::Contains("more placements than SHARDCAST_MAX_AXES"), sc::layout_error);
  CHECK(runtime_layout{r, r, r, r, r, r, r, r}.naxes == 8);
}

static_assert(sc::layout<sc::shard<0>, sc::replicate, sc::partial<sc::max>>::naxes == 3);
static_assert(sc::layout<sc::shard<3>, sc::shard<1>>::max_shard_dim == 3);
static_assert(sc::check_layout<sc::layout<sc::shard<1>, sc::partial<>>, 2, 2>());
static_assert(sc::shard<2>::desc.is_shard(2) && sc::partial<sc::prod>::desc.op == sc::reduce_op::prod);
