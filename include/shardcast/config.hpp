#pragma once
/// @file config.hpp
/// Macros shared by every shardcast header.

#define SHARDCAST_VERSION_MAJOR 0
#define SHARDCAST_VERSION_MINOR 1
#define SHARDCAST_VERSION_PATCH 0

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SHARDCAST_HOST_DEVICE __host__ __device__
#else
#define SHARDCAST_HOST_DEVICE
#endif

/// A namespace-scope constant object (the fn:: functors) that host code and device code
/// can both use: nvcc's device pass sees a __device__ constexpr variable, every other pass
/// an inline constexpr one (as CCCL's _CCCL_GLOBAL_CONSTANT).
#if defined(__CUDA_ARCH__)
#define SHARDCAST_GLOBAL_CONSTANT __device__ constexpr
#else
#define SHARDCAST_GLOBAL_CONSTANT inline constexpr
#endif

/// Largest number of mesh axes: of a mesh<N>, a layout<P...> and a runtime_layout.
#ifndef SHARDCAST_MAX_AXES
#define SHARDCAST_MAX_AXES 8
#endif
/// Largest tensor rank (number of dims) of a dtensor, of a plan and of the local boxes and
/// region copies behind them; a dtensor of higher rank fails to compile. Define both
/// before including shardcast to raise them (the fixed-size arrays grow with them).
#ifndef SHARDCAST_MAX_RANK
#define SHARDCAST_MAX_RANK 8
#endif
// Sets of mesh axes are bit masks of an int, and the planner keeps each axis' candidate
// placements (replicate, a shard per dim, two partials) in a 32-bit mask.
static_assert(SHARDCAST_MAX_AXES >= 1 && SHARDCAST_MAX_AXES <= 30, "shardcast: SHARDCAST_MAX_AXES must be between 1 and 30.");
static_assert(SHARDCAST_MAX_RANK >= 1 && SHARDCAST_MAX_RANK <= 29, "shardcast: SHARDCAST_MAX_RANK must be between 1 and 29.");

/// Default for mesh::set_result_pool_limit: at most this many bytes of released host
/// results (each >= 256 KiB) wait per rank to be reused by later results of the same size.
#ifndef SHARDCAST_RESULT_POOL_BYTES
#define SHARDCAST_RESULT_POOL_BYTES (std::size_t{512} << 20)
#endif

/// Brackets the host copy routines whose memcpy sizes GCC 12 cannot bound after inlining
/// into small fixed buffers: at -O2/-O3 it reports overflows on paths the callers' size
/// checks rule out (-Wstringop-overflow, -Wstringop-overread, -Warray-bounds). These
/// false reports are kept out of users' builds.
#if defined(__GNUC__) && !defined(__clang__)
#define SHARDCAST_SIZED_COPY_BEGIN                                  \
  _Pragma("GCC diagnostic push")                                    \
  _Pragma("GCC diagnostic ignored \"-Wstringop-overflow\"")         \
  _Pragma("GCC diagnostic ignored \"-Wstringop-overread\"")         \
  _Pragma("GCC diagnostic ignored \"-Warray-bounds\"")
#define SHARDCAST_SIZED_COPY_END _Pragma("GCC diagnostic pop")
#else
#define SHARDCAST_SIZED_COPY_BEGIN
#define SHARDCAST_SIZED_COPY_END
#endif
