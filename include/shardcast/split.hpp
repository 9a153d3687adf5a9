#pragma once
/// @file split.hpp
/// The balanced split rule and the boxes (offset + extent per dim) that a layout gives
/// each rank. Plain constexpr math, usable in kernels (SHARDCAST_HOST_DEVICE).
///
/// Split of n into k parts (numpy array_split): part i has n/k + (i < n%k) elements and
/// starts at i*(n/k) + min(i, n%k). Example: n = 10, k = 4 -> sizes 3,3,2,2, offsets 0,3,6,8.
/// Several mesh axes sharding one dim nest in increasing axis order.

#include <cstdint>

#include "config.hpp"
#include "layout.hpp"

namespace shardcast {

/// Size of part `i` of a balanced split of `n` into `k` parts.
SHARDCAST_HOST_DEVICE constexpr std::int64_t split_size(std::int64_t n, std::int64_t k, std::int64_t i) {
  return n / k + (i < n % k ? 1 : 0);
}
/// Offset of part `i` of a balanced split of `n` into `k` parts.
SHARDCAST_HOST_DEVICE constexpr std::int64_t split_offset(std::int64_t n, std::int64_t k, std::int64_t i) {
  return i * (n / k) + (i < n % k ? i : n % k);
}

/// An axis-aligned box of a rank-`rank` tensor: offsets and extents per dim.
struct box {
  std::int64_t off[SHARDCAST_MAX_RANK]{};
  std::int64_t ext[SHARDCAST_MAX_RANK]{};
  int rank = 0;

  SHARDCAST_HOST_DEVICE constexpr std::int64_t volume() const {
    std::int64_t v = 1;
    for (int d = 0; d < rank; ++d) v *= ext[d];
    return v;
  }
  SHARDCAST_HOST_DEVICE constexpr bool empty() const { return volume() == 0; }
  SHARDCAST_HOST_DEVICE friend constexpr bool operator==(const box& a, const box& b) {
    if (a.rank != b.rank) return false;
    for (int d = 0; d < a.rank; ++d)
      if (a.off[d] != b.off[d] || a.ext[d] != b.ext[d]) return false;
    return true;
  }
};

/// The whole tensor as a box.
SHARDCAST_HOST_DEVICE constexpr box full_box(const std::int64_t* extents, int rank) {
  box b;
  b.rank = rank;
  for (int d = 0; d < rank; ++d) b.ext[d] = extents[d];
  return b;
}

/// Intersection of two boxes of the same rank (extent 0 where they do not meet).
SHARDCAST_HOST_DEVICE constexpr box intersect(const box& a, const box& b) {
  box r;
  r.rank = a.rank;
  for (int d = 0; d < a.rank; ++d) {
    std::int64_t lo = a.off[d] > b.off[d] ? a.off[d] : b.off[d];
    std::int64_t ha = a.off[d] + a.ext[d], hb = b.off[d] + b.ext[d];
    std::int64_t hi = ha < hb ? ha : hb;
    r.off[d] = lo;
    r.ext[d] = hi > lo ? hi - lo : 0;
  }
  return r;
}

/// The box of global indices held by the rank at mesh coordinates `coord` (sizes `shape`).
/// Partial and replicate axes do not restrict the box.
SHARDCAST_HOST_DEVICE constexpr box local_box(const runtime_layout& l, const int* shape, const int* coord,
                                              const std::int64_t* extents, int rank) {
  box b = full_box(extents, rank);
  for (int a = 0; a < l.naxes; ++a) {
    const placement_desc& p = l.p[static_cast<std::size_t>(a)];
    if (!p.is_shard()) continue;
    const int d = p.dim;
    const std::int64_t n = b.ext[d];
    b.off[d] += split_offset(n, shape[a], coord[a]);
    b.ext[d] = split_size(n, shape[a], coord[a]);
  }
  return b;
}

/// Row-major mesh coordinates of `rank` (axis 0 outermost).
SHARDCAST_HOST_DEVICE constexpr void rank_to_coord(int rank, const int* shape, int naxes, int* coord) {
  for (int a = naxes - 1; a >= 0; --a) {
    coord[a] = rank % shape[a];
    rank /= shape[a];
  }
}
/// Inverse of rank_to_coord.
SHARDCAST_HOST_DEVICE constexpr int coord_to_rank(const int* coord, const int* shape, int naxes) {
  int r = 0;
  for (int a = 0; a < naxes; ++a) r = r * shape[a] + coord[a];
  return r;
}

}  // namespace shardcast
