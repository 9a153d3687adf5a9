#pragma once
// What the gpu-labelled tests share:
// - device detection: without a device every case is skipped (doctest::skip) and the run
//   prints the line CTest's SKIP_REGULAR_EXPRESSION matches;
// - stream_guard, a CUDA stream for the length of a scope;
// - device_buffer<T>, n device elements starting `shift` elements past a 256-byte aligned
//   cudaMalloc base (shift 0: aligned), with host copies in and out.
// Host code may include it (test_nccl.cpp is built by the C++ compiler).
#include <shardcast/cuda/check.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <vector>

namespace shardcast_test {
inline int device_count() {
  static const int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      (void)cudaGetLastError();
      c = 0;
    }
    if (c == 0) std::printf("SKIPPED: no CUDA device\n");
    return c;
  }();
  return n;
}
inline bool no_device() { return device_count() == 0; }

struct stream_guard {
  cudaStream_t s{};
  stream_guard() { SHARDCAST_CUDA_TRY(cudaStreamCreate(&s)); }
  ~stream_guard() { (void)cudaStreamDestroy(s); }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;
};

template <class T>
struct device_buffer {
  void* raw = nullptr;
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t n_, std::size_t shift = 0) : n(n_) {
    SHARDCAST_CUDA_TRY(cudaMalloc(&raw, (n + shift + 1) * sizeof(T)));
    p = static_cast<T*>(raw) + shift;
  }
  ~device_buffer() { (void)cudaFree(raw); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  void put(const std::vector<T>& h) { SHARDCAST_CUDA_TRY(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    SHARDCAST_CUDA_TRY(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};
}  // namespace shardcast_test
