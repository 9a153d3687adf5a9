#pragma once
/// @file cuda/pack.cuh
/// Device-side local operations of the executor: N-D region copies between row-major
/// buffers (the pack/unpack of gathers and scatters along inner dims and of uneven
/// shards), fill and scale, and `detail::memory_ops<device_memory>` built on them.
///
/// A region copy is planned on the host (`device::detail::plan_region`, tested on the host):
/// dims contiguous in both buffers merge, and what is left is a set of equal rows. It then
/// runs one of three ways:
/// - one contiguous run: `cudaMemcpyAsync`;
/// - rows of at least SHARDCAST_BATCHED_COPY_MIN_ROW_BYTES: CUB's `cub::DeviceMemcpy::Batched`,
///   one buffer per row, whose row pointers are computed on the fly (no pointer arrays in
///   device memory). It copies each row with vector loads and stores whatever the row's
///   alignment, where the kernel below falls back to the largest unit every address allows;
/// - shorter rows: the grid-stride unit kernel below, which moves 16-byte units where every
///   address and stride allows. Batched memcpy pays a per-buffer cost (it scans the buffer
///   sizes to assign them to threads, warps or blocks) that rows of a few units do not
///   amortise; the kernel does one index computation per unit and nothing else.
/// This header launches kernels: include it from CUDA sources (nvcc).

#include <cub/device/device_memcpy.cuh>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <string>

#include "../comm/communicator.hpp"
#include "../split.hpp"
#include "allocator.hpp"
#include "check.hpp"
#include "dtypes.hpp"
#include "index_math.hpp"

/// Rows of a region copy at least this long (bytes) go through cub::DeviceMemcpy::Batched;
/// shorter ones through the unit kernel. A tuning knob: bench_kernels prints both paths.
#ifndef SHARDCAST_BATCHED_COPY_MIN_ROW_BYTES
#define SHARDCAST_BATCHED_COPY_MIN_ROW_BYTES 256
#endif

namespace shardcast::device {
namespace detail {

template <int W> struct unit_of;
template <> struct unit_of<1> { using type = unsigned char; };
template <> struct unit_of<2> { using type = unsigned short; };
template <> struct unit_of<4> { using type = unsigned int; };
template <> struct unit_of<8> { using type = uint2; };
template <> struct unit_of<16> { using type = uint4; };

/// Unit `idx` of the plan goes from src (+ its row offset) to dst; src and dst point at the
/// region's first unit in each buffer.
template <class U>
SHARDCAST_KERNEL void copy_region_kernel(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, region_plan p) {
  const U* s = reinterpret_cast<const U*>(src);
  U* o = reinterpret_cast<U*>(dst);
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < p.total; idx += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t so = 0, dof = 0;
    unit_offsets(p, idx, so, dof);
    o[dof] = s[so];
  }
}

template <class T, class A>
SHARDCAST_KERNEL void fill_kernel(T* __restrict__ dst, std::size_t n, T value) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <class T, class A>
SHARDCAST_KERNEL void scale_kernel(T* __restrict__ dst, std::size_t n, A factor) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = convert<T>(static_cast<A>(convert<A>(dst[i]) * factor));
}

/// Random-access iterator over the start pointers of a plan's rows in one buffer, computed
/// from the row index (what cub::DeviceMemcpy::Batched reads as its buffer list).
struct row_pointer_iterator {
  using value_type = void*;
  using difference_type = std::int64_t;
  using pointer = void**;
  using reference = void*;
  using iterator_category = std::random_access_iterator_tag;

  unsigned char* base = nullptr;  // the region's first byte in this buffer
  region_plan plan{};
  bool dst = false;
  std::int64_t row = 0;

  SHARDCAST_HOST_DEVICE void* operator[](std::int64_t k) const {
    return base + row_offset(plan, row + k, dst) * static_cast<std::int64_t>(plan.unit);
  }
  SHARDCAST_HOST_DEVICE void* operator*() const { return (*this)[0]; }
  SHARDCAST_HOST_DEVICE row_pointer_iterator operator+(std::int64_t k) const {
    row_pointer_iterator r = *this;
    r.row += k;
    return r;
  }
};

/// Every row has the same length.
struct constant_size_iterator {
  using value_type = std::uint32_t;
  using difference_type = std::int64_t;
  using pointer = const std::uint32_t*;
  using reference = std::uint32_t;
  using iterator_category = std::random_access_iterator_tag;

