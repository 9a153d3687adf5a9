#pragma once
/// @file comm/host.hpp
/// The host backend: ranks are threads of one process and collectives read peers'
/// buffers directly (one copy, no staging buffer). Collectives of at most
/// SHARDCAST_HOST_EAGER_BYTES per rank (256 unless defined; all_to_allv: when every rank's
/// sends fit, in groups of up to 16) are eager instead: each rank copies its input into a
/// buffer of its own, so the ranks meet once rather than twice. A send of at most that many
/// bytes does not wait for its recv either: it leaves the message in the channel, and the
/// root of a broadcast of that size leaves its data in the group's queue of broadcasts.
/// It is the embedded default.
///
/// @code
///   shardcast::host::run(4, [](shardcast::host::communicator& comm) {
///     std::vector<float> x(8, float(comm.rank()));
///     comm.all_reduce(x.data(), x.data(), x.size(), shardcast::reduce_op::sum);
///   });
/// @endcode
///
/// Failure model: when a rank's function throws, every rank waiting in (or later
/// entering) a collective gets shardcast::comm_error instead of waiting forever, and
/// run() rethrows the first exception once all threads have ended. When a rank's function
/// returns while peers wait for it (it skipped a collective, left a loop early, never sent
/// a message a peer receives or never received a larger one a peer sends), each of them
/// throws comm_error within milliseconds, naming that rank (and its rank of the run, on a
/// split group) and what it waits for ("all_reduce abandoned: rank 3 returned from its
/// function after 5 collectives on this group, and this rank waits for it in the 6th");
/// run() rethrows one of those. A waiter stops only for a member that has returned without
/// starting the collective it waits in (that member's count of collectives on the group is
/// below its own), so a rank that returns right after a collective its slower peers are
/// still in stops nobody. A collective that
/// waits longer than the timeout (options::timeout, or the environment variable
/// SHARDCAST_TIMEOUT_MS; default 60 s) throws comm_error as a last resort. Ranks that
/// call different collectives, or the same one with different sizes, all get a
/// comm_error that names what each rank asked for, also where their sizes fall on
/// different sides of the eager limit (where a rank has returned before the others could
/// compare, as the root of a small broadcast has, the others get it, at once: a peer
/// whose call of that broadcast is larger, and waits for the others, finds the root's
/// record and names the root's call and its own).

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../error.hpp"
#include "communicator.hpp"
#include "in_process.hpp"

#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
#include <emmintrin.h>
#endif

/// Collectives that touch at least this many bytes (read and written, over all ranks)
/// store their output with non-temporal (streaming) stores where the CPU has them: the
/// data would not stay in the caches anyway, and a streaming store does not read the
/// destination line first, which saves a third of the memory traffic of a copy.
#ifndef SHARDCAST_HOST_STREAM_BYTES
#define SHARDCAST_HOST_STREAM_BYTES (std::size_t{32} << 20)
#endif

/// Collectives whose data fits this many bytes per rank are eager: each rank copies its
/// input into a buffer of its own in the group, and the ranks meet once, after which each
/// one reads the others' buffers. A larger collective reads the peers' own buffers (one
/// copy, no staging), so the ranks meet twice: to publish them, and once done reading
/// them, after which their owners may change them. 0 makes every collective direct. A run
/// with more ranks than CPUs uses SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES for its
/// collectives instead; point-to-point messages always use this one.
#ifndef SHARDCAST_HOST_EAGER_BYTES
#define SHARDCAST_HOST_EAGER_BYTES 256
#endif

/// The same limit for the collectives (not point-to-point messages) of a run that has more
/// ranks than the process has CPUs. There every meeting of the ranks costs context
/// switches, microseconds against the nanoseconds of copying a few KiB more, so larger
/// collectives gain from meeting once: with 4 ranks on 2 CPUs, collectives of 512 bytes to
/// 4 KiB per rank took up to 12x less time eager than direct (broadcast gained most, since
/// its root returns once its data is queued), 4 KiB is about the crossover, and 8-16 KiB
/// gain nothing (docs/bench.md, "Eager collectives with more ranks than CPUs"). Never below
/// SHARDCAST_HOST_EAGER_BYTES; 0 there keeps every collective direct.
#ifndef SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES
#define SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES 4096
#endif

/// How many eager broadcasts a group queues: the root of a broadcast of at most
/// SHARDCAST_HOST_EAGER_BYTES copies its data into the next entry of the group's queue and
/// returns; the other ranks copy it out when they call broadcast. A root waits only when
/// the entry it needs still holds the broadcast this many before, not yet taken by every
/// rank. 0: no queue; small broadcasts read the root's buffer as larger ones do.
#ifndef SHARDCAST_HOST_BCAST_DEPTH
#define SHARDCAST_HOST_BCAST_DEPTH 16
#endif

/// How many messages a point-to-point channel (one per ordered pair of ranks of a group)
/// holds: a send of at most SHARDCAST_HOST_EAGER_BYTES returns once its message is in the
/// channel, and waits only when the channel already holds this many not yet received.
/// At least 1.
#ifndef SHARDCAST_HOST_SEND_DEPTH
#define SHARDCAST_HOST_SEND_DEPTH 8
#endif
static_assert(SHARDCAST_HOST_SEND_DEPTH >= 1, "SHARDCAST_HOST_SEND_DEPTH must be at least 1: a channel holds at least the message in flight");

namespace shardcast::host {

/// Options of host::run.
struct options {
  /// How long a rank waits in a collective for its peers before throwing comm_error.
  std::chrono::milliseconds timeout{0};  ///< 0: SHARDCAST_TIMEOUT_MS or 60 s
};

namespace detail {

enum class op_kind : std::uint8_t { none, all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, barrier, split };

inline const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::none: return "none";
    case op_kind::all_reduce: return "all_reduce";
    case op_kind::all_gather: return "all_gather";
    case op_kind::reduce_scatter: return "reduce_scatter";
    case op_kind::all_to_all: return "all_to_all";
    case op_kind::all_to_allv: return "all_to_allv";
    case op_kind::broadcast: return "broadcast";
    case op_kind::barrier: return "barrier";
    case op_kind::split: return "split";
  }
  return "?";
}

inline std::chrono::milliseconds default_timeout() {
  if (const char* e = std::getenv("SHARDCAST_TIMEOUT_MS")) {
    long v = std::strtol(e, nullptr, 10);
    if (v > 0) return std::chrono::milliseconds(v);
  }
  return std::chrono::milliseconds(60000);
}

/// State shared by every rank of one host::run (comm/in_process.hpp).
using world_state = shardcast::detail::in_process_world;

SHARDCAST_SIZED_COPY_BEGIN
/// memcpy of `n` bytes (no overlap) with non-temporal stores where available; the
/// stores are fenced before returning, so a following barrier publishes them.
inline void stream_copy(void* dst, const void* src, std::size_t n) {
#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
  if (n < head + 64) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

SHARDCAST_SIZED_COPY_END

/// out[i] = op(a[i], b[i]) (avg: the sum; divide with finish_avg). `out` does not alias.
template <class T>
inline void combine(T* __restrict out, const T* __restrict a, const T* __restrict b, std::size_t n, reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      for (std::size_t i = 0; i < n; ++i) out[i] = shardcast::detail::wrapping_add(a[i], b[i]);
      break;
    case reduce_op::prod:
      for (std::size_t i = 0; i < n; ++i) out[i] = shardcast::detail::wrapping_mul(a[i], b[i]);
      break;
    case reduce_op::max:
      for (std::size_t i = 0; i < n; ++i) out[i] = (b[i] > a[i] || b[i] != b[i]) ? b[i] : a[i];
      break;
    case reduce_op::min:
      for (std::size_t i = 0; i < n; ++i) out[i] = (b[i] < a[i] || b[i] != b[i]) ? b[i] : a[i];
      break;
  }
}

/// What one rank published for the collective in progress (a cache line of its own, so
/// publishing the next collective does not disturb peers reading this one).
struct alignas(64) slot {
  op_kind kind = op_kind::none;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  std::uint64_t bcasts = 0;  ///< eager broadcasts this rank had called on the group before it
  std::size_t count = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  const std::size_t* send_counts = nullptr;
  const std::size_t* send_displs = nullptr;
  const std::size_t* recv_counts = nullptr;
  int color = 0, key = 0;
  std::shared_ptr<struct group_state> made;  // split: the group the leader made
  /// all_to_allv, groups of up to max_eager_v ranks: did this rank stage its data (eager),
  /// and copies of its send and receive counts, which peers check once it may have returned.
  static constexpr int max_eager_v = 16;
  bool eager_v = false;
  std::size_t vsend[max_eager_v]{}, vrecv[max_eager_v]{};
};

