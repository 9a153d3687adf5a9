#pragma once
/// @file cuda/reduce_scatter.cuh
/// The fused "reduce N source buffers, apply an epilogue, store once" kernel, used by the
/// peer-memory backend's reduce-scatter and all-reduce (each rank reads its chunk from every
/// peer's buffer), and the one-pass epilogue applied after NCCL's reduce-scatter.
///
/// Two implementations, chosen per call (`detail::choose_reduce_path`):
/// - A grid-stride kernel written here, taken whenever it can move 16-byte vectors: all
///   pointers share an element phase, so it does only the head and tail one element at a
///   time (`device::detail::split_for_vectors`, tested on the host). It takes any source
///   count (up to SHARDCAST_MAX_SOURCES) with one instantiation and any epilogue, also one
///   that needs the element index (a bias over the innermost dim). On an H200 it ran at
///   0.98-1.08 of the device copy bandwidth for 4 sources of float and bfloat16, against
///   0.65-1.02 for DeviceTransform (docs/bench/gpu.md).
/// - CUB's `cub::DeviceTransform` (CCCL 3.x) when the pointers' phases differ (the kernel
///   would fall back to one element at a time), the source count is 1, 2, 4 or 8 and the
///   epilogue ignores the element index (`epilogue_uses_index_v`): it handles any pointer
///   alignment itself, and on Hopper and later stages tiles through shared memory with bulk
///   copies (`cp.async.bulk`), which also read peer-mapped memory (mscclpp documents its
///   bulk-copy primitives on peer pointers, github.com/microsoft/mscclpp pull 853).
///
/// @code
///   // rank r of p: reduce chunk r of every peer's send buffer, scale by 1/p, store bf16.
///   const float* srcs[8]; for (int q = 0; q < p; ++q) srcs[q] = peer_send[q] + r * count;
///   sc::device::reduce_sources(srcs, p, out_bf16, count, sc::reduce_op::sum, stream,
///                            sc::device::scale{1.0f / p});
/// @endcode
/// This header launches kernels: include it from CUDA sources (nvcc).

#include <cub/device/device_transform.cuh>
#include <cuda/std/tuple>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../comm/communicator.hpp"
#include "check.hpp"
#include "dtypes.hpp"
#include "epilogue.cuh"
#include "index_math.hpp"

/// Most source buffers one fused reduction reads (they travel as kernel parameters, so
/// the kernel needs no device-side pointer array and no host-to-device copy).
#ifndef SHARDCAST_MAX_SOURCES
#define SHARDCAST_MAX_SOURCES 64
#endif