  std::uint32_t bytes = 0;

  SHARDCAST_HOST_DEVICE std::uint32_t operator[](std::int64_t) const { return bytes; }
  SHARDCAST_HOST_DEVICE std::uint32_t operator*() const { return bytes; }
  SHARDCAST_HOST_DEVICE constant_size_iterator operator+(std::int64_t) const { return *this; }
};

/// The rows of `p` with cub::DeviceMemcpy::Batched; its scratch comes from this thread's allocator.
inline void copy_rows_batched(const unsigned char* src, unsigned char* dst, const region_plan& p, cudaStream_t s) {
  const row_pointer_iterator in{const_cast<unsigned char*>(src), p, false, 0};
  const row_pointer_iterator out{dst, p, true, 0};
  const constant_size_iterator sizes{static_cast<std::uint32_t>(p.row_units() * p.unit)};
  std::size_t temp_bytes = 0;
  SHARDCAST_CUDA_TRY(cub::DeviceMemcpy::Batched(nullptr, temp_bytes, in, out, sizes, p.rows(), s));
  const any_allocator a = current_allocator();
  auto temp = allocate_shared<unsigned char>(a, temp_bytes > 0 ? temp_bytes : 1, s);
  SHARDCAST_CUDA_TRY(cub::DeviceMemcpy::Batched(temp.get(), temp_bytes, in, out, sizes, p.rows(), s));
}

/// The rows of `p` with the unit kernel.
inline void copy_rows_kernel(const unsigned char* src, unsigned char* dst, const region_plan& p, cudaStream_t s) {
  constexpr unsigned block = 256;
  const unsigned grid = grid_for(p.total, block);
  switch (p.unit) {
    case 16: copy_region_kernel<uint4><<<grid, block, 0, s>>>(src, dst, p); break;
    case 8: copy_region_kernel<uint2><<<grid, block, 0, s>>>(src, dst, p); break;
    case 4: copy_region_kernel<unsigned int><<<grid, block, 0, s>>>(src, dst, p); break;
    case 2: copy_region_kernel<unsigned short><<<grid, block, 0, s>>>(src, dst, p); break;
    default: copy_region_kernel<unsigned char><<<grid, block, 0, s>>>(src, dst, p); break;
  }
  SHARDCAST_CUDA_CHECK_LAUNCH();
}

/// Which way copy_region goes for a plan (see the file comment).
enum class region_path { none, memcpy, batched, kernel };
inline region_path choose_region_path(const region_plan& p) {
  if (p.total == 0) return region_path::none;
  if (p.contiguous()) return region_path::memcpy;
  const std::int64_t row_bytes = p.row_units() * p.unit;
  if (row_bytes >= SHARDCAST_BATCHED_COPY_MIN_ROW_BYTES && row_bytes <= std::int64_t(std::numeric_limits<std::uint32_t>::max()))
    return region_path::batched;
  return region_path::kernel;
}

}  // namespace detail

