// A rank whose function returns while its peers wait for it (a collective it skipped, a
// message it never sent or received) releases them at once with comm_error naming it,
// rather than at the timeout; ranks that return after matched calls release nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <string>
#include <thread>
#include <vector>

namespace sc = shardcast;

namespace {
using clock_type = std::chrono::steady_clock;

// Far beyond the bound the tests check: a wait that ended at the timeout shows.
const sc::host::options long_timeout{std::chrono::milliseconds(20000)};
// Generous: the waiters stop within milliseconds (the returning rank wakes those asleep in
// a meeting; channel waits sleep at most 5 ms between checks), but sanitizer builds on a
// busy machine are slow. The test of the wake-up itself measures it more tightly.
constexpr double prompt_s = 5.0;

struct outcome {
  std::vector<std::string> what;  // per rank of the run: its comm_error's message, "" if none
  std::string run_error;          // what run() threw, "" if nothing
  double seconds = 0;
};

// Runs f on n ranks; each rank's comm_error (or other exception) is caught and recorded.
template <class F>
outcome run_caught(int n, F f) {
  outcome out;
  out.what.resize(static_cast<std::size_t>(n));
  std::mutex mu;
  const auto t0 = clock_type::now();
  try {
    sc::host::run(
        n,
        [&](sc::host::communicator& c) {
          std::string w;
          try {
            f(c);
          } catch (const sc::comm_error& e) {
            w = e.what();
          } catch (const std::exception& e) {
            w = std::string("other: ") + e.what();
          }
          std::lock_guard lk(mu);
          out.what[static_cast<std::size_t>(c.rank())] = w;
        },
        long_timeout);
  } catch (const std::exception& e) {
    out.run_error = e.what();
  }
  out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Ranks in `waiters` must have thrown `msg` (exactly), the others nothing; the run ended promptly.
void expect_released(const outcome& o, const std::vector<int>& waiters, const std::string& msg) {
  for (std::size_t r = 0; r < o.what.size(); ++r) {
    const bool waits = std::find(waiters.begin(), waiters.end(), static_cast<int>(r)) != waiters.end();
    INFO("rank " << r);
    if (waits) CHECK(o.what[r] == msg);
    else CHECK(o.what[r] == "");
  }
  CHECK(o.seconds < prompt_s);
}

constexpr std::size_t large = std::size_t{1} << 16;  // floats: over every eager limit
}  // namespace

TEST_CASE("a rank that returns while its peers wait in an all_reduce releases them with comm_error naming it") {
  for (std::size_t count : {std::size_t{4}, large}) {
    INFO("count " << count);
    const outcome o = run_caught(4, [&](sc::host::communicator& c) {
      std::vector<float> x(count, 1.0f);
      const int calls = c.rank() == 3 ? 5 : 6;  // rank 3 leaves its loop early
      for (int i = 0; i < calls; ++i) c.all_reduce(x.data(), x.data(), count, sc::reduce_op::max);
    });
    expect_released(o, {0, 1, 2},
                    "shardcast::host: all_reduce abandoned: rank 3 returned from its function after 5 collectives on this group, and this "
                    "rank waits for it in the 6th (every rank must call the same collectives)");
    CHECK(o.run_error == "");
  }
}

TEST_CASE("a rank that returns at once releases peers in an all_gather, and one that skips a barrier releases the barrier") {
  for (std::size_t count : {std::size_t{2}, large}) {
    INFO("count " << count);
    const outcome o = run_caught(3, [&](sc::host::communicator& c) {
      if (c.rank() == 2) return;
      std::vector<float> x(count, 1.0f), y(3 * count);
      c.all_gather(x.data(), y.data(), count);
    });
    expect_released(o, {0, 1},
                    "shardcast::host: all_gather abandoned: rank 2 returned from its function after 0 collectives on this group, and this "
                    "rank waits for it in the 1st (every rank must call the same collectives)");
  }
  const outcome o = run_caught(4, [&](sc::host::communicator& c) {
    const int calls = c.rank() == 1 ? 2 : 3;
    for (int i = 0; i < calls; ++i) c.barrier();
  });
  expect_released(o, {0, 2, 3},
                  "shardcast::host: barrier abandoned: rank 1 returned from its function after 2 collectives on this group, and this "
                  "rank waits for it in the 3rd (every rank must call the same collectives)");
}

TEST_CASE("a broadcast whose root returned without calling it releases the other ranks") {
  SUBCASE("large: the others wait for the root at the meeting") {
    const outcome o = run_caught(3, [&](sc::host::communicator& c) {
      std::vector<float> x(large, 1.0f);
      c.all_reduce(x.data(), x.data(), 8, sc::reduce_op::sum);
      if (c.rank() == 0) return;
      c.broadcast(x.data(), large, 0);
    });
    expect_released(o, {1, 2},
                    "shardcast::host: broadcast abandoned: rank 0 returned from its function after 1 collective on this group, and this "
                    "rank waits for it in the 2nd (every rank must call the same collectives)");
  }
#if SHARDCAST_HOST_EAGER_BYTES > 0 && SHARDCAST_HOST_BCAST_DEPTH > 0
  SUBCASE("small: the others wait for the root's queued data") {
    const outcome o = run_caught(3, [&](sc::host::communicator& c) {
      std::int32_t v = 7;
      c.broadcast(&v, 1, 0);
      c.broadcast(&v, 1, 0);
      if (c.rank() == 0) return;
      c.broadcast(&v, 1, 0);
    });
    expect_released(o, {1, 2},
                    "shardcast::host: broadcast abandoned: rank 0 returned from its function after 0 collectives and 2 small broadcasts "
                    "on this group, and this rank waits for it, the root of broadcast(count=1, int32, root=0) (this rank's broadcast "
                    "number 2 on the group, after 0 other collectives) (every rank must call the same collectives)");
  }
  SUBCASE("small: a root waits for a rank that returned to take an earlier one from the queue") {
    const outcome o = run_caught(2, [&](sc::host::communicator& c) {
      if (c.rank() == 1) return;
      std::int32_t v = 7;
      for (int i = 0; i <= SHARDCAST_HOST_BCAST_DEPTH; ++i) c.broadcast(&v, 1, 0);
    });
    expect_released(o, {0},
                    "shardcast::host: broadcast abandoned: rank 1 returned from its function after 0 collectives on this group, without "
                    "taking small broadcast number 0 (rank 0's), and this rank, the root of broadcast(count=1, int32, root=0) (its "
                    "broadcast number " + std::to_string(SHARDCAST_HOST_BCAST_DEPTH) + " on the group), waits for that entry of the "
                    "group's queue of " + std::to_string(SHARDCAST_HOST_BCAST_DEPTH) + " to be taken by every rank (every rank must "
                    "call the same collectives)");
    CHECK(contains(o.run_error, "never received"));  // the broadcasts rank 1 never took
  }
#endif
}

TEST_CASE("a rank that returns releases its peers on the groups split from the run, each naming it by its rank there") {
  SUBCASE("one split") {
    const outcome o = run_caught(4, [&](sc::host::communicator& c) {
      sc::host::communicator sub = c.split(c.rank() % 2, c.rank());
      std::vector<float> x(large, 1.0f);
      const int calls = c.rank() == 3 ? 1 : 2;  // rank 3 is rank 1 of the group of ranks 1 and 3
      for (int i = 0; i < calls; ++i) sub.all_reduce(x.data(), x.data(), large, sc::reduce_op::sum);
    });
    expect_released(o, {1},
                    "shardcast::host: all_reduce abandoned: rank 1 of this group (rank 3 of the run) returned from its function after 1 "
                    "collective on this group, and this rank waits for it in the 2nd (every rank must call the same collectives)");
  }
  SUBCASE("a 2 x 2 mesh: the rank that returned is in a row and a column") {
    const outcome o = run_caught(4, [&](sc::host::communicator& c) {
      sc::host::communicator row = c.split(c.rank() / 2, c.rank());
      sc::host::communicator col = c.split(c.rank() % 2, c.rank());
      std::vector<float> x(8, 1.0f), y(16);
      if (c.rank() == 3) return;
      if (c.rank() == 2) row.all_reduce(x.data(), x.data(), 8, sc::reduce_op::sum);  // row 1: ranks 2, 3
      if (c.rank() == 1) col.all_gather(x.data(), y.data(), 8);                     // column 1: ranks 1, 3
    });
    CHECK(o.what[0] == "");
    CHECK(o.what[3] == "");
    CHECK(o.what[2] ==
          "shardcast::host: all_reduce abandoned: rank 1 of this group (rank 3 of the run) returned from its function after 0 collectives "
          "on this group, and this rank waits for it in the 1st (every rank must call the same collectives)");
    CHECK(o.what[1] ==
          "shardcast::host: all_gather abandoned: rank 1 of this group (rank 3 of the run) returned from its function after 0 collectives "
          "on this group, and this rank waits for it in the 1st (every rank must call the same collectives)");
    CHECK(o.seconds < prompt_s);
  }
}

TEST_CASE("peers already asleep in a meeting are woken by the rank that returns, on the run's group and on split groups") {
  // The rank returns 300 ms late, when its peers sleep in the meeting (a sleep lasts up to a
  // second): each must throw soon after the return, not at its next check a second later.
  using sec = std::chrono::duration<double>;
  for (const bool split : {false, true}) {
    const std::string where = split ? "split: the rows of a 2 x 2 mesh" : "the run's group";
    INFO(where);
    std::mutex mu;
    clock_type::time_point returned{};
    std::vector<clock_type::time_point> thrown(4);
    const outcome o = run_caught(4, [&](sc::host::communicator& c) {
      sc::host::communicator row = split ? c.split(c.rank() / 2, c.rank()) : c;
      std::vector<float> x(large, 1.0f);
      if (c.rank() == 3) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::lock_guard lk(mu);
        returned = clock_type::now();
        return;
      }
      try {
        if (!split || c.rank() == 2) row.all_reduce(x.data(), x.data(), large, sc::reduce_op::sum);
      } catch (...) {
        std::lock_guard lk(mu);
        thrown[static_cast<std::size_t>(c.rank())] = clock_type::now();
        throw;
      }
    });
    for (const int r : split ? std::vector<int>{2} : std::vector<int>{0, 1, 2}) {
      INFO("rank " << r);
      CHECK(contains(o.what[static_cast<std::size_t>(r)], "abandoned: rank"));
      CHECK(contains(o.what[static_cast<std::size_t>(r)], "returned from its function after 0 collectives on this group"));
      // Woken: a few ms even under a sanitizer; a waiter left asleep would take up to a second.
      CHECK(sec(thrown[static_cast<std::size_t>(r)] - returned).count() < 0.5);
    }
  }
}

