#pragma once
/// @file cuda/pack.cuh
/// Device-side local operations of the executor: N-D region copies between row-major
/// buffers (the pack/unpack of gathers and scatters along inner dims and of uneven
/// shards), fill and scale, and `detail::memory_ops<device_memory>` built on them.
///
/// A region copy is planned on the host (`device::detail::plan_region`, tested on the host):
/// dims contiguous in both buffers merge, and what is left is a set of equal rows, copied in
/// units of the widest size (up to 16 bytes) that every address and stride allows. It then
/// runs one of three ways (`detail::choose_region_path`), chosen from measurements on an
/// H200 (docs/bench/gpu.md; fractions of the device copy bandwidth):
/// - one contiguous run: `cudaMemcpyAsync`;
/// - units of 8 or 16 bytes (rows aligned alike in both buffers): the grid-stride unit kernel
///   below, one index computation per unit: 0.65-0.74 for rows of 64 B and 4 KiB of 16-byte
///   units and 0.45-0.47 for 4 KiB rows of 8-byte units, against 0.24-0.41 for
///   cudaMemcpy2DAsync and 0.04-0.11 for CUB's `cub::DeviceMemcpy::Batched` (one buffer per
///   row, the row pointers computed on the fly);
/// - smaller units, one outer dim and rows of at least SHARDCAST_COPY2D_MIN_ROW_BYTES (96):
///   `cudaMemcpy2DAsync`, which handles rows that are not aligned alike itself: 0.35-0.73 for
///   rows of 124 B to 4 KiB of 2- and 4-byte units, against 0.14-0.27 for the unit kernel and
///   0.05-0.31 for DeviceMemcpy::Batched;
/// - anything else (rows of 60 B of 4-byte units ran at 0.24-0.26 on the kernel and
///   0.23-0.24 through cudaMemcpy2DAsync; several outer dims): the unit kernel.
/// This header launches kernels: include it from CUDA sources (nvcc).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "../comm/communicator.hpp"
#include "../split.hpp"
#include "allocator.hpp"
#include "check.hpp"
#include "dtypes.hpp"
#include "index_math.hpp"

/// Region copies whose units are at least this many bytes run on the unit kernel.
#ifndef SHARDCAST_COPY_KERNEL_MIN_UNIT
#define SHARDCAST_COPY_KERNEL_MIN_UNIT 8
#endif
/// Region copies with smaller units, one outer dim and rows at least this long (bytes) run
/// as one cudaMemcpy2DAsync. Tuning knobs: bench_kernels prints every path.
#ifndef SHARDCAST_COPY2D_MIN_ROW_BYTES
#define SHARDCAST_COPY2D_MIN_ROW_BYTES 96
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
    dst[i] = convert<T>(shardcast::detail::wrapping_mul(convert<A>(dst[i]), factor));  // integers wrap, as on the host
}

/// dst[i] / divisor, as shardcast::detail::divide_mean divides.
template <class T>
SHARDCAST_KERNEL void divide_kernel(T* __restrict__ dst, std::size_t n, std::int64_t divisor) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = shardcast::detail::divide_mean(dst[i], divisor);
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

/// True when the plan is one outer dim of rows whose pitches cudaMemcpy2DAsync takes.
inline bool fits_memcpy2d(const region_plan& p) {
  constexpr std::int64_t max_pitch = std::numeric_limits<int>::max();  // cudaDeviceProp::memPitch on current GPUs
  return p.rank == 2 && p.sstride[0] * p.unit <= max_pitch && p.dstride[0] * p.unit <= max_pitch;
}

/// The rows of a two-dim plan with one cudaMemcpy2DAsync.
inline void copy_rows_2d(const unsigned char* src, unsigned char* dst, const region_plan& p, cudaStream_t s) {
  const auto unit = std::size_t(p.unit);
  SHARDCAST_CUDA_TRY(cudaMemcpy2DAsync(dst, std::size_t(p.dstride[0]) * unit, src, std::size_t(p.sstride[0]) * unit,
                                       std::size_t(p.ext[1]) * unit, std::size_t(p.ext[0]), cudaMemcpyDeviceToDevice, s));
}

/// Which way copy_region goes for a plan (see the file comment).
enum class region_path { none, memcpy, memcpy2d, kernel };
inline region_path choose_region_path(const region_plan& p) {
  if (p.total == 0) return region_path::none;
  if (p.contiguous()) return region_path::memcpy;
  if (p.unit >= SHARDCAST_COPY_KERNEL_MIN_UNIT) return region_path::kernel;
  if (p.row_units() * p.unit >= SHARDCAST_COPY2D_MIN_ROW_BYTES && fits_memcpy2d(p)) return region_path::memcpy2d;
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
    case detail::region_path::memcpy2d: return detail::copy_rows_2d(sb, db, p, s);
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

/// dst[i] /= divisor for i < n (integer types: truncating), stream-ordered.
template <class T>
void divide_elements(T* dst, std::size_t n, std::int64_t divisor, cudaStream_t s) {
  if (n == 0) return;
  detail::divide_kernel<T><<<detail::grid_for(std::int64_t(n), 256), 256, 0, s>>>(dst, n, divisor);
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
  static void divide(T* dst, std::size_t n, std::int64_t divisor, cudaStream_t s) { device::divide_elements(dst, n, divisor, s); }
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