/// Copies the elements of global box `region` from `src` (holding `src_box` row-major) to
/// `dst` (holding `dst_box` row-major), stream-ordered. Dims contiguous in both buffers are
/// merged; the rest is copied as rows (see the file comment for how).
/// @code
///   // The pack of an all-gather along dim 1: columns 8..16 of a 13 x 37 row-major piece.
///   sc::box whole{{0, 0}, {13, 37}, 2}, cols{{0, 8}, {13, 9}, 2};
///   sc::device::copy_region(d_piece, whole, d_packed, cols, cols, stream);  // d_packed: 13 x 9
/// @endcode
/// @throws layout_error if the boxes' ranks differ or `region` is not inside both boxes.
/// @throws cuda_error if a launch fails.
template <class T>
void copy_region(const T* src, const box& src_box, T* dst, const box& dst_box, const box& region, cudaStream_t s) {
  SHARDCAST_EXPECTS(src_box.rank == region.rank && dst_box.rank == region.rank && region.rank >= 1 &&
                        region.rank <= SHARDCAST_MAX_RANK,
                    "shardcast::device::copy_region: src_box, dst_box and region must have the same rank (1..SHARDCAST_MAX_RANK)");
  const int r = region.rank;
  for (int d = 0; d < r; ++d) {
    if (region.ext[d] == 0) return;
    SHARDCAST_EXPECTS(region.off[d] >= src_box.off[d] && region.off[d] + region.ext[d] <= src_box.off[d] + src_box.ext[d] &&
                          region.off[d] >= dst_box.off[d] && region.off[d] + region.ext[d] <= dst_box.off[d] + dst_box.ext[d],
                      "shardcast::device::copy_region: region dim " + std::to_string(d) + " is not inside both boxes");
  }
  const detail::region_plan p = detail::plan_region(sizeof(T), src_box, dst_box, region, reinterpret_cast<std::uintptr_t>(src),
                                                    reinterpret_cast<std::uintptr_t>(dst));
  const auto* sb = reinterpret_cast<const unsigned char*>(src) + p.src_byte_offset;
  auto* db = reinterpret_cast<unsigned char*>(dst) + p.dst_byte_offset;
  switch (detail::choose_region_path(p)) {
    case detail::region_path::none: return;
    case detail::region_path::memcpy:
      SHARDCAST_CUDA_TRY(cudaMemcpyAsync(db, sb, std::size_t(p.total) * std::size_t(p.unit), cudaMemcpyDeviceToDevice, s));
      return;
    case detail::region_path::batched: return detail::copy_rows_batched(sb, db, p, s);
    case detail::region_path::kernel: return detail::copy_rows_kernel(sb, db, p, s);
  }
}

/// dst[i] = value for i < n, stream-ordered.
template <class T>
void fill_elements(T* dst, std::size_t n, T value, cudaStream_t s) {
  if (n == 0) return;
  detail::fill_kernel<T, acc_type_t<T>><<<detail::grid_for(std::int64_t(n), 256), 256, 0, s>>>(dst, n, value);
  SHARDCAST_CUDA_CHECK_LAUNCH();
}

/// dst[i] *= factor for i < n (in float for half/bf16/fp8), stream-ordered.
template <class T>
void scale_elements(T* dst, std::size_t n, T factor, cudaStream_t s) {
  if (n == 0) return;
  using A = acc_type_t<T>;
  detail::scale_kernel<T, A><<<detail::grid_for(std::int64_t(n), 256), 256, 0, s>>>(dst, n, convert<A>(factor));
  SHARDCAST_CUDA_CHECK_LAUNCH();
}

}  // namespace shardcast::device

namespace shardcast::detail {

template <class Space>
struct memory_ops;

/// Local operations of the executor on device memory; every call is stream-ordered on `s`
/// except `to_host` and `from_host`, which return once the host buffer may be reused.
template <>
struct memory_ops<device_memory> {
  /// n elements from this thread's current allocator (cuda/allocator.hpp; by default
  /// cudaMallocAsync on `s`), freed with it on `s` when the last owner goes.
  template <class T>
  static std::shared_ptr<T> allocate(std::size_t n, cudaStream_t s) {
    return device::allocate_shared<T>(device::current_allocator(), n, s);
  }
  /// Same, from a given allocator.
  template <class T>
  static std::shared_ptr<T> allocate(std::size_t n, cudaStream_t s, const device::any_allocator& a) {
    return device::allocate_shared<T>(a, n, s);
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t n, cudaStream_t s) {
    if (n == 0 || dst == src) return;
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
  }
  template <class T>
  static void copy_region(const T* src, const box& src_box, T* dst, const box& dst_box, const box& region, cudaStream_t s) {
    device::copy_region(src, src_box, dst, dst_box, region, s);
  }
  template <class T>
  static void fill(T* dst, std::size_t n, T value, cudaStream_t s) { device::fill_elements(dst, n, value, s); }
  template <class T>
  static void scale(T* dst, std::size_t n, T factor, cudaStream_t s) { device::scale_elements(dst, n, factor, s); }
  template <class T>
  static void to_host(T* host_dst, const T* src, std::size_t n, cudaStream_t s) {
    if (n == 0) return;
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(host_dst, src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
  }
  template <class T>
  static void from_host(T* dst, const T* host_src, std::size_t n, cudaStream_t s) {
    if (n == 0) return;
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(dst, host_src, n * sizeof(T), cudaMemcpyHostToDevice, s));
    // Pinned sources are read asynchronously; wait so the caller may free or reuse them.
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
  }
};

}  // namespace shardcast::detail
