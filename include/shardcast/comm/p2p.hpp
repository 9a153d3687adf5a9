#pragma once
/// @file comm/p2p.hpp
/// The peer-memory backend: ranks are threads of this process whose buffers live on one or
/// more GPUs (several ranks may share one). Collectives read peers' buffers directly: the
/// reductions are one fused kernel per rank (cuda/reduce_scatter.cuh) and the data moves are
/// cudaMemcpyPeerAsync. Ordering is stream-ordered with events: each rank records an event on
/// its stream after publishing its pointers and every peer waits on it with
/// cudaStreamWaitEvent before reading; a second event says "done reading", so no rank reuses a
/// buffer a peer is still reading (all_reduce has a third, between its two phases). The host
/// side meets at one barrier per event (comm/rank_barrier.hpp: spin, yield, then park): two
/// per collective, three for all_reduce. Point-to-point send/recv are pairwise: one channel per
/// (sender, receiver), so only the two ranks involved meet (see communicator::send).
/// Host-side rendezvous has the host backend's failure semantics: a rank that throws aborts
/// the world, and a wait longer than the timeout is a comm_error.
/// This header launches kernels: include it from CUDA sources (nvcc).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "../cuda/allocator.hpp"
#include "../cuda/check.hpp"
#include "../cuda/dtypes.hpp"
#include "../cuda/reduce_scatter.cuh"
#include "../error.hpp"
#include "communicator.hpp"
#include "in_process.hpp"

namespace shardcast::p2p {

/// Options of p2p::run.
struct options {
  std::chrono::milliseconds timeout{0};  ///< 0: SHARDCAST_TIMEOUT_MS or 60 s
  /// Device memory of every rank's tensors and temporaries (cuda/allocator.hpp); unset: the
  /// allocator current in the calling thread when run starts. Shared by all ranks, so it must
  /// be thread-safe.
  std::optional<device::any_allocator> allocator{};
};

namespace detail {

inline std::chrono::milliseconds timeout_or_default(std::chrono::milliseconds t) {
  if (t.count() > 0) return t;
  if (const char* e = std::getenv("SHARDCAST_TIMEOUT_MS")) {
    const long v = std::strtol(e, nullptr, 10);
    if (v > 0) return std::chrono::milliseconds(v);
  }
  return std::chrono::milliseconds(60000);
}

/// State shared by every rank of one p2p::run (comm/in_process.hpp).
using world_state = shardcast::detail::in_process_world;

struct slot {
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  const std::size_t* send_counts = nullptr;
  const std::size_t* send_displs = nullptr;
  int root = 0, color = 0, key = 0, device = 0;
  // The rank's events, recorded on its stream after its inputs are ready, after its part of
  // an all_reduce's reduction, and after it finished reading peers. Made once by the rank
  // (on its device) when its communicator is made, and destroyed with the group: a peer may
  // still be making its stream wait for them after this rank dropped its communicator.
  cudaEvent_t ready = nullptr;
  cudaEvent_t reduced = nullptr;
  cudaEvent_t done = nullptr;
  std::shared_ptr<struct group_state> made;
  std::vector<int> members;  // split: world-group ranks of the new group
  slot() = default;
  slot(const slot&) = delete;
  slot& operator=(const slot&) = delete;
  ~slot() {
    for (cudaEvent_t e : {ready, reduced, done})
      if (e) (void)cudaEventDestroy(e);
  }
};

/// A point-to-point channel from one rank to another. The receiver posts its buffer and an
/// event recorded on its stream (`ready`: the buffer may be overwritten after it); the sender
/// makes its stream wait for `ready`, enqueues the peer copy, records `copied` after it and
/// marks the channel done; the receiver makes its stream wait for `copied`. Each event is
/// created by the rank that records it, on that rank's device, the first time it is needed.
struct channel : shardcast::detail::channel_sync {
  void* buf = nullptr;
  std::size_t bytes = 0;
  int device = 0;  // the receiver's
  bool posted = false, done = false, mismatch = false;
  std::size_t sent_bytes = 0;  // on a mismatch: what the sender offered
  cudaEvent_t ready = nullptr;
  cudaEvent_t copied = nullptr;
  channel() = default;
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  ~channel() {
    if (ready) (void)cudaEventDestroy(ready);
    if (copied) (void)cudaEventDestroy(copied);
  }
};

/// State of one communicator (a group of ranks): the barrier, abort and timeout handling
/// it shares with the host backend (comm/in_process.hpp: spin, yield, then park, so a
/// collective's host-side rendezvous costs well under a microsecond when every rank has a
/// core; an abort wakes the parked waiters of every group), and its slots and channels.
struct group_state : shardcast::detail::in_process_group {
  std::vector<slot> slots;
  std::vector<std::unique_ptr<channel>> channels;  // [src * size + dst]
  group_state(std::shared_ptr<world_state> w, int n) : in_process_group(std::move(w), n, "shardcast::p2p"), slots(std::size_t(n)) {
    channels.reserve(std::size_t(n) * std::size_t(n));
    for (int i = 0; i < n * n; ++i) channels.push_back(std::make_unique<channel>());
  }
};

}  // namespace detail

/// One rank's handle on a group of peer-memory ranks. Buffers are device pointers on this
/// rank's GPU (`device()`); collectives are stream-ordered on the given stream and return
/// without waiting for the GPU.
class communicator {
 public:
  using memory_space = device_memory;
  using stream_type = cudaStream_t;

