#pragma once
// Failures found on rank threads, reported on the test thread: doctest's assertions are
// not thread-safe, so ranks add messages here and the test reports them after the run.
#include <doctest/doctest.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace shardcast::testing {

struct failures {
  static constexpr std::size_t kept = 20;  ///< messages kept; later ones are dropped
  std::mutex mu;
  std::vector<std::string> list;

  /// Adds `s` unless it is empty (the checks return "" when all is well).
  void add(const std::string& s) {
    if (s.empty()) return;
    std::lock_guard lk(mu);
    if (list.size() < kept) list.push_back(s);
  }
  /// The same, prefixed with the rank (also nothing when `what` is empty).
  void add(int rank, const std::string& what) {
    if (!what.empty()) add("rank " + std::to_string(rank) + ": " + what);
  }
  /// On the test thread, after the ranks have finished.
  void report() {
    for (auto& s : list) FAIL_CHECK(s);
    CHECK(list.empty());
  }
};

/// failures, and how many cases the ranks of a sweep ran (a sweep must run at least one).
struct sweep_outcome : failures {
  std::size_t cases = 0;
  /// Adds `n` cases (from rank 0 of each run, so that each case counts once).
  void count(std::size_t n) {
    std::lock_guard lk(mu);
    cases += n;
  }
  void report() {
    failures::report();
    CHECK(cases > 0);
    MESSAGE(cases << " cases");
  }
};

}  // namespace shardcast::testing
