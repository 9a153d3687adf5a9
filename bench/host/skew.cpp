// What a late peer costs on the host backend beyond its lateness: 2 ranks take turns being
// `skew` microseconds late (busy, as a rank computing) before a 4-byte (one float) all_reduce, and the
// time per iteration minus the skew is the synchronisation's overhead. Run with waiters
// that spin by time for SHARDCAST_HOST_SPIN_US (the default when every rank has a CPU) and
// with waiters that yield after the SHARDCAST_HOST_BARRIER_SPIN pauses (SHARDCAST_HOST_SPIN_US=0),
// alternately, in one run.
//   bench_host_skew [batches] [rounds]      (defaults: 21 batches of 2000 iterations, 3 rounds)
// Every all_reduce's result is checked; a wrong one makes the program exit with status 1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <shardcast/comm/host.hpp>
#include <string>
#include <vector>

namespace sc = shardcast;
using clk = std::chrono::steady_clock;

namespace {
void busy(double us) {
  const auto end = clk::now() + std::chrono::nanoseconds(static_cast<long>(us * 1000));
  while (clk::now() < end) {
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 21;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (batches < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: %s [batches >= 1] [rounds >= 1]\n", argv[0]);
    return 2;
  }
  constexpr int per_batch = 2000;
  const int default_us = static_cast<int>(SHARDCAST_HOST_SPIN_US);
  std::printf("# 2 ranks (this process may use %d CPUs), 8-byte all_reduce after a rank late by `skew` us in turns;\n",
              sc::detail::available_cpus());
  std::printf("# overhead = median over %d batches of %d iterations of (time per iteration - skew), in us\n", batches, per_batch);
  const std::string spun = "overhead, spin " + std::to_string(default_us) + " us";
  std::printf("%6s %8s %22s %22s\n", "round", "skew", "overhead, spin 0 us", spun.c_str());
  std::atomic<bool> wrong{false};
  for (int round = 0; round < rounds; ++round)
    for (double skew : {0.0, 2.0, 5.0, 10.0, 30.0}) {
      double overhead[2]{};
      for (int mode = 0; mode < 2; ++mode) {
        const std::string us = std::to_string(mode == 0 ? 0 : default_us);
        setenv("SHARDCAST_HOST_SPIN_US", us.c_str(), 1);  // read by host::run
        std::vector<double> per;
        sc::host::run(2, [&](sc::host::communicator& c) {
          float x = static_cast<float>(c.rank() + 1), y = 0;
          for (int w = 0; w < 200; ++w) c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
          for (int b = 0; b < batches; ++b) {
            c.barrier();
            const auto t0 = clk::now();
            for (int i = 0; i < per_batch; ++i) {
              if ((c.rank() + i) % 2 == 0) busy(skew);
              c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
              if (y != 3.0f) wrong = true;
            }
            const double t = std::chrono::duration<double, std::micro>(clk::now() - t0).count() / per_batch;
            double slowest = 0;
            c.all_reduce(&t, &slowest, 1, sc::reduce_op::max);
            if (c.rank() == 0) per.push_back(slowest - skew);
          }
        });
        std::sort(per.begin(), per.end());
        overhead[mode] = per[per.size() / 2];
      }
      std::printf("%6d %8.1f %22.3f %22.3f\n", round + 1, skew, overhead[0], overhead[1]);
      std::fflush(stdout);
    }
  unsetenv("SHARDCAST_HOST_SPIN_US");
  if (wrong) {
    std::fprintf(stderr, "bench_host_skew: a wrong all_reduce result\n");
    return 1;
  }
  return 0;
}
