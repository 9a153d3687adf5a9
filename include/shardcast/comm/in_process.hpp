#pragma once
/// @file comm/in_process.hpp
/// What the in-process backends (host and p2p, whose ranks are threads of one process)
/// share: the world of one run (abort flag, reason, timeout, and the groups made in it) and
/// the part of a group that makes ranks meet (a barrier, channel waits, and the comm_error
/// of an abort or a timeout, named after the backend). Internal.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "rank_barrier.hpp"

namespace shardcast::detail {

struct in_process_group;

/// The meeting point of a point-to-point channel: a mutex for its state, a condition
/// variable for sleepers, and a count of changes that spinning waiters watch without the
/// mutex. A backend's channel derives from it and calls notify() after every change of
/// its state that a waiter may be waiting for.
struct channel_sync {
  std::mutex m;
  std::condition_variable cv;
  std::atomic<std::uint32_t> changes{0};
  std::atomic<int> sleepers{0};  ///< waiters in (or about to enter) cv's wait
  void notify() {
    changes.fetch_add(1, std::memory_order_acq_rel);
    cv.notify_all();
  }
  /// notify() for a change made with atomic operations (seq_cst), not under `m`: the
  /// sleepers count tells whether a waiter may be between its last check and its sleep,
  /// and taking `m` then makes the wake-up reach it.
  void notify_lock_free() {
    changes.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard g(m); }
      cv.notify_all();
    }
  }
};

/// What a rank of an in-process run throws when it stops waiting because the run aborted (a
/// peer failed or timed out): a comm_error caused by another rank's failure, not a cause of
/// its own. The runs (host::run, p2p::run) rethrow a cause in preference to it.
class abandoned_error : public comm_error {
 public:
  using comm_error::comm_error;
};

/// The exception an in-process run rethrows once its threads have ended: the first one
/// recorded that is not an abandoned_error, else the first abandoned_error. (A rank that
/// times out aborts the run before its own exception reaches the run, so a peer it woke may
/// record its abandoned_error first.)
struct run_failure {
  std::mutex m;
  std::exception_ptr cause, abandoned;  ///< the first of each kind; each set once
  /// Records the exception being handled (call inside a catch block). Nothing recorded is
  /// released before the run's threads have ended (the exception objects are shared with
  /// the threads that threw them).
  void record_current(bool is_abandoned) {
    std::lock_guard lk(m);
    std::exception_ptr& slot = is_abandoned ? abandoned : cause;
    if (!slot) slot = std::current_exception();
  }
  /// What the run rethrows: the first cause, else the first abandoned_error (null if none).
  std::exception_ptr first() const { return cause ? cause : abandoned; }
  static bool is_abandoned(const std::exception& e) { return dynamic_cast<const abandoned_error*>(&e) != nullptr; }
};

/// State shared by every rank of one run: the abort flag, the timeout, and the groups
/// (communicators) made in it, so an abort can wake every rank parked in a barrier.
struct in_process_world {
  std::atomic<bool> aborted{false};
  std::mutex m;  // guards reason and groups; taken before any group's park mutex, never after
  std::string reason;
  std::chrono::milliseconds timeout{};
  std::chrono::nanoseconds spin_for{0};  ///< how long waiters spin by time (spin_time of the run's ranks)
  int pauses = barrier_tuning::spin;     ///< how many times waiters pause first (pause_count of the run's ranks)
  /// How the waiters of a run of `nranks` threads wait: spin_time and pause_count.
  void set_waits(int nranks) {
    spin_for = spin_time(nranks);
    pauses = pause_count(nranks);
  }
  std::vector<in_process_group*> groups;
  std::string undelivered;  ///< host: a message no recv took, found when its group ended

