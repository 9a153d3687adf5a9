// The split, box and cost arithmetic with extents far beyond 2^31 (and pieces beyond
// 2^31 elements), where a size or offset computed in int would wrap. No memory is
// allocated: these are the functions the executor sizes its buffers with. The reference
// is the split rule written out in 128-bit arithmetic: part sizes from the contract,
// offsets as running sums of the sizes before.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <shardcast/shardcast.hpp>
#include <vector>

namespace sc = shardcast;
__extension__ typedef __int128 i128;  // GCC and Clang

namespace {
/// Sizes and running-sum offsets of the balanced split of n into k parts.
struct ref_split {
  std::vector<i128> size, off;
  ref_split(i128 n, int k) {
    i128 at = 0;
    for (int i = 0; i < k; ++i) {
      const i128 s = n / k + (i < n % k ? 1 : 0);
      size.push_back(s);
      off.push_back(at);
      at += s;
    }
    REQUIRE(at == n);  // the parts tile the extent
  }
};

constexpr std::int64_t e0 = (std::int64_t{1} << 33) + 7;  // rows: 8.6e9
constexpr std::int64_t e1 = 3 * (std::int64_t{1} << 20) + 5;  // cols: 3.1e6; volume 2.7e16
}  // namespace

TEST_CASE("split_size and split_offset with extents above 2^32") {
  for (int k : {1, 2, 3, 7, 12, 1000}) {
    CAPTURE(k);
    const ref_split r(e0, k);
    for (int i = 0; i < k; ++i) {
      CHECK(static_cast<i128>(sc::split_size(e0, k, i)) == r.size[static_cast<std::size_t>(i)]);
      CHECK(static_cast<i128>(sc::split_offset(e0, k, i)) == r.off[static_cast<std::size_t>(i)]);
    }
  }
}

TEST_CASE("local_box and its volume for a 2^33 x 3*2^20 tensor on a 4x3 mesh, nested and crossed shards") {
  const std::array<int, 2> shape{4, 3};
  const std::array<std::int64_t, 2> ext{e0, e1};
  const sc::runtime_layout crossed = sc::runtime_layout::parse("S(0),S(1)");
  const sc::runtime_layout nested = sc::runtime_layout::parse("S(0),S(0)");
  const ref_split rows4(e0, 4), cols3(e1, 3);
  i128 total = 0;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b) {
      CAPTURE(a);
      CAPTURE(b);
      const int coord[2] = {a, b};
      const sc::box x = sc::local_box(crossed, shape.data(), coord, ext.data(), 2);
      CHECK(static_cast<i128>(x.off[0]) == rows4.off[static_cast<std::size_t>(a)]);
      CHECK(static_cast<i128>(x.ext[0]) == rows4.size[static_cast<std::size_t>(a)]);
      CHECK(static_cast<i128>(x.off[1]) == cols3.off[static_cast<std::size_t>(b)]);
      CHECK(static_cast<i128>(x.ext[1]) == cols3.size[static_cast<std::size_t>(b)]);
      const i128 vol = rows4.size[static_cast<std::size_t>(a)] * cols3.size[static_cast<std::size_t>(b)];
      CHECK(static_cast<i128>(x.volume()) == vol);
      CHECK(vol > (i128{1} << 31));  // every piece is beyond int
      total += vol;

      // Nested: dim 0 split in 4, then each part in 3.
      const ref_split inner(rows4.size[static_cast<std::size_t>(a)], 3);
      const sc::box y = sc::local_box(nested, shape.data(), coord, ext.data(), 2);
      CHECK(static_cast<i128>(y.off[0]) == rows4.off[static_cast<std::size_t>(a)] + inner.off[static_cast<std::size_t>(b)]);
      CHECK(static_cast<i128>(y.ext[0]) == inner.size[static_cast<std::size_t>(b)]);
      CHECK(y.ext[1] == e1);
      CHECK(static_cast<i128>(y.volume()) == inner.size[static_cast<std::size_t>(b)] * e1);
    }
  CHECK(total == static_cast<i128>(e0) * e1);  // the pieces tile the tensor
  CHECK(sc::detail::max_volume(crossed, shape.data(), ext.data(), 2) == static_cast<std::int64_t>(rows4.size[0] * cols3.size[0]));
}

