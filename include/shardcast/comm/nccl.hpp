#pragma once
/// @file comm/nccl.hpp
/// The NCCL backend: device memory, CUDA streams, one rank per GPU.
///
/// Communicators made here are non-blocking (`ncclConfig_t::blocking = 0`): every call is
/// followed by polling `ncclCommGetAsyncError` while it reports `ncclInProgress`, up to a
/// timeout (options::timeout, else SHARDCAST_TIMEOUT_MS, else 60 s). On timeout or on an
/// NCCL error the communicator is aborted (`ncclCommAbort`) and `shardcast::comm_error`
/// names the NCCL error and `ncclGetLastError`, so a dead peer becomes an exception.
/// @code
///   // Wrap the ncclComm_t and stream an application already has (not owned, not destroyed):
///   sc::nccl::communicator comm(existing_comm);
///   comm.all_reduce(d_buf, d_buf, n, sc::reduce_op::sum, stream);
/// @endcode

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
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
#include "../error.hpp"
#include "communicator.hpp"

namespace shardcast::nccl {

/// Options of an NCCL communicator.
struct options {
  std::chrono::milliseconds timeout{0};  ///< 0: SHARDCAST_TIMEOUT_MS or 60 s
  /// run_local only: device memory of every rank's tensors and temporaries
  /// (cuda/allocator.hpp); unset: the allocator current in the calling thread. Shared by all
  /// ranks, so it must be thread-safe.
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

/// NCCL's type tag for a shardcast dtype.
inline ncclDataType_t to_nccl(dtype t) {
  switch (t) {
    case dtype::f32: return ncclFloat32;
    case dtype::f64: return ncclFloat64;
    case dtype::i32: return ncclInt32;
    case dtype::i64: return ncclInt64;
    case dtype::u32: return ncclUint32;
    case dtype::u64: return ncclUint64;
    case dtype::i8: return ncclInt8;
    case dtype::u8: return ncclUint8;
    case dtype::f16: return ncclFloat16;
    case dtype::bf16: return ncclBfloat16;
    case dtype::f8e4m3: return ncclFloat8e4m3;
    case dtype::f8e5m2: return ncclFloat8e5m2;
  }
  return ncclFloat32;
}

inline ncclRedOp_t to_nccl(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::avg: return ncclAvg;  // native: sum / size in one pass
    case reduce_op::max: return ncclMax;
    case reduce_op::min: return ncclMin;
    case reduce_op::prod: return ncclProd;
  }
  return ncclSum;
}

template <class T>
ncclDataType_t type_of() {
  return to_nccl(dtype_of<std::remove_cv_t<T>>::value);
}

/// Set by run_local when one rank throws, so the others stop waiting on it.
struct world_flag {
  std::atomic<bool> failed{false};
};

/// Polls `comm` (ncclCommGetAsyncError) until it is no longer in progress, `deadline`
/// passes or `stop()` says to give up. Returns its last state: ncclSuccess, an error, or
/// ncclInProgress when it gave up.
template <class Stop>
ncclResult_t wait_not_in_progress(ncclComm_t comm, std::chrono::steady_clock::time_point deadline, Stop stop) {
  for (;;) {
    ncclResult_t a = ncclSuccess;
    if (const ncclResult_t q = ncclCommGetAsyncError(comm, &a); q != ncclSuccess) return q;
    if (a != ncclInProgress) return a;
    if (stop() || std::chrono::steady_clock::now() >= deadline) return ncclInProgress;
    std::this_thread::yield();
  }
}

/// What a communicator handle shares with its moved-from copies: the comm and its state.
struct state {
  ncclComm_t comm = nullptr;
  bool owned = false;
  bool aborted = false;
  int rank = 0, size = 0;
  std::chrono::milliseconds timeout{};
  std::shared_ptr<world_flag> world;
  // Lazily made for barrier(): a stream and one device int.
  cudaStream_t barrier_stream = nullptr;
  int* barrier_buf = nullptr;

  ~state() {
    release_comm();
    // After the communicator: cudaFree synchronises the device, which would wait for an
    // NCCL kernel that a dead peer never completes.
    if (barrier_buf) (void)cudaFree(barrier_buf);
    if (barrier_stream) (void)cudaStreamDestroy(barrier_stream);
  }