namespace shardcast::device {
namespace detail {

template <class In>
struct source_list {
  const In* p[SHARDCAST_MAX_SOURCES];
  int n;
};

template <class A>
SHARDCAST_HOST_DEVICE inline A combine(A a, A b, reduce_op op) {
  switch (op) {
    case reduce_op::prod: return shardcast::detail::wrapping_mul(a, b);  // integers wrap, as on the host
    case reduce_op::max: return (b > a || b != b) ? b : a;  // a NaN on either side wins, as on the host
    case reduce_op::min: return (b < a || b != b) ? b : a;
    default: return shardcast::detail::wrapping_add(a, b);  // sum, avg
  }
}

/// sum / n for avg: integers divide in their promoted type, as the host's divide_mean (n as
/// an int8 would wrap from 128 on); floating types by the divisor converted once (avg_div).
template <class A>
SHARDCAST_HOST_DEVICE inline A mean_of(A sum, A avg_div, int n) {
  if constexpr (std::is_integral_v<A>) return shardcast::detail::divide_mean(sum, n);
  else return static_cast<A>(sum / avg_div);
}

template <class In, class Out, class A, class Epi>
__device__ __forceinline__ Out reduce_one(const source_list<In>& s, std::size_t i, reduce_op op, A avg_div, Epi epi) {
  A acc = convert<A>(s.p[0][i]);
  for (int k = 1; k < s.n; ++k) acc = combine(acc, convert<A>(s.p[k][i]), op);
  if (op == reduce_op::avg) acc = mean_of(acc, avg_div, s.n);
  return convert<Out>(epi(acc, i));
}

/// Elements [vs.head, vs.head + vs.nvec * W) go as aligned W-element vectors from every
/// source to `dst`; the others one at a time. `dst` may be one of the sources (each thread
/// reads its elements from every source before it stores them), so it is not __restrict__.
template <int W, class In, class Out, class Epi>
SHARDCAST_KERNEL void reduce_sources_kernel(source_list<In> s, Out* dst, std::size_t count, vector_split vs, reduce_op op, Epi epi) {
  using A = acc_type_t<In>;
  const A avg_div = convert<A>(static_cast<float>(s.n));
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if constexpr (W > 1) {
    for (std::size_t j = tid; j < vs.nvec; j += stride) {
      const std::size_t e0 = vs.head + j * std::size_t(W);
      A acc[W];
      {
        const aligned_vector<In, W> x = *reinterpret_cast<const aligned_vector<In, W>*>(s.p[0] + e0);
#pragma unroll
        for (int e = 0; e < W; ++e) acc[e] = convert<A>(x.v[e]);
      }
      for (int k = 1; k < s.n; ++k) {
        const aligned_vector<In, W> x = *reinterpret_cast<const aligned_vector<In, W>*>(s.p[k] + e0);
#pragma unroll
        for (int e = 0; e < W; ++e) acc[e] = combine(acc[e], convert<A>(x.v[e]), op);
      }
      aligned_vector<Out, W> y;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        A a = acc[e];
        if (op == reduce_op::avg) a = mean_of(a, avg_div, s.n);
        y.v[e] = convert<Out>(epi(a, e0 + std::size_t(e)));
      }
      *reinterpret_cast<aligned_vector<Out, W>*>(dst + e0) = y;
    }
  }
  const std::size_t ns = scalar_count(count, vs, W);
  for (std::size_t i = tid; i < ns; i += stride) {
    const std::size_t e = scalar_index(vs, W, i);
    dst[e] = reduce_one<In, Out, A>(s, e, op, avg_div, epi);
  }
}

/// The DeviceTransform operation: reduce the N values of one element in A, then the
/// (index-free) epilogue, then the conversion to Out.
template <class A, class Out, class Epi>
struct fused_reduce_op {
  reduce_op op;
  A avg_div;
  Epi epi;
  template <class... X>
  __device__ Out operator()(X... x) const {
    const A v[] = {convert<A>(x)...};
    A acc = v[0];
#pragma unroll
    for (int k = 1; k < int(sizeof...(X)); ++k) acc = combine(acc, v[k], op);
    if (op == reduce_op::avg) acc = mean_of(acc, avg_div, int(sizeof...(X)));
    return convert<Out>(epi(acc, std::size_t(0)));
  }
};

template <class In, class Out, class Epi, std::size_t... I>
void transform_sources(std::index_sequence<I...>, const In* const* srcs, Out* dst, std::size_t count, reduce_op op, cudaStream_t stream,
                       Epi epi) {
  using A = acc_type_t<In>;
  const fused_reduce_op<A, Out, Epi> f{op, convert<A>(static_cast<float>(sizeof...(I))), epi};
  SHARDCAST_CUDA_TRY(cub::DeviceTransform::Transform(::cuda::std::make_tuple(srcs[I]...), dst, static_cast<std::int64_t>(count), f, stream));
}

/// The CUB path for exactly N sources (1, 2, 4 or 8); the epilogue must ignore the index.
template <int N, class In, class Out, class Epi>
void reduce_sources_cub(const In* const* srcs, Out* dst, std::size_t count, reduce_op op, cudaStream_t stream, Epi epi) {
  static_assert(!epilogue_uses_index_v<Epi>,
                "shardcast::device::reduce_sources_cub: DeviceTransform passes no element index; use an epilogue with "
                "uses_index = false, or reduce_sources_kernel.");
  if (count == 0) return;
  transform_sources(std::make_index_sequence<std::size_t(N)>{}, srcs, dst, count, op, stream, epi);
}

/// Elements per vector of the kernel path for In sources and Out results.
template <class In, class Out>
inline constexpr int reduce_vector_width = [] {
  constexpr std::size_t both[] = {sizeof(In), sizeof(Out)};
  return vector_width(both, 2);
}();

/// How the kernel path cuts `count` elements of `nsrc` sources and `dst` into scalar head,
/// vectors and scalar tail (nsrc <= SHARDCAST_MAX_SOURCES).
template <class In, class Out>
vector_split reduce_split(const In* const* srcs, std::size_t nsrc, const Out* dst, std::size_t count) {
  std::uintptr_t addrs[SHARDCAST_MAX_SOURCES + 1];
  std::size_t sizes[SHARDCAST_MAX_SOURCES + 1];
  for (std::size_t k = 0; k < nsrc; ++k) {
    addrs[k] = reinterpret_cast<std::uintptr_t>(srcs[k]);
    sizes[k] = sizeof(In);
  }
  addrs[nsrc] = reinterpret_cast<std::uintptr_t>(dst);
  sizes[nsrc] = sizeof(Out);
  return split_for_vectors(count, reduce_vector_width<In, Out>, addrs, sizes, static_cast<int>(nsrc) + 1);
}

/// The kernel path for any number of sources (1..SHARDCAST_MAX_SOURCES) and any epilogue,
/// given the split `reduce_split` made for these pointers.
template <class In, class Out, class Epi>
void reduce_sources_kernel_path(const In* const* srcs, std::size_t nsrc, Out* dst, std::size_t count, const vector_split& vs,
                                reduce_op op, cudaStream_t stream, Epi epi) {
  if (count == 0) return;
  source_list<In> s{};
  s.n = static_cast<int>(nsrc);
  for (int k = 0; k < s.n; ++k) s.p[k] = srcs[k];
  constexpr int w = reduce_vector_width<In, Out>;
  constexpr unsigned block = 256;
  const std::size_t ns = scalar_count(count, vs, w);
  const unsigned grid = grid_for(static_cast<std::int64_t>(vs.nvec > ns ? vs.nvec : ns), block);
  reduce_sources_kernel<w><<<grid, block, 0, stream>>>(s, dst, count, vs, op, epi);
  SHARDCAST_CUDA_CHECK_LAUNCH();
}

/// The kernel path for any number of sources (1..SHARDCAST_MAX_SOURCES) and any epilogue.
template <class In, class Out, class Epi>
void reduce_sources_kernel_path(const In* const* srcs, std::size_t nsrc, Out* dst, std::size_t count, reduce_op op, cudaStream_t stream,
                                Epi epi) {
  reduce_sources_kernel_path(srcs, nsrc, dst, count, reduce_split(srcs, nsrc, dst, count), op, stream, epi);
}

/// Which implementation reduce_sources runs (see the file comment).
enum class reduce_path { kernel, cub };

/// The kernel when it moves vectors (`vs`, the kernel path's split, has any), or when
/// DeviceTransform cannot serve the call (an epilogue that needs the index, a source count
/// other than 1, 2, 4, 8); else CUB.
template <class In, class Out, class Epi>
reduce_path choose_reduce_path(std::size_t nsrc, const vector_split& vs) {
  if constexpr (epilogue_uses_index_v<Epi>) {
    return reduce_path::kernel;
  } else {
    if (nsrc != 1 && nsrc != 2 && nsrc != 4 && nsrc != 8) return reduce_path::kernel;
    if (reduce_vector_width<In, Out> > 1 && vs.nvec > 0) return reduce_path::kernel;
    return reduce_path::cub;
  }
}

/// The same for these pointers (nsrc must be 1..SHARDCAST_MAX_SOURCES).
template <class In, class Out, class Epi>
reduce_path choose_reduce_path(const In* const* srcs, std::size_t nsrc, const Out* dst, std::size_t count) {
  return choose_reduce_path<In, Out, Epi>(nsrc, reduce_split(srcs, nsrc, dst, count));
}

}  // namespace detail