TEST_CASE("intersect of boxes whose offsets are above 2^32") {
  sc::box a, b;
  a.rank = b.rank = 2;
  a.off[0] = std::int64_t{5} << 32;
  a.ext[0] = std::int64_t{3} << 31;
  a.off[1] = 0;
  a.ext[1] = e1;
  b.off[0] = (std::int64_t{5} << 32) + (std::int64_t{1} << 31);
  b.ext[0] = std::int64_t{1} << 33;
  b.off[1] = 7;
  b.ext[1] = 10;
  const sc::box c = sc::intersect(a, b);
  CHECK(c.off[0] == (std::int64_t{5} << 32) + (std::int64_t{1} << 31));
  CHECK(c.ext[0] == std::int64_t{1} << 32);  // a ends at 5*2^32 + 3*2^31
  CHECK(c.off[1] == 7);
  CHECK(c.ext[1] == 10);
  CHECK(c.volume() == std::int64_t{10} << 32);
}

TEST_CASE("plan costs for a tensor of 2.7e16 elements (pieces of 2.25e15) match the cost model (relative error below 1e-12)") {
  // Extents divisible by the mesh, so no piece is padded and one merged all_gather is the
  // cheapest plan (uneven parts make gathering axis by axis cheaper, padding included).
  const std::array<int, 2> shape{4, 3};
  const std::int64_t rows = (std::int64_t{1} << 33) + 12, cols = 3 * (std::int64_t{1} << 20) + 6;
  const std::array<std::int64_t, 2> ext{rows, cols};
  const double piece = static_cast<double>(static_cast<i128>(rows / 4) * (cols / 3));  // 2.25e15
  // S(0),S(1) -> R,R: one all_gather over both axes; the busiest rank sends (12 - 1) pieces.
  const sc::plan g = sc::make_plan(sc::runtime_layout::parse("S(0),S(1)"), sc::runtime_layout::parse("R,R"), shape, ext);
  REQUIRE(g.nsteps == 1);
  CHECK(g.steps[0].kind == sc::step_kind::all_gather);
  CHECK(g.steps[0].axes == 3u);
  CHECK(std::fabs(g.elements - 11 * piece) <= 1e-12 * 11 * piece);
  // P(sum),S(1) -> S(0),S(1): one reduce_scatter on axis 0 into quarter-row blocks of each
  // column third; the busiest rank sends 3 of them (one piece each).
  const sc::plan rs = sc::make_plan(sc::runtime_layout::parse("P(sum),S(1)"), sc::runtime_layout::parse("S(0),S(1)"), shape, ext);
  REQUIRE(rs.nsteps == 1);
  CHECK(rs.steps[0].kind == sc::step_kind::reduce_scatter);
  const double quarter = piece;
  CHECK(std::fabs(rs.elements - 3 * quarter) <= 1e-12 * 3 * quarter);
}

TEST_CASE("extents whose non-zero product overflows are refused in any order, an empty dim included") {
  const std::int64_t big = std::int64_t{1} << 40;
  using A = std::array<std::int64_t, 3>;
  // Strides and piece sizes multiply the non-zero extents even when another one is 0, so the
  // refusal does not depend on where the 0 stands (once only {2^40, 2^40, 0} was refused).
  for (const A& e : {A{0, big, big}, A{big, 0, big}, A{big, big, 0}}) {
    CAPTURE(e[0]);
    CAPTURE(e[2]);
    CHECK_THROWS_WITH_AS((void)sc::detail::checked_volume(e, "shardcast::empty"), doctest::Contains("non-zero extents overflows 64 bits"),
                         sc::layout_error);
  }
  CHECK(sc::detail::checked_volume(A{0, big, std::int64_t{1} << 22}, "x") == 0);
  CHECK(sc::detail::checked_volume(A{3, big, std::int64_t{1} << 21}, "x") == 3 * (std::int64_t{1} << 61));
  CHECK_THROWS_AS((void)sc::detail::checked_volume(A{4, big, std::int64_t{1} << 21}, "x"), sc::layout_error);  // 2^63
}