  /// Which ranks' functions have returned normally (host): such a rank never comes to a
  /// meeting or a channel again, so a peer waiting for it there may stop at once (see
  /// in_process_group::member_returned). Sized by track_returns before the threads start;
  /// empty where the backend does not mark returns (p2p).
  std::unique_ptr<std::atomic<bool>[]> returned;
  int ranks = 0;  ///< size of `returned`
  std::atomic<int> returns{0};  ///< how many are set: a waiter with nothing to find reads only this
  void track_returns(int nranks) {
    returned.reset(new std::atomic<bool>[static_cast<std::size_t>(nranks)]());
    ranks = nranks;
  }
  /// Rank r's function has returned normally. Everything the rank did before (its counts of
  /// collectives, its messages) happens before a waiter's has_returned(r) that sees it.
  /// The waiters parked in a meeting are woken, so that their stop checks see it at once.
  inline void mark_returned(int r);
  /// Has rank r's function returned? (acquire: what it did before is then visible.)
  bool has_returned(int r) const {
    return r >= 0 && r < ranks && returns.load(std::memory_order_relaxed) > 0 &&
           returned[static_cast<std::size_t>(r)].load(std::memory_order_acquire);
  }

  /// Aborts the world (the first reason stays) and wakes the parked waiters of every group.
  /// Never throws: without memory for the reason the world aborts with an empty one.
  inline void abort(const std::string& why) noexcept;
  inline void abort(const char* why) noexcept;
  std::string why() {
    std::lock_guard lk(m);
    return reason;
  }
};

/// The meeting part of one group of ranks. A backend's group state derives from it and adds
/// its slots and channels.
struct in_process_group {
  std::shared_ptr<in_process_world> world;
  int size;
  rank_barrier bar;
  const char* backend;  ///< prefix of its errors, e.g. "shardcast::host"
  /// The world rank (rank of the run) of each member, in group order; empty where the
  /// backend does not say (then member_returned is always false).
  std::vector<int> world_ranks;

  in_process_group(std::shared_ptr<in_process_world> w, int n, const char* name, std::vector<int> members = {})
      : world(std::move(w)), size(n), bar(n), backend(name), world_ranks(std::move(members)) {
    std::lock_guard lk(world->m);
    world->groups.push_back(this);
  }
  ~in_process_group() {
    std::lock_guard lk(world->m);
    std::erase(world->groups, this);
  }
  in_process_group(const in_process_group&) = delete;
  in_process_group& operator=(const in_process_group&) = delete;

  /// Has member q's function returned (see in_process_world::has_returned)? A rank that
  /// returned never arrives anywhere again.
  bool member_returned(int q) const {
    return q >= 0 && static_cast<std::size_t>(q) < world_ranks.size() && world->has_returned(world_ranks[static_cast<std::size_t>(q)]);
  }
  /// Whether any rank of the run has returned: one relaxed load, the cheap first test of a
  /// stop check.
  bool any_returned() const { return world->returns.load(std::memory_order_relaxed) > 0; }
  /// "rank q" and, where the group is not the world, which rank of the run that is.
  std::string member_name(int q) const {
    std::string s = "rank " + std::to_string(q);
    if (static_cast<std::size_t>(q) < world_ranks.size() && (world_ranks[static_cast<std::size_t>(q)] != q || static_cast<int>(world_ranks.size()) != world->ranks))
      s += " of this group (rank " + std::to_string(world_ranks[static_cast<std::size_t>(q)]) + " of the run)";
    return s;
  }

  [[noreturn]] void throw_aborted(const char* where) {
    throw abandoned_error(std::string(backend) + ": " + where + " abandoned: " + world->why());
  }
  /// Throws comm_error if the world has aborted (a peer failed or timed out). `order`:
  /// relaxed where the caller only needs to learn of the failure, not read what a peer wrote
  /// before it.
  void throw_if_aborted(const char* where, std::memory_order order = std::memory_order_acquire) {
    if (world->aborted.load(order)) [[unlikely]]
      throw_aborted(where);
  }
  [[noreturn]] void throw_timeout(const char* where) {
    const std::string msg = std::string(backend) + ": " + where + " timed out after " + std::to_string(world->timeout.count()) +
                            " ms waiting for peers (a peer never arrived)";
    // abort() takes the world's mutex, then each group's park mutex; the caller may hold a
    // channel mutex (nothing takes one after those), never a park mutex.
    world->abort(msg);
    throw comm_error(msg);
  }

