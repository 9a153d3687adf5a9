// Host backend argument checks that concern the buffers themselves: send and receive
// buffers that overlap other than in the in-place forms MPI allows (which the host backend
// would read while a peer writes them: wrong values, no error) are refused; in-place and
// disjoint calls still give the single-rank reference. And which exception host::run
// rethrows when a rank times out: the timeout, not a peer's "abandoned" error it caused.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <string>
#include <thread>
#include <vector>

#include "rank_outcomes.hpp"

namespace sc = shardcast;

namespace {
using outcome_testing::contains;
using outcome_testing::outcomes;

/// Rank r's element i of a chunk meant for rank q: distinct for every (r, q, i).
double value(int r, int q, std::size_t i) { return 1000.0 * r + 100.0 * q + static_cast<double>(i); }
}  // namespace

TEST_CASE("all_to_allv refuses send and receive chunks that overlap, on both sides of the eager limit") {
  for (const std::size_t per : {std::size_t{4}, std::size_t{1000}}) {  // 32 B and 8 KB per peer
    CAPTURE(per);
    // In place (the reviewer's case: above the eager limit it returned wrong values).
    auto got = outcomes(2, [&](sc::host::communicator& c) {
      std::vector<double> buf(2 * per);
      std::vector<std::size_t> counts(2, per), displs{0, per};
      c.all_to_allv(buf.data(), counts.data(), displs.data(), buf.data(), counts.data(), displs.data());
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], "layout_error: shardcast::host::all_to_allv: the chunk for rank 0 (send + 0, " + std::to_string(per) +
                                 " elements) overlaps the chunk from rank 0 (recv + 0, " + std::to_string(per) +
                                 " elements); all_to_allv has no in-place form"));
    }
    // Partly: the receive chunks start one element into the send buffer's last chunk.
    got = outcomes(2, [&](sc::host::communicator& c) {
      std::vector<double> buf(4 * per);
      std::vector<std::size_t> counts(2, per), displs{0, per};
      c.all_to_allv(buf.data(), counts.data(), displs.data(), buf.data() + 2 * per - 1, counts.data(), displs.data());
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], "layout_error: shardcast::host::all_to_allv: the chunk for rank 1"));
    }
  }
}

TEST_CASE("all_to_allv with send and receive chunks interleaved in one buffer, but disjoint, matches the reference") {
  // Each rank's buffer holds, per peer q, the chunk it sends to q at [4q, 4q + 2) and the
  // chunk it receives from q at [4q + 2, 4q + 4): the spans overlap, the chunks do not.
  for (const int n : {2, 3}) {
    CAPTURE(n);
    std::mutex mu;
    std::vector<std::string> bad;
    sc::host::run(n, [&](sc::host::communicator& c) {
      const auto un = static_cast<std::size_t>(n);
      std::vector<double> buf(4 * un, -1.0);
      std::vector<std::size_t> counts(un, 2), sdispl(un), rdispl(un);
      for (std::size_t q = 0; q < un; ++q) {
        sdispl[q] = 4 * q;
        rdispl[q] = 4 * q + 2;
        for (std::size_t i = 0; i < 2; ++i) buf[4 * q + i] = value(c.rank(), static_cast<int>(q), i);
      }
      c.all_to_allv(buf.data(), counts.data(), sdispl.data(), buf.data(), counts.data(), rdispl.data());
      for (std::size_t q = 0; q < un; ++q)
        for (std::size_t i = 0; i < 2; ++i)
          if (buf[4 * q + 2 + i] != value(static_cast<int>(q), c.rank(), i) || buf[4 * q + i] != value(c.rank(), static_cast<int>(q), i)) {
            std::lock_guard lk(mu);
            bad.push_back("rank " + std::to_string(c.rank()) + ": wrong value from or for rank " + std::to_string(q));
          }
    });
    for (const auto& b : bad) FAIL_CHECK(b);
  }
}

TEST_CASE("all_reduce, all_gather, reduce_scatter and all_to_all refuse buffers that overlap other than in place") {
  const std::size_t count = 600;  // above the eager limit: the peers' buffers are read directly
  struct call {
    const char* name;
    const char* message;
    void (*run)(sc::host::communicator&, std::vector<double>&, std::size_t);
  };
  const call calls[] = {
      {"all_reduce", "shardcast::host::all_reduce: send and recv overlap without being the same buffer",
       [](sc::host::communicator& c, std::vector<double>& b, std::size_t k) { c.all_reduce(b.data(), b.data() + 1, k, sc::reduce_op::sum); }},
      {"all_gather", "shardcast::host::all_gather: send overlaps recv other than as this rank's block",
       [](sc::host::communicator& c, std::vector<double>& b, std::size_t k) { c.all_gather(b.data() + 1, b.data(), k); }},
      {"reduce_scatter", "shardcast::host::reduce_scatter: recv overlaps send other than as this rank's block",
       [](sc::host::communicator& c, std::vector<double>& b, std::size_t k) { c.reduce_scatter(b.data(), b.data() + 1, k, sc::reduce_op::sum); }},
      {"all_to_all", "shardcast::host::all_to_all: send and recv overlap; all_to_all has no in-place form",
       [](sc::host::communicator& c, std::vector<double>& b, std::size_t k) { c.all_to_all(b.data(), b.data() + 3, k); }},
  };
  for (const call& k : calls) {
    CAPTURE(k.name);
    const auto got = outcomes(2, [&](sc::host::communicator& c) {
      std::vector<double> buf(8 * count);
      k.run(c, buf, count);
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], std::string("layout_error: ") + k.message));
    }
  }
}

