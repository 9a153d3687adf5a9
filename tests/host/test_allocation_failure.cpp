// Allocations that fail anywhere in host::run (its set-up, a rank's thread, the
// collectives the ranks call, a mesh and a redistribute on it, and the handling of an
// earlier failure): run throws, and never ends in std::terminate or a wait for a peer that
// is gone. The global operator new of this program fails, once armed, the k-th allocation,
// the k-th and the next, or every one from the k-th on; every k from 0 until a run
// completes without reaching it is tried, in a child process whose exit status says
// whether it ended normally. Not under a sanitizer, which brings its own operator new.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sc = shardcast;

namespace {
/// Armed: allocations number `fail_from` to `fail_from + fail_count - 1` since arming fail
/// (fail_count < 0: every one from fail_from on, memory that has run out).
std::atomic<bool> armed{false};
std::atomic<long> seen{0};
long fail_from = 0, fail_count = 1;

bool fails() {
  if (!armed.load(std::memory_order_relaxed)) return false;
  const long i = seen.fetch_add(1);
  return i >= fail_from && (fail_count < 0 || i < fail_from + fail_count);
}
void* allocate(std::size_t n) {
  if (fails()) throw std::bad_alloc();
  if (void* p = std::malloc(n > 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void* operator new(std::size_t n, std::align_val_t a) {
  const auto al = static_cast<std::size_t>(a);
  if (fails()) throw std::bad_alloc();
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al + (n == 0 ? al : 0))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST_CASE("host::run survives a failed allocation anywhere" * doctest::skip(true)) {}
#else
TEST_CASE("host::run survives failed allocations anywhere") {
  // Where the child is (the window, the k), for the parent to read after the child ends.
  void* shared = mmap(nullptr, 2 * sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  auto* where = static_cast<volatile long*>(shared);
  where[0] = -1;
  where[1] = -1;
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Exit codes: 0 every k ended with a completed run or an exception; 2 a run took
    // longer than a peer's failure should take (a wait until the timeout).
    const std::vector<float> g(24, 1.0f);
    // One failed allocation, two in a row (one in the handling of the other), and every
    // allocation from the k-th on (memory that has run out).
    for (long window : {1L, 2L, -1L}) {
      fail_count = window;
      for (long k = 0;; ++k) {
        where[0] = window;
        where[1] = k;
        fail_from = k;
        seen.store(0);
        const auto t0 = std::chrono::steady_clock::now();
        armed.store(true);
        try {
          sc::host::run(
              4,
              [&](sc::host::communicator& c) {
                std::vector<float> v(64, 1.0f);
                c.all_reduce(v.data(), v.data(), v.size(), sc::reduce_op::sum);
                auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
                const std::array<std::int64_t, 2> ext{6, 4};
                auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, ext);
                auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<0>>>(x);  // over sub-communicators
                auto z = sc::redistribute(sc::distribute(m, sc::runtime_layout::parse("P(sum),R"), g, ext), sc::runtime_layout::parse("S(1),R"));
                c.barrier();
              },
              sc::host::options{std::chrono::milliseconds(20000)});
        } catch (...) {
        }
        armed.store(false);
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) _exit(2);
        if (seen.load() <= k) break;  // the run completed before the k-th allocation: every point was tried
        if (k > 100000) _exit(3);
      }
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  const long window = where[0], k = where[1];
  munmap(shared, 2 * sizeof(long));
  CAPTURE(status);
  CAPTURE(window);  // the failing allocations when the child ended: `window` of them (-1: all) from the k-th on
  CAPTURE(k);
  REQUIRE(WIFEXITED(status));  // not killed by std::terminate's abort
  CHECK(WEXITSTATUS(status) == 0);
  MESSAGE("the run survived failed allocations at each of its first " << k << " allocations, one, two in a row, and all from there on");
}
#endif