  /// Frees an owned communicator: finalize (flush), then destroy. A finalize that fails or
  /// does not finish in time is an abort, and so is the end of a communicator whose world
  /// failed or that goes away while an exception unwinds the stack (its peers may never
  /// reach the finalize, and its collectives may be half done).
  void release_comm() {
    if (!comm || !owned || aborted) return;  // (an abort already freed it)
    if (peer_failed() || std::uncaught_exceptions() > 0) {
      (void)ncclCommAbort(comm);
      aborted = true;
      return;
    }
    ncclResult_t r = ncclCommFinalize(comm);
    if (r == ncclInProgress) r = wait_not_in_progress(comm, std::chrono::steady_clock::now() + timeout, [&] { return peer_failed(); });
    if (r == ncclSuccess) (void)ncclCommDestroy(comm);
    else (void)ncclCommAbort(comm);
  }

  [[noreturn]] void fail(const char* what, ncclResult_t r) {
    std::string msg = std::string("shardcast::nccl: ") + what + " failed: " + ncclGetErrorString(r);
    const char* last = comm ? ncclGetLastError(comm) : nullptr;
    if (last && *last) msg += std::string(" (") + last + ")";
    abort_comm();
    throw comm_error(msg);
  }

  /// True once a rank of this communicator's run_local failed.
  bool peer_failed() const { return world && world->failed.load(); }

  void abort_comm() {
    if (comm && !aborted) {
      (void)ncclCommAbort(comm);
      aborted = true;
    }
    if (world) world->failed.store(true);
  }

  /// Throws comm_error if the communicator was aborted (ncclCommAbort freed it, so no NCCL
  /// call may use it) or a peer of its world failed (it is aborted first).
  void ensure_live(const char* what) {
    if (!aborted && peer_failed()) abort_comm();
    if (aborted) throw comm_error(std::string("shardcast::nccl: ") + what + " on an aborted communicator (a collective failed or a peer rank failed)");
    // (a misuse of this rank alone: thrown before any NCCL call, so the peers are not told)
    if (!comm) throw comm_error(std::string("shardcast::nccl: ") + what + " called on a null communicator (split with a negative color)");
  }

  /// Checks that the communicator is live, then makes the NCCL call `f()` and waits until it
  /// is no longer in progress.
  template <class F>
  void call(const char* what, F&& f) {
    ensure_live(what);
    check(what, f());
  }

  /// Waits until the call just made (returning r) is no longer in progress.
  void check(const char* what, ncclResult_t r) {
    if (aborted) throw comm_error(std::string("shardcast::nccl: ") + what + " on an aborted communicator");
    if (r != ncclSuccess && r != ncclInProgress) fail(what, r);
    const ncclResult_t a = wait_not_in_progress(comm, std::chrono::steady_clock::now() + timeout, [&] { return peer_failed(); });
    if (a == ncclSuccess) return;
    if (a != ncclInProgress) fail(what, a);
    const bool abandoned = peer_failed();  // (before abort_comm, which sets the flag)
    abort_comm();
    if (abandoned) throw comm_error(std::string("shardcast::nccl: ") + what + " abandoned: a peer rank failed");
    throw comm_error(std::string("shardcast::nccl: ") + what + " timed out after " + std::to_string(timeout.count()) +
                     " ms (a peer never arrived); communicator aborted");
  }
};

inline ncclConfig_t nonblocking_config() {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  return c;
}

}  // namespace detail

template <class F>
void run_local(int ndev, F&& f, options o = {});

/// An NCCL communicator: owns a non-blocking ncclComm_t it created, or wraps one it was given.
/// Models shardcast::communicator on device memory; `stream_type` is cudaStream_t. Buffers
/// are device pointers on this rank's GPU; collectives are stream-ordered on the given stream.
class communicator {
 public:
  using memory_space = device_memory;
  using stream_type = cudaStream_t;

  /// Joins the `nranks`-rank communicator identified by `id` as `rank` (collective over all ranks;
  /// the current CUDA device is this rank's GPU). Owned: finalized and destroyed with the last handle.
  /// @throws comm_error if initialisation fails or times out.
  communicator(const ncclUniqueId& id, int nranks, int rank, options o = {}) : s_(std::make_shared<detail::state>()) {
    s_->owned = true;
    s_->timeout = detail::timeout_or_default(o.timeout);
    ncclConfig_t cfg = detail::nonblocking_config();
    const ncclResult_t r = ncclCommInitRankConfig(&s_->comm, nranks, id, rank, &cfg);
    s_->check("ncclCommInitRankConfig", r);
    fill_rank_size();
  }