TEST_CASE("point to point: a recv from a rank that returned without sending, and a send to one that returned without receiving") {
  SUBCASE("recv") {
    const outcome o = run_caught(2, [&](sc::host::communicator& c) {
      std::int32_t v = 5;
      if (c.rank() == 1) {
        c.send(&v, 1, 0);
        c.send(&v, 1, 0);
        return;
      }
      for (int i = 0; i < 3; ++i) c.recv(&v, 1, 1);
    });
    expect_released(o, {0},
                    "shardcast::host: recv abandoned: rank 1 returned from its function after sending 2 messages to this rank on this "
                    "group, and this rank waits for the 3rd, of 1 int32 (every recv needs its send)");
    CHECK(o.run_error == "");
  }
  SUBCASE("the receive half of a sendrecv") {
    const outcome o = run_caught(2, [&](sc::host::communicator& c) {
      if (c.rank() == 1) return;
      std::int32_t s = 1, r = 0;
      c.sendrecv(&s, 1, 1, &r, 1, 1);
    });
    expect_released(o, {0},
                    "shardcast::host: sendrecv abandoned: rank 1 returned from its function after sending 0 messages to this rank on this "
                    "group, and this rank waits for the 1st, of 1 int32 (every recv needs its send)");
    if (SHARDCAST_HOST_EAGER_BYTES >= sizeof(std::int32_t)) CHECK(contains(o.run_error, "a send without its recv"));  // its small message, never received
    else CHECK(o.run_error == "");  // a larger message: withdrawn
  }
  SUBCASE("a large send") {
    const outcome o = run_caught(2, [&](sc::host::communicator& c) {
      if (c.rank() == 1) return;
      std::vector<float> x(large, 1.0f);
      c.send(x.data(), large, 1);
    });
    expect_released(o, {0},
                    "shardcast::host: send abandoned: rank 1 returned from its function after receiving 0 of the 1 messages this rank "
                    "sent it on this group, and this rank waits for it to receive the 1st, of 65536 float (every send needs its recv)");
    CHECK(o.run_error == "");
  }
#if SHARDCAST_HOST_EAGER_BYTES > 0
  SUBCASE("small sends beyond the channel's depth") {
    const outcome o = run_caught(2, [&](sc::host::communicator& c) {
      if (c.rank() == 1) return;
      std::int32_t v = 1;
      for (int i = 0; i <= SHARDCAST_HOST_SEND_DEPTH; ++i) c.send(&v, 1, 1);
    });
    expect_released(o, {0},
                    "shardcast::host: send abandoned: rank 1 returned from its function after receiving 0 of the " +
                        std::to_string(SHARDCAST_HOST_SEND_DEPTH) + " messages this rank sent it on this group, and this rank waits for "
                        "room in the channel to it for the " + std::to_string(SHARDCAST_HOST_SEND_DEPTH + 1) +
                        (SHARDCAST_HOST_SEND_DEPTH + 1 == 2 ? "nd" : "th") + " (every send needs its recv)");
    CHECK(contains(o.run_error, "a send without its recv"));
  }
#endif
}

