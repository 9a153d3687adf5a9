#pragma once
/// @file detail/region_copy.hpp
/// A copy of a box-shaped region between two row-major buffers, reduced once (when a
/// plan's geometry is cached) to what the copy loop needs: the two start offsets, the
/// length of a contiguous run and the outer loops around it. A cached static redistribute
/// then packs and unpacks without recomputing strides and offsets from boxes on every
/// call.

#include <cstdint>

#include "../config.hpp"
#include "../split.hpp"

namespace shardcast::detail {

/// Copies region `r` from a buffer holding box `sb` row-major to one holding `db`: for
/// every index of the `loops` outer loops (outermost first), `run` contiguous elements
/// from src + src_off + sum(i_k * sstride[k]) to dst + dst_off + sum(i_k * dstride[k]).
/// Offsets and strides are in elements; `run == 0` means nothing to copy.
struct region_copy {
  std::int64_t src_off = 0, dst_off = 0;
  std::int64_t run = 0;
  int loops = 0;
  std::int64_t count[SHARDCAST_MAX_RANK]{};
  std::int64_t sstride[SHARDCAST_MAX_RANK]{};
  std::int64_t dstride[SHARDCAST_MAX_RANK]{};
};

/// The copy of `region` (inside both `sb` and `db`, all of one rank) from a buffer
/// holding `sb` to one holding `db`. Dims of extent 1 are dropped, trailing dims whole in
/// both buffers join the contiguous run, and neighbouring loops whose strides line up in
/// both buffers merge into one, so a copy has as few loops as its layout allows.
constexpr region_copy plan_region_copy(const box& sb, const box& db, const box& region) {
  region_copy c;
  const int R = region.rank;
  if (region.empty()) return c;
  std::int64_t ss[SHARDCAST_MAX_RANK]{}, ds[SHARDCAST_MAX_RANK]{};
  std::int64_t s = 1, d = 1;
  for (int k = R - 1; k >= 0; --k) {
    ss[k] = s;
    ds[k] = d;
    s *= sb.ext[k];
    d *= db.ext[k];
  }
  for (int k = 0; k < R; ++k) {
    c.src_off += (region.off[k] - sb.off[k]) * ss[k];
    c.dst_off += (region.off[k] - db.off[k]) * ds[k];
  }
  // Innermost first: each dim either extends the run (while everything inside it is one
  // contiguous run in both buffers) or becomes a loop.
  c.run = 1;
  std::int64_t cnt[SHARDCAST_MAX_RANK]{}, ls[SHARDCAST_MAX_RANK]{}, ld[SHARDCAST_MAX_RANK]{};
  int n = 0;  // loops found, innermost first
  for (int k = R - 1; k >= 0; --k) {
    const std::int64_t e = region.ext[k];
    if (e == 1) continue;
    if (n == 0 && ss[k] == c.run && ds[k] == c.run) {
      c.run *= e;
      continue;
    }
    if (n > 0 && ss[k] == ls[n - 1] * cnt[n - 1] && ds[k] == ld[n - 1] * cnt[n - 1]) {
      cnt[n - 1] *= e;  // this dim continues the loop inside it in both buffers
      continue;
    }
    cnt[n] = e;
    ls[n] = ss[k];
    ld[n] = ds[k];
    ++n;
  }
  c.loops = n;
  for (int j = 0; j < n; ++j) {  // outermost first
    c.count[j] = cnt[n - 1 - j];
    c.sstride[j] = ls[n - 1 - j];
    c.dstride[j] = ld[n - 1 - j];
  }
  return c;
}

/// The same copy with `src_shift` / `dst_shift` elements added to its start offsets (a
/// region that lies at an offset inside a larger staging buffer).
constexpr region_copy shifted(region_copy c, std::int64_t src_shift, std::int64_t dst_shift) {
  c.src_off += src_shift;
  c.dst_off += dst_shift;
  return c;
}

}  // namespace shardcast::detail
