#pragma once
/// @file cuda/pack.cuh
/// Device-side local operations of the executor: N-D region copies between row-major
/// buffers (the pack/unpack of gathers and scatters along inner dims and of uneven
/// shards), fill and scale, and `detail::memory_ops<device_memory>` built on them.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../comm/communicator.hpp"
#include "../split.hpp"
#include "check.hpp"
#include "dtypes.hpp"

namespace shardcast::device {
namespace detail {

/// A strided N-D copy in units of W bytes, after merging dims that are contiguous in both buffers.
struct region_desc {
  int rank = 0;
  std::int64_t ext[SHARDCAST_MAX_RANK]{};      // in units; innermost last
  std::int64_t sstride[SHARDCAST_MAX_RANK]{};  // in units
  std::int64_t dstride[SHARDCAST_MAX_RANK]{};
  std::int64_t total = 0;
};

template <int W> struct unit_of;
template <> struct unit_of<1> { using type = unsigned char; };
template <> struct unit_of<2> { using type = unsigned short; };
template <> struct unit_of<4> { using type = unsigned int; };
template <> struct unit_of<8> { using type = uint2; };
template <> struct unit_of<16> { using type = uint4; };

template <class U>
SHARDCAST_KERNEL void copy_region_kernel(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                         region_desc d) {
  const U* s = reinterpret_cast<const U*>(src);
  U* o = reinterpret_cast<U*>(dst);
  const std::int64_t inner = d.ext[d.rank - 1];
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < d.total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t row = idx / inner;
    const std::int64_t col = idx - row * inner;
    std::int64_t so = col * d.sstride[d.rank - 1], dof = col * d.dstride[d.rank - 1];
    for (int k = d.rank - 2; k >= 0; --k) {
      const std::int64_t c = row % d.ext[k];
      row /= d.ext[k];
      so += c * d.sstride[k];
      dof += c * d.dstride[k];
    }
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

}  // namespace detail

/// Copies the elements of global box `region` from `src` (holding `src_box` row-major) to
/// `dst` (holding `dst_box` row-major), stream-ordered. Dims contiguous in both buffers are
/// merged; the widest unit (up to 16 bytes) that every address and stride allows is used, so
/// aligned rows move as vector loads/stores and misaligned ones still work.
/// @throws layout_error if the boxes' ranks differ or `region` is not inside both boxes.
/// @throws cuda_error if the launch fails.
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
  // Element strides of both buffers and the region's start offsets in them.
  std::int64_t ss[SHARDCAST_MAX_RANK], ds[SHARDCAST_MAX_RANK];
  std::int64_t sacc = 1, dacc = 1, soff = 0, doff = 0;
  for (int d = r - 1; d >= 0; --d) {
    ss[d] = sacc;
    ds[d] = dacc;
    soff += (region.off[d] - src_box.off[d]) * sacc;
    doff += (region.off[d] - dst_box.off[d]) * dacc;
    sacc *= src_box.ext[d];
    dacc *= dst_box.ext[d];
  }
  // Merge dim d into d+1 while the region spans d+1 fully in both buffers.
  detail::region_desc m;
  std::int64_t ext[SHARDCAST_MAX_RANK], mss[SHARDCAST_MAX_RANK], mds[SHARDCAST_MAX_RANK];
  int n = 0;
  ext[0] = region.ext[r - 1];
  mss[0] = ss[r - 1];
  mds[0] = ds[r - 1];
  n = 1;
  for (int d = r - 2; d >= 0; --d) {
    const int last = n - 1;
    if (mss[last] * ext[last] == ss[d] && mds[last] * ext[last] == ds[d]) {
      ext[last] *= region.ext[d];
    } else {
      ext[n] = region.ext[d];
      mss[n] = ss[d];
      mds[n] = ds[d];
      ++n;
    }
  }
  const auto* sb = reinterpret_cast<const unsigned char*>(src + soff);
  auto* db = reinterpret_cast<unsigned char*>(dst + doff);
  if (n == 1 && mss[0] == 1 && mds[0] == 1) {
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(db, sb, ext[0] * sizeof(T), cudaMemcpyDeviceToDevice, s));
    return;
  }
  // Widest unit W such that addresses, row byte lengths and all byte strides are multiples of W.
  std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(sb) | reinterpret_cast<std::uintptr_t>(db);
  if (mss[0] == 1 && mds[0] == 1) bits |= std::uintptr_t(ext[0] * sizeof(T));
  else bits |= sizeof(T);
  for (int k = 0; k < n; ++k) bits |= std::uintptr_t(mss[k] * sizeof(T)) | std::uintptr_t(mds[k] * sizeof(T));
  int w = 16;
  while (w > 1 && (bits & (w - 1))) w /= 2;
  if (w < int(sizeof(T)) && !(mss[0] == 1 && mds[0] == 1)) w = int(sizeof(T));  // strided inner dim: whole elements
  m.rank = n;
  m.total = 1;
  for (int k = 0; k < n; ++k) {
    // desc is outermost first; our merged arrays are innermost first.
    const int o = n - 1 - k;
    const bool inner = k == 0 && mss[0] == 1 && mds[0] == 1;
    m.ext[o] = inner ? ext[k] * std::int64_t(sizeof(T)) / w : ext[k];
    // The innermost dim is contiguous in both buffers (row-major), so its unit stride is 1.
    m.sstride[o] = inner ? 1 : mss[k] * std::int64_t(sizeof(T)) / w;
    m.dstride[o] = inner ? 1 : mds[k] * std::int64_t(sizeof(T)) / w;
    m.total *= m.ext[o];
  }
  constexpr unsigned block = 256;
  const unsigned grid = detail::grid_for(m.total, block);
  switch (w) {
    case 16: detail::copy_region_kernel<uint4><<<grid, block, 0, s>>>(sb, db, m); break;
    case 8: detail::copy_region_kernel<uint2><<<grid, block, 0, s>>>(sb, db, m); break;
    case 4: detail::copy_region_kernel<unsigned int><<<grid, block, 0, s>>>(sb, db, m); break;
    case 2: detail::copy_region_kernel<unsigned short><<<grid, block, 0, s>>>(sb, db, m); break;
    default: detail::copy_region_kernel<unsigned char><<<grid, block, 0, s>>>(sb, db, m); break;
  }
  SHARDCAST_CUDA_CHECK_LAUNCH();
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
  /// Stream-ordered allocation (cudaMallocAsync); the deleter frees on the same stream.
  template <class T>
  static std::shared_ptr<T> allocate(std::size_t n, cudaStream_t s) {
    if (n == 0) return std::shared_ptr<T>();
    void* p = nullptr;
    SHARDCAST_CUDA_TRY(cudaMallocAsync(&p, n * sizeof(T), s));
    // A deleter must not throw; a failed free here means the context is already gone.
    return std::shared_ptr<T>(static_cast<T*>(p), [s](T* q) { (void)cudaFreeAsync(q, s); });
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
