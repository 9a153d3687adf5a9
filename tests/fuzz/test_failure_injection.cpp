// Failure injection on the host backend: every case must end, on every rank, with
// sc::comm_error or the original exception, well within the configured timeout.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <shardcast/comm/host.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sc = shardcast;

namespace {
struct injected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const sc::host::options opts{std::chrono::milliseconds(200)};

// Runs f on n ranks; returns the message of the exception run() rethrew (empty if none),
// counts ranks that saw comm_error, and checks the whole run ended in bounded time.
template <class F>
std::string run_case(int n, F f, std::atomic<int>& comm_errors) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    sc::host::run(
        n,
        [&](sc::host::communicator& c) {
          try {
            f(c);
          } catch (const sc::comm_error&) {
            ++comm_errors;
            throw;
          }
        },
        opts);
  } catch (const std::exception& e) {
    what = e.what();
  }
  const auto dt = std::chrono::steady_clock::now() - t0;
  CHECK(dt < std::chrono::seconds(5));
  return what;
}
}  // namespace

TEST_CASE("a rank throws before a collective: peers get comm_error, run rethrows the original") {
  std::atomic<int> ce{0};
  const std::string w = run_case(4, [](sc::host::communicator& c) {
    if (c.rank() == 2) throw injected("boom before");
    std::vector<int> a(8, 1), b(8);
    c.all_reduce(a.data(), b.data(), a.size(), sc::reduce_op::sum);
  }, ce);
  CHECK(w.find("boom before") != std::string::npos);
  CHECK(ce.load() == 3);
}

TEST_CASE("a rank throws between two collectives") {
  std::atomic<int> ce{0};
  const std::string w = run_case(3, [](sc::host::communicator& c) {
    std::vector<float> a(5, 1.0f), b(15);
    c.all_gather(a.data(), b.data(), a.size());
    if (c.rank() == 0) throw injected("boom during");
    c.all_gather(a.data(), b.data(), a.size());
  }, ce);
  CHECK(w.find("boom during") != std::string::npos);
  CHECK(ce.load() == 2);
}

TEST_CASE("a rank throws after the last collective: the others finish, run rethrows") {
  std::atomic<int> ce{0};
  const std::string w = run_case(4, [](sc::host::communicator& c) {
    std::vector<int> a(4, c.rank()), b(4);
    c.all_reduce(a.data(), b.data(), a.size(), sc::reduce_op::max);
    CHECK(b[0] == 3);
    if (c.rank() == 3) throw injected("boom after");
  }, ce);
  CHECK(w.find("boom after") != std::string::npos);
  CHECK(ce.load() == 0);
}

TEST_CASE("ranks call different collectives") {
  std::atomic<int> ce{0};
  const std::string w = run_case(2, [](sc::host::communicator& c) {
    std::vector<int> a(4, 1), b(8);
    if (c.rank() == 0) c.all_reduce(a.data(), b.data(), 4, sc::reduce_op::sum);
    else c.all_gather(a.data(), b.data(), 4);
  }, ce);
  CHECK(w.find("mismatched") != std::string::npos);
  CHECK(w.find("all_reduce") != std::string::npos);
  CHECK(w.find("all_gather") != std::string::npos);
  CHECK(ce.load() == 2);
}

TEST_CASE("ranks pass different sizes: the message names every size") {
  std::atomic<int> ce{0};
  const std::string w = run_case(3, [](sc::host::communicator& c) {
    const std::size_t n = c.rank() == 1 ? 7 : 5;
    std::vector<double> a(n, 1.0), b(n);
    c.all_reduce(a.data(), b.data(), n, sc::reduce_op::sum);
  }, ce);
  CHECK(w.find("count=5") != std::string::npos);
  CHECK(w.find("count=7") != std::string::npos);
  CHECK(ce.load() == 3);
}

