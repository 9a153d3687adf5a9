/// @file bench/tool/device.cu
/// shardcast-bench on the device backends: `--backend p2p` (ranks are threads sharing this
/// process's GPUs, rank r on GPU r % visible, so several ranks may share one GPU) and
/// `--backend nccl` (one rank per GPU, nccl::run_local). Buffers live in device memory; each
/// rank times its collectives with CUDA events on its own stream and the slowest rank's
/// time is reported. The roofline columns are the device copy bandwidth measured in the
/// same run: cpy1, one cudaMemcpyAsync device-to-device of `size` bytes by rank 0 alone;
/// cpyN, per rank with every rank copying `size` bytes at once (ranks sharing a GPU share
/// its bandwidth). Both are bytes / time, as the host backend's memcpy columns.
/// With -c 1 every rank copies its output to the host and compares it with the reference.
/// Transition mode (device_transition) times whole redistributes on the same ranks.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <shardcast/comm/p2p.hpp>
#include <shardcast/cuda/pack.cuh>
#if defined(SHARDCAST_BENCH_WITH_NCCL)
#include <shardcast/comm/nccl.hpp>
#endif

#include "device.hpp"
#include "transition.hpp"

namespace shardcast::bench {
namespace {

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  return n;
}

/// A device buffer of n elements (at least one byte, so every pointer is valid).
template <class T>
struct dbuf {
  T* p = nullptr;
  explicit dbuf(std::size_t n) { SHARDCAST_CUDA_TRY(cudaMalloc(&p, (n ? n : 1) * sizeof(T))); }
  ~dbuf() { (void)cudaFree(p); }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
};

struct event_pair {
  cudaEvent_t a = nullptr, b = nullptr;
  event_pair() {
    SHARDCAST_CUDA_TRY(cudaEventCreate(&a));
    SHARDCAST_CUDA_TRY(cudaEventCreate(&b));
  }
  ~event_pair() {
    (void)cudaEventDestroy(a);
    (void)cudaEventDestroy(b);
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  /// Milliseconds between the two records (waits for the second).
  double ms() const {
    SHARDCAST_CUDA_TRY(cudaEventSynchronize(b));
    float t = 0;
    SHARDCAST_CUDA_TRY(cudaEventElapsedTime(&t, a, b));
    return double(t);
  }
};

/// Copies of `bytes` to time: at least `iters`, and enough to move 1 GiB (a device copy of a
/// few KiB takes microseconds, below what one pair of events resolves well).
int copy_reps(std::size_t bytes, int iters) {
  const std::size_t enough = (std::size_t{1} << 30) / (bytes ? bytes : 1);
  return static_cast<int>(std::min<std::size_t>(100000, std::max<std::size_t>(static_cast<std::size_t>(std::max(3, iters)), enough)));
}

/// What the rank threads of one size share; rank 0 reads it after a barrier.
struct shared_results {
  explicit shared_results(int n) : ms(std::size_t(n)), copy_ms(std::size_t(n)), wrong(std::size_t(n)) {}
  std::vector<double> ms, copy_ms;
  std::vector<std::int64_t> wrong;
  double copy1_ms = 0;
  int copy_reps = 0;
};

/// Every rank waits until the work on its stream is done and every other rank got here.
template <class Comm>
void sync_all(Comm& comm, cudaStream_t s) {
  SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
  comm.barrier();
}

template <class T, class Comm>
void run_size(Comm& comm, const options& o, std::size_t bytes, cudaStream_t s, shared_results& sh, device_row& out) {
  const int n = comm.size(), me = comm.rank();
  const counts k = counts_for(o.op_kind, bytes, sizeof(T), n);
  dbuf<T> send(k.send), recv(k.recv);
  std::vector<T> hsend(k.send), hrecv(k.recv);
  auto upload = [&] {
    fill_input(hsend.data(), k.send, me, o.op);
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(send.p, hsend.data(), k.send * sizeof(T), cudaMemcpyHostToDevice, s));
    if (o.op_kind == coll::broadcast) {
      fill_input(hrecv.data(), k.recv, me, o.op);
      SHARDCAST_CUDA_TRY(cudaMemcpyAsync(recv.p, hrecv.data(), k.recv * sizeof(T), cudaMemcpyHostToDevice, s));
    } else {
      SHARDCAST_CUDA_TRY(cudaMemsetAsync(recv.p, 0, k.recv * sizeof(T), s));
    }
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));  // the host vectors are pageable: done before they change
  };
  auto once = [&] {
    switch (o.op_kind) {
      case coll::all_reduce: comm.all_reduce(send.p, recv.p, k.arg, o.op, s); break;
      case coll::all_gather: comm.all_gather(send.p, recv.p, k.arg, s); break;
      case coll::reduce_scatter: comm.reduce_scatter(send.p, recv.p, k.arg, o.op, s); break;
      case coll::all_to_all: comm.all_to_all(send.p, recv.p, k.arg, s); break;
      case coll::broadcast: comm.broadcast(recv.p, k.arg, o.root, s); break;
      case coll::sendrecv: ring_sendrecv(comm, send.p, recv.p, k.arg, s); break;
    }
  };
  upload();
  for (int i = 0; i < o.warmup; ++i) once();
  std::vector<double> batch_ms;  // rank 0: per batch, the slowest rank's time
  for (int b = 0; b < o.batches; ++b) {
    sync_all(comm, s);  // also: rank 0 has read the previous batch's times
    {
      event_pair ev;
      SHARDCAST_CUDA_TRY(cudaEventRecord(ev.a, s));
      for (int i = 0; i < o.iters; ++i) once();
      SHARDCAST_CUDA_TRY(cudaEventRecord(ev.b, s));
      sh.ms[std::size_t(me)] = ev.ms();
    }
    sync_all(comm, s);
    if (me == 0) batch_ms.push_back(*std::max_element(sh.ms.begin(), sh.ms.end()));
  }

  if (o.check) {
    upload();  // fresh inputs (broadcast overwrote non-root buffers)
    sync_all(comm, s);
    once();
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(hrecv.data(), recv.p, k.recv * sizeof(T), cudaMemcpyDeviceToHost, s));
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    sh.wrong[std::size_t(me)] = count_wrong<T>(o.op_kind, o.op, n, o.root, me, k, hrecv.data());
    sync_all(comm, s);
  }

  if (o.roofline && k.bytes) {
    dbuf<unsigned char> a(k.bytes), b(k.bytes);
    SHARDCAST_CUDA_TRY(cudaMemsetAsync(a.p, 1, k.bytes, s));
    SHARDCAST_CUDA_TRY(cudaMemcpyAsync(b.p, a.p, k.bytes, cudaMemcpyDeviceToDevice, s));  // warm up
    const int reps = copy_reps(k.bytes, o.iters);
    auto copies = [&] {
      event_pair ev;
      SHARDCAST_CUDA_TRY(cudaEventRecord(ev.a, s));
      for (int i = 0; i < reps; ++i) SHARDCAST_CUDA_TRY(cudaMemcpyAsync(b.p, a.p, k.bytes, cudaMemcpyDeviceToDevice, s));
      SHARDCAST_CUDA_TRY(cudaEventRecord(ev.b, s));
      return ev.ms();
    };
    sync_all(comm, s);
    sh.copy_ms[std::size_t(me)] = copies();  // every rank at once
    sync_all(comm, s);
    if (me == 0) sh.copy1_ms = copies();     // rank 0 alone
    sh.copy_reps = reps;
    sync_all(comm, s);
  }

  if (me == 0) {
    out.k = k;
    out.time_us = median(batch_ms) * 1e3 / o.iters;
    out.wrong = 0;
    for (auto w : sh.wrong) out.wrong += w;
    if (o.roofline && k.bytes) {
      const double total = double(k.bytes) * sh.copy_reps;
      out.cpyN = total / (*std::max_element(sh.copy_ms.begin(), sh.copy_ms.end()) * 1e-3) / 1e9;
      out.cpy1 = total / (sh.copy1_ms * 1e-3) / 1e9;
    }
  }
  sync_all(comm, s);  // rank 0 has read `sh` before anyone reuses it
}

