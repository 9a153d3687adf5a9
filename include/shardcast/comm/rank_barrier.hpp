#pragma once
/// @file comm/rank_barrier.hpp
/// The barrier of the in-process backends (host and p2p), where ranks are threads: one
/// atomic word, waiters that spin, then yield, then park, and a timeout and an abort flag
/// that every waiter honours. Internal: detail::in_process_group (comm/in_process.hpp) turns
/// its outcome into the backend's comm_error.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <type_traits>

#if defined(__linux__)
#include <sched.h>
#endif

#include "communicator.hpp"

/// Barrier waiting policy of the in-process backends (host and p2p; see
/// detail::rank_barrier): pauses before spinning by time or yielding (when the run has no
/// more ranks than the process has CPUs), and microseconds of yielding before parking.
#ifndef SHARDCAST_HOST_BARRIER_SPIN
#define SHARDCAST_HOST_BARRIER_SPIN 64
#endif
/// The same count when the run has more ranks than the process has CPUs. Then the rank
/// waited for often needs the waiter's CPU, and every pause before the yield is time it
/// cannot run: with 4 ranks on 2 CPUs, a 64-byte all_reduce took 3.3 us with 64 pauses
/// and 2.6 us with 4, and a 64-byte all_gather 3.3 and 2.0 us (docs/bench.md, "Waiting
/// with more ranks than CPUs").
#ifndef SHARDCAST_HOST_OVERSUBSCRIBED_SPIN
#define SHARDCAST_HOST_OVERSUBSCRIBED_SPIN 4
#endif
#ifndef SHARDCAST_HOST_BARRIER_YIELD_US
#define SHARDCAST_HOST_BARRIER_YIELD_US 50
#endif
/// Microseconds a waiter keeps spinning (after the SHARDCAST_HOST_BARRIER_SPIN pauses)
/// before it yields, when the run has no more ranks than the process has CPUs; with more
/// ranks than CPUs it yields after its SHARDCAST_HOST_OVERSUBSCRIBED_SPIN pauses, since a
/// spinning waiter would then keep the rank it waits for off its CPU. The environment
/// variable SHARDCAST_HOST_SPIN_US overrides it (0: never spin by time).
#ifndef SHARDCAST_HOST_SPIN_US
#define SHARDCAST_HOST_SPIN_US 20
#endif

/// Whether the in-process backends may move a rank's thread to another CPU of its affinity
/// mask (always giving the whole mask back at once): host::run starts the ranks spread over
/// the CPUs (each on its own when they do not outnumber them), and a thread whose spins by
/// time go in vain moves on (see spin_policy). 0: never; threads stay where the scheduler
/// puts them.
#ifndef SHARDCAST_HOST_MOVE_THREADS
#define SHARDCAST_HOST_MOVE_THREADS 1
#endif

