#pragma once
/// @file cuda/reduce_scatter.cuh
/// The fused "reduce N source buffers, apply an epilogue, store once" kernel, used by the
/// peer-memory backend's reduce-scatter and all-reduce (each rank reads its chunk from every
/// peer's buffer), and the one-pass epilogue applied after NCCL's reduce-scatter.
///
/// @code
///   // rank r of p: reduce chunk r of every peer's send buffer, scale by 1/p, store bf16.
///   const float* srcs[8]; for (int q = 0; q < p; ++q) srcs[q] = peer_send[q] + r * count;
///   sc::device::reduce_sources(srcs, p, out_bf16, count, sc::reduce_op::sum, stream,
///                            sc::device::scale{1.0f / p});
/// @endcode

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../comm/communicator.hpp"
#include "check.hpp"
#include "dtypes.hpp"
#include "epilogue.cuh"

/// Most source buffers one fused reduction reads (they travel as kernel parameters, so
/// the fast path needs no device-side pointer array and no host-to-device copy).
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

template <class T, int N>
struct alignas(sizeof(T) * N) vec {
  T v[N];
};

template <class A>
__device__ __forceinline__ A combine(A a, A b, reduce_op op) {
  switch (op) {
    case reduce_op::prod: return a * b;
    case reduce_op::max: return b > a ? b : a;
    case reduce_op::min: return b < a ? b : a;
    default: return a + b;  // sum, avg
  }
}

template <class In, class Out, class A, class Epi>
__device__ __forceinline__ Out reduce_one(const source_list<In>& s, std::size_t i, reduce_op op, A avg_div, Epi epi) {
  A acc = convert<A>(s.p[0][i]);
  for (int k = 1; k < s.n; ++k) acc = combine(acc, convert<A>(s.p[k][i]), op);
  if (op == reduce_op::avg) acc = static_cast<A>(acc / avg_div);
  return convert<Out>(epi(acc, i));
}

/// VEC > 1: every source and the destination are aligned for VEC-element vectors; the
/// last count % VEC elements are done one at a time. VEC == 1: any alignment.
template <int VEC, class In, class Out, class Epi>
SHARDCAST_KERNEL void reduce_sources_kernel(source_list<In> s, Out* __restrict__ dst, std::size_t count, reduce_op op,
                                            Epi epi) {
  using A = acc_type_t<In>;
  const A avg_div = convert<A>(s.n);
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if constexpr (VEC > 1) {
    const std::size_t nv = count / VEC;
    for (std::size_t j = tid; j < nv; j += stride) {
      A acc[VEC];
      {
        const vec<In, VEC> x = reinterpret_cast<const vec<In, VEC>*>(s.p[0])[j];
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] = convert<A>(x.v[e]);
      }
      for (int k = 1; k < s.n; ++k) {
        const vec<In, VEC> x = reinterpret_cast<const vec<In, VEC>*>(s.p[k])[j];
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] = combine(acc[e], convert<A>(x.v[e]), op);
      }
      vec<Out, VEC> y;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        A a = acc[e];
        if (op == reduce_op::avg) a = static_cast<A>(a / avg_div);
        y.v[e] = convert<Out>(epi(a, j * VEC + e));
      }
      reinterpret_cast<vec<Out, VEC>*>(dst)[j] = y;
    }
    for (std::size_t i = nv * VEC + tid; i < count; i += stride) dst[i] = reduce_one<In, Out, A>(s, i, op, avg_div, epi);
  } else {
    for (std::size_t i = tid; i < count; i += stride) dst[i] = reduce_one<In, Out, A>(s, i, op, avg_div, epi);
  }
}

}  // namespace detail

/// dst[i] = Out(epi(op_k srcs[k][i], i)) for i < count: one read of every source, one
/// store, accumulation in float for half/bf16/fp8 (in In otherwise). avg divides the sum
/// by nsrc before the epilogue. Sources may live on peer devices with peer access
/// enabled. Uses 16-byte vector loads when every pointer allows, else scalar loads.
/// `dst` may alias `srcs[k]` only if In and Out are the same type.
/// @tparam In  source element type; @tparam Out stored type (e.g. __nv_bfloat16 for a cast).
/// @tparam Epi an epilogue functor from epilogue.cuh (or any `A operator()(A, std::size_t) const`).
/// `srcs` is a host array of `nsrc` device pointers.
/// @throws layout_error if nsrc is 0 or longer than SHARDCAST_MAX_SOURCES.
/// @throws cuda_error if the launch fails.
template <class In, class Out, class Epi = identity>
void reduce_sources(const In* const* srcs, std::size_t nsrc, Out* dst, std::size_t count, reduce_op op, cudaStream_t stream,
                    Epi epi = {}) {
  SHARDCAST_EXPECTS(nsrc >= 1 && nsrc <= SHARDCAST_MAX_SOURCES,
                    "shardcast::device::reduce_sources: needs 1.." + std::to_string(SHARDCAST_MAX_SOURCES) +
                        " sources, got " + std::to_string(nsrc) + "; raise SHARDCAST_MAX_SOURCES");
  if (count == 0) return;
  detail::source_list<In> s{};
  s.n = static_cast<int>(nsrc);
  constexpr int vec = 16 / sizeof(In) > 0 ? int(16 / sizeof(In)) : 1;
  std::uintptr_t in_bits = 0;
  for (int k = 0; k < s.n; ++k) {
    s.p[k] = srcs[k];
    in_bits |= reinterpret_cast<std::uintptr_t>(srcs[k]);
  }
  const bool aligned = (in_bits % (vec * sizeof(In))) == 0 && (reinterpret_cast<std::uintptr_t>(dst) % (vec * sizeof(Out))) == 0;
  constexpr unsigned block = 256;
  if (aligned && vec > 1) {
    const unsigned grid = detail::grid_for(std::int64_t(count / vec) + 1, block);
    detail::reduce_sources_kernel<vec><<<grid, block, 0, stream>>>(s, dst, count, op, epi);
  } else {
    const unsigned grid = detail::grid_for(std::int64_t(count), block);
    detail::reduce_sources_kernel<1><<<grid, block, 0, stream>>>(s, dst, count, op, epi);
  }
  SHARDCAST_CUDA_CHECK_LAUNCH();
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