/// The whole sweep on one rank of `comm` (called on every rank thread); rank 0 reports rows.
template <class Comm>
void run_sweep(Comm& comm, const options& o, cudaStream_t s, shared_results& sh, const std::function<void(const device_row&)>& on_row) {
  for (std::size_t bytes : sweep(o)) {
    device_row row;
    with_dtype(o.type, [&]<class T>() { run_size<T>(comm, o, bytes, s, sh, row); });
    if (comm.rank() == 0) on_row(row);
  }
}

/// GPUs the `n` ranks of a device backend use: 0 .. min(visible, n) - 1.
std::vector<int> devices_for(int n) {
  std::vector<int> devices;
  for (int d = 0; d < std::min(visible_devices(), n); ++d) devices.push_back(d);
  return devices;
}

/// Runs `body(comm, stream)` on each of the `n` ranks of `backend` (p2p: rank r on GPU
/// r % devices_for(n).size(); nccl: one rank per GPU), each with its own non-blocking stream.
template <class Body>
void on_device_ranks(const std::string& backend, int n, Body body) {
  auto rank = [&](auto& comm) {
    cudaStream_t s = nullptr;
    SHARDCAST_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    try {
      body(comm, s);
    } catch (...) {
      (void)cudaStreamDestroy(s);
      throw;
    }
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  };
  if (backend == "p2p") {
    p2p::run(n, devices_for(n), [&](p2p::communicator& c) { rank(c); });
  } else {
#if defined(SHARDCAST_BENCH_WITH_NCCL)
    nccl::run_local(n, [&](nccl::communicator& c) { rank(c); });
#endif
  }
}

}  // namespace

