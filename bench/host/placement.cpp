// Where the rank threads of a 2-rank run sit, and what a step costs there: a ping-pong of
// `bytes` (rank 0 sends then receives, rank 1 receives then sends) or an all_reduce of
// `bytes`, in reps of `steps` steps. Each rep prints, per rank, the CPU it ended on
// (sched_getcpu) and the time per step. With --same-cpu both ranks first pin themselves to
// the CPU rank 0 starts on (what a user's own pinning, or the scheduler, may do), so
// every wait that spins by time spins against the thread it waits for.
//   bench_host_placement [sendrecv|all_reduce] [bytes] [steps] [reps] [--same-cpu]
//   (defaults: sendrecv 65536 200 5)
// Every received element is checked; a wrong one makes the program exit with status 1.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <shardcast/comm/host.hpp>
#include <string>
#include <vector>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace sc = shardcast;

int main(int argc, char** argv) {
  std::string mode = "sendrecv";
  std::size_t bytes = 65536;
  int steps = 200, reps = 5, pos = 0;
  bool same = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--same-cpu") == 0) {
      same = true;
      continue;
    }
    switch (pos++) {
      case 0: mode = argv[i]; break;
      case 1: bytes = std::strtoull(argv[i], nullptr, 10); break;
      case 2: steps = std::atoi(argv[i]); break;
      case 3: reps = std::atoi(argv[i]); break;
      default: std::fprintf(stderr, "usage: bench_host_placement [sendrecv|all_reduce] [bytes] [steps] [reps] [--same-cpu]\n"); return 2;
    }
  }
  if ((mode != "sendrecv" && mode != "all_reduce") || steps < 1 || reps < 1) {
    std::fprintf(stderr, "usage: bench_host_placement [sendrecv|all_reduce] [bytes] [steps] [reps] [--same-cpu]\n");
    return 2;
  }
  const std::size_t n = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
  std::atomic<bool> wrong{false};
  std::atomic<int> cpu0{-1};
#if defined(__linux__)
  cpu0 = sched_getcpu();
#endif
  std::printf("# %s of %zu bytes, 2 ranks, %d steps per rep%s\n", mode.c_str(), n * sizeof(float), steps, same ? ", both ranks pinned to one CPU" : "");
  std::printf("#  rep  rank  cpu  us/step\n");
  std::vector<std::string> lines(static_cast<std::size_t>(2 * reps));
  sc::host::run(2, [&](sc::host::communicator& c) {
#if defined(__linux__)
    if (same) {
      cpu_set_t s;
      CPU_ZERO(&s);
      CPU_SET(cpu0.load(), &s);
      pthread_setaffinity_np(pthread_self(), sizeof s, &s);
    }
#endif
    const int me = c.rank(), other = 1 - me;
    std::vector<float> a(n), b(n);
    for (int rep = 0; rep < reps; ++rep) {
      c.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) {
        for (std::size_t i = 0; i < n; i += 997) a[i] = static_cast<float>(me * 1000 + s % 1000);
        if (mode == "sendrecv") {
          if (me == 0) {
            c.send(a.data(), n, other);
            c.recv(b.data(), n, other);
          } else {
            c.recv(b.data(), n, other);
            c.send(a.data(), n, other);
          }
          for (std::size_t i = 0; i < n; i += 997)
            if (b[i] != static_cast<float>(other * 1000 + s % 1000)) wrong = true;
        } else {
          c.all_reduce(a.data(), b.data(), n, sc::reduce_op::sum);
          for (std::size_t i = 0; i < n; i += 997)
            if (b[i] != static_cast<float>(1000 + 2 * (s % 1000))) wrong = true;
        }
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / steps;
      int cpu = -1;
#if defined(__linux__)
      cpu = sched_getcpu();
#endif
      char buf[96];
      std::snprintf(buf, sizeof buf, "  %4d  %4d  %3d  %8.2f", rep, me, cpu, us);
      lines[static_cast<std::size_t>(2 * rep + me)] = buf;
    }
  });
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  if (wrong) {
    std::printf("# WRONG: a received element differs from what its sender sent\n");
    return 1;
  }
  return 0;
}
