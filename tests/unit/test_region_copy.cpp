// Planned region copies (plan_region_copy + copy_planned, what the executor runs for host
// packs and unpacks of a cached plan) against an element-by-element reference: random
// boxes of ranks 0-5 and element sizes 1-16 bytes, with copies that must stay inside the
// region and leave the source as it was.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <random>
#include <shardcast/detail/host_ops.hpp>
#include <vector>

namespace sc = shardcast;
using sc::box;
using sc::detail::memory_ops;
using sc::detail::plan_region_copy;
using sc::detail::region_copy;

namespace {

/// Row-major offset of global index `idx` in a buffer holding box `b`.
std::int64_t offset_in(const box& b, const std::int64_t* idx) {
  std::int64_t o = 0;
  for (int d = 0; d < b.rank; ++d) o = o * b.ext[d] + (idx[d] - b.off[d]);
  return o;
}

/// The reference: visit every global index of `r`, one element at a time.
template <class T>
void copy_reference(const T* src, const box& sb, T* dst, const box& db, const box& r) {
  if (r.empty()) return;
  std::int64_t idx[SHARDCAST_MAX_RANK];
  for (int d = 0; d < r.rank; ++d) idx[d] = r.off[d];
  while (true) {
    dst[offset_in(db, idx)] = src[offset_in(sb, idx)];
    int d = r.rank - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < r.off[d] + r.ext[d]) break;
      idx[d] = r.off[d];
    }
    if (d < 0) return;
  }
}

/// An element of `B` bytes whose value names its position.
template <std::size_t B>
struct elem {
  std::array<unsigned char, B> b{};
  friend bool operator==(const elem&, const elem&) = default;
};
template <std::size_t B>
elem<B> make_elem(std::uint64_t v) {
  elem<B> e;
  for (std::size_t i = 0; i < B; ++i) e.b[i] = static_cast<unsigned char>((v >> (8 * (i % 8))) + i);
  return e;
}

/// A region, and a source and a destination box containing it, of rank R.
struct case_boxes {
  box sb, db, r;
};
case_boxes random_case(std::mt19937& rng, int R) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  case_boxes c;
  c.sb.rank = c.db.rank = c.r.rank = R;
  for (int d = 0; d < R; ++d) {
    c.r.off[d] = pick(0, 5);
    c.r.ext[d] = pick(0, 9) == 0 ? 0 : pick(1, 5);
    // Each buffer either holds the region's extent exactly along d (so trailing dims can
    // join the run) or more on either side.
    for (box* b : {&c.sb, &c.db}) {
      const bool exact = pick(0, 2) == 0;
      const std::int64_t before = exact ? 0 : pick(0, 2), after = exact ? 0 : pick(0, 2);
      b->off[d] = c.r.off[d] - before;
      b->ext[d] = c.r.ext[d] + before + after;
    }
  }
  return c;
}

template <std::size_t B>
void check_case(const case_boxes& c, std::int64_t src_shift, std::int64_t dst_shift) {
  using T = elem<B>;
  const auto ns = static_cast<std::size_t>(c.sb.volume() + src_shift), nd = static_cast<std::size_t>(c.db.volume() + dst_shift);
  std::vector<T> src(ns), dst(nd), want(nd);
  for (std::size_t i = 0; i < ns; ++i) src[i] = make_elem<B>(i * 2654435761u + 17);
  for (std::size_t i = 0; i < nd; ++i) dst[i] = want[i] = make_elem<B>(~i);
  const std::vector<T> src_before = src;
  copy_reference(src.data() + src_shift, c.sb, want.data() + dst_shift, c.db, c.r);
  const region_copy p = sc::detail::shifted(plan_region_copy(c.sb, c.db, c.r), src_shift, dst_shift);
  memory_ops<sc::host_memory>::copy_planned(src.data(), dst.data(), p);
  CHECK(dst == want);
  CHECK(src == src_before);
  // No more loops than the region has dims of extent > 1, and none at all when empty.
  int big = 0;
  for (int d = 0; d < c.r.rank; ++d) big += c.r.ext[d] > 1;
  CHECK(p.loops <= big);
  if (c.r.empty()) CHECK(p.run == 0);
}

}  // namespace

TEST_CASE("planned region copies match an element-by-element copy") {
  std::mt19937 rng(20261204);
  int cases = 0;
  for (int R = 0; R <= 5; ++R)
    for (int k = 0; k < 400; ++k) {
      const case_boxes c = random_case(rng, R);
      const std::int64_t ss = k % 3 == 0 ? 0 : k % 7, ds = k % 2 == 0 ? 0 : k % 5;
      CAPTURE(R);
      CAPTURE(k);
      switch (k % 5) {
        case 0: check_case<1>(c, ss, ds); break;
        case 1: check_case<2>(c, ss, ds); break;
        case 2: check_case<4>(c, ss, ds); break;
        case 3: check_case<8>(c, ss, ds); break;
        default: check_case<16>(c, ss, ds); break;
      }
      ++cases;
    }
  CHECK(cases == 2400);
}

/// Checks a planned copy's run, offsets and loops (outermost first).
static void check_plan(const region_copy& c, std::int64_t run, std::int64_t src_off, std::int64_t dst_off,
                       std::vector<std::array<std::int64_t, 3>> loops) {  // {count, sstride, dstride}
  CHECK(c.run == run);
  CHECK(c.src_off == src_off);
  CHECK(c.dst_off == dst_off);
  REQUIRE(c.loops == static_cast<int>(loops.size()));
  for (std::size_t j = 0; j < loops.size(); ++j) {
    CAPTURE(j);
    CHECK(c.count[j] == loops[j][0]);
    CHECK(c.sstride[j] == loops[j][1]);
    CHECK(c.dstride[j] == loops[j][2]);
  }
}

TEST_CASE("planned region copies merge what is contiguous") {
  // A whole 4x6 box into a whole 4x6 box: one run of 24, no loop.
  const box whole{{0, 0}, {4, 6}, 2};
  check_plan(plan_region_copy(whole, whole, whole), 24, 0, 0, {});
  // Columns [2, 5) of it into a 4x3 box: 4 rows of 3, source rows 6 apart.
  const box cols{{0, 2}, {4, 3}, 2};
  check_plan(plan_region_copy(whole, cols, cols), 3, 2, 0, {{4, 6, 3}});
  // A 2x1x3x5 region of a 2x4x3x8 buffer into a 2x1x3x5 buffer: the extent-1 dim drops
  // out and dims 0 and 2 stay apart in the source, so two loops of runs of 5.
  const box big{{0, 0, 0, 0}, {2, 4, 3, 8}, 4};
  const box r{{0, 1, 0, 0}, {2, 1, 3, 5}, 4};
  check_plan(plan_region_copy(big, r, r), 5, 24, 0, {{2, 96, 15}, {3, 8, 5}});
  // The same region of a 2x1x3x8 buffer: dims 0 and 2 line up in both buffers and merge.
  const box thin{{0, 1, 0, 0}, {2, 1, 3, 8}, 4};
  check_plan(plan_region_copy(thin, r, r), 5, 0, 0, {{6, 8, 5}});
  // Rank 0: one element.
  const box scalar{};
  check_plan(plan_region_copy(scalar, scalar, scalar), 1, 0, 0, {});
}