  /// Wraps an existing communicator without owning it: it is never finalized or destroyed
  /// here, but it is aborted (ncclCommAbort, which frees it) on a timeout or on any NCCL
  /// error of a call made through this wrapper, since it could not be used afterwards
  /// anyway. After a comm_error from this wrapper, do not destroy the ncclComm_t yourself.
  explicit communicator(ncclComm_t existing, options o = {}) : s_(std::make_shared<detail::state>()) {
    s_->comm = existing;
    s_->timeout = detail::timeout_or_default(o.timeout);
    fill_rank_size();
  }

  /// The underlying ncclComm_t, for calls shardcast does not wrap.
  ncclComm_t native() const { return s_->comm; }
  int rank() const { return s_->rank; }
  int size() const { return s_->size; }
  /// False for the null communicator (what split returns for a negative color): size 0;
  /// every call on it throws comm_error.
  explicit operator bool() const { return s_->comm != nullptr; }

  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s = {}) {
    s_->call("ncclAllReduce", [&] { return ncclAllReduce(send, recv, count, detail::type_of<T>(), detail::to_nccl(op), s_->comm, s); });
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count, stream_type s = {}) {
    s_->call("ncclAllGather", [&] { return ncclAllGather(send, recv, count, detail::type_of<T>(), s_->comm, s); });
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s = {}) {
    s_->call("ncclReduceScatter",
             [&] { return ncclReduceScatter(send, recv, count, detail::type_of<T>(), detail::to_nccl(op), s_->comm, s); });
  }
  /// `count` elements to and from every peer, rank-major: grouped ncclSend/ncclRecv.
  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count, stream_type s = {}) {
    const ncclDataType_t t = detail::type_of<T>();
    grouped("all_to_all", [&](auto issue) {
      for (int p = 0; p < size(); ++p) {
        const std::size_t o = std::size_t(p) * count;
        issue("ncclSend", ncclSend(send + o, count, t, p, s_->comm, s));
        issue("ncclRecv", ncclRecv(recv + o, count, t, p, s_->comm, s));
      }
    });
  }
  template <class T>
  void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, T* recv,
                   const std::size_t* recv_counts, const std::size_t* recv_displs, stream_type s = {}) {
    const ncclDataType_t t = detail::type_of<T>();
    grouped("all_to_allv", [&](auto issue) {
      for (int p = 0; p < size(); ++p) {
        if (send_counts[p]) issue("ncclSend", ncclSend(send + send_displs[p], send_counts[p], t, p, s_->comm, s));
        if (recv_counts[p]) issue("ncclRecv", ncclRecv(recv + recv_displs[p], recv_counts[p], t, p, s_->comm, s));
      }
    });
  }
  template <class T>
  void broadcast(T* buf, std::size_t count, int root, stream_type s = {}) {
    s_->call("ncclBroadcast", [&] { return ncclBroadcast(buf, buf, count, detail::type_of<T>(), root, s_->comm, s); });
  }
  template <class T>
  void send(const T* buf, std::size_t count, int peer, stream_type s = {}) {
    s_->call("ncclSend", [&] { return ncclSend(buf, count, detail::type_of<T>(), peer, s_->comm, s); });
  }
  template <class T>
  void recv(T* buf, std::size_t count, int peer, stream_type s = {}) {
    s_->call("ncclRecv", [&] { return ncclRecv(buf, count, detail::type_of<T>(), peer, s_->comm, s); });
  }

  /// A send to `dest` and a receive from `source` in one NCCL group, so exchanges in which
  /// every rank sends and receives (a ring shift, a pairwise exchange) cannot wait on each
  /// other. They match recv and send on the peers.
  template <class T>
  void sendrecv(const T* send, std::size_t send_count, int dest, T* recv, std::size_t recv_count, int source, stream_type s = {}) {
    const ncclDataType_t t = detail::type_of<T>();
    grouped("sendrecv", [&](auto issue) {
      issue("ncclSend", ncclSend(send, send_count, t, dest, s_->comm, s));
      issue("ncclRecv", ncclRecv(recv, recv_count, t, source, s_->comm, s));
    });
  }

  /// Host-blocking barrier: a one-int all-reduce on an internal stream, waited for with the
  /// timeout (so a dead peer is an exception here rather than a hang).
  /// @throws comm_error on timeout or NCCL error; cuda_error if the stream fails.
  void barrier() {
    s_->ensure_live("barrier");  // (before the stream and buffer below are made)
    if (!s_->barrier_stream) {
      SHARDCAST_CUDA_TRY(cudaStreamCreateWithFlags(&s_->barrier_stream, cudaStreamNonBlocking));
      SHARDCAST_CUDA_TRY(cudaMalloc(&s_->barrier_buf, sizeof(int)));
      SHARDCAST_CUDA_TRY(cudaMemsetAsync(s_->barrier_buf, 0, sizeof(int), s_->barrier_stream));  // (its value is never read)
    }
    all_reduce(s_->barrier_buf, s_->barrier_buf, 1, reduce_op::sum, s_->barrier_stream);
    const auto deadline = std::chrono::steady_clock::now() + s_->timeout;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(s_->barrier_stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) SHARDCAST_CUDA_TRY(e);
      s_->ensure_live("barrier");         // a peer rank failed: abort rather than wait out the timeout
      s_->check("barrier", ncclSuccess);  // surfaces asynchronous NCCL errors
      if (std::chrono::steady_clock::now() >= deadline) {
        s_->abort_comm();
        throw comm_error("shardcast::nccl: barrier timed out after " + std::to_string(s_->timeout.count()) +
                         " ms (a peer never arrived); communicator aborted");
      }
      std::this_thread::yield();
    }
  }

  /// Collective: ranks with equal `color` form a new owned communicator, ordered by `key` then rank
  /// (ncclCommSplit; non-blocking like this one). A negative color (NCCL_SPLIT_NOCOLOR)
  /// gives the null communicator.
  /// @throws comm_error if the split fails or times out.
  communicator split(int color, int key) const {
    communicator c;
    c.s_->owned = true;
    c.s_->timeout = s_->timeout;
    c.s_->world = s_->world;
    ncclConfig_t cfg = detail::nonblocking_config();
    s_->call("ncclCommSplit", [&] { return ncclCommSplit(s_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c.s_->comm, &cfg); });
    if (c.s_->comm) c.s_->check("ncclCommSplit (new communicator)", ncclSuccess);
    c.fill_rank_size();
    return c;
  }

 private:
  template <class F>
  friend void run_local(int ndev, F&& f, options o);

  communicator() : s_(std::make_shared<detail::state>()) {}

  /// Runs `body(issue)` inside ncclGroupStart / ncclGroupEnd; `issue(name, result)` records
  /// the first failed call. The group is closed on every path (an open group would queue
  /// every later NCCL call of this thread), then the first failure or the group's end is
  /// checked.
  template <class Body>
  void grouped(const char* what, Body&& body) {
    s_->ensure_live(what);
    const ncclResult_t started = ncclGroupStart();
    if (started != ncclSuccess) s_->fail("ncclGroupStart", started);
    const char* failed_call = nullptr;
    ncclResult_t failed = ncclSuccess;
    auto issue = [&](const char* name, ncclResult_t r) {
      if (!failed_call && r != ncclSuccess && r != ncclInProgress) {
        failed_call = name;
        failed = r;
      }
    };
    try {
      body(issue);
    } catch (...) {
      (void)ncclGroupEnd();
      throw;
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (failed_call) s_->fail(failed_call, failed);
    s_->check(what, ended);
  }

  void fill_rank_size() {
    if (!s_->comm) return;
    s_->check("ncclCommUserRank", ncclCommUserRank(s_->comm, &s_->rank));
    s_->check("ncclCommCount", ncclCommCount(s_->comm, &s_->size));
  }

  std::shared_ptr<detail::state> s_;
};