/// One message in a channel's ring: the data of a message of at most
/// SHARDCAST_HOST_EAGER_BYTES, or the address of a larger one in its sender's memory, from
/// which the receive copies it while the send waits. `turn` says whose the entry is (as in
/// a bounded queue of sequence numbers): 2t, the sender's, to put message t in; 2t + 1, the
/// receiver's, holding message t; after the receive, 2(t + depth). The receiver waits on
/// the entry itself, and a short message lies in the same cache line as `turn`.
struct p2p_entry {
  /// States of a larger message. The receive moves `posted` to `taking` before it reads the
  /// sender's buffer; a send that gives up (abort, timeout) moves `posted` to `withdrawn`,
  /// and one that finds `taking` waits for `done` first, so its buffer is never read after
  /// it has returned or thrown.
  enum : int { posted = 1, taking = 2, done = 3, withdrawn = 4 };
  alignas(64) std::atomic<std::uint64_t> turn{0};
  std::size_t count = 0;
  dtype type = dtype::f32;
  bool large = false;  ///< false: the data is in `data`
  alignas(16) std::byte data[SHARDCAST_HOST_EAGER_BYTES > 0 ? SHARDCAST_HOST_EAGER_BYTES : 1];
  const void* src = nullptr;  ///< a larger message: the sender's buffer
  std::atomic<int> state{0};  ///< a larger message: posted, taking, done or withdrawn
  bool mismatch = false;      ///< a larger message, once done: its receive asked for another size or type ...
  std::size_t recv_count = 0; ///< ... namely this many
  dtype recv_type = dtype::f32;
};

/// A point-to-point channel from one rank to another: a ring of SHARDCAST_HOST_SEND_DEPTH
/// messages with one writer (the sender) and one reader (the receiver), changed with
/// atomic operations only. A side that has to wait spins on the entry first; only then does
/// it count itself in `waiters` and wait as every channel does (yield, then sleep on the
/// condition variable), and only then does the other side notify it.
struct channel : shardcast::detail::channel_sync {
  channel() {
    for (std::uint64_t i = 0; i < SHARDCAST_HOST_SEND_DEPTH; ++i) ring[i].turn.store(2 * i, std::memory_order_relaxed);
  }
  alignas(64) std::uint64_t sent = 0;   ///< messages the sender has put in the ring (only the sender's thread uses it)
  alignas(64) std::uint64_t taken = 0;  ///< messages the receiver has taken (only the receiver's thread uses it)
  alignas(64) std::atomic<int> waiters{0};
  p2p_entry ring[SHARDCAST_HOST_SEND_DEPTH];
  /// After a change a waiter may wait for (seq_cst): wakes it, if one has announced itself.
  void wake() {
    if (waiters.load(std::memory_order_seq_cst) > 0) notify_lock_free();
  }
};

/// One entry of a group's queue of eager broadcasts (see communicator::broadcast). Its
/// root and readers change it with atomic operations; the mutex and condition variable are
/// only for waiters that sleep.
struct bcast_entry : shardcast::detail::channel_sync {
  static constexpr std::uint64_t claimed = ~std::uint64_t{0};  ///< a root is writing it
  alignas(64) std::atomic<std::uint64_t> ticket{0};  ///< 1 + the number of the broadcast it holds (0: none yet)
  std::atomic<int> left{0};  ///< ranks that have yet to copy it out (0: free)
  int root = 0;
  std::uint64_t seq = 0;     ///< the root's other collectives on the group before it
  std::size_t count = 0;
  dtype type = dtype::f32;
  std::byte* data = nullptr;  ///< the group's eager limit in bytes, in the group's buffer (64-byte aligned)
};

/// One rank's part of a group. Collectives alternate between two slots (and two eager
/// buffers) by the parity of their sequence number on this rank, so a rank may publish its
/// next collective while a slower peer still reads what it published for this one: the
/// peer reads this one's slot until it arrives at the next collective's barrier, which the
/// rank must pass before it can publish into this slot again.
struct alignas(64) rank_slots {
  slot s[2];
  /// Collectives this rank has started on the group, other than queued broadcasts. Only
  /// this rank changes it; peers waiting for its queued broadcast read it.
  alignas(64) std::atomic<std::uint64_t> seq{0};
  std::uint64_t bcasts = 0;  ///< queued broadcasts this rank has called on the group (only it reads this)
  /// While this rank waits as a non-root for queued broadcast number b: b + 1 (else 0), and
  /// the root it named. A waiter whose named root waits so for the same broadcast knows
  /// that no rank is its root (the ranks disagree on the root) instead of waiting it out.
  alignas(64) std::atomic<std::uint64_t> waits_for_bcast{0};
  std::atomic<int> named_root{-1};
};

/// The eager limit of a run of `nranks` threads: SHARDCAST_HOST_EAGER_BYTES, or
/// SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES (at least as large) when the ranks outnumber
/// the process's CPUs.
inline std::size_t eager_limit(int nranks) {
  constexpr std::size_t base = SHARDCAST_HOST_EAGER_BYTES;
  constexpr std::size_t over = SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES > base ? SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES : base;
  return base > 0 && shardcast::detail::ranks_outnumber_cpus(nranks) ? over : base;
}

/// State of one communicator (a group of ranks): the barrier, abort and timeout handling
/// it shares with the p2p backend (comm/in_process.hpp: spin, yield, then park; an abort
/// wakes the parked waiters of every group), and its slots and channels.
struct group_state : shardcast::detail::in_process_group {
  std::vector<rank_slots> ranks;
  /// [src * size + dst]; each made by the first of its two ranks to use it (see chan)
  std::unique_ptr<std::atomic<channel*>[]> channels;
  std::unique_ptr<bcast_entry[]> bq;  ///< the queue of eager broadcasts, SHARDCAST_HOST_BCAST_DEPTH entries
  /// The eager buffers: every rank's two (one per parity), then the broadcast queue's data,
  /// `stride` bytes each, in one block. Set at construction and only read after, on a cache
  /// line of their own (beside counters that peers write, each read would cost a miss).
  struct alignas(64) eager_buffers {
    struct aligned_delete {
      void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{64}); }
    };
    std::size_t bytes;   ///< the limit: collectives of at most this many bytes per rank are eager (eager_limit of the run; groups split from a communicator keep its limit)
    std::size_t stride;  ///< bytes between buffers: `bytes` rounded up to whole cache lines, at least one
    std::unique_ptr<std::byte, aligned_delete> base;  ///< the block, 64-byte aligned

    eager_buffers(std::size_t limit, std::size_t nbuffers)
        : bytes(limit), stride(std::max<std::size_t>(64, (limit + 63) / 64 * 64)),
          base(static_cast<std::byte*>(::operator new(stride * nbuffers, std::align_val_t{64}))) {}
    std::byte* at(std::size_t i) const { return base.get() + i * stride; }
  } eager;

  /// `members`: the world rank of each of its n ranks, in group order (see
  /// in_process_group::world_ranks).
  group_state(std::shared_ptr<world_state> w, int n, std::size_t eager_bytes, std::vector<int> members)
      : in_process_group(std::move(w), n, "shardcast::host", std::move(members)), ranks(static_cast<std::size_t>(n)),
        channels(new std::atomic<channel*>[static_cast<std::size_t>(n) * static_cast<std::size_t>(n)]()),  // null: none made yet
        bq(new bcast_entry[depth]), eager(eager_bytes, 2 * static_cast<std::size_t>(n) + depth) {
    for (std::size_t i = 0; i < depth; ++i) bq[i].data = eager.at(2 * static_cast<std::size_t>(n) + i);
  }
  /// Channel i (src * size + dst), made on first use: a channel holds a ring of messages
  /// (about 2.8 KB), and most programs use few of the size^2 pairs. Its sender and its
  /// receiver may both come first; one of them installs it.
  channel& chan(std::size_t i) {
    channel* c = channels[i].load(std::memory_order_acquire);
    if (c) return *c;
    auto* made = new channel;
    if (channels[i].compare_exchange_strong(c, made, std::memory_order_acq_rel, std::memory_order_acquire)) return *made;
    delete made;  // the other rank's came first
    return *c;
  }
  /// A message that no receive took (an eager send without its recv), for run() to report.
  std::string undelivered() const {
    for (int i = 0; i < size * size; ++i) {
      const channel* c = channels[static_cast<std::size_t>(i)].load(std::memory_order_acquire);
      if (!c) continue;
      const channel& ch = *c;
      // (Every rank has ended: their counts are final.) Every message not taken, in order.
      for (std::uint64_t h = ch.taken; h != ch.sent; ++h) {
        const p2p_entry& e = ch.ring[h % SHARDCAST_HOST_SEND_DEPTH];
        if (e.large) continue;  // a larger send waited for its receive, and ended with an error
        return "shardcast::host: rank " + std::to_string(i / size) + " sent " + std::to_string(e.count) + " " + to_string(e.type) +
               " to rank " + std::to_string(i % size) + " (a communicator of size " + std::to_string(size) +
               "), which never received them: a send without its recv";
      }
    }
    for (int i = 0; i < SHARDCAST_HOST_BCAST_DEPTH; ++i) {
      const bcast_entry& e = bq[static_cast<std::size_t>(i)];
      const std::uint64_t t = e.ticket.load();
      if (const int left = e.left.load(); left > 0 && t != bcast_entry::claimed)
        return "shardcast::host: rank " + std::to_string(e.root) + " broadcast " + std::to_string(e.count) + " " + to_string(e.type) +
               " (broadcast number " + std::to_string(t - 1) + " on a communicator of size " + std::to_string(size) + "), which " +
               std::to_string(left) + " rank(s) never received: a broadcast that not every rank called";
    }
    return {};
  }
  ~group_state() {
    if (std::string u = undelivered(); !u.empty()) {
      std::lock_guard lk(world->m);
      if (world->undelivered.empty()) world->undelivered = std::move(u);
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(size) * static_cast<std::size_t>(size); ++i) delete channels[i].load(std::memory_order_acquire);
  }

  /// Entries of the queue of small broadcasts (one when queued broadcasts are off).
  static constexpr std::size_t depth = SHARDCAST_HOST_BCAST_DEPTH > 0 ? SHARDCAST_HOST_BCAST_DEPTH : 1;
};