  /// Waits on channel `ch` under `lk` (a lock of `ch.m`) until `ready()`, the world aborts,
  /// or the timeout passes (the world is then aborted, so every peer stops waiting too).
  /// Like the barrier, it first spins and then yields, both without the mutex, watching
  /// `ch.changes` (a peer that is about to arrive costs no sleep and wake-up, and finds the
  /// mutex free); then it sleeps on `ch.cv`.
  /// `spun`: the caller has already spun (pauses and by time) watching `ready()` itself, so
  /// the wait goes on with yielding. `stop()` (asked only once the wait sleeps, before each
  /// sleep of at most 5 ms, with `lk` held) ends the wait early: the caller has learnt that
  /// what it waits for will not come (a peer that returned). Returns true on `ready()`,
  /// false on `stop()`.
  /// @throws comm_error on abort or timeout (with `lk` held, as on return).
  template <class Lock, class Pred, class Stop = rank_barrier::no_stop>
  bool wait(channel_sync& ch, Lock& lk, Pred ready, const char* where, bool spun = false, Stop stop = {}) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const int pauses = world->pauses;
    int spins = spun ? pauses : 0;
    bool spun_by_time = spun;  // once per wait, after the pauses
    while (!ready()) {
      throw_if_aborted(where);
      // No peer can change the channel under its mutex before we unlock: a change after this
      // load shows. A change made without the mutex (notify_lock_free) may have come between
      // the check above and this load: check again.
      const std::uint32_t seen = ch.changes.load(std::memory_order_acquire);
      if (ready()) break;
      lk.unlock();
      bool changed = false;
      for (; spins < pauses && !changed; ++spins) {
        changed = ch.changes.load(std::memory_order_acquire) != seen;
        if (!changed) cpu_relax();
      }
      if (!changed && !spun_by_time) {
        spun_by_time = true;
        spin_until([&] { return ch.changes.load(std::memory_order_acquire) != seen; }, world->spin_for, world->aborted);
        changed = ch.changes.load(std::memory_order_acquire) != seen;
      }
      while (!changed && clock::now() - start < barrier_tuning::yield_for) {
        changed = ch.changes.load(std::memory_order_acquire) != seen;
        if (!changed) std::this_thread::yield();
      }
      lk.lock();
      if (!changed) break;  // spinning and yielding are spent: sleep
    }
    const auto deadline = deadline_after(clock::now(), world->timeout);
    while (!ready()) {
      throw_if_aborted(where, std::memory_order_seq_cst);
      if (stop()) return false;  // (before the deadline: a stop that came during the last sleep wins)
      const auto now = clock::now();
      if (now >= deadline) throw_timeout(where);
      // Announce the sleep, then check once more. In the seq_cst order, a notify_lock_free
      // either reads the announcement (and its taking of the mutex waits until this thread
      // sleeps), or made its increment of `changes` before this load of it, which then
      // makes its change visible to the check. (A load rather than a fence: ThreadSanitizer
      // does not model fences.)
      ch.sleepers.fetch_add(1, std::memory_order_seq_cst);
      (void)ch.changes.load(std::memory_order_seq_cst);
      if (!ready()) ch.cv.wait_for(lk, std::min<clock::duration>(deadline - now, std::chrono::milliseconds(5)));
      ch.sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
  }

  /// The ranks meet after reading each other's buffers: the end of a collective (or of its
  /// phase) whose ranks copy straight out of their peers' memory. Unlike barrier(), it waits
  /// until every rank has arrived, whatever the abort flag and the timeout: every rank that
  /// passed the meeting before the reads arrives here as soon as its own copies are done,
  /// without waiting on anything else, and a rank that left at an abort or a timeout would
  /// return to its caller, who may free or reuse the buffers a slower peer is still reading.
  /// An abort is noticed at the next meeting.
  void barrier_after_reads() { bar.arrive_and_wait_all(world->spin_for, world->pauses); }