  /// The null communicator (what split returns for a negative color): size 0; every call
  /// on it throws comm_error.
  communicator() = default;

  int rank() const { return rank_; }
  int size() const { return g_ ? g_->size : 0; }
  /// False for the null communicator.
  explicit operator bool() const { return static_cast<bool>(g_); }
  /// The CUDA device this rank's buffers live on.
  int device() const { return device_; }

  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s = {}) {
    live("all_reduce");
    // Phase 1: reduce my balanced chunk from every peer's send into my recv.
    // Phase 2: copy every other chunk from its owner's recv. In place is safe: in phase 1
    // peers read only their own chunk of my buffer, which I do not write.
    const int p = size();
    const std::size_t base = count / std::size_t(p), rem = count % std::size_t(p);
    auto off = [&](int q) { return std::size_t(q) * base + std::min<std::size_t>(std::size_t(q), rem); };
    auto len = [&](int q) { return base + (std::size_t(q) < rem ? 1 : 0); };
    publish(send, recv, count, s, "all_reduce");
    std::vector<const T*> srcs(static_cast<std::size_t>(p));
    for (int q = 0; q < p; ++q) srcs[std::size_t(q)] = static_cast<const T*>(peer(q).send) + off(rank_);
    if (len(rank_)) device::reduce_sources(srcs.data(), srcs.size(), recv + off(rank_), len(rank_), op, s);
    // Between the phases: every peer has reduced its chunk (and so finished reading mine).
    // The pointers published above still hold: no rank leaves before the final barrier.
    exchange(&detail::slot::reduced, s, "all_reduce");
    for (int q = 0; q < p; ++q)
      if (q != rank_ && len(q))
        copy_from(q, recv + off(q), static_cast<const T*>(peer(q).recv) + off(q), len(q) * sizeof(T), s);
    finish(s, "all_reduce");
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count, stream_type s = {}) {
    live("all_gather");
    publish(send, recv, count, s, "all_gather");
    for (int q = 0; q < size(); ++q) {
      T* dst = recv + std::size_t(q) * count;
      const T* src = static_cast<const T*>(peer(q).send);
      if (dst != src && count) copy_from(q, dst, src, count * sizeof(T), s);
    }
    finish(s, "all_gather");
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s = {}) {
    reduce_scatter(send, recv, count, op, s, device::identity{});
  }
  /// reduce_scatter with an epilogue fused into the single store (scale, bias, activation;
  /// see cuda/epilogue.cuh): recv[i] = epi(op_q send_q[rank*count + i], i).
  template <class T, class Epi>
  void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s, Epi epi) {
    live("reduce_scatter");
    publish(send, recv, count, s, "reduce_scatter");
    std::vector<const T*> srcs(static_cast<std::size_t>(size()));
    for (int q = 0; q < size(); ++q)
      srcs[std::size_t(q)] = static_cast<const T*>(peer(q).send) + std::size_t(rank_) * count;
    if (count) device::reduce_sources(srcs.data(), srcs.size(), recv, count, op, s, epi);
    finish(s, "reduce_scatter");
  }
  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count, stream_type s = {}) {
    live("all_to_all");
    publish(send, recv, count, s, "all_to_all");
    for (int q = 0; q < size(); ++q)
      if (count)
        copy_from(q, recv + std::size_t(q) * count, static_cast<const T*>(peer(q).send) + std::size_t(rank_) * count,
                  count * sizeof(T), s);
    finish(s, "all_to_all");
  }
  template <class T>
  void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, T* recv,
                   const std::size_t* recv_counts, const std::size_t* recv_displs, stream_type s = {}) {
    live("all_to_allv");
    auto& me = g_->slots[std::size_t(rank_)];
    me.send_counts = send_counts;
    me.send_displs = send_displs;
    publish(send, recv, 0, s, "all_to_allv");
    for (int q = 0; q < size(); ++q) {
      const auto& o = peer(q);
      if (o.send_counts[rank_] != recv_counts[q]) {
        const std::string msg = "shardcast::p2p: all_to_allv: rank " + std::to_string(q) + " sends " +
                                std::to_string(o.send_counts[rank_]) + " elements to rank " + std::to_string(rank_) +
                                ", which expects " + std::to_string(recv_counts[q]);
        g_->world->abort(msg);
        throw comm_error(msg);
      }
      if (recv_counts[q])
        copy_from(q, recv + recv_displs[q], static_cast<const T*>(o.send) + o.send_displs[rank_], recv_counts[q] * sizeof(T), s);
    }
    finish(s, "all_to_allv");
  }
  template <class T>
  void broadcast(T* buf, std::size_t count, int root, stream_type s = {}) {
    live("broadcast");
    check_peer(root, "broadcast");
    publish(buf, buf, count, s, "broadcast");
    if (rank_ != root && count) copy_from(root, buf, static_cast<const T*>(peer(root).send), count * sizeof(T), s);
    finish(s, "broadcast");
  }
  /// Point-to-point: a rendezvous of the two ranks only (no other rank of the group takes part).
  /// `send` returns once the copy into the receiver's buffer is enqueued on `s` after
  /// everything the receiver queued on its stream before posting; `recv` returns once its
  /// stream waits for that copy. Neither waits for the GPU. Sends on one (sender, receiver)
  /// pair match receives in order; a send blocks until its receive is posted (as MPI_Ssend),
  /// so order mutual exchanges (e.g. even ranks send first), or call sendrecv.
  /// @throws comm_error if the counts differ (on both ranks), on timeout, or if a peer failed.
  template <class T>
  void send(const T* buf, std::size_t count, int peer_rank, stream_type s = {}) {
    live("send");
    check_peer(peer_rank, "send");
    deliver(buf, count, peer_rank, s, "send");
  }
  template <class T>
  void recv(T* buf, std::size_t count, int peer_rank, stream_type s = {}) {
    live("recv");
    check_peer(peer_rank, "recv");
    auto& ch = channel_between(peer_rank, rank_);
    std::unique_lock lk(ch.m);
    post_receive(ch, buf, count * sizeof(T), s);
    take_receive(ch, lk, peer_rank, s, "recv");
  }
  /// A send to `dest` and a receive from `source` that cannot wait on each other, as
  /// MPI_Sendrecv: the receive is posted first, then the send waits for `dest` to post its
  /// receive (which a sendrecv on `dest` has done first too), then this rank waits for
  /// `source`'s copy. So every rank of a ring shift or a pairwise exchange may call it at
  /// once. Its halves match send and recv on the peers. `dest` and `source` may both be
  /// this rank (a device-to-device copy on `s`; the counts must agree).
  /// @throws comm_error on a size mismatch, a failed peer or a timeout.
  template <class T>
  void sendrecv(const T* send, std::size_t send_count, int dest, T* recv, std::size_t recv_count, int source, stream_type s = {}) {
    live("sendrecv");
    check_peer(dest, "sendrecv");
    check_peer(source, "sendrecv");
    SHARDCAST_EXPECTS((dest == rank_) == (source == rank_),
                      "shardcast::p2p::sendrecv: rank " + std::to_string(rank_) + " sends to rank " + std::to_string(dest) +
                          " and receives from rank " + std::to_string(source) +
                          "; a message to itself needs its receive from itself in the same call (dest == source == rank)");
    if (dest == rank_) {
      if (send_count != recv_count)
        throw comm_error("shardcast::p2p::sendrecv: rank " + std::to_string(rank_) + " sends " + std::to_string(send_count * sizeof(T)) +
                         " bytes to itself and receives " + std::to_string(recv_count * sizeof(T)));
      if (send_count && static_cast<const void*>(send) != static_cast<const void*>(recv))
        SHARDCAST_CUDA_TRY(cudaMemcpyAsync(recv, send, send_count * sizeof(T), cudaMemcpyDeviceToDevice, s));
      return;
    }
    auto& in = channel_between(source, rank_);
    {
      std::unique_lock lk(in.m);
      post_receive(in, recv, recv_count * sizeof(T), s);
    }
    try {
      deliver(send, send_count, dest, s, "sendrecv");
    } catch (...) {
      std::lock_guard lk(in.m);
      if (!in.done) in.posted = false;  // the source has not copied into `recv`: withdraw the receive
      throw;
    }
    std::unique_lock lk(in.m);
    take_receive(in, lk, source, s, "sendrecv");
  }
  /// Host barrier of the group (it does not wait for the GPU).
  void barrier() {
    live("barrier");
    g_->barrier("barrier");
  }

  /// Collective: ranks with equal color form a new group, ordered by key then rank. A
  /// negative color gives the null communicator.
  communicator split(int color, int key) const {
    live("split");
    auto& me = g_->slots[std::size_t(rank_)];
    me.color = color;
    me.key = key;
    g_->barrier("split");
    if (color < 0) {  // takes part in the barriers only
      g_->barrier("split");
      g_->barrier("split");
      return communicator{};
    }
    std::vector<int> members;
    for (int q = 0; q < size(); ++q)
      if (g_->slots[std::size_t(q)].color == color) members.push_back(q);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return g_->slots[std::size_t(a)].key < g_->slots[std::size_t(b)].key;
    });
    if (members.front() == rank_) me.made = std::make_shared<detail::group_state>(g_->world, int(members.size()));
    g_->barrier("split");
    auto made = g_->slots[std::size_t(members.front())].made;
    const int new_rank = int(std::find(members.begin(), members.end(), rank_) - members.begin());
    g_->barrier("split");
    if (members.front() == rank_) me.made.reset();
    return communicator(made, new_rank, device_);
  }

  /// Rank `rank` of group `g`, with buffers on `device` (made by run and split).
  communicator(std::shared_ptr<detail::group_state> g, int rank, int device) : g_(std::move(g)), rank_(rank), device_(device) {
    auto& me = mine();  // read by peers only after the next barrier
    for (cudaEvent_t* e : {&me.ready, &me.reduced, &me.done})
      if (!*e) SHARDCAST_CUDA_TRY(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }

 private:
  const detail::slot& peer(int q) const { return g_->slots[std::size_t(q)]; }

  /// The channel of the messages from rank `from` to rank `to`.
  detail::channel& channel_between(int from, int to) const {
    return *g_->channels[std::size_t(from) * std::size_t(size()) + std::size_t(to)];
  }

  /// The sending half of send and sendrecv: waits for `peer_rank` to post its receive, then
  /// enqueues the copy into it on `s` (after the receiver's stream reached its receive) and
  /// records the event the receiver's stream waits for.
  template <class T>
  void deliver(const T* buf, std::size_t count, int peer_rank, stream_type s, const char* where) {
    auto& ch = channel_between(rank_, peer_rank);
    std::unique_lock lk(ch.m);
    g_->wait(ch, lk, [&] { return ch.posted && !ch.done; }, where);
    const std::size_t bytes = count * sizeof(T);
    if (ch.bytes != bytes) {
      ch.mismatch = true;
      ch.sent_bytes = bytes;
      ch.done = true;
      const std::string msg = "shardcast::p2p::" + std::string(where) + ": rank " + std::to_string(rank_) + " sends " + std::to_string(bytes) +
                              " bytes to rank " + std::to_string(peer_rank) + ", which posted a receive of " + std::to_string(ch.bytes);
      lk.unlock();
      ch.notify();
      throw comm_error(msg);
    }
    if (bytes) {
      SHARDCAST_CUDA_TRY(cudaStreamWaitEvent(s, ch.ready, 0));
      SHARDCAST_CUDA_TRY(cudaMemcpyPeerAsync(ch.buf, ch.device, buf, device_, bytes, s));
    }
    if (!ch.copied) SHARDCAST_CUDA_TRY(cudaEventCreateWithFlags(&ch.copied, cudaEventDisableTiming));
    SHARDCAST_CUDA_TRY(cudaEventRecord(ch.copied, s));
    ch.done = true;
    lk.unlock();
    ch.notify();
  }

  /// Posts a receive of `bytes` bytes into `buf` on channel `ch` (under its mutex): the
  /// event of the point `s` has reached, which the sender's copy waits for.
  void post_receive(detail::channel& ch, void* buf, std::size_t bytes, stream_type s) {
    if (!ch.ready) SHARDCAST_CUDA_TRY(cudaEventCreateWithFlags(&ch.ready, cudaEventDisableTiming));
    SHARDCAST_CUDA_TRY(cudaEventRecord(ch.ready, s));
    ch.buf = buf;
    ch.bytes = bytes;
    ch.device = device_;
    ch.posted = true;
    ch.done = false;
    ch.mismatch = false;
    ch.notify();
  }

  /// Waits (holding `lk`, a lock of `ch.m`) until the sender has enqueued its copy into the
  /// posted receive, then makes `s` wait for that copy. Throws comm_error on a size mismatch.
  void take_receive(detail::channel& ch, std::unique_lock<std::mutex>& lk, int peer_rank, stream_type s, const char* where) {
    try {
      g_->wait(ch, lk, [&] { return ch.done; }, where);
    } catch (...) {
      ch.posted = false;
      throw;
    }
    ch.posted = false;
    ch.done = false;
    if (ch.mismatch)
      throw comm_error("shardcast::p2p::" + std::string(where) + ": rank " + std::to_string(rank_) + " posted a receive of " + std::to_string(ch.bytes) +
                       " bytes from rank " + std::to_string(peer_rank) + ", which sent " + std::to_string(ch.sent_bytes));
    SHARDCAST_CUDA_TRY(cudaStreamWaitEvent(s, ch.copied, 0));
  }

  void live(const char* what) const {
    if (!g_) throw comm_error(std::string("shardcast::p2p: ") + what + " called on a null communicator (default-constructed, or split with a negative color)");
  }

  void check_peer(int q, const char* what) const {
    SHARDCAST_EXPECTS(q >= 0 && q < size(), std::string("shardcast::p2p: ") + what + ": rank " + std::to_string(q) +
                                                 " is outside the group of " + std::to_string(size()));
  }

  // Records my event `which` on my stream, meets every peer, and makes my stream wait for
  // each peer's event of the same kind.
  void exchange(cudaEvent_t detail::slot::* which, cudaStream_t s, const char* where) {
    SHARDCAST_CUDA_TRY(cudaEventRecord(mine().*which, s));
    g_->barrier(where);
    for (int q = 0; q < size(); ++q)
      if (q != rank_) SHARDCAST_CUDA_TRY(cudaStreamWaitEvent(s, peer(q).*which, 0));
  }
  // Publish my pointers and an event after my stream's prior work; wait for every peer's.
  void publish(const void* send, void* recv, std::size_t count, cudaStream_t s, const char* where) {
    auto& me = mine();
    me.send = send;
    me.recv = recv;
    me.count = count;
    me.device = device_;
    exchange(&detail::slot::ready, s, where);
  }
  // Say I am done reading: every peer's stream waits for my done event before its later
  // writes, and mine for theirs. Two barriers per collective suffice (publish, finish): a
  // rank that leaves may publish its next pointers and record its next `ready` while peers
  // still take these waits, because
  //  - peers read my pointers only between the publish barrier and this one;
  //  - they wait on my `ready` only before arriving here, and on my `done` only before
  //    arriving at the next collective's publish barrier, which I must pass before I record
  //    `done` (or `reduced`) again;
  //  - the events in my slot never change (made with the communicator) and live as long as
  //    the group, so a peer may take its waits after I have dropped my handle.
  void finish(cudaStream_t s, const char* where) { exchange(&detail::slot::done, s, where); }
  void copy_from(int q, void* dst, const void* src, std::size_t bytes, cudaStream_t s) {
    SHARDCAST_CUDA_TRY(cudaMemcpyPeerAsync(dst, device_, src, peer(q).device, bytes, s));
  }
  detail::slot& mine() const { return g_->slots[std::size_t(rank_)]; }

  std::shared_ptr<detail::group_state> g_;
  int rank_ = 0;
  int device_ = 0;
};