/// Whether [a, a + na) and [b, b + nb) share an element.
template <class T>
bool overlap(const T* a, std::size_t na, const T* b, std::size_t nb) {
  return na > 0 && nb > 0 && std::less<const T*>{}(a, b + nb) && std::less<const T*>{}(b, a + na);
}
}  // namespace detail

/// A host communicator: one rank's handle on a group of threads.
class communicator {
 public:
  using memory_space = host_memory;
  using stream_type = host_stream;

  communicator() = default;
  communicator(std::shared_ptr<detail::group_state> g, int rank) : g_(std::move(g)), rank_(rank) {}

  int rank() const { return rank_; }
  int size() const { return g_ ? g_->size : 0; }
  /// False for the null communicator (what split returns for a negative color).
  explicit operator bool() const { return static_cast<bool>(g_); }

  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, stream_type = {}) {
    SHARDCAST_EXPECTS(send == recv || !detail::overlap<T>(send, count, recv, count),
                      "shardcast::host::all_reduce: send and recv overlap without being the same buffer; pass one buffer (in place) or two "
                      "that do not overlap");
    publish<T>(detail::op_kind::all_reduce, count, send, recv, op);
    // Eager: every rank reduces the whole of every rank's copy, so from 8 ranks on the
    // limit is divided by ranks / 4, which keeps what a rank reads (ranks x count) under 8x
    // the limit.
    if (collective_eager<T>(count, std::max(std::size_t{1}, static_cast<std::size_t>(size()) / 4))) {
      stage<T>(send, count);
      enter("all_reduce");
      reduce_range<T>(recv, 0, count, op, [&](int q) { return staged<T>(q); }, false);
      return;
    }
    enter("all_reduce");
    const int n = size();
    // Phase 1: this rank reduces its segment of every peer's input into its output.
    const std::size_t seg = (count + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
    const std::size_t lo = std::min(count, seg * static_cast<std::size_t>(rank_)), hi = std::min(count, lo + seg);
    // In place, this rank's segment of the output was just read as input and sits in the
    // cache, where streaming stores would first have to evict it; plain stores are faster
    // (in place, 2 and 4 ranks, 16-64 MiB: 1.3-2.7x, docs/bench.md "In-place reductions").
    const bool st = send != recv && streaming<T>(3 * static_cast<std::size_t>(n) * count);
    reduce_range<T>(recv + lo, lo, hi - lo, op, [&](int q) { return static_cast<const T*>(at(q).send); }, st);
    g_->barrier_after_reads();  // (every rank's inputs read; every segment reduced)
    // Phase 2: copy the other segments out of their owners' outputs.
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      const std::size_t qlo = std::min(count, seg * static_cast<std::size_t>(q)), qhi = std::min(count, qlo + seg);
      copy(recv + qlo, static_cast<const T*>(at(q).recv) + qlo, qhi - qlo, st);
    }
    g_->barrier_after_reads();
  }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count, stream_type = {}) {
    SHARDCAST_EXPECTS(send == recv + static_cast<std::size_t>(rank_) * count ||
                          !detail::overlap<T>(send, count, recv, static_cast<std::size_t>(size()) * count),
                      "shardcast::host::all_gather: send overlaps recv other than as this rank's block (in place: send == recv + "
                      "rank * count); pass that block or a send buffer outside recv");
    publish<T>(detail::op_kind::all_gather, count, send, recv);
    if (collective_eager<T>(count)) {
      stage<T>(send, count);
      enter("all_gather");
      for (int q = 0; q < size(); ++q) copy(recv + static_cast<std::size_t>(q) * count, staged<T>(q), count);
      return;
    }
    enter("all_gather");
    const auto n = static_cast<std::size_t>(size());
    const bool st = streaming<T>(2 * n * n * count);
    for (int q = 0; q < size(); ++q)
      copy(recv + static_cast<std::size_t>(q) * count, static_cast<const T*>(at(q).send), count, st);
    g_->barrier_after_reads();
  }

  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type = {}) {
    SHARDCAST_EXPECTS(recv == send + static_cast<std::size_t>(rank_) * count ||
                          !detail::overlap<T>(send, static_cast<std::size_t>(size()) * count, recv, count),
                      "shardcast::host::reduce_scatter: recv overlaps send other than as this rank's block (in place: recv == send + "
                      "rank * count); pass that block or a recv buffer outside send");
    publish<T>(detail::op_kind::reduce_scatter, count, send, recv, op);
    const std::size_t off = static_cast<std::size_t>(rank_) * count;
    const auto n = static_cast<std::size_t>(size());
    if (collective_eager<T>(count, n)) {
      stage<T>(send, n * count);
      enter("reduce_scatter");
      reduce_range<T>(recv, off, count, op, [&](int q) { return staged<T>(q); }, false);
      return;
    }
    enter("reduce_scatter");
    // In place (recv is this rank's block of send), the output lines were just read as input
    // and sit in the cache, where streaming stores would first have to evict them: plain
    // stores are faster there (as in all_reduce).
    reduce_range<T>(recv, off, count, op, [&](int q) { return static_cast<const T*>(at(q).send); },
                    recv != send + off && streaming<T>((n * n + n) * count));
    g_->barrier_after_reads();
  }

  template <element_type T>
  void all_to_all(const T* send, T* recv, std::size_t count, stream_type = {}) {
    require_group();
    const std::size_t all = static_cast<std::size_t>(size()) * count;
    SHARDCAST_EXPECTS(!detail::overlap<T>(send, all, recv, all) || (send == recv && size() == 1),
                      "shardcast::host::all_to_all: send and recv overlap; all_to_all has no in-place form, pass two buffers that do not "
                      "overlap");
    publish<T>(detail::op_kind::all_to_all, count, send, recv);
    const auto n = static_cast<std::size_t>(size());
    if (collective_eager<T>(count, n)) {
      stage<T>(send, n * count);
      enter("all_to_all");
      for (int q = 0; q < size(); ++q)
        copy(recv + static_cast<std::size_t>(q) * count, staged<T>(q) + static_cast<std::size_t>(rank_) * count, count);
      return;
    }
    enter("all_to_all");
    const bool st = streaming<T>(2 * n * n * count);
    for (int q = 0; q < size(); ++q)
      copy(recv + static_cast<std::size_t>(q) * count,
           static_cast<const T*>(at(q).send) + static_cast<std::size_t>(rank_) * count, count, st);
    g_->barrier_after_reads();
  }

  template <element_type T>
  void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, T* recv,
                   const std::size_t* recv_counts, const std::size_t* recv_displs, stream_type = {}) {
    require_group();
    expect_disjoint_v(send, send_counts, send_displs, recv, recv_counts, recv_displs);
    publish<T>(detail::op_kind::all_to_allv, 0, send, recv);
    auto& me = at(rank_);
    me.send_counts = send_counts;
    me.send_displs = send_displs;
    me.recv_counts = recv_counts;
    // Eager when every rank's data fits its eager buffer: each rank stages what it sends,
    // packed in destination order, with copies of its counts; whether all did is known
    // after the meeting, the same on every rank. Otherwise the peers' buffers are read.
    const int n = size();
    std::size_t total = 0;
    for (int q = 0; q < n; ++q) total += send_counts[q];
    me.eager_v = n <= detail::slot::max_eager_v && collective_eager<T>(total);
    if (me.eager_v) {
      T* dst = eager_buffer<T>(rank_);
      for (int q = 0; q < n; ++q) {
        me.vsend[q] = send_counts[q];
        me.vrecv[q] = recv_counts[q];
        copy(dst, send + send_displs[q], send_counts[q]);
        dst += send_counts[q];
      }
    }
    enter("all_to_allv");
    bool all_eager = true;
    for (int q = 0; q < n; ++q) all_eager = all_eager && at(q).eager_v;
    // Every rank checks every pair, so a mismatch throws on all ranks alike.
    for (int p = 0; p < size(); ++p)
      for (int q = 0; q < size(); ++q) {
        const auto& sp = at(p);
        const auto& sq = at(q);
        const std::size_t sent = all_eager ? sp.vsend[q] : sp.send_counts[q], expected = all_eager ? sq.vrecv[p] : sq.recv_counts[p];
        if (sent != expected) {
          g_->barrier("all_to_allv");
          throw comm_error("shardcast::host::all_to_allv: rank " + std::to_string(p) + " sends " + std::to_string(sent) +
                           " elements to rank " + std::to_string(q) + ", which expects " + std::to_string(expected));
        }
      }
    if (all_eager) {
      for (int q = 0; q < n; ++q) {  // rank q packed its chunks for ranks 0, 1, ... in turn
        const auto& sq = at(q);
        std::size_t off = 0;
        for (int j = 0; j < rank_; ++j) off += sq.vsend[j];
        copy(recv + recv_displs[q], staged<T>(q) + off, recv_counts[q]);
      }
      return;
    }
    std::size_t mine = 0;
    for (int q = 0; q < size(); ++q) mine += recv_counts[q];
    const bool st = streaming<T>(2 * static_cast<std::size_t>(size()) * mine);  // every rank about as busy as this one
    for (int q = 0; q < size(); ++q) {
      const auto& sq = at(q);
      copy(recv + recv_displs[q], static_cast<const T*>(sq.send) + sq.send_displs[rank_], recv_counts[q], st);
    }
    g_->barrier_after_reads();
  }

  /// all_to_allv has no in-place form: throws unless every chunk this rank sends is disjoint
  /// from every chunk it receives (chunks of zero elements aside). The spans of the two sets
  /// are compared first; only spans that overlap need the chunks compared pairwise.
  template <class T>
  void expect_disjoint_v(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, const T* recv,
                         const std::size_t* recv_counts, const std::size_t* recv_displs) const {
    const auto n = static_cast<std::size_t>(size());
    auto span = [n](const std::size_t* counts, const std::size_t* displs) {
      std::size_t lo = static_cast<std::size_t>(-1), hi = 0;
      for (std::size_t q = 0; q < n; ++q)
        if (counts[q] > 0) {
          lo = std::min(lo, displs[q]);
          hi = std::max(hi, displs[q] + counts[q]);
        }
      return std::pair<std::size_t, std::size_t>{lo, hi > lo ? hi - lo : 0};
    };
    const auto [slo, sn] = span(send_counts, send_displs);
    const auto [rlo, rn] = span(recv_counts, recv_displs);
    if (sn == 0 || rn == 0 || !detail::overlap<T>(send + slo, sn, recv + rlo, rn)) return;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = 0; q < n; ++q)
        if (detail::overlap<T>(send + send_displs[p], send_counts[p], recv + recv_displs[q], recv_counts[q]))
          throw layout_error("shardcast::host::all_to_allv: the chunk for rank " + std::to_string(p) + " (send + " +
                             std::to_string(send_displs[p]) + ", " + std::to_string(send_counts[p]) + " elements) overlaps the chunk from rank " +
                             std::to_string(q) + " (recv + " + std::to_string(recv_displs[q]) + ", " + std::to_string(recv_counts[q]) +
                             " elements); all_to_allv has no in-place form, pass send and receive chunks that do not overlap");
  }

  /// A broadcast within the group's eager limit (detail::eager_limit) goes through its queue of
  /// SHARDCAST_HOST_BCAST_DEPTH entries: the root copies its data into the queue and returns,
  /// the others copy it out when they arrive (see queued_broadcast). Larger ones read the
  /// root's buffer directly, and the ranks meet twice. Ranks whose calls fall on different
  /// sides of the limit (another count or type) see each other's record: a queued one
  /// (queued_instead) or the slot of a direct one (queued_broadcast).
  template <element_type T>
  void broadcast(T* buf, std::size_t count, int root, stream_type = {}) {
    require_group();
    SHARDCAST_EXPECTS(root >= 0 && root < size(), "shardcast::host::broadcast: root " + std::to_string(root) +
                                                      " is outside the communicator of size " + std::to_string(size()));
    if (SHARDCAST_HOST_BCAST_DEPTH > 0 && g_ && collective_eager<T>(count) && queued_broadcast(buf, count, root)) return;
    auto& me = g_->ranks[static_cast<std::size_t>(rank_)];
    const std::uint64_t b = me.bcasts, seq = me.seq.load(std::memory_order_relaxed);
    publish<T>(detail::op_kind::broadcast, count, buf, buf, reduce_op::sum, root);
    // A rank that made this broadcast a queued one never comes to this meeting (it may to
    // its next collective's): stop waiting once its record shows, and name both calls.
    detail::bcast_entry* queued = nullptr;
    if (!enter("broadcast", [&] { return (queued = queued_instead(b, seq)) != nullptr; })) {
      detail::bcast_entry& e = *queued;  // this rank has not taken it: nobody reuses it
      std::string msg = "shardcast::host: ranks called mismatched collectives: rank " + std::to_string(rank_) + " called " +
                        bcast_call(count, dtype_of<T>::value, root) + " after " + std::to_string(seq) + " other collectives and " +
                        std::to_string(b) + " small broadcasts on the group, which rank " + std::to_string(e.root) + " made as " +
                        bcast_call(e.count, e.type, e.root) + ", a small broadcast (it queued its data and returned)";
      me.bcasts = b + 1;  // taken, as a queued broadcast whose call differs is
      if (e.left.fetch_sub(1, std::memory_order_seq_cst) == 1) e.notify_lock_free();  // its next root may wait for it
      throw comm_error(msg);
    }
    if (rank_ != root)
      copy(buf, static_cast<const T*>(at(root).send), count,
           streaming<T>(2 * static_cast<std::size_t>(size() - 1) * count));
    g_->barrier_after_reads();
  }

  /// Blocking send; returns once `buf` may be reused. Each channel (one per ordered pair of
  /// ranks) is a ring of SHARDCAST_HOST_SEND_DEPTH messages, so messages between two ranks
  /// arrive in the order they were sent. A message of at most SHARDCAST_HOST_EAGER_BYTES is
  /// copied into the ring and the send returns (eager, as MPI's shared-memory transports send
  /// small messages); it waits only when the ring is full. A larger one leaves its address
  /// there, and the receive copies it straight out of `buf` (one copy) while the send waits.
  /// A size or type mismatch throws comm_error on the receiving rank, and on the sender too
  /// for a larger message; a message that is never received makes run() throw comm_error
  /// (a larger one: its send times out).
  template <element_type T>
  void send(const T* buf, std::size_t count, int peer, stream_type = {}) {
    check_peer(peer, "send");
    auto& ch = g_->chan(static_cast<std::size_t>(rank_ * size() + peer));
    detail::p2p_entry& e = post_send(ch, buf, count, peer, "send");
    if (e.large) finish_send<T>(ch, e, count, peer, "send");
  }

  /// Blocking receive of the next message from `peer` (see send).
  template <element_type T>
  void recv(T* buf, std::size_t count, int peer, stream_type = {}) {
    check_peer(peer, "recv");
    take(buf, count, peer, "recv");
  }

  /// Sends `send_count` elements to `dest` and receives `recv_count` from `source`, as
  /// MPI_Sendrecv: the send is posted first (or, while the channel to `dest` is full, the
  /// receive is taken first if its message comes before the channel has room), so any
  /// pattern in which every rank's sends have matching receives completes whatever the
  /// sizes and the order of the ranks (a ring shift, a pairwise exchange), where a send then
  /// a receive on every rank would wait on each other above SHARDCAST_HOST_EAGER_BYTES, or
  /// once the channels are full. (As with MPI's standard-mode sends, a message over
  /// SHARDCAST_HOST_EAGER_BYTES returns only once received: a pattern whose receive of it
  /// comes after another sendrecv of the receiving rank that waits for the same, waits.)
  /// The message is the next on the (this rank, dest) channel, so it matches a recv() or
  /// the receive half of a sendrecv(). `dest` and `source` may both be this rank (a copy;
  /// the counts must agree); `send` and `recv` must not overlap. Returns once `send` may be reused and `recv` holds the message.
  /// @throws layout_error if `send` and `recv` overlap; comm_error on a size or type mismatch
  ///         (as send and recv), a failed peer or a timeout.
  template <element_type T>
  void sendrecv(const T* send, std::size_t send_count, int dest, T* recv, std::size_t recv_count, int source, stream_type = {}) {
    require_p2p("sendrecv");
    SHARDCAST_EXPECTS(dest >= 0 && dest < size() && source >= 0 && source < size(),
                      "shardcast::host::sendrecv: dest " + std::to_string(dest) + " or source " + std::to_string(source) +
                          " is not a rank of this communicator of size " + std::to_string(size()));
    SHARDCAST_EXPECTS((dest == rank_) == (source == rank_),
                      "shardcast::host::sendrecv: rank " + std::to_string(rank_) + " sends to rank " + std::to_string(dest) +
                          " and receives from rank " + std::to_string(source) +
                          "; a message to itself needs its receive from itself in the same call (dest == source == rank)");
    SHARDCAST_EXPECTS(!detail::overlap<T>(send, send_count, recv, recv_count),
                      "shardcast::host::sendrecv: the send buffer (" + std::to_string(send_count) + " elements) and the receive buffer (" +
                          std::to_string(recv_count) + " elements) overlap; sendrecv has no in-place form, pass a receive buffer "
                          "outside the send buffer");
    if (dest == rank_) {
      if (send_count != recv_count) throw recv_mismatch<T>(recv_count, rank_, send_count, dtype_of<T>::value, "sendrecv");
      copy(recv, send, send_count);
      return;
    }
    auto& ch = g_->chan(static_cast<std::size_t>(rank_ * size() + dest));
    bool received = false;
    if (!send_entry_free(ch)) {
      // The channel to dest is full: dest has yet to take earlier messages, and may first
      // wait for the message this call receives. Wait for room or for that message,
      // whichever comes first (a message that arrives is seen within a sleep of the wait).
      auto& in = g_->chan(static_cast<std::size_t>(source * size() + rank_));
      const detail::p2p_entry& next = in.ring[in.taken % SHARDCAST_HOST_SEND_DEPTH];
      const auto either = [&] { return send_entry_free(ch) || next.turn.load(std::memory_order_seq_cst) == 2 * in.taken + 1; };
      // dest returned without taking its messages: the channel never has room again.
      if (!wait_for(ch, either, "sendrecv", returned_without(dest, either))) throw unreceived(ch, dest, "sendrecv");
      if (!send_entry_free(ch)) {
        take(recv, recv_count, source, "sendrecv");
        received = true;
      }
    }
    detail::p2p_entry& e = post_send(ch, send, send_count, dest, "sendrecv");
    if (!received) {
      try {
        take(recv, recv_count, source, "sendrecv");
      } catch (...) {
        if (e.large) withdraw(e);  // `send` is not read after this throws
        throw;
      }
    }
    if (e.large) finish_send<T>(ch, e, send_count, dest, "sendrecv");
  }

  /// Every rank of the group meets once (with the check that all of them called barrier).
  void barrier() {
    publish<std::int32_t>(detail::op_kind::barrier, 0, nullptr, nullptr);
    enter("barrier");
  }

  /// Collective: ranks passing the same color form a new communicator, ordered by
  /// (key, rank). A negative color returns the null communicator.
  communicator split(int color, int key) const {
    auto* self = const_cast<communicator*>(this);
    self->publish<std::int32_t>(detail::op_kind::split, 0, nullptr, nullptr);
    auto& me = at(rank_);
    me.color = color;
    me.key = key;
    me.made.reset();
    self->enter("split");
    std::vector<std::pair<int, int>> members;  // (key, rank)
    for (int q = 0; q < size(); ++q) {
      const auto& s = at(q);
      if (color >= 0 && s.color == color) members.emplace_back(s.key, q);
    }
    std::sort(members.begin(), members.end());
    int new_rank = -1;
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i].second == rank_) new_rank = static_cast<int>(i);
    const bool leader = color >= 0 && new_rank == 0;
    if (leader) {
      std::vector<int> world_ranks;  // the new group's members as ranks of the run, for member_returned
      world_ranks.reserve(members.size());
      for (const auto& m : members) world_ranks.push_back(g_->world_ranks[static_cast<std::size_t>(m.second)]);
      me.made = std::make_shared<detail::group_state>(g_->world, static_cast<int>(members.size()), g_->eager.bytes, std::move(world_ranks));
    }
    g_->barrier("split");
    communicator out;
    if (color >= 0) out = communicator(at(members[0].second).made, new_rank);
    g_->barrier("split");
    return out;
  }

 private:
  /// An eager broadcast through the group's queue: the root copies its data into the entry
  /// of this broadcast's number and returns (waiting only while that entry still holds the
  /// broadcast SHARDCAST_HOST_BCAST_DEPTH before it, not yet taken by every rank); the others
  /// wait for the entry to hold this broadcast and copy it out. Each entry records its root,
  /// size, type and the root's count of other collectives, which the others check; and every
  /// other collective checks that all ranks have made as many eager broadcasts.
  /// Returns false, having done nothing, where the root made this broadcast direct (another
  /// count or type, over the limit): the caller then joins it, and its meeting compares the
  /// calls on every rank.
  template <element_type T>
  bool queued_broadcast(T* buf, std::size_t count, int root) {
    // The root returns without meeting anyone, so it learns of a failed peer here.
    g_->throw_if_aborted("broadcast", std::memory_order_relaxed);
    auto& me = g_->ranks[static_cast<std::size_t>(rank_)];
    const std::uint64_t t = me.bcasts++;
    const std::uint64_t seq = me.seq.load(std::memory_order_relaxed);
    if (size() == 1) return true;
    constexpr std::uint64_t depth = detail::group_state::depth;
    auto& e = g_->bq[static_cast<std::size_t>(t % depth)];
    const auto mine = [&] { return bcast_call(count, dtype_of<T>::value, root); };
    if (rank_ == root) {
      // The entry is free once every rank has taken the broadcast `depth` before this one.
      const std::uint64_t before = t >= depth ? t + 1 - depth : 0;
      const auto entry_free = [&] { return e.left.load(std::memory_order_acquire) == 0 || e.ticket.load(std::memory_order_acquire) != before; };
      // A rank that returned without taking the broadcast in the entry never will. Its
      // count of queued broadcasts is final once its return is seen; it took broadcast
      // number before - 1 (or was its root) if and only if that count passed it.
      int gone = -1;
      if (!wait_on(e, entry_free, "broadcast", [&] {
            if (!g_->any_returned()) return false;
            for (int q = 0; q < size(); ++q)
              if (q != rank_ && g_->member_returned(q) && g_->ranks[static_cast<std::size_t>(q)].bcasts < before && !entry_free()) {
                gone = q;
                return true;
              }
            return false;
          }))
        throw comm_error("shardcast::host: broadcast abandoned: " + returned_peer(gone) + ", without taking small broadcast number " +
                         std::to_string(before - 1) + " (rank " + std::to_string(e.root) + "'s), and this rank, the root of " + mine() +
                         " (its broadcast number " + std::to_string(t) + " on the group), waits for that entry of the group's queue of " +
                         std::to_string(depth) + " to be taken by every rank (every rank must call the same collectives)");
      std::uint64_t expected = before;
      if (e.left.load(std::memory_order_acquire) != 0 || !e.ticket.compare_exchange_strong(expected, detail::bcast_entry::claimed, std::memory_order_acq_rel))
        throw comm_error("shardcast::host: ranks called mismatched collectives: rank " + std::to_string(rank_) + " called " + mine() +
                         " as its broadcast number " + std::to_string(t) + " on the group, which another rank made as its root");
      copy(reinterpret_cast<T*>(e.data), buf, count);
      e.root = root;
      e.seq = seq;
      e.count = count;
      e.type = dtype_of<T>::value;
      e.left.store(size() - 1, std::memory_order_relaxed);
      e.ticket.store(t + 1, std::memory_order_seq_cst);
      e.notify_lock_free();
      // A peer whose call of this broadcast was over the eager limit may sleep in the
      // group's meeting, where its stop check looks for this entry (queued_instead): wake it
      // (only when someone sleeps there, so a matched broadcast pays one load).
      if (g_->bar.has_parked()) g_->bar.wake_parked();
      return true;
    }
    // Wait for the broadcast, unless its root has gone on to a later collective without it.
    const auto& rs = g_->ranks[static_cast<std::size_t>(root)];
    const auto ready = [&] { return e.ticket.load(std::memory_order_acquire) == t + 1 || rs.seq.load(std::memory_order_acquire) > seq; };
    // A root that returned without queueing this broadcast never will (its stores happen
    // before its return is seen: ready() is asked again after that). Nor will a root that
    // waits as a non-root for this same broadcast: it names another root.
    const auto gone = returned_without(root, ready);
    int root_named = -1;  // the root the named root names, when it waits as a non-root too
    const auto root_waits = [&] {
      if (rs.waits_for_bcast.load(std::memory_order_seq_cst) != t + 1 || ready()) return false;
      root_named = rs.named_root.load(std::memory_order_relaxed);
      return true;
    };
    struct clear_record {
      std::atomic<std::uint64_t>* w = nullptr;
      ~clear_record() {
        if (w != nullptr) w->store(0, std::memory_order_seq_cst);
      }
    } clear;
    if (!ready()) {  // (a broadcast already queued is taken without the record)
      me.named_root.store(root, std::memory_order_relaxed);
      me.waits_for_bcast.store(t + 1, std::memory_order_seq_cst);
      clear.w = &me.waits_for_bcast;
      e.notify_lock_free();  // a peer asleep on this entry may be waiting for this rank as its root
    }
    if (!wait_on(e, ready, "broadcast", [&] { return gone() || root_waits(); })) {
      if (root_named >= 0)
        throw comm_error("shardcast::host: ranks called mismatched collectives: rank " + std::to_string(rank_) + " called " + mine() +
                         " as its broadcast number " + std::to_string(t) + " on the group, but rank " + std::to_string(root) +
                         " waits in that broadcast for its root, rank " + std::to_string(root_named) +
                         ": no rank is this broadcast's root (every rank must pass the same root)");
      throw comm_error("shardcast::host: broadcast abandoned: " + returned_peer(root) + ", and this rank waits for it, the root of " + mine() +
                       " (this rank's broadcast number " + std::to_string(t) + " on the group, after " + std::to_string(seq) +
                       " other collectives) (every rank must call the same collectives)");
    }
    if (e.ticket.load(std::memory_order_acquire) != t + 1) {
      // Is the root's collective this broadcast, made direct? publish fills the slot before
      // it counts the collective, and the root fills that slot again only after this rank
      // has come to that collective's meeting (or the run has failed).
      const detail::slot& rsl = rs.s[seq & 1u];
      if (rs.seq.load(std::memory_order_acquire) == seq + 1 && rsl.kind == detail::op_kind::broadcast && rsl.bcasts == t) {
        me.bcasts = t;  // not a queued broadcast after all
        return false;
      }
      throw comm_error("shardcast::host: ranks called mismatched collectives: rank " + std::to_string(rank_) + " called " + mine() +
                       " (its broadcast number " + std::to_string(t) + " on the group) after " + std::to_string(seq) +
                       " other collectives, but rank " + std::to_string(root) + " went on to another collective");
    }
    const bool match = e.root == root && e.count == count && e.type == dtype_of<T>::value && e.seq == seq;
    if (match) copy(buf, reinterpret_cast<const T*>(e.data), count);
    const std::string theirs = match ? std::string() : bcast_call(e.count, e.type, e.root) + " after " + std::to_string(e.seq) + " other collectives";
    if (e.left.fetch_sub(1, std::memory_order_seq_cst) == 1) e.notify_lock_free();  // its next root may wait for it
    if (!match)
      throw comm_error("shardcast::host: ranks called mismatched collectives: rank " + std::to_string(rank_) + " called " + mine() + " after " +
                       std::to_string(seq) + " other collectives as its broadcast number " + std::to_string(t) +
                       " on the group, which rank " + std::to_string(e.root) + " made as " + theirs);
    return true;
  }

  static std::string bcast_call(std::size_t n, dtype type, int root) {
    return "broadcast(count=" + std::to_string(n) + ", " + to_string(type) + ", root=" + std::to_string(root) + ")";
  }

  /// For a direct broadcast after `seq` other collectives and `b` queued ones: the queue's
  /// entry of broadcast number `b`, if a rank queued it at that same point (its call had
  /// another count or type, within the eager limit) and has not gone on to a later
  /// collective (whose meeting would compare the calls); else null. Only asked while the
  /// direct broadcast waits for its peers.
  detail::bcast_entry* queued_instead(std::uint64_t b, std::uint64_t seq) const {
    constexpr std::uint64_t depth = detail::group_state::depth;
    detail::bcast_entry& e = g_->bq[static_cast<std::size_t>(b % depth)];
    // seq_cst: against the root's ticket store and its load of the barrier's parked count.
    if (e.ticket.load(std::memory_order_seq_cst) != b + 1 || e.seq != seq) return nullptr;
    return g_->ranks[static_cast<std::size_t>(e.root)].seq.load(std::memory_order_acquire) == seq ? &e : nullptr;
  }

  /// Throws comm_error on the null communicator (before any argument check that its size
  /// of 0 would fail with another error).
  void require_group() const {
    if (!g_) throw comm_error("shardcast::host: collective called on a null communicator (default-constructed, or split with a negative color)");
  }

  /// A member of the group, other than this rank, that has returned from its function
  /// before starting this rank's collective number `mine` on the group (its count of
  /// collectives is below `mine`): it never will, and the meeting can never complete. -1
  /// if none. A member whose count reached `mine` took part, and the meeting completes
  /// (it may have returned since). The returned flag is loaded with acquire, then the
  /// count: the member's last store to its count happens before its flag's store.
  int returned_before(std::uint64_t mine) const {
    if (!g_->any_returned()) return -1;
    for (int q = 0; q < size(); ++q)
      if (q != rank_ && g_->member_returned(q) && g_->ranks[static_cast<std::size_t>(q)].seq.load(std::memory_order_acquire) < mine) return q;
    return -1;
  }

  /// "rank q returned from its function after n collectives on this group" (and its small
  /// broadcasts, if any), for a member q that has returned (its counts are final and
  /// visible: member_returned was seen).
  std::string returned_peer(int q) const {
    const auto& rs = g_->ranks[static_cast<std::size_t>(q)];
    const std::uint64_t n = rs.seq.load(std::memory_order_acquire);
    std::string s = g_->member_name(q) + " returned from its function after " + std::to_string(n) + (n == 1 ? " collective" : " collectives");
    if (rs.bcasts > 0) s += " and " + std::to_string(rs.bcasts) + (rs.bcasts == 1 ? " small broadcast" : " small broadcasts");
    return s + " on this group";
  }

  /// 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st, ...
  static std::string ordinal(std::uint64_t n) {
    const std::uint64_t t = n % 100, u = n % 10;
    const char* suffix = (t >= 11 && t <= 13) ? "th" : u == 1 ? "st" : u == 2 ? "nd" : u == 3 ? "rd" : "th";
    return std::to_string(n) + suffix;
  }

  template <class T>
  void publish(detail::op_kind k, std::size_t count, const void* send, void* recv, reduce_op op = reduce_op::sum, int root = 0) {
    require_group();
    auto& me = g_->ranks[static_cast<std::size_t>(rank_)];
    const std::uint64_t seq = me.seq.load(std::memory_order_relaxed);
    par_ = static_cast<int>(seq & 1u);
    auto& s = at(rank_);
    s.bcasts = me.bcasts;
    s.kind = k;
    s.type = dtype_of<T>::value;
    s.count = count;
    s.op = op;
    s.root = root;
    s.send = send;
    s.recv = recv;
    me.seq.store(seq + 1, std::memory_order_release);  // after the slot: a peer waiting for a queued broadcast reads it (queued_broadcast)
  }

  /// Barrier after publishing, then the same consistency check on every rank. Returns true;
  /// false, having left the meeting, when `stop()` first (see in_process_group::barrier).
  /// A rank waiting here for a peer that has returned from its function without starting
  /// this collective (returned_before) leaves the meeting and throws comm_error naming it.
  template <class Stop = shardcast::detail::rank_barrier::no_stop>
  bool enter(const char* where, Stop stop = {}) {
    const std::uint64_t mine = g_->ranks[static_cast<std::size_t>(rank_)].seq.load(std::memory_order_relaxed);
    int gone = -1;
    if (!g_->barrier(where, [&] {
          if (stop()) return true;
          gone = returned_before(mine);
          return gone >= 0;
        })) {
      if (gone < 0) return false;
      throw comm_error(std::string("shardcast::host: ") + where + " abandoned: " + returned_peer(gone) + ", and this rank waits for it in the " +
                       ordinal(mine) + " (every rank must call the same collectives)");
    }
    const auto& s0 = at(0);
    for (int q = 1; q < size(); ++q) {
      const auto& s = at(q);
      if (s.kind != s0.kind || s.type != s0.type || s.count != s0.count || s.op != s0.op || s.root != s0.root || s.bcasts != s0.bcasts) {
        std::string msg = "shardcast::host: ranks called mismatched collectives:";
        bool bcasts_differ = false;  // then every rank's count of small broadcasts is named
        for (int r = 1; r < size(); ++r) bcasts_differ = bcasts_differ || at(r).bcasts != s0.bcasts;
        for (int r = 0; r < size(); ++r) {
          const auto& t = at(r);
          msg += " rank " + std::to_string(r) + ": " + detail::to_string(t.kind) + "(count=" + std::to_string(t.count) + ", " +
                 to_string(t.type) + ", " + shardcast::to_string(t.op) + ", root=" + std::to_string(t.root) + ")";
          if (bcasts_differ) msg += " after " + std::to_string(t.bcasts) + " small broadcasts";
          msg += ";";
        }
        g_->barrier(where);  // nobody leaves while others still read the slots
        throw comm_error(msg);
      }
    }
    return true;
  }

  /// What rank q published for the collective in progress (publish chose the parity).
  detail::slot& at(int q) const { return g_->ranks[static_cast<std::size_t>(q)].s[par_]; }

  /// Is a point-to-point message of `count` elements of T eager (at most
  /// SHARDCAST_HOST_EAGER_BYTES)?
  template <class T>
  static bool eager(std::size_t count) {
    return SHARDCAST_HOST_EAGER_BYTES > 0 && count <= SHARDCAST_HOST_EAGER_BYTES / sizeof(T);
  }
  /// Is a collective of `count` elements of T per peer, `n` peers, eager (its data per rank
  /// fits the group's eager limit, see detail::eager_limit)?
  template <class T>
  bool collective_eager(std::size_t count, std::size_t n = 1) const {
    return g_->eager.bytes > 0 && count <= g_->eager.bytes / sizeof(T) / n;
  }
  /// Rank q's eager buffer for the collective in progress.
  template <class T>
  T* eager_buffer(int q) const {
    return reinterpret_cast<T*>(g_->eager.at(2 * static_cast<std::size_t>(q) + static_cast<std::size_t>(par_)));
  }
  /// Copies this rank's input of an eager collective into its eager buffer.
  template <class T>
  void stage(const T* src, std::size_t n) {
    copy(eager_buffer<T>(rank_), src, n);
  }
  /// Rank q's eager copy, to read.
  template <class T>
  const T* staged(int q) const {
    return eager_buffer<T>(q);
  }

  template <class T>
  comm_error recv_mismatch(std::size_t count, int peer, std::size_t sent, dtype sent_type, const char* where = "recv") const {
    return comm_error("shardcast::host::" + std::string(where) + ": rank " + std::to_string(rank_) + " posted a receive of " + std::to_string(count) + " " +
                      to_string(dtype_of<T>::value) + " from rank " + std::to_string(peer) + ", which sent " + std::to_string(sent) +
                      " " + to_string(sent_type));
  }

  /// Is the channel's next entry free for a send (the receiver has taken the message that
  /// SHARDCAST_HOST_SEND_DEPTH sends ago filled it)?
  static bool send_entry_free(const detail::channel& ch) {
    return ch.ring[ch.sent % SHARDCAST_HOST_SEND_DEPTH].turn.load(std::memory_order_seq_cst) == 2 * ch.sent;
  }

  /// The sending half of send and sendrecv: waits for the channel's next entry to be free,
  /// puts the message in it (a message of at most SHARDCAST_HOST_EAGER_BYTES: its data; a
  /// larger one: its address, `posted`) and hands it to the receiver.
  /// Throws comm_error when `peer`, the receiver, has returned without freeing the entry.
  template <element_type T>
  detail::p2p_entry& post_send(detail::channel& ch, const T* buf, std::size_t count, int peer, const char* where) {
    const std::uint64_t t = ch.sent;
    detail::p2p_entry& e = ch.ring[t % SHARDCAST_HOST_SEND_DEPTH];
    const auto room = [&] { return e.turn.load(std::memory_order_seq_cst) == 2 * t; };
    if (!wait_for(ch, room, where, returned_without(peer, room)))  // the entry is free
      throw unreceived(ch, peer, where);
    e.count = count;
    e.type = dtype_of<T>::value;
    const bool small = eager<T>(count);
    e.large = !small;
    if (small) {
      copy(reinterpret_cast<T*>(e.data), buf, count);
    } else {
      e.src = buf;
      e.state.store(detail::p2p_entry::posted, std::memory_order_relaxed);
    }
    e.turn.store(2 * t + 1, std::memory_order_seq_cst);
    ch.sent = t + 1;
    ch.wake();
    return e;
  }

  /// Waits until the receiver has copied the larger message of entry `e` (its buffer is then
  /// free), or withdraws it and throws (abort, timeout). Throws comm_error if the receive
  /// asked for another size or type.
  /// A receiver that returned without taking the message never will: the send withdraws it
  /// and throws comm_error naming that rank.
  template <element_type T>
  void finish_send(detail::channel& ch, detail::p2p_entry& e, std::size_t count, int peer, const char* where) {
    bool taken = false;
    const auto done = [&] { return e.state.load(std::memory_order_seq_cst) == detail::p2p_entry::done; };
    try {
      taken = wait_for(ch, done, where, returned_without(peer, done));
    } catch (...) {
      withdraw(e);
      throw;
    }
    if (!taken) {
      withdraw(e);
      throw comm_error("shardcast::host: " + std::string(where) + " abandoned: " + g_->member_name(peer) +
                       " returned from its function after receiving " + std::to_string(ch.taken) + " of the " + std::to_string(ch.sent) +
                       " messages this rank sent it on this group, and this rank waits for it to receive the " + ordinal(ch.sent) + ", of " +
                       std::to_string(count) + " " + to_string(dtype_of<T>::value) + " (every send needs its recv)");
    }
    if (e.mismatch)
      throw comm_error("shardcast::host::" + std::string(where) + ": rank " + std::to_string(rank_) + " sends " + std::to_string(count) +
                       " " + to_string(dtype_of<T>::value) + " to rank " + std::to_string(peer) + ", which posted a receive of " +
                       std::to_string(e.recv_count) + " " + to_string(e.recv_type));
  }

  /// Takes back a posted larger message whose send gives up: its receive then throws instead
  /// of reading the buffer; if the receive is already copying, waits until it is done, so
  /// the buffer is never read after the send has returned or thrown.
  static void withdraw(detail::p2p_entry& e) {
    int expected = detail::p2p_entry::posted;
    if (!e.state.compare_exchange_strong(expected, detail::p2p_entry::withdrawn, std::memory_order_acq_rel))
      while (e.state.load(std::memory_order_acquire) != detail::p2p_entry::done) std::this_thread::yield();  // the receive is copying from buf
  }

  /// The receiving half of recv and sendrecv: waits for the next message from `peer` and
  /// copies it into `buf` (from the ring, or from the sender's buffer for a larger one).
  template <element_type T>
  void take(T* buf, std::size_t count, int peer, const char* where) {
    auto& ch = g_->chan(static_cast<std::size_t>(peer * size() + rank_));
    const std::uint64_t h = ch.taken;
    detail::p2p_entry& e = ch.ring[h % SHARDCAST_HOST_SEND_DEPTH];
    const auto arrived = [&] { return e.turn.load(std::memory_order_seq_cst) == 2 * h + 1; };
    // A sender that returned with nothing more in the channel never sends again (its stores
    // happen before its return is seen: arrived() is asked again after that).
    if (!wait_for(ch, arrived, where, returned_without(peer, arrived)))
      throw comm_error("shardcast::host: " + std::string(where) + " abandoned: " + g_->member_name(peer) +
                       " returned from its function after sending " + std::to_string(h) + (h == 1 ? " message" : " messages") +
                       " to this rank on this group, and this rank waits for the " + ordinal(h + 1) + ", of " + std::to_string(count) + " " +
                       to_string(dtype_of<T>::value) + " (every recv needs its send)");
    const std::size_t sent = e.count;
    const dtype sent_type = e.type;
    const bool match = sent == count && sent_type == dtype_of<T>::value;
    if (!e.large) {
      if (match) copy(buf, reinterpret_cast<const T*>(e.data), count);
    } else {
      int expected = detail::p2p_entry::posted;
      if (!e.state.compare_exchange_strong(expected, detail::p2p_entry::taking, std::memory_order_acq_rel)) {
        // The send gave up, and its buffer may be gone. Its rank failed: in a timeout or an
        // abort (the world says why), or in the receive half of its own sendrecv, whose
        // exception host::run reports once it ends the run. The message is dropped (the
        // entry goes back to the sender), so a caller that goes on after the exception
        // receives that rank's next message next.
        e.turn.store(2 * (h + SHARDCAST_HOST_SEND_DEPTH), std::memory_order_seq_cst);
        ch.taken = h + 1;
        ch.wake();
        if (g_->world->aborted.load(std::memory_order_acquire)) g_->throw_aborted(where);
        // A consequence of that rank's failure, not a cause: run() prefers the cause.
        throw shardcast::detail::abandoned_error("shardcast::host::" + std::string(where) + ": rank " + std::to_string(peer) + " withdrew its message of " +
                         std::to_string(sent) + " " + to_string(sent_type) + " to rank " + std::to_string(rank_) +
                         " before this receive took it: that rank failed (its own exception says why)");
      }
      if (match) copy(buf, static_cast<const T*>(e.src), count);
      e.mismatch = !match;
      e.recv_count = count;
      e.recv_type = dtype_of<T>::value;
      e.state.store(detail::p2p_entry::done, std::memory_order_seq_cst);
    }
    e.turn.store(2 * (h + SHARDCAST_HOST_SEND_DEPTH), std::memory_order_seq_cst);
    ch.taken = h + 1;
    ch.wake();  // the sender may wait for the entry, or for its larger message to be copied
    if (!match) throw recv_mismatch<T>(count, peer, sent, sent_type, where);
  }

  /// The stop check of a wait for `peer`: it has returned from its function and `ready()`
  /// is still false. Its stores happen before its return is seen, so ready() asked after
  /// that is final: the wait can end, and the caller throws naming that rank.
  template <class Ready>
  auto returned_without(int peer, const Ready& ready) const {
    return [this, peer, &ready] { return g_->member_returned(peer) && !ready(); };
  }

  /// Returns true once `ready()`; waits on `ch` as every wait does (spin, yield, sleep;
  /// comm_error on abort or timeout), taking its mutex only when `ready()` is not true at
  /// once. False when `stop()` (asked only once the wait sleeps; see in_process_group::wait).
  template <class Ready, class Stop = shardcast::detail::rank_barrier::no_stop>
  bool wait_on(shardcast::detail::channel_sync& ch, Ready ready, const char* where, Stop stop = {}) const {
    if (ready()) return true;
    std::unique_lock lk(ch.m);
    return g_->wait(ch, lk, ready, where, false, stop);
  }

  /// A channel's wait: spins on `ready()` (pauses, then by time as every wait does), and
  /// only then counts itself among the channel's waiters, which the other side wakes, and
  /// yields and sleeps (comm_error on abort or timeout). `ready()` loads are seq_cst: with
  /// the announcement and the other side's change then load of `waiters`, either the
  /// change is seen or the waiter is.
  /// (Spinning by time follows spin_policy: off for a while after two vain spins.)
  /// Returns true once `ready()`; false when `stop()`, which is asked only once the wait
  /// sleeps (see in_process_group::wait): the peer it waits for has returned.
  template <class Ready, class Stop = shardcast::detail::rank_barrier::no_stop>
  bool wait_for(detail::channel& ch, Ready ready, const char* where, Stop stop = {}) const {
    if (shardcast::detail::pause_until(ready, g_->world->pauses) ||
        shardcast::detail::spin_until(ready, g_->world->spin_for, g_->world->aborted) || ready())
      return true;
    ch.waiters.fetch_add(1, std::memory_order_seq_cst);
    struct leave {
      detail::channel& c;
      ~leave() { c.waiters.fetch_sub(1, std::memory_order_relaxed); }
    } guard{ch};
    std::unique_lock lk(ch.m);
    return g_->wait(ch, lk, ready, where, true, stop);
  }

  /// The comm_error of a send that waits for room in the channel `ch` to `peer`, whose rank
  /// has returned from its function without taking the messages there (its count of those
  /// taken is final once its return is seen).
  comm_error unreceived(const detail::channel& ch, int peer, const char* where) const {
    return comm_error("shardcast::host: " + std::string(where) + " abandoned: " + g_->member_name(peer) +
                      " returned from its function after receiving " + std::to_string(ch.taken) + " of the " + std::to_string(ch.sent) +
                      " messages this rank sent it on this group, and this rank waits for room in the channel to it for the " +
                      ordinal(ch.sent + 1) + " (every send needs its recv)");
  }

  /// What every point-to-point call checks first: comm_error on the null communicator, or
  /// once the run has aborted (an eager send, and a receive of one already sent, would
  /// otherwise complete after a peer has failed; every call entered after the failure
  /// throws instead).
  void require_p2p(const char* what) const {
    if (!g_) throw comm_error("shardcast::host: point-to-point call on a null communicator (default-constructed, or split with a negative color)");
    g_->throw_if_aborted(what, std::memory_order_relaxed);
  }

  void check_peer(int peer, const char* what) const {
    require_p2p(what);
    SHARDCAST_EXPECTS(peer >= 0 && peer < size() && peer != rank_,
                      std::string("shardcast::host::") + what + ": peer " + std::to_string(peer) + " is not another rank of this communicator of size " +
                          std::to_string(size()));
  }

  /// Does a collective that touches `elements` elements of T (over all ranks) stream its output?
  template <class T>
  static bool streaming(std::size_t elements) {
    return elements * sizeof(T) >= SHARDCAST_HOST_STREAM_BYTES;
  }

  template <class T>
  static void copy(T* dst, const T* src, std::size_t n, bool stream = false) {
    if (!n || dst == src) return;
    if (stream) detail::stream_copy(dst, src, n * sizeof(T));
    else std::memcpy(dst, src, n * sizeof(T));
  }

  /// out[i] = op over q of in(q)[off + i], blocked so the partial result stays in L1:
  /// the block is computed in a scratch array (`out` may alias an input) and stored once.
  template <class T, class In>
  void reduce_range(T* out, std::size_t off, std::size_t n, reduce_op op, In in, bool stream) {
    constexpr std::size_t block = 16384 / sizeof(T);
    const int p = size();
    alignas(64) T acc[block];
    for (std::size_t b = 0; b < n; b += block) {
      const std::size_t m = std::min(block, n - b);
      if (p == 1) {
        std::memcpy(acc, in(0) + off + b, m * sizeof(T));
      } else {
        detail::combine(acc, in(0) + off + b, in(1) + off + b, m, op);
        for (int q = 2; q < p; ++q) shardcast::detail::accumulate(acc, in(q) + off + b, m, op);
      }
      if (op == reduce_op::avg) shardcast::detail::finish_avg(acc, m, p);
      if (stream) detail::stream_copy(out + b, acc, m * sizeof(T));
      else std::memcpy(out + b, acc, m * sizeof(T));
    }
  }

  std::shared_ptr<detail::group_state> g_;
  int rank_ = 0;
  int par_ = 0;  ///< parity of the collective in progress: which slot and eager buffer it uses
};