namespace shardcast::detail {

/// Pause instruction for spin-waiting (lets the sibling hyper-thread run).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// How a barrier waits: spin `spin` times, then for the run's spin time (see spin_time),
/// then yield the CPU for up to `yield_for`, then park (sleep until woken by the last
/// arrival, an abort, or the deadline).
struct barrier_tuning {
  static constexpr int spin = SHARDCAST_HOST_BARRIER_SPIN;
  static constexpr int spin_oversubscribed = SHARDCAST_HOST_OVERSUBSCRIBED_SPIN;
  static constexpr std::chrono::microseconds yield_for{SHARDCAST_HOST_BARRIER_YIELD_US};
};

/// CPUs this process may run on (its affinity mask on Linux), at least 1.
inline int available_cpus() {
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

/// Whether a run of `nranks` threads has more ranks than the process has CPUs (its
/// affinity mask): then the rank a waiter waits for often needs the waiter's CPU.
inline bool ranks_outnumber_cpus(int nranks) { return nranks > available_cpus(); }

/// How long the waiters of a run of `nranks` threads spin by time before yielding:
/// SHARDCAST_HOST_SPIN_US (or the environment variable of that name) when every rank can
/// have a CPU of its own, else 0.
inline std::chrono::nanoseconds spin_time(int nranks) {
  long us = SHARDCAST_HOST_SPIN_US;
  if (const char* e = std::getenv("SHARDCAST_HOST_SPIN_US")) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (end != e && v >= 0) us = v;
  }
  if (us <= 0 || ranks_outnumber_cpus(nranks)) return std::chrono::nanoseconds{0};
  return std::chrono::microseconds{us};
}

/// How many times the waiters of a run of `nranks` threads pause before they spin by time
/// or yield: barrier_tuning::spin, or barrier_tuning::spin_oversubscribed when the run has
/// more ranks than the process has CPUs.
inline int pause_count(int nranks) {
  return ranks_outnumber_cpus(nranks) ? barrier_tuning::spin_oversubscribed : barrier_tuning::spin;
}

/// The CPU the calling thread runs on, or -1 where that cannot be told.
inline int current_cpu() {
#if defined(__linux__) && defined(CPU_COUNT)
  return sched_getcpu();
#else
  return -1;
#endif
}

/// Moves the calling thread to the r-th CPU after `cpu0` in its affinity mask, then gives
/// it the whole mask back. Nothing stays bound: the scheduler may move the thread later.
/// Threads that start on one CPU may stay there for milliseconds while another CPU is idle
/// (the scheduler balances them periodically, and a waiter that spins or yields never
/// sleeps, which would let a wake-up place it on an idle CPU); waiters that spin by time
/// then spin against each other; and more threads than CPUs may start unevenly spread and
/// stay so for a hundred milliseconds. host::run starts rank r (r > 0) with cpu0 = rank
/// 0's CPU; spin_policy moves a thread whose spins go in vain with r = 1.
inline void spread_start(int r, int cpu0) {
#if defined(__linux__) && defined(CPU_COUNT) && SHARDCAST_HOST_MOVE_THREADS
  cpu_set_t all;
  CPU_ZERO(&all);
  if (cpu0 < 0 || sched_getaffinity(0, sizeof all, &all) != 0 || !CPU_ISSET(cpu0, &all) || CPU_COUNT(&all) < 2) return;
  int cpus[CPU_SETSIZE], n = 0, at = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) {
      if (c == cpu0) at = n;
      cpus[n++] = c;
    }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[(at + r) % n], &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) (void)sched_setaffinity(0, sizeof all, &all);
#else
  (void)r;
  (void)cpu0;
#endif
}

/// Whether the calling thread's next wait spins by time. Spinning by time pays only while
/// the thread waited for runs on another CPU. Threads that the scheduler keeps on one CPU
/// (as it may for a while after they start, or after a wake-up) would each spin for the
/// whole time while the other waits for the CPU: after two waits in a row whose spin by
/// time ended without what they waited for, the thread stops spinning by time (it yields
/// after the pauses, which hands the CPU over), and tries again every 64th wait. Kept per
/// thread, since that is what the scheduler places.
struct spin_policy {
  static bool spin_now() {
    thread_state& s = state();
    return s.misses < 2 || ++s.skips % 64 == 0;
  }
  /// After a spin by time: did it see what it waited for? From the second vain spin in a
  /// row on, the thread also moves itself to the next CPU of its affinity mask (and is
  /// free to move again at once), since the thread it waits for may be on its own CPU;
  /// at most once per `move_every`, since it may as well just be late.
  static void spun(bool seen) {
    thread_state& s = state();
    if (seen) {
      s.misses = 0;
      return;
    }
    if (s.misses < 2) ++s.misses;
    if (s.misses == 2) {
      const auto now = std::chrono::steady_clock::now();
      if (now - s.moved >= move_every) {
        s.moved = now;
        move_on();
      }
    }
  }
  static constexpr std::chrono::milliseconds move_every{20};

 private:
  static void move_on() { spread_start(1, current_cpu()); }
  struct thread_state {
    int misses = 0;
    unsigned skips = 0;
    std::chrono::steady_clock::time_point moved{};
  };
  static thread_state& state() {
    thread_local thread_state s;
    return s;
  }
};

