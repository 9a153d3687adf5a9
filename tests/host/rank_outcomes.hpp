#pragma once
// What each rank of a host run threw: for the tests of collective argument checks, where
// every rank must throw the same kind of error (and none may hang).
#include <chrono>
#include <cstddef>
#include <exception>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/error.hpp>
#include <string>
#include <vector>

namespace outcome_testing {
// A short timeout: a rank that waited for a peer would show up as a timeout comm_error
// instead of the layout_error the tests expect.
inline const shardcast::host::options opts{std::chrono::milliseconds(2000)};

/// Runs f on n ranks; returns what each rank threw ("" if nothing), prefixed with
/// "layout_error: " when the exception had that type.
template <class F>
std::vector<std::string> outcomes(int n, F f, const shardcast::host::options& run_options = opts) {
  std::vector<std::string> out(static_cast<std::size_t>(n));
  std::mutex mu;
  shardcast::host::run(
      n,
      [&](shardcast::host::communicator& c) {
        std::string what;
        try {
          f(c);
        } catch (const shardcast::layout_error& e) {
          what = std::string("layout_error: ") + e.what();
        } catch (const std::exception& e) {
          what = std::string("other: ") + e.what();
        }
        std::lock_guard lk(mu);
        out[static_cast<std::size_t>(c.rank())] = what;
      },
      run_options);
  return out;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace outcome_testing