/// dst[i] = Out(epi(op_k srcs[k][i], i)) for i < count: one read of every source, one
/// store, accumulation in float for half/bf16/fp8 (in In otherwise). avg divides the sum
/// by nsrc before the epilogue. Sources may live on peer devices with peer access
/// enabled. `dst` may be one of `srcs[k]` (same start) only if In and Out are the same
/// type; other overlaps are not supported.
/// @tparam In  source element type; @tparam Out stored type (e.g. __nv_bfloat16 for a cast).
/// @tparam Epi an epilogue functor from epilogue.cuh (or any `A operator()(A, std::size_t) const`).
/// @param srcs host array of `nsrc` device pointers
/// @throws layout_error if nsrc is 0 or larger than SHARDCAST_MAX_SOURCES.
/// @throws cuda_error if the launch fails.
template <class In, class Out, class Epi = identity>
void reduce_sources(const In* const* srcs, std::size_t nsrc, Out* dst, std::size_t count, reduce_op op, cudaStream_t stream,
                    Epi epi = {}) {
  SHARDCAST_EXPECTS(nsrc >= 1 && nsrc <= SHARDCAST_MAX_SOURCES,
                    "shardcast::device::reduce_sources: needs 1.." + std::to_string(SHARDCAST_MAX_SOURCES) +
                        " sources, got " + std::to_string(nsrc) + "; raise SHARDCAST_MAX_SOURCES");
  if (count == 0) return;
  const detail::vector_split vs = detail::reduce_split(srcs, nsrc, dst, count);  // made once, for the choice and the kernel
  if constexpr (!epilogue_uses_index_v<Epi>) {
    if (detail::choose_reduce_path<In, Out, Epi>(nsrc, vs) == detail::reduce_path::cub) {
      switch (nsrc) {  // choose_reduce_path returns cub for these counts only
        case 1: return detail::reduce_sources_cub<1>(srcs, dst, count, op, stream, epi);
        case 2: return detail::reduce_sources_cub<2>(srcs, dst, count, op, stream, epi);
        case 4: return detail::reduce_sources_cub<4>(srcs, dst, count, op, stream, epi);
        case 8: return detail::reduce_sources_cub<8>(srcs, dst, count, op, stream, epi);
        default: break;
      }
    }
  }
  detail::reduce_sources_kernel_path(srcs, nsrc, dst, count, vs, op, stream, epi);
}

/// dst[i] = Out(epi(src[i], i)): one pass over the output of a collective that already
/// reduced (e.g. NCCL's reduce-scatter), instead of a separate scale/bias/activation/cast
/// kernel each. In place when `dst == src` and In == Out.
/// @throws cuda_error if the launch fails.
template <class In, class Out, class Epi>
void apply_epilogue(const In* src, Out* dst, std::size_t count, Epi epi, cudaStream_t stream) {
  const In* one[1] = {src};
  reduce_sources<In, Out, Epi>(one, 1, dst, count, reduce_op::sum, stream, epi);
}

}  // namespace shardcast::device