/// Pauses up to `pauses` times until `done()`; returns whether it saw `done()`.
template <class Done>
bool pause_until(Done done, int pauses) {
  for (int i = 0; i < pauses; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  return false;
}

/// Spins by time, when `spin_for` is positive and spin_policy lets the calling thread:
/// until `done()`, `aborted`, or `spin_for` has passed (reading the clock every 32 pauses).
/// Then tells spin_policy whether the spin saw `done()`, and returns that (false when it
/// did not spin).
template <class Done>
bool spin_until(Done done, std::chrono::nanoseconds spin_for, const std::atomic<bool>& aborted) {
  if (spin_for.count() <= 0 || !spin_policy::spin_now()) return false;
  const auto end = std::chrono::steady_clock::now() + spin_for;
  for (;;) {
    int i = 0;
    for (; i < 32 && !done() && !aborted.load(std::memory_order_relaxed); ++i) cpu_relax();
    if (i < 32 || std::chrono::steady_clock::now() >= end) break;
  }
  const bool seen = done();
  spin_policy::spun(seen);
  return seen;
}

/// A reusable barrier of `size` threads.
///
/// One 64-bit word holds the generation (high 32 bits) and the number of ranks that arrived
/// in it (low 32 bits). A rank arrives with one fetch_add; the last one stores
/// (generation + 1, 0), which releases the others. Waiters spin briefly, then yield the CPU
/// (ranks often outnumber cores), then park on a condition variable that the releaser
/// signals only when someone is parked (`parked`), so the common path takes no lock.
/// std::atomic::wait would park without a mutex, but it has no timeout, and a waiter must
/// still notice the timeout; a parked waiter sleeps until its deadline at the latest, or
/// until wake_parked (which the owner calls after setting the abort flag).
/// A waiter that gives up (abort, timeout) withdraws its arrival with a compare-exchange
/// that only succeeds while the generation is unchanged and the count is below the size:
/// once the last rank has arrived the barrier is complete for everyone.
/// arrive_and_wait_all is the same meeting without the abort flag and the timeout: for
/// meetings that every rank is sure to reach (see in_process_group::barrier_after_reads).
class rank_barrier {
 public:
  enum class outcome { passed, aborted, timed_out, stopped };
  /// The `stop` of a wait that only the other ranks, an abort or the timeout end.
  struct no_stop {
    constexpr bool operator()() const { return false; }
  };

  explicit rank_barrier(int size) : size_(size) {}
  rank_barrier(const rank_barrier&) = delete;
  rank_barrier& operator=(const rank_barrier&) = delete;

  int size() const { return size_; }

  /// Arrives and waits until every rank has arrived (passed), `aborted` becomes true
  /// (aborted), `timeout` passes (timed_out), or `stop()` (stopped: the caller has learnt
  /// that a rank it waits for will not come). A rank that does not pass has withdrawn its
  /// arrival. The caller checks `aborted` before arriving, if it must.
  /// Waiters pause `pauses` times (see pause_count), then spin by time for `spin_for`;
  /// `stop()` is asked only after that, while yielding and before each sleep: a sleep lasts
  /// at most a second, and whoever makes `stop()` true should wake the parked waiters
  /// (wake_parked) if it must be seen at once. `stop()` is also asked with the park mutex
  /// held, so it must not take a lock (atomic loads only).
  template <class Stop = no_stop>
  outcome arrive_and_wait(const std::atomic<bool>& aborted, std::chrono::milliseconds timeout,
                          std::chrono::nanoseconds spin_for = std::chrono::nanoseconds{0}, int pauses = barrier_tuning::spin,
                          Stop stop = {}) {
    std::uint32_t gen = 0;
    if (arrive(gen)) return outcome::passed;
    return await<true>(gen, aborted, timeout, spin_for, pauses, stop);
  }

  /// Arrives and waits until every rank has arrived, whatever an abort flag or a timeout
  /// would say: for a meeting every rank is sure to reach without waiting on anything else
  /// (the end of a collective whose ranks read each other's buffers, which no rank may
  /// leave while a peer may still read its memory).
  void arrive_and_wait_all(std::chrono::nanoseconds spin_for = std::chrono::nanoseconds{0}, int pauses = barrier_tuning::spin) {
    static const std::atomic<bool> never{false};
    std::uint32_t gen = 0;
    if (!arrive(gen)) (void)await<false>(gen, never, std::chrono::milliseconds::max(), spin_for, pauses, no_stop{});
  }

  /// Whether a waiter is parked (or about to park) here; seq_cst, against the waiter's
  /// announcement, so that a change made before this load and not seen by the waiter's last
  /// check is followed by wake_parked.
  bool has_parked() const { return parked_.load(std::memory_order_seq_cst) > 0; }
  /// Wakes every waiter parked here (call after setting the abort flag).
  void wake_parked() {
    { std::lock_guard lk(park_m_); }
    park_cv_.notify_all();
  }

 private:
  bool passed(std::uint32_t gen, std::memory_order o = std::memory_order_acquire) const {
    return static_cast<std::uint32_t>(bar_.load(o) >> 32) != gen;
  }
  /// Withdraws this rank's arrival in generation `gen`; false if the barrier completed.
  bool withdraw(std::uint32_t gen) {
    std::uint64_t cur = bar_.load(std::memory_order_acquire);
    while (static_cast<std::uint32_t>(cur >> 32) == gen && static_cast<int>(cur & 0xffffffffu) < size_)
      if (bar_.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    return false;
  }
  /// The barrier completed (passed), or this rank gives up: withdraw, then say why.
  outcome give_up(std::uint32_t gen, outcome why) { return withdraw(gen) ? why : outcome::passed; }

  /// Arrives in the current generation (returned in `gen`); true if this rank was the last,
  /// which releases the others.
  bool arrive(std::uint32_t& gen) {
    const std::uint64_t old = bar_.fetch_add(1, std::memory_order_acq_rel);
    gen = static_cast<std::uint32_t>(old >> 32);
    if (static_cast<int>(old & 0xffffffffu) + 1 != size_) return false;
    bar_.store(static_cast<std::uint64_t>(gen + 1u) << 32, std::memory_order_seq_cst);
    if (parked_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard lk(park_m_); }  // a parked waiter is either before its check or inside wait()
      park_cv_.notify_all();
    }
    return true;
  }

  /// Waits for generation `gen` to complete. `CanGiveUp`: also stops (withdrawing this
  /// rank's arrival) when `aborted` becomes true, `timeout` passes or `stop()`; otherwise it
  /// waits for the last rank however long that takes.
  template <bool CanGiveUp, class Stop>
  outcome await(std::uint32_t gen, const std::atomic<bool>& aborted, std::chrono::milliseconds timeout, std::chrono::nanoseconds spin_for,
                int pauses, Stop stop) {
    using clock = std::chrono::steady_clock;
    constexpr bool stoppable = CanGiveUp && !std::is_same_v<Stop, no_stop>;
    if (pause_until([&] { return passed(gen); }, pauses)) return outcome::passed;
    const auto start = clock::now();
    const auto deadline = deadline_after(start, timeout);
    // Spinning by time takes the first part of the yielding phase, so a waiter stays busy
    // for yield_for in all, as before, whether it spins or yields.
    spin_until([&] { return passed(gen); }, spin_for, aborted);
    while (clock::now() - start < barrier_tuning::yield_for) {
      if (passed(gen)) return outcome::passed;
      if (CanGiveUp && aborted.load(std::memory_order_acquire)) return give_up(gen, outcome::aborted);
      if (stoppable && stop()) return give_up(gen, outcome::stopped);
      std::this_thread::yield();
    }
    while (true) {
      if (passed(gen)) return outcome::passed;
      if (CanGiveUp && aborted.load(std::memory_order_acquire)) return give_up(gen, outcome::aborted);
      if (stoppable && stop()) return give_up(gen, outcome::stopped);  // (before the deadline: a stop that came during the last sleep wins)
      const auto now = clock::now();
      if (CanGiveUp && now >= deadline) return give_up(gen, outcome::timed_out);
      std::unique_lock lk(park_m_);
      parked_.fetch_add(1, std::memory_order_seq_cst);
      // Checked after announcing ourselves: the releaser stores the generation, then reads
      // `parked` (both seq_cst), so either we see the new generation or it sees us and
      // signals under park_m, which we hold until wait_until releases it. An abort sets the
      // flag (seq_cst) before wake_parked takes park_m, likewise. (Each sleep is at most a
      // second, so a deadline at the clock's end is never handed to the wait itself.)
      // `stop()` is asked again under park_m: whoever makes it true and then takes park_m
      // (wake_parked) either made its change before this check, or wakes this sleep.
      if (!passed(gen, std::memory_order_seq_cst) && !(CanGiveUp && aborted.load(std::memory_order_seq_cst)) && !(stoppable && stop()))
        park_cv_.wait_until(lk, now + std::chrono::seconds(1) < deadline ? now + std::chrono::seconds(1) : deadline);
      parked_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  int size_;
  alignas(64) std::atomic<std::uint64_t> bar_{0};  // (generation << 32) | arrived
  alignas(64) std::atomic<int> parked_{0};
  std::mutex park_m_;
  std::condition_variable park_cv_;
};

}  // namespace shardcast::detail