/// Runs `f(comm)` on `nranks` threads, one communicator per thread (rank 0 on the calling
/// thread). Rethrows the first exception after every thread has ended; peers of a failed
/// rank get comm_error. Rank r's thread starts on the r-th CPU after the caller's in the
/// process's affinity mask (round the mask when ranks outnumber CPUs, so that they start
/// evenly spread) and is then free to move (see spread_start).
template <class F>
void run(int nranks, F&& f, options opt = {}) {
  SHARDCAST_EXPECTS(nranks >= 1, "shardcast::host::run: nranks must be at least 1, got " + std::to_string(nranks));
  auto world = std::make_shared<detail::world_state>();
  world->timeout = opt.timeout.count() > 0 ? opt.timeout : detail::default_timeout();
  world->set_waits(nranks);
  world->track_returns(nranks);
  std::vector<int> all(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) all[static_cast<std::size_t>(r)] = r;
  auto group = std::make_shared<detail::group_state>(world, nranks, detail::eager_limit(nranks), std::move(all));
  shardcast::detail::run_failure failure;
  // Ranks start spread over the CPUs (see spread_start).
  const int cpu0 = nranks > 1 ? shardcast::detail::current_cpu() : -1;
  auto body = [&](int r) {
    if (r > 0 && cpu0 >= 0) shardcast::detail::spread_start(r, cpu0);
    try {
      communicator c(group, r);
      f(c);
      // It will call nothing more: a peer waiting for it in a collective it never started,
      // or for a message it never sent, stops waiting (see communicator::returned_before).
      // Not when f throws: that aborts the run, which releases every waiter anyway.
      world->mark_returned(r);
    } catch (...) {
      shardcast::detail::fail_rank(failure, *world, r);
    }
  };
  std::vector<std::thread> threads;  // ranks 1.. on new threads, rank 0 on this one
  shardcast::detail::start_rank_threads(threads, body, 1, nranks, *world, "shardcast::host::run",
                                        "shardcast::host::run: a rank's thread could not be started");
  body(0);
  for (auto& t : threads) t.join();
  if (const std::exception_ptr e = failure.first()) std::rethrow_exception(e);
  std::string undelivered = group->undelivered();
  group.reset();
  if (undelivered.empty()) {
    std::lock_guard lk(world->m);
    undelivered = world->undelivered;  // from the groups split made
  }
  if (!undelivered.empty()) throw comm_error(undelivered);
}

}  // namespace shardcast::host