/// Runs `f(comm)` on `nranks` threads; rank r's current device is `devices[r % devices.size()]`
/// (several ranks may share a GPU) and its current allocator `o.allocator` (else the caller's). Peer access (and access to the current memory pools) is enabled between every pair of distinct
/// devices that supports it. If one rank throws, peers blocked in a collective get comm_error;
/// after all threads end the first exception is rethrown.
/// @throws layout_error if nranks < 1 or devices is empty.
template <class F>
void run(int nranks, const std::vector<int>& devices, F&& f, options o = {}) {
  SHARDCAST_EXPECTS(nranks >= 1 && !devices.empty(),
                    "shardcast::p2p::run: needs nranks >= 1 and at least one device (e.g. {0} to put every rank on GPU 0)");
  // The fused reductions (reduce_scatter, all_reduce) load peers' buffers in a kernel, which
  // needs peer access between every pair of distinct devices (cudaMemcpyPeerAsync alone would not).
  for (int a : devices)
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      SHARDCAST_CUDA_TRY(cudaDeviceCanAccessPeer(&can, a, b));
      SHARDCAST_EXPECTS(can, "shardcast::p2p::run: device " + std::to_string(a) + " cannot access device " + std::to_string(b) +
                                 "'s memory (no peer access); the p2p backend reads peers' buffers in its reduction kernels. "
                                 "Use devices with peer access, or shardcast::nccl");
    }
  int caller_device = 0;
  SHARDCAST_CUDA_TRY(cudaGetDevice(&caller_device));
  struct restore_device {  // the loop below changes this thread's device; give the caller's back, also on a throw
    int d;
    ~restore_device() { (void)cudaSetDevice(d); }
  } restore{caller_device};
  for (int a : devices)
    for (int b : devices) {
      if (a == b) continue;
      SHARDCAST_CUDA_TRY(cudaSetDevice(a));
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else SHARDCAST_CUDA_TRY(e);
    }
  // Stream-ordered allocations (the default allocator) come from each device's current
  // memory pool, which peer access does not open: let every peer device read and write it.
  for (int a : devices) {
    std::vector<cudaMemAccessDesc> peers;
    for (int b : devices) {
      int can = 0;
      if (b == a || std::any_of(peers.begin(), peers.end(), [&](const cudaMemAccessDesc& d) { return d.location.id == b; })) continue;
      SHARDCAST_CUDA_TRY(cudaDeviceCanAccessPeer(&can, b, a));
      if (can) peers.push_back(cudaMemAccessDesc{cudaMemLocation{cudaMemLocationTypeDevice, b}, cudaMemAccessFlagsProtReadWrite});
    }
    if (peers.empty()) continue;
    cudaMemPool_t pool = nullptr;
    SHARDCAST_CUDA_TRY(cudaDeviceGetMemPool(&pool, a));
    SHARDCAST_CUDA_TRY(cudaMemPoolSetAccess(pool, peers.data(), peers.size()));
  }
  auto world = std::make_shared<detail::world_state>();
  world->timeout = detail::timeout_or_default(o.timeout);
  world->set_waits(nranks);
  auto group = std::make_shared<detail::group_state>(world, nranks);
  const device::any_allocator alloc = o.allocator ? *o.allocator : device::current_allocator();
  shardcast::detail::run_failure failure;
  auto body = [&](int r) {
    try {
      const int dev = devices[std::size_t(r) % devices.size()];
      SHARDCAST_CUDA_TRY(cudaSetDevice(dev));
      device::scoped_allocator use(alloc);
      communicator c(group, r, dev);
      f(c);
    } catch (...) {
      shardcast::detail::fail_rank(failure, *world, r);
    }
  };
  std::vector<std::thread> threads;
  shardcast::detail::start_rank_threads(threads, body, 0, nranks, *world, "shardcast::p2p::run",
                                        "shardcast::p2p::run: a rank's thread could not be started");
  for (auto& t : threads) t.join();
  if (const std::exception_ptr e = failure.first()) std::rethrow_exception(e);
}

}  // namespace shardcast::p2p