TEST_CASE("sendrecv refuses send and receive buffers that overlap, on both sides of the eager limit and to itself") {
  for (const std::size_t count : {std::size_t{4}, std::size_t{2000}}) {  // 32 B and 16 KB
    CAPTURE(count);
    // A pairwise exchange in place: above the limit the peer would read this rank's send
    // buffer while this rank's receive writes it.
    auto got = outcomes(2, [&](sc::host::communicator& c) {
      std::vector<double> buf(count, static_cast<double>(c.rank()));
      const int peer = 1 - c.rank();
      c.sendrecv(buf.data(), count, peer, buf.data(), count, peer);
    });
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      CHECK(contains(got[r], "layout_error: shardcast::host::sendrecv: the send buffer"));
    }
    // To itself, shifted by one element (a memcpy of overlapping ranges).
    got = outcomes(1, [&](sc::host::communicator& c) {
      std::vector<double> buf(count + 1, 1.0);
      c.sendrecv(buf.data(), count, 0, buf.data() + 1, count, 0);
    });
    CAPTURE(got[0]);
    CHECK(contains(got[0], "layout_error: shardcast::host::sendrecv: the send buffer"));
  }
  // Disjoint halves of one buffer stay legal: each rank gets the peer's values.
  std::vector<std::string> errors(2);
  const std::size_t count = 2000;
  const auto got = outcomes(2, [&](sc::host::communicator& c) {
    std::vector<double> buf(2 * count);
    for (std::size_t i = 0; i < count; ++i) buf[i] = value(c.rank(), 0, i);
    const int peer = 1 - c.rank();
    c.sendrecv(buf.data(), count, peer, buf.data() + count, count, peer);
    for (std::size_t i = 0; i < count; ++i)
      if (buf[count + i] != value(peer, 0, i)) {
        errors[static_cast<std::size_t>(c.rank())] = "element " + std::to_string(i) + " differs";
        break;
      }
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(got[r].empty());  // nothing thrown
    CHECK(errors[r].empty());
  }
}

TEST_CASE("a small broadcast whose ranks disagree so that no rank is its root throws at once on every rank") {
  // Rank 0 names rank 1 as the root and the others name rank 0: every rank waits as a
  // non-root for a queued broadcast nobody makes (the larger form meets and compares).
  for (const int n : {2, 3, 5}) {
    CAPTURE(n);
    const auto t0 = std::chrono::steady_clock::now();
    const auto got = outcomes(n, [&](sc::host::communicator& c) {
      std::vector<float> buf(4, static_cast<float>(c.rank()));
      c.broadcast(buf.data(), buf.size(), c.rank() == 0 ? 1 : 0);
    });
    const auto took = std::chrono::steady_clock::now() - t0;
    int told = 0;
    for (std::size_t r = 0; r < got.size(); ++r) {
      CAPTURE(r);
      CAPTURE(got[r]);
      // Each rank throws the mismatch; or, its named root having thrown and returned first
      // (outcomes() catches every rank's exception, so the rank returns), that return.
      const bool mismatch = contains(got[r], "no rank is this broadcast's root");
      told += mismatch ? 1 : 0;
      CHECK((mismatch || contains(got[r], "shardcast::host: broadcast abandoned: rank")));
    }
    CHECK(told >= 1);
    CHECK(took < std::chrono::milliseconds(1500));  // not the 2 s timeout of outcomes()
  }
}

