#pragma once
/// @file cuda/check.hpp
/// SHARDCAST_CUDA_TRY and SHARDCAST_KERNEL. Host code may include this file; it only
/// pulls in <cuda_runtime_api.h>.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "../error.hpp"

namespace shardcast::detail {
[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
  // Clear the sticky error so the next unrelated check does not report this one again.
  (void)cudaGetLastError();
  throw cuda_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " +
                   expr + " [" + file + ":" + std::to_string(line) + "]");
}
}  // namespace shardcast::detail

/// Evaluates a cudaError_t expression; throws shardcast::cuda_error naming the error,
/// the expression and file:line unless it is cudaSuccess.
#define SHARDCAST_CUDA_TRY(call)                                                              \
  do {                                                                                        \
    const cudaError_t shardcast_cuda_try_status_ = (call);                                    \
    if (shardcast_cuda_try_status_ != cudaSuccess)                                            \
      ::shardcast::detail::throw_cuda_error(shardcast_cuda_try_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch that just happened (configuration errors surface here, not later).
#define SHARDCAST_CUDA_CHECK_LAUNCH() SHARDCAST_CUDA_TRY(cudaPeekAtLastError())

#if defined(__CUDACC__)
/// Kernels have hidden visibility so shared objects built for different architectures
/// that both instantiate a shardcast kernel do not resolve to each other's copy.
#define SHARDCAST_KERNEL __global__ __attribute__((visibility("hidden")))
#endif

namespace shardcast::device::detail {
/// Enough blocks to fill the device a few times over; grid-stride loops do the rest.
inline unsigned grid_for(std::int64_t work, unsigned block) {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 132;
    }
    return n;
  }();
  const std::int64_t want = (work + block - 1) / block;
  const std::int64_t cap = std::int64_t(sms) * 8;
  return static_cast<unsigned>(want < 1 ? 1 : (want < cap ? want : cap));
}

}  // namespace shardcast::device::detail
