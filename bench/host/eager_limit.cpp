// Where eager collectives stop paying on the host backend: the time per call of all_reduce,
// all_gather and reduce_scatter over a range of sizes, as the median over batches (robust
// to a rank descheduled now and then, unlike an average over one long run). Built twice:
// bench_host_eager (eager up to 4 KiB per rank) and bench_host_direct (never eager), so
// that running both shows the crossover that SHARDCAST_HOST_EAGER_BYTES should sit below.
//   bench_host_eager  [ranks] [batches]      (defaults: 2 ranks, 101 batches of 2000 calls)
//   bench_host_direct [ranks] [batches]
// Every call's result is checked; a wrong one makes the program exit with status 1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <shardcast/comm/host.hpp>
#include <vector>

namespace sc = shardcast;

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  const int batches = argc > 2 ? std::atoi(argv[2]) : 101;
  if (ranks < 1 || batches < 1) {
    std::fprintf(stderr, "usage: %s [ranks >= 1] [batches >= 1]\n", argv[0]);
    return 2;
  }
  constexpr int per_batch = 2000;
  const auto R = static_cast<std::size_t>(ranks);
  std::printf("# host backend, %d ranks, eager up to %d bytes per rank; median ns per call over %d batches of %d\n", ranks,
              static_cast<int>(SHARDCAST_HOST_EAGER_BYTES), batches, per_batch);
  std::printf("# bytes: per rank (all_reduce, all_gather: the count; reduce_scatter: the whole input)\n");
  std::printf("%8s %12s %12s %16s\n", "bytes", "all_reduce", "all_gather", "reduce_scatter");
  std::atomic<bool> wrong{false};
  for (std::size_t bytes : {32, 64, 128, 256, 512, 1024, 2048, 4096}) {
    const std::size_t n = bytes / sizeof(float);
    double med[3]{};
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<double> per;
      sc::host::run(ranks, [&](sc::host::communicator& c) {
        const std::size_t count = kind == 2 ? std::max<std::size_t>(1, n / R) : n;  // reduce_scatter: n / R per rank
        std::vector<float> x(count * R), y(count * R);
        for (int b = 0; b < batches; ++b) {
          c.barrier();
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < per_batch; ++i) {
            x[0] = static_cast<float>(i + c.rank());  // a fresh input, as an application's would be
            if (kind == 0) c.all_reduce(x.data(), y.data(), count, sc::reduce_op::sum);
            else if (kind == 1) c.all_gather(x.data(), y.data(), count);
            else c.reduce_scatter(x.data(), y.data(), count, sc::reduce_op::sum);
          }
          const auto t1 = std::chrono::steady_clock::now();
          if (c.rank() == 0) per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / per_batch);
        }
        // The last call's result against the reference: x[0] was i + rank, the rest 0.
        const int last = per_batch - 1;
        float sum0 = 0;
        for (int q = 0; q < c.size(); ++q) sum0 += static_cast<float>(last + q);
        if (kind == 0 && count && y[0] != sum0) wrong = true;
        if (kind == 1)
          for (int q = 0; q < c.size(); ++q)
            if (y[static_cast<std::size_t>(q) * count] != static_cast<float>(last + q)) wrong = true;
        if (kind == 2 && y[0] != (c.rank() == 0 ? sum0 : 0.f)) wrong = true;
      });
      std::sort(per.begin(), per.end());
      med[kind] = per[per.size() / 2];
    }
    std::printf("%8zu %12.0f %12.0f %16.0f\n", bytes, med[0], med[1], med[2]);
  }
  if (wrong) {
    std::fprintf(stderr, "%s: a collective gave a wrong result\n", argv[0]);
    return 1;
  }
  return 0;
}
