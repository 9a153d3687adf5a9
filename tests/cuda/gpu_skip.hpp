#pragma once
// Device detection shared by the gpu-labelled tests: without a device every case is
// skipped (doctest::skip) and the run prints the line CTest's SKIP_REGULAR_EXPRESSION matches.
#include <cuda_runtime_api.h>

#include <cstdio>

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
}  // namespace shardcast_test
