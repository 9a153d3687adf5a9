#pragma once
/// @file detail/host_ops.hpp
/// Local data movement for host memory: the executor's pack/unpack/pad primitives.

#include <algorithm>
#include <cstring>
#include <memory>

#include "../config.hpp"
#include "../comm/communicator.hpp"
#include "../split.hpp"
#include "region_copy.hpp"
#include "wrapping.hpp"

namespace shardcast::detail {

template <class Space>
struct memory_ops;

template <>
struct memory_ops<host_memory> {
  /// Uninitialised storage for `n` elements and its control block in one allocation.
  template <class T>
  static std::shared_ptr<T> allocate(std::size_t n, host_stream = {}) {
    return allocate_nonempty<T>(n > 0 ? n : 1);
  }
  /// The same for n > 0.
  template <class T>
  static std::shared_ptr<T> allocate_nonempty(std::size_t n) {
    std::shared_ptr<T[]> a = std::make_shared_for_overwrite<T[]>(n);
    T* p = a.get();
    return std::shared_ptr<T>(std::move(a), p);
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
    for (std::size_t i = 0; i < n; ++i) dst[i] = wrapping_mul(dst[i], factor);  // integers wrap (an avg pad's n * x)
  }
  template <class T>
  static void divide(T* dst, std::size_t n, std::int64_t divisor, host_stream = {}) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = divide_mean(dst[i], divisor);
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
  /// (holding `db` row-major): the copy plan_region_copy makes of it, run at once (a cached
  /// plan keeps its copies planned instead; see copy_planned).
  template <class T>
  static void copy_region(const T* src, const box& sb, T* dst, const box& db, const box& region, host_stream = {}) {
    copy_planned(src, dst, plan_region_copy(sb, db, region));
  }

  /// A copy planned by plan_region_copy, from a buffer at `src` to one at `dst`.
  template <class T>
  static void copy_planned(const T* src, T* dst, const region_copy& c) {
    if (c.run == 0) return;
    auto* d = reinterpret_cast<unsigned char*>(dst + c.dst_off);
    const auto* s = reinterpret_cast<const unsigned char*>(src + c.src_off);
    const std::size_t bytes = static_cast<std::size_t>(c.run) * sizeof(T);
    constexpr auto z = static_cast<std::int64_t>(sizeof(T));
    if (c.loops == 0) return copy_bytes(d, s, bytes);
    const int inner = c.loops - 1;  // the innermost loop runs as copy_rows
    const std::int64_t rows = c.count[inner], rs = c.sstride[inner] * z, rd = c.dstride[inner] * z;
    if (inner == 0) return copy_rows(d, rd, s, rs, rows, bytes);
    std::int64_t idx[SHARDCAST_MAX_RANK]{};
    while (true) {
      copy_rows(d, rd, s, rs, rows, bytes);
      int k = inner - 1;
      for (; k >= 0; --k) {
        s += c.sstride[k] * z;
        d += c.dstride[k] * z;
        if (++idx[k] < c.count[k]) break;
        s -= c.sstride[k] * z * c.count[k];
        d -= c.dstride[k] * z * c.count[k];
        idx[k] = 0;
      }
      if (k < 0) return;
    }
  }

  /// `rows` runs of `bytes` bytes, `ds` / `ss` bytes apart; short fixed lengths get a copy
  /// the compiler inlines.
  [[gnu::always_inline]] static inline void copy_rows(unsigned char* d, std::int64_t ds, const unsigned char* s, std::int64_t ss, std::int64_t rows, std::size_t bytes) {
    auto fixed = [&]<std::size_t B>() {
      for (std::int64_t r = 0; r < rows; ++r) __builtin_memcpy(d + r * ds, s + r * ss, B);
    };
    switch (bytes) {
      case 4: return fixed.template operator()<4>();
      case 8: return fixed.template operator()<8>();
      case 16: return fixed.template operator()<16>();
      case 32: return fixed.template operator()<32>();
      case 64: return fixed.template operator()<64>();
      default:
        for (std::int64_t r = 0; r < rows; ++r) copy_bytes(d + r * ds, s + r * ss, bytes);
    }
  }

SHARDCAST_SIZED_COPY_BEGIN
  /// memcpy of `n` bytes between buffers that do not overlap; short runs (the rows of a
  /// strided pack or unpack of a small piece) are copied inline instead of by a call.
  static void copy_bytes(void* d, const void* s, std::size_t n) {
    auto* dd = static_cast<unsigned char*>(d);
    const auto* ss = static_cast<const unsigned char*>(s);
    if (n > 64) {
      std::memcpy(dd, ss, n);
    } else if (n >= 16) {  // 16-byte blocks, the last one overlapping the one before
      for (std::size_t i = 0; i + 16 < n; i += 16) __builtin_memcpy(dd + i, ss + i, 16);
      __builtin_memcpy(dd + n - 16, ss + n - 16, 16);
    } else if (n >= 8) {
      __builtin_memcpy(dd, ss, 8);
      __builtin_memcpy(dd + n - 8, ss + n - 8, 8);
    } else if (n >= 4) {
      __builtin_memcpy(dd, ss, 4);
      __builtin_memcpy(dd + n - 4, ss + n - 4, 4);
    } else {
      for (std::size_t i = 0; i < n; ++i) dd[i] = ss[i];
    }
  }
SHARDCAST_SIZED_COPY_END
};

}  // namespace shardcast::detail