static_assert(shardcast::communicator<communicator>, "shardcast::nccl::communicator must model shardcast::communicator");

namespace detail {
/// One non-blocking communicator per device 0..ndev-1 of this process, made from this
/// thread: ncclCommInitRankConfig for every device inside one group (what ncclCommInitAll
/// does, which makes blocking ones), then polled until every one is ready. On an error or
/// timeout every communicator made is aborted and comm_error is thrown.
inline std::vector<ncclComm_t> init_local(int ndev, std::chrono::milliseconds timeout) {
  auto fail = [](const std::string& msg) { throw comm_error("shardcast::nccl::run_local: " + msg); };
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) fail(std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r));
  int old_device = 0;
  SHARDCAST_CUDA_TRY(cudaGetDevice(&old_device));
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ndev), nullptr);
  auto abort_all = [&] {
    for (ncclComm_t& c : comms)
      if (c) (void)ncclCommAbort(c), c = nullptr;
  };
  ncclConfig_t cfg = nonblocking_config();
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) fail(std::string("ncclGroupStart failed: ") + ncclGetErrorString(r));
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < ndev; ++i) {
    (void)cudaSetDevice(i);
    const ncclResult_t ri = ncclCommInitRankConfig(&comms[static_cast<std::size_t>(i)], ndev, id, i, &cfg);
    if (first == ncclSuccess && ri != ncclSuccess && ri != ncclInProgress) first = ri;
  }
  r = ncclGroupEnd();
  (void)cudaSetDevice(old_device);
  if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) first = r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::size_t i = 0; first == ncclSuccess && i < comms.size(); ++i) {
    const ncclResult_t a = wait_not_in_progress(comms[i], deadline, [] { return false; });
    if (a == ncclInProgress) {
      abort_all();
      fail("creating the communicators timed out after " + std::to_string(timeout.count()) + " ms");
    }
    first = a;
  }
  if (first != ncclSuccess) {
    abort_all();
    fail(std::string("creating the communicators failed: ") + ncclGetErrorString(first));
  }
  return comms;
}
}  // namespace detail

