#pragma once
/// @file bench/tool/device.hpp
/// The device backends of shardcast-bench (`--backend p2p|nccl`), built from device.cu when
/// CUDA is found at configure time (SHARDCAST_BENCH_WITH_DEVICE). main.cpp prints the rows
/// with the same table as the host backend.

#include <cstdint>
#include <functional>

#include "common.hpp"

namespace shardcast::bench {

struct transition_options;

/// One measured size on a device backend.
struct device_row {
  counts k{};
  double time_us = 0;     ///< per collective, the slowest rank's (CUDA events on each rank's stream)
  double cpy1 = 0;        ///< GB/s of one cudaMemcpyAsync D2D of `size` bytes, rank 0 alone
  double cpyN = 0;        ///< GB/s per rank with every rank copying `size` bytes at once
  std::int64_t wrong = 0; ///< -c 1: output elements, summed over ranks, that differ from the reference
};

/// The number of ranks `o` runs on its device backend, or -1 after explaining on stderr why
/// it cannot run here (no device; NCCL not built; more NCCL ranks than GPUs).
int device_ranks(const options& o);

/// Runs the sweep of `o` on its device backend, calling `on_row` for each size in order.
/// Returns 0, or a non-zero exit status after explaining on stderr.
int device_sweep(const options& o, const std::function<void(const device_row&)>& on_row);

/// Transition mode (`shardcast-bench redistribute --backend p2p|nccl`): the mesh's ranks as
/// in the collective mode (p2p: rank r on GPU r % visible; nccl: one rank per GPU), each
/// timing whole redistributes on its own stream (host clock, stopped after the stream
/// synchronised). Returns the exit status, after explaining on stderr when it cannot run.
int device_transition(const transition_options& o);

}  // namespace shardcast::bench