  /// Every rank of the group meets here (see rank_barrier). Returns true; false when
  /// `stop()` came first (see rank_barrier::arrive_and_wait: this rank's arrival is
  /// withdrawn, and the caller says why it stopped waiting).
  /// @throws comm_error if the world aborts or the timeout passes first.
  template <class Stop = rank_barrier::no_stop>
  bool barrier(const char* where, Stop stop = {}) {
    throw_if_aborted(where);
    switch (bar.arrive_and_wait(world->aborted, world->timeout, world->spin_for, world->pauses, stop)) {
      case rank_barrier::outcome::passed: return true;
      case rank_barrier::outcome::aborted: throw_aborted(where);
      case rank_barrier::outcome::timed_out: throw_timeout(where);
      case rank_barrier::outcome::stopped: return false;
    }
    return true;
  }
};

inline void in_process_world::mark_returned(int r) {
  if (r < 0 || r >= ranks) return;
  returned[static_cast<std::size_t>(r)].store(true, std::memory_order_release);
  returns.fetch_add(1, std::memory_order_release);
  std::lock_guard lk(m);
  for (in_process_group* g : groups) g->bar.wake_parked();  // world mutex, then the group's park mutex
}

inline void in_process_world::abort(const char* why) noexcept {
  std::lock_guard lk(m);
  if (aborted.load()) return;
  try {
    reason = why;
  } catch (...) {  // (no memory for the reason: abort all the same)
    reason.clear();
  }
  aborted.store(true, std::memory_order_seq_cst);
  for (in_process_group* g : groups) g->bar.wake_parked();  // world mutex, then the group's park mutex
}
inline void in_process_world::abort(const std::string& why) noexcept { abort(why.c_str()); }

/// Aborts `w` because rank r failed: "rank r failed: <what>", or "rank r failed with a
/// non-standard exception" when `what` is null. Never throws (a run calls it in the catch
/// of a rank's thread, where an exception would end the process): without memory for the
/// message the reason is a fixed one.
inline void abort_failed(in_process_world& w, int r, const char* what) noexcept {
  try {
    w.abort("rank " + std::to_string(r) + (what ? std::string(" failed: ") + what : std::string(" failed with a non-standard exception")));
  } catch (...) {
    w.abort("a rank failed (no memory was left to say which)");
  }
}

/// The catch block of a rank's thread in an in-process run (call it inside `catch (...)`):
/// records the exception being handled in `failure`, then aborts `w` for rank r; in that
/// order, so that the peers' comm_errors never come before the cause. Never throws.
inline void fail_rank(run_failure& failure, in_process_world& w, int r) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    failure.record_current(run_failure::is_abandoned(e));
    abort_failed(w, r, e.what());
  } catch (...) {
    failure.record_current(false);
    abort_failed(w, r, nullptr);
  }
}

/// Starts `body(r)` on a new thread for each rank r in [first, nranks), appended to `threads`.
/// When a thread cannot be started (std::system_error, or std::bad_alloc for its state), the
/// ranks already started wait for it: `w` is aborted with `abort_reason` (comm_error in their
/// waits), they are joined, and then comm_error says which rank `run` could not start, instead
/// of destroying joinable threads. Nothing allocates before the joins (memory may be what ran
/// out).
template <class Body>
void start_rank_threads(std::vector<std::thread>& threads, Body& body, int first, int nranks, in_process_world& w, const char* run,
                        const char* abort_reason) {
  threads.reserve(static_cast<std::size_t>(nranks - first));
  for (int r = first; r < nranks; ++r) {
    try {
      threads.emplace_back(body, r);
    } catch (const std::exception& e) {
      w.abort(abort_reason);
      for (auto& t : threads) t.join();
      throw comm_error(std::string(run) + ": could not start the thread of rank " + std::to_string(r) + " of " + std::to_string(nranks) +
                       " (" + e.what() + "); run fewer ranks, or raise the process's limit on threads or memory");
    }
  }
}

}  // namespace shardcast::detail