/// Runs `f(comm)` on `ndev` threads, thread i on GPU i with rank i of one communicator
/// (non-blocking, made as ncclCommInitAll would) and `o.allocator` (else the caller's) as
/// its current allocator. If one rank throws, its communicator is aborted and the others'
/// NCCL waits give up with comm_error (communicators that end while an exception unwinds,
/// such as the mesh's sub-communicators, are aborted too rather than finalized); after
/// every thread ends, the first exception is rethrown.
/// @throws layout_error if ndev exceeds the visible devices; comm_error if NCCL fails.
template <class F>
void run_local(int ndev, F&& f, options o) {
  int visible = 0;
  SHARDCAST_CUDA_TRY(cudaGetDeviceCount(&visible));
  SHARDCAST_EXPECTS(ndev >= 1 && ndev <= visible, "shardcast::nccl::run_local: asked for " + std::to_string(ndev) +
                                                      " GPUs but " + std::to_string(visible) +
                                                      " are visible; NCCL needs one GPU per rank (use shardcast::p2p::run "
                                                      "for several ranks on one GPU)");
  const auto timeout = detail::timeout_or_default(o.timeout);
  // What may throw std::bad_alloc comes before the NCCL communicators exist: from then on
  // every path aborts or destroys each of them once.
  auto world = std::make_shared<detail::world_flag>();
  const device::any_allocator alloc = o.allocator ? *o.allocator : device::current_allocator();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ndev));
  std::vector<ncclComm_t> comms = detail::init_local(ndev, timeout);
  std::mutex m;
  std::exception_ptr first;
  auto record = [&] {
    std::lock_guard lk(m);
    if (!first) first = std::current_exception();
  };
  auto body = [&](int i) {
    // Made before the second try, so its catch can abort it before the peers are told.
    std::optional<communicator> c;
    try {
      c.emplace(communicator());
    } catch (...) {  // (std::bad_alloc) no communicator owns comms[i]: abort it here, and tell the peers
      record();
      world->failed.store(true);
      (void)ncclCommAbort(comms[std::size_t(i)]);
      return;
    }
    c->s_->comm = comms[std::size_t(i)];
    c->s_->owned = true;
    c->s_->timeout = timeout;
    c->s_->world = world;
    try {
      SHARDCAST_CUDA_TRY(cudaSetDevice(i));
      device::scoped_allocator use(alloc);
      c->fill_rank_size();
      f(*c);
    } catch (...) {
      record();
      // Then tell the peers (abort_comm sets world->failed), whose own comm_errors come
      // second: the first exception is this rank's.
      c->s_->abort_comm();
    }
  };
  for (int i = 0; i < ndev; ++i) {
    try {
      threads.emplace_back(body, i);
    } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc for the thread's state
      // The ranks already started see the flag in their waits and abort their
      // communicators; the ones never started are aborted here.
      world->failed.store(true);
      for (auto& t : threads) t.join();
      for (int j = i; j < ndev; ++j) (void)ncclCommAbort(comms[std::size_t(j)]);
      throw comm_error("shardcast::nccl::run_local: could not start the thread of rank " + std::to_string(i) + " of " +
                       std::to_string(ndev) + " (" + e.what() + ")");
    }
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace shardcast::nccl