TEST_CASE("the in-place forms stay allowed and match the reference") {
  const std::size_t count = 600;
  std::mutex mu;
  std::vector<std::string> bad;
  sc::host::run(3, [&](sc::host::communicator& c) {
    auto fail = [&](const std::string& what) {
      std::lock_guard lk(mu);
      bad.push_back("rank " + std::to_string(c.rank()) + ": " + what);
    };
    const auto r = static_cast<std::size_t>(c.rank());
    std::vector<double> a(count);
    for (std::size_t i = 0; i < count; ++i) a[i] = value(c.rank(), 0, i);
    c.all_reduce(a.data(), a.data(), count, sc::reduce_op::sum);
    for (std::size_t i = 0; i < count; ++i)
      if (a[i] != value(0, 0, i) + value(1, 0, i) + value(2, 0, i)) return fail("all_reduce in place");
    std::vector<double> g(3 * count);
    for (std::size_t i = 0; i < count; ++i) g[r * count + i] = value(c.rank(), 0, i);
    c.all_gather(g.data() + r * count, g.data(), count);
    for (std::size_t q = 0; q < 3; ++q)
      for (std::size_t i = 0; i < count; ++i)
        if (g[q * count + i] != value(static_cast<int>(q), 0, i)) return fail("all_gather in place");
    std::vector<double> s(3 * count);
    for (std::size_t q = 0; q < 3; ++q)
      for (std::size_t i = 0; i < count; ++i) s[q * count + i] = value(c.rank(), static_cast<int>(q), i);
    c.reduce_scatter(s.data(), s.data() + r * count, count, sc::reduce_op::sum);
    for (std::size_t i = 0; i < count; ++i)
      if (s[r * count + i] != value(0, c.rank(), i) + value(1, c.rank(), i) + value(2, c.rank(), i)) return fail("reduce_scatter in place");
  });
  for (const auto& b : bad) FAIL_CHECK(b);
}

TEST_CASE("host::run rethrows a rank's timeout, not the abandoned errors of the peers it woke") {
  // Rank 3 stays away (busy elsewhere until the others have given up: had it returned,
  // they would stop at once, naming it); the others time out in an all_reduce. The first
  // rank to time out aborts the run before its exception reaches run(), so a woken peer's
  // "abandoned" comm_error could get there first. Over many runs, run() must always
  // rethrow a timeout.
  int abandoned = 0, timed_out = 0, other = 0;
  for (int i = 0; i < 30; ++i) {
    std::atomic<int> gave_up{0};
    try {
      sc::host::run(
          4,
          [&gave_up](sc::host::communicator& c) {
            if (c.rank() == 3) {
              while (gave_up.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
              return;
            }
            double x = 1, y = 0;
            try {
              c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
            } catch (...) {
              ++gave_up;
              throw;
            }
          },
          sc::host::options{std::chrono::milliseconds(20)});
      ++other;
    } catch (const sc::comm_error& e) {
      const std::string what = e.what();
      if (contains(what, "abandoned")) ++abandoned;
      else if (contains(what, "timed out")) ++timed_out;
      else ++other;
    }
  }
  CHECK(abandoned == 0);
  CHECK(other == 0);
  CHECK(timed_out == 30);
}

TEST_CASE("a broadcast over the eager limit whose root queued a small one late is told at once, not after a sleep or the timeout") {
  // Rank 1 asks for 1000 floats (a meeting), the root for 10 (queued) 300 ms later, when
  // rank 1 sleeps in the meeting; the root then stays busy. The root wakes rank 1, which
  // throws naming both calls well before its next check a second later, and before the
  // 1.5 s timeout.
  using clock_type = std::chrono::steady_clock;
  clock_type::time_point queued{}, thrown{};
  std::string what;
  std::mutex mu;
  try {
    sc::host::run(
        2,
        [&](sc::host::communicator& c) {
          std::vector<float> b(1000, 1.0f);
          if (c.rank() == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            c.broadcast(b.data(), 10, 0);
            {
              std::lock_guard lk(mu);
              queued = clock_type::now();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1200));
            return;
          }
          try {
            c.broadcast(b.data(), 1000, 0);
          } catch (const sc::comm_error& e) {
            std::lock_guard lk(mu);
            thrown = clock_type::now();
            what = e.what();
            throw;
          }
        },
        sc::host::options{std::chrono::milliseconds(1500)});
  } catch (const sc::comm_error&) {
  }
  CAPTURE(what);
  CHECK(contains(what, "broadcast(count=1000, float, root=0)"));
  CHECK(contains(what, "broadcast(count=10, float, root=0)"));
  CHECK(std::chrono::duration<double>(thrown - queued).count() < 0.5);  // (left asleep: about 0.7 s)
}

// A thread that cannot be started (the process's address space is capped below what 64
// threads' stacks need): run throws comm_error naming the rank, after ending the ranks it
// started, instead of destroying joinable threads (std::terminate). In a child process,
// whose exit status says what happened. Not under a sanitizer, whose shadow memory needs
// more address space than the cap leaves.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST_CASE("host::run throws when a rank's thread cannot be started" * doctest::skip(true)) {}
#else
TEST_CASE("host::run throws when a rank's thread cannot be started") {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;  // the address space in use, in pages
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{48} << 20);
    const rlimit lim{cap, cap};
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
    int code = 1;  // run returned without an error
    try {
      sc::host::run(
          64, [](sc::host::communicator& c) { c.barrier(); }, sc::host::options{std::chrono::milliseconds(20000)});
    } catch (const sc::comm_error& e) {
      code = std::string(e.what()).find("shardcast::host::run: could not start the thread of rank") != std::string::npos ? 0 : 2;
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CAPTURE(status);
  REQUIRE(WIFEXITED(status));  // not killed by std::terminate's abort
  CHECK(WEXITSTATUS(status) == 0);
}
#endif