TEST_CASE("one rank never arrives: the others time out with comm_error") {
  std::atomic<int> ce{0};
  const auto t0 = std::chrono::steady_clock::now();
  const std::string w = run_case(3, [&ce](sc::host::communicator& c) {
    if (c.rank() == 1) {  // skips the collective entirely, busy elsewhere until the others gave up
      while (ce.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
    c.barrier();
  }, ce);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(150));
  CHECK(w.find("timed out") != std::string::npos);
  CHECK(ce.load() == 2);
}

TEST_CASE("one rank returns instead of arriving: the others stop at once with comm_error naming it") {
  std::atomic<int> ce{0};
  const std::string w = run_case(3, [](sc::host::communicator& c) {
    if (c.rank() == 1) return;  // skips the collective entirely
    c.barrier();
  }, ce);
  CHECK(w.find("barrier abandoned: rank 1 returned from its function after 0 collectives") != std::string::npos);
  CHECK(w.find("timed out") == std::string::npos);
  CHECK(ce.load() == 2);
}

// Element counts of int just above SHARDCAST_HOST_EAGER_BYTES, which send waits for its recv.
constexpr std::size_t big = SHARDCAST_HOST_EAGER_BYTES / sizeof(int) + 6;

TEST_CASE("send/recv count mismatch names both sizes") {
  {  // above the eager limit: the sender waits for the recv, and both see the mismatch
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> buf(big, 3);
      if (c.rank() == 0) c.send(buf.data(), big, 1);
      else c.recv(buf.data(), big - 2, 0);
    }, ce);
    // run rethrows whichever rank failed first; each names both sizes
    CHECK(w.find(std::to_string(big) + " int32") != std::string::npos);
    CHECK(w.find(std::to_string(big - 2) + " int32") != std::string::npos);
    CHECK(ce.load() == 2);
  }
  {  // eager: the sender may have returned before the recv; the receiver sees the mismatch
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> buf(10, 3);
      if (c.rank() == 0) c.send(buf.data(), 6, 1);
      else c.recv(buf.data(), 4, 0);
    }, ce);
    // (When the recv was posted first, the sender sees the mismatch too, and may be first.)
    CHECK(w.find("6 int32") != std::string::npos);
    CHECK(w.find("4 int32") != std::string::npos);
    CHECK(ce.load() >= 1);
  }
}

TEST_CASE("send without a matching recv times out, or is reported by run when it did not wait") {
  {  // the receiver is busy elsewhere until the send gave up
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [&ce](sc::host::communicator& c) {
      std::vector<int> buf(big, 1);
      if (c.rank() == 0) c.send(buf.data(), big, 1);
      else while (ce.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }, ce);
    CHECK(w.find("timed out") != std::string::npos);
    CHECK(ce.load() == 1);
  }
  {  // the receiver returned: the send stops at once, naming it
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> buf(big, 1);
      if (c.rank() == 0) c.send(buf.data(), big, 1);
    }, ce);
    CHECK(w.find("send abandoned: rank 1 returned from its function after receiving 0 of the 1 messages") != std::string::npos);
    CHECK(ce.load() == 1);
  }
  if (SHARDCAST_HOST_EAGER_BYTES >= 3 * sizeof(int)) {
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> buf(3, 1);
      if (c.rank() == 0) c.send(buf.data(), 3, 1);
    }, ce);
    CHECK(w.find("rank 0 sent 3 int32 to rank 1") != std::string::npos);
    CHECK(w.find("never received") != std::string::npos);
    CHECK(ce.load() == 0);
  }
}

