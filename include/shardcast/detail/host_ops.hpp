#pragma once
/// @file detail/host_ops.hpp
/// Local data movement for host memory: the executor's pack/unpack/pad primitives.

#include <algorithm>
#include <cstring>
#include <memory>

#include "../comm/communicator.hpp"
#include "../split.hpp"

namespace shardcast::detail {

template <class Space>
struct memory_ops;

template <>
struct memory_ops<host_memory> {
  template <class T>
  static std::shared_ptr<T> allocate(std::size_t n, host_stream = {}) {
    return std::shared_ptr<T>(new T[n > 0 ? n : 1], std::default_delete<T[]>());
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t n, host_stream = {}) {
    if (n && dst != src) std::memcpy(dst, src, n * sizeof(T));
  }
  template <class T>
  static void fill(T* dst, std::size_t n, T value, host_stream = {}) {
    std::fill(dst, dst + n, value);
  }
  template <class T>
  static void scale(T* dst, std::size_t n, T factor, host_stream = {}) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] * factor);
  }
  template <class T>
  static void to_host(T* host_dst, const T* src, std::size_t n, host_stream = {}) {
    copy(host_dst, src, n);
  }
  template <class T>
  static void from_host(T* dst, const T* host_src, std::size_t n, host_stream = {}) {
    copy(dst, host_src, n);
  }

  /// Copies the elements of global `region` from `src` (holding `sb` row-major) to `dst`
  /// (holding `db` row-major). Runs of the innermost dims that are contiguous in both
  /// buffers are copied with one memcpy.
  template <class T>
  static void copy_region(const T* src, const box& sb, T* dst, const box& db, const box& region, host_stream = {}) {
    const int R = region.rank;
    if (region.empty()) return;
    if (R == 0) {
      *dst = *src;
      return;
    }
    // Fold trailing dims that are full in both buffers into one contiguous run.
    int inner = R - 1;
    std::int64_t run = region.ext[R - 1];
    while (inner > 0 && region.ext[inner] == sb.ext[inner] && region.ext[inner] == db.ext[inner]) {
      --inner;
      run *= region.ext[inner];
    }
    std::int64_t sstride[SHARDCAST_MAX_RANK], dstride[SHARDCAST_MAX_RANK];
    sstride[R - 1] = dstride[R - 1] = 1;
    for (int d = R - 2; d >= 0; --d) {
      sstride[d] = sstride[d + 1] * sb.ext[d + 1];
      dstride[d] = dstride[d + 1] * db.ext[d + 1];
    }
    std::int64_t so = 0, doff = 0;
    for (int d = 0; d < R; ++d) {
      so += (region.off[d] - sb.off[d]) * sstride[d];
      doff += (region.off[d] - db.off[d]) * dstride[d];
    }
    // Iterate the outer dims [0, inner) with an odometer.
    std::int64_t idx[SHARDCAST_MAX_RANK]{};
    while (true) {
      std::memcpy(dst + doff, src + so, static_cast<std::size_t>(run) * sizeof(T));
      int d = inner - 1;
      for (; d >= 0; --d) {
        so += sstride[d];
        doff += dstride[d];
        if (++idx[d] < region.ext[d]) break;
        so -= sstride[d] * region.ext[d];
        doff -= dstride[d] * region.ext[d];
        idx[d] = 0;
      }
      if (d < 0) break;
    }
  }
};

}  // namespace shardcast::detail