int device_ranks(const options& o) {
#if !defined(SHARDCAST_BENCH_WITH_NCCL)
  if (o.backend == "nccl") {
    std::fprintf(stderr, "shardcast-bench: backend nccl not built (needs NCCL at configure time)\n");
    return -1;
  }
#endif
  const int ndev = visible_devices();
  if (ndev == 0) {
    std::fprintf(stderr, "shardcast-bench: backend %s needs a CUDA device; none is visible\n", o.backend.c_str());
    return -1;
  }
  if (o.backend == "nccl") {
    if (o.ranks > ndev) {
      std::fprintf(stderr,
                   "shardcast-bench: --backend nccl runs one rank per GPU; %d ranks asked, %d GPUs visible "
                   "(use --ranks %d, or --backend p2p for several ranks on one GPU)\n",
                   o.ranks, ndev, ndev);
      return -1;
    }
    return o.ranks;
  }
  if (o.backend == "p2p") return o.ranks;
  std::fprintf(stderr, "shardcast-bench: %s is not a device backend\n", o.backend.c_str());
  return -1;
}

int device_sweep(const options& o, const std::function<void(const device_row&)>& on_row) {
  const int n = device_ranks(o);
  if (n < 0) return 2;
  if (const std::string why = rank_problem(o.op_kind, o.root, n); !why.empty()) {
    std::fprintf(stderr, "shardcast-bench: %s\n", why.c_str());
    return 2;
  }
  std::printf("# device backend: buffers in device memory, times from CUDA events; cpy1/cpyN are device copies, not host memcpy:\n"
              "# cpy1 = one cudaMemcpyAsync device-to-device of size bytes by rank 0 alone; cpyN = per rank, every rank copying at "
              "once; %d rank(s) on %zu GPU(s)\n",
              n, devices_for(n).size());
  shared_results sh(n);
  on_device_ranks(o.backend, n, [&](auto& comm, cudaStream_t s) { run_sweep(comm, o, s, sh, on_row); });
  return 0;
}

namespace {
/// Transition mode on one device backend, for a mesh of N axes and a tensor of rank R.
template <int N, int R>
int run_device_transition(const transition_options& o) {
  const transition_problem<N, R> pb(o);
  options co;
  co.backend = o.backend;
  co.ranks = pb.nranks;
  const int n = device_ranks(co);
  if (n < 0) return 2;
  const std::string text =
      o.backend + " backend, " + std::to_string(devices_for(n).size()) + " GPU(s), device memory, host clock after a stream sync";
  print_transition_header(o, pb, text.c_str());
  std::vector<transition_measure> ranks(static_cast<std::size_t>(n));
  on_device_ranks(o.backend, n, [&](auto& comm, cudaStream_t s) {
    ranks[static_cast<std::size_t>(comm.rank())] = measure_transition(comm, pb, o, s, [&] { SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s)); });
  });
  return report_transition(o, pb, ranks);
}
}  // namespace

int device_transition(const transition_options& o) {
  return with_transition_shape(o, [&]<int N, int R>() { return run_device_transition<N, R>(o); });
}

}  // namespace shardcast::bench