TEST_CASE("a larger send that gives up is never read after it has thrown") {
  // Rank 0 leaves a larger message for rank 1, which comes for it only after rank 2 has
  // failed: rank 0's send throws (and its buffer is freed), and rank 1's receive must then
  // throw rather than copy from that buffer (AddressSanitizer builds see such a read).
  std::atomic<int> ce{0};
  const std::string w = run_case(3, [](sc::host::communicator& c) {
    if (c.rank() == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      throw injected("rank 2 fails");
    }
    if (c.rank() == 0) {
      std::vector<int> buf(big, 5);
      c.send(buf.data(), big, 1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::vector<int> buf(big, 0);
      c.recv(buf.data(), big, 0);
    }
  }, ce);
  CHECK(w.find("rank 2 fails") != std::string::npos);
  CHECK(ce.load() == 2);
}

// Broadcasts of at most SHARDCAST_HOST_EAGER_BYTES go through the group's queue: the root
// returns at once and the others copy its data out when they call broadcast. A mismatch
// must still end every rank with an error.
TEST_CASE("small broadcasts that the ranks do not all make alike are reported") {
  if (SHARDCAST_HOST_EAGER_BYTES < 8 * sizeof(int) || SHARDCAST_HOST_BCAST_DEPTH < 1) return;
  {  // a rank skips a broadcast: the next collective finds the ranks' broadcast counts differ
    std::atomic<int> ce{0};
    const std::string w = run_case(3, [](sc::host::communicator& c) {
      std::vector<int> b(4, c.rank());
      if (c.rank() != 2) c.broadcast(b.data(), 4, 0);
      int x = 1, y = 0;
      c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
    }, ce);
    CHECK(w.find("mismatched") != std::string::npos);
    CHECK(w.find("after 1 small broadcasts") != std::string::npos);
    CHECK(w.find("after 0 small broadcasts") != std::string::npos);
    CHECK(ce.load() == 3);
  }
  {  // a rank skips a broadcast and another passes another count: the message names both
    std::atomic<int> ce{0};
    const std::string w = run_case(3, [](sc::host::communicator& c) {
      std::vector<int> b(4, c.rank());
      if (c.rank() != 2) c.broadcast(b.data(), 4, 0);
      int x[2] = {1, 1}, y[2] = {0, 0};
      c.all_reduce(x, y, c.rank() == 1 ? 2 : 1, sc::reduce_op::sum);
    }, ce);
    CHECK(w.find("count=2") != std::string::npos);
    CHECK(w.find("after 0 small broadcasts") != std::string::npos);
    CHECK(ce.load() == 3);
  }
  {  // a rank waits for a broadcast while its root calls another collective
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> b(4, c.rank());
      if (c.rank() == 0) {
        int x = 1, y = 0;
        c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
      } else {
        c.broadcast(b.data(), 4, 0);
      }
    }, ce);
    CHECK(w.find("mismatched") != std::string::npos);
    CHECK(w.find("rank 0 went on to another collective") != std::string::npos);
    CHECK(ce.load() == 2);
  }
  {  // different sizes: the root has returned; the other rank names both
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> b(8, c.rank());
      c.broadcast(b.data(), c.rank() == 0 ? 4 : 5, 0);
    }, ce);
    CHECK(w.find("broadcast(count=5, int32, root=0)") != std::string::npos);
    CHECK(w.find("broadcast(count=4, int32, root=0)") != std::string::npos);
    CHECK(ce.load() == 1);
  }
  {  // different roots
    std::atomic<int> ce{0};
    const std::string w = run_case(2, [](sc::host::communicator& c) {
      std::vector<int> b(4, c.rank());
      c.broadcast(b.data(), 4, c.rank());  // each rank thinks it is the root
      c.barrier();
    }, ce);
    CHECK(w.find("mismatched") != std::string::npos);
    CHECK(ce.load() >= 1);
  }
  {  // a broadcast nobody receives: run reports it once every rank has ended
    std::atomic<int> ce{0};
    const std::string w = run_case(3, [](sc::host::communicator& c) {
      std::vector<int> b(4, c.rank());
      if (c.rank() == 1) c.broadcast(b.data(), 4, 1);
    }, ce);
    CHECK(w.find("rank 1 broadcast 4 int32") != std::string::npos);
    CHECK(w.find("which 2 rank(s) never received") != std::string::npos);
    CHECK(ce.load() == 0);
  }
}