TEST_CASE("run rethrows the waiter's comm_error, not an abandoned_error") {
  const auto t0 = clock_type::now();
  std::string what;
  bool abandoned = true;
  try {
    sc::host::run(
        3,
        [](sc::host::communicator& c) {
          if (c.rank() == 2) return;
          float x = 1;
          c.all_reduce(&x, &x, 1, sc::reduce_op::sum);
        },
        long_timeout);
  } catch (const sc::comm_error& e) {
    what = e.what();
    abandoned = dynamic_cast<const sc::detail::abandoned_error*>(&e) != nullptr;
  }
  CHECK(what ==
        "shardcast::host: all_reduce abandoned: rank 2 returned from its function after 0 collectives on this group, and this rank "
        "waits for it in the 1st (every rank must call the same collectives)");
  CHECK_FALSE(abandoned);
  CHECK(std::chrono::duration<double>(clock_type::now() - t0).count() < prompt_s);
}

// The controls: ranks that return right after their last collective, while slower peers
// are still in it (still copying large data, or not yet woken from the meeting), must not
// release anyone. More ranks than CPUs make the late wake-ups common.
TEST_CASE("ranks that return right after matched collectives leave their slower peers to complete them") {
  for (int rep = 0; rep < 6; ++rep)
    for (int n : {2, 3, 8}) {
      INFO("rep " << rep << ", " << n << " ranks");
      const outcome o = run_caught(n, [&](sc::host::communicator& c) {
        const int r = c.rank();
        const auto un = static_cast<std::size_t>(n);
        // A late rank each time, so the others wait (and some sleep) in the meeting.
        if (r == rep % n) std::this_thread::sleep_for(std::chrono::microseconds(200 * (rep % 4)));
        for (std::size_t count : {std::size_t{3}, large}) {
          std::vector<float> x(count, static_cast<float>(r + 1)), y(un * count);
          c.all_reduce(x.data(), x.data(), count, sc::reduce_op::sum);
          REQUIRE(x[count - 1] == static_cast<float>(n * (n + 1) / 2));
          c.all_gather(x.data(), y.data(), count);
          REQUIRE(y[un * count - 1] == static_cast<float>(n * (n + 1) / 2));
          std::vector<float> b(count, r == n - 1 ? 5.0f : 0.0f);
          c.broadcast(b.data(), count, n - 1);
          REQUIRE(b[count - 1] == 5.0f);
          if (r == (rep + 1) % n) std::this_thread::sleep_for(std::chrono::microseconds(300));
          c.reduce_scatter(y.data(), x.data(), count, sc::reduce_op::max);
          REQUIRE(x[0] == static_cast<float>(n * (n + 1) / 2));
        }
        sc::host::communicator sub = c.split(r % 2, r);
        std::vector<float> z(large, 1.0f);
        sub.all_reduce(z.data(), z.data(), large, sc::reduce_op::sum);
        REQUIRE(z[large - 1] == static_cast<float>(sub.size()));
        c.barrier();
        // The last collective: the first ranks out return while the others are still in it.
        std::vector<float> w(large, static_cast<float>(r));
        c.all_reduce(w.data(), w.data(), large, sc::reduce_op::max);
        REQUIRE(w[0] == static_cast<float>(n - 1));
      });
      for (std::size_t r = 0; r < o.what.size(); ++r) {
        INFO("rank " << r);
        CHECK(o.what[r] == "");
      }
      CHECK(o.run_error == "");
    }
}

