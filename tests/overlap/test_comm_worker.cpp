// detail::comm_worker: order, thread, exception propagation, skipping after a failure,
// drain and shutdown with queued work. Waits are on the worker's own state (pending(),
// tickets), never on sleeps, so the outcomes do not depend on scheduling (one test watches
// pending() for 20 ms: a worker that drops queued tasks shows it then, a correct one never).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <shardcast/detail/comm_worker.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sc = shardcast;
using sc::detail::comm_worker;

namespace {
struct injected : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Spins until nothing is queued behind the running task (what ~comm_worker does).
void wait_until_queue_empty(const comm_worker& w) {
  while (w.pending() != 0) std::this_thread::yield();
}
}  // namespace

TEST_CASE("comm_worker runs tasks in submission order on its own thread") {
  comm_worker w;
  std::vector<int> order;  // written by the worker only; read after wait()
  std::vector<std::thread::id> where;
  std::vector<comm_worker::ticket> t;
  for (int i = 0; i < 20; ++i)
    t.push_back(w.submit([&order, &where, i] {
      order.push_back(i);
      where.push_back(std::this_thread::get_id());
    }));
  for (std::size_t i = 1; i < t.size(); ++i) CHECK(t[i] == t[i - 1] + 1);
  w.wait(t.back());
  REQUIRE(order.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  for (auto id : where) {
    CHECK(id == w.id());
    CHECK(id != std::this_thread::get_id());
  }
  w.wait(t.front());  // an earlier ticket after a later one: returns at once
}

TEST_CASE("comm_worker: a task's exception reaches wait(); later tasks are skipped until drain()") {
  comm_worker w;
  std::atomic<int> ran{0};
  const auto a = w.submit([&] { ++ran; });
  const auto b = w.submit([] { throw injected("task b failed"); });
  const auto c = w.submit([&] { ++ran; });
  w.wait(a);
  try {
    w.wait(b);
    FAIL("wait(b) did not throw");
  } catch (const injected& e) {
    CHECK(std::string(e.what()) == "task b failed");
  }
  try {
    w.wait(c);
    FAIL("wait(c) did not throw");
  } catch (const sc::comm_error& e) {
    CHECK(std::string(e.what()).find("task b failed") != std::string::npos);
  }
  CHECK(ran.load() == 1);
  // Still failed: a new task is skipped too.
  const auto d = w.submit([&] { ++ran; });
  CHECK_THROWS_AS(w.wait(d), sc::comm_error);
  CHECK(ran.load() == 1);
  w.drain();
  const auto e = w.submit([&] { ++ran; });
  w.wait(e);
  CHECK(ran.load() == 2);
}

TEST_CASE("comm_worker::drain runs the queued tasks (peers run theirs) and waits for them") {
  // The first task blocks until released; drain() starts on another thread while the second
  // task is queued. A drain that dropped it would empty the queue while the first still
  // runs: the main thread watches pending() for a while before it releases the first.
  comm_worker w;
  std::atomic<bool> started{false}, release{false}, draining{false}, drained{false};
  std::atomic<int> ran{0};
  w.submit([&] {
    started = true;
    while (!release.load()) std::this_thread::yield();
    ++ran;
  });
  const auto second = w.submit([&] { ++ran; });
  while (!started.load()) std::this_thread::yield();  // the first task is running, the second queued
  std::thread d([&] {
    draining = true;
    w.drain();
    drained = true;
  });
  while (!draining.load()) std::this_thread::yield();
  bool dropped = false;
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20);)
    dropped = dropped || w.pending() == 0;
  CHECK_FALSE(dropped);
  CHECK_FALSE(drained.load());  // still waiting: the first task has not ended
  release = true;
  d.join();
  CHECK(ran.load() == 2);
  w.wait(second);  // ran: returns at once, no error
  const auto third = w.submit([&] { ++ran; });
  w.wait(third);
  CHECK(ran.load() == 3);
}

TEST_CASE("comm_worker::drain after a failure lets the queued tasks be skipped, not run, then clears the failure") {
  comm_worker w;
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  w.submit([&] {
    while (!release.load()) std::this_thread::yield();
    throw injected("first failed");
  });
  const auto second = w.submit([&] { ++ran; });
  release = true;
  w.drain();
  CHECK(ran.load() == 0);
  w.wait(second);  // its error was forgotten by drain: returns at once
  const auto third = w.submit([&] { ++ran; });
  w.wait(third);
  CHECK(ran.load() == 1);
}

TEST_CASE("comm_worker: destruction with queued tasks drops them and joins") {
  auto w = std::make_unique<comm_worker>();
  std::atomic<bool> started{false}, queued{false}, first_done{false}, second_ran{false};
  comm_worker* raw = w.get();
  w->submit([&, raw] {
    started = true;
    while (!queued.load()) std::this_thread::yield();
    wait_until_queue_empty(*raw);  // the destructor empties the queue, then joins
    first_done = true;
  });
  w->submit([&] { second_ran = true; });
  queued = true;
  while (!started.load()) std::this_thread::yield();
  w.reset();
  CHECK(first_done.load());
  CHECK_FALSE(second_ran.load());
}

TEST_CASE("comm_worker: destruction after a failure, with unclaimed errors, runs nothing more") {
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) {
    comm_worker w;
    const auto bad = w.submit([] { throw injected("x"); });
    w.submit([&] { ++ran; });  // skipped (failure) or dropped (destructor): never runs
    if (i % 2 == 0) CHECK_THROWS_AS(w.wait(bad), injected);
  }
  CHECK(ran.load() == 0);
}
