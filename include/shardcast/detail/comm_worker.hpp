#pragma once
/// @file detail/comm_worker.hpp
/// A per-rank communication thread: runs submitted tasks (collectives) one at a time, in
/// submission order, while the submitting thread computes. Used by ops/overlap.hpp.
///
/// Failure model. A task's exception is kept and rethrown by wait() on that task's
/// ticket. After a failure the worker skips every later task until the owner calls
/// drain(): the tasks of one pipeline are collectives that peers run in the same order,
/// so once one failed on this rank, entering the next could wait on peers that will never
/// join it. Skipped tasks complete with comm_error naming the first failure. drain()
/// lets every queued task end (run, or skipped after a failure) and then clears the
/// failure: a call that ends early by an exception of the submitting thread (its GEMM
/// threw) still enters the collectives it queued, as its peers do, so ranks on which the
/// same call failed stay in step. The destructor drops queued tasks, lets the running one
/// finish and joins the thread.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "../error.hpp"

namespace shardcast::detail {

class comm_worker {
 public:
  /// Identifies one submitted task; tickets increase by one per submit, starting at 1.
  using ticket = std::uint64_t;

  comm_worker() : thread_([this] { loop(); }) {}
  comm_worker(const comm_worker&) = delete;
  comm_worker& operator=(const comm_worker&) = delete;

  ~comm_worker() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Queues `f` (callable as f()) to run on the worker after every earlier task.
  template <class F>
  ticket submit(F&& f) {
    std::lock_guard lk(m_);
    const ticket t = next_++;
    queue_.emplace_back(t, std::function<void()>(std::forward<F>(f)));
    cv_.notify_all();
    return t;
  }

  /// Blocks until task `t` has ended; rethrows its exception (comm_error if it was skipped
  /// after an earlier failure). A ticket whose error drain() forgot returns at once, no error.
  void wait(ticket t) {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return finished_ >= t; });
    if (auto it = errors_.find(t); it != errors_.end()) {
      std::exception_ptr e = it->second;
      errors_.erase(it);
      std::rethrow_exception(e);
    }
  }

  /// Waits until every task submitted so far has ended (run, or skipped after a failure: a
  /// task is never dropped, since its peers run theirs), then forgets unclaimed errors and
  /// clears the failure state. Never throws; the worker is then idle and ready for new
  /// tasks. Call it before buffers the tasks use go away.
  void drain() noexcept {
    std::unique_lock lk(m_);
    const ticket last = next_ - 1;
    cv_.wait(lk, [&] { return finished_ >= last; });
    errors_.clear();
    failed_ = false;
    first_error_.clear();
    cv_.notify_all();
  }

  /// Tasks queued and not started yet.
  std::size_t pending() const {
    std::lock_guard lk(m_);
    return queue_.size();
  }

  /// Thread id of the worker (for tests that check where tasks run).
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void loop() {
    std::unique_lock lk(m_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto [t, task] = std::move(queue_.front());
      queue_.pop_front();
      if (failed_) {
        errors_[t] = std::make_exception_ptr(
            comm_error("shardcast: collective skipped because an earlier one on this rank's communication worker failed: " + first_error_));
      } else {
        busy_ = true;
        lk.unlock();
        std::exception_ptr err;
        std::string what;
        try {
          task();
        } catch (const std::exception& e) {
          err = std::current_exception();
          what = e.what();
        } catch (...) {
          err = std::current_exception();
          what = "a non-standard exception";
        }
        task = nullptr;  // release what the task captured before reporting it finished
        lk.lock();
        busy_ = false;
        if (err) {
          errors_[t] = err;
          failed_ = true;
          first_error_ = what;
        }
      }
      finished_ = t;
      cv_.notify_all();
    }
  }

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::pair<ticket, std::function<void()>>> queue_;
  std::map<ticket, std::exception_ptr> errors_;
  ticket next_ = 1;      ///< the next ticket submit() hands out
  ticket finished_ = 0;  ///< every task up to this ticket has ended
  bool busy_ = false, stop_ = false, failed_ = false;
  std::string first_error_;
  std::thread thread_;  // last: started after every member above is initialised
};

}  // namespace shardcast::detail