TEST_CASE("a fast rank returns before its peers read its staged data or its queued broadcast") {
  for (int rep = 0; rep < 20; ++rep) {
    INFO("rep " << rep);
    const outcome o = run_caught(4, [&](sc::host::communicator& c) {
      const int r = c.rank();
      std::int32_t x[4] = {r, r, r, r}, y[16] = {};
      c.all_gather(x, y, 4);  // eager: the peers read rank r's copy after the meeting
      REQUIRE(y[12] == 3);
      c.all_reduce(x, x, 4, sc::reduce_op::sum);
      REQUIRE(x[3] == 6);
      std::int32_t b[3] = {r == 0 ? 11 : 0, r == 0 ? 12 : 0, r == 0 ? 13 : 0};
      c.broadcast(b, 3, 0);  // queued: rank 0 returns at once
      c.broadcast(b, 3, 0);
      if (r == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(rep % 3));
      REQUIRE(b[2] == 13);
      std::int32_t v = 0;
      if (r == 1) {
        c.send(&r, 1, 2);  // eager: returns before rank 2 receives it
        return;
      }
      if (r == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        c.recv(&v, 1, 1);
        REQUIRE(v == 1);
      }
    });
    for (std::size_t r = 0; r < o.what.size(); ++r) {
      INFO("rank " << r);
      CHECK(o.what[r] == "");
    }
    CHECK(o.run_error == "");
  }
}
