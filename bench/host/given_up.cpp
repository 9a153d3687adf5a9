// What giving up the input of a partial -> replicate redistribute saves: the loop of a
// layer whose partial output is all-reduced (a row-parallel linear layer, a gradient),
// on the host backend. Each iteration makes a partial tensor, writes it, redistributes it
// to replicate and reads one element of the result; `kept` passes the tensor as an
// lvalue (the all_reduce writes a second piece), `given_up` passes it with std::move
// (the all_reduce runs in place in its storage).
//
// `chain_kept` and `chain_given_up` time a chain of elementwise operators instead,
// relu(2 x + bias) on a sharded tensor: `chain_kept` names each step's result (as every
// step allocated before elementwise operators took given-up operands: four pieces live at
// the end), `chain_given_up` writes map(bias_add(scale(std::move(x), 2), b), relu), whose
// steps each write over the previous piece (one piece).
//
//   bench_host_given_up kept|given_up|chain_kept|chain_given_up ELEMENTS [ITERS] [RANKS]
//
// Prints the median time per iteration over 5 batches (rank 0) and the process's peak
// resident memory (getrusage; run each mode in its own process to compare them).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

namespace sc = shardcast;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc < 3 || (mode != "kept" && mode != "given_up" && mode != "chain_kept" && mode != "chain_given_up")) {
    std::fprintf(stderr, "usage: %s kept|given_up|chain_kept|chain_given_up ELEMENTS [ITERS] [RANKS]\n", argv[0]);
    return 2;
  }
  const bool given_up = mode == "given_up" || mode == "chain_given_up";
  const bool chain = mode.starts_with("chain");
  const std::int64_t n = std::atoll(argv[2]);
  const int iters = argc > 3 ? std::atoi(argv[3]) : 20;
  const int ranks = argc > 4 ? std::atoi(argv[4]) : 2;
  using P = sc::layout<sc::partial<>>;
  using R = sc::layout<sc::replicate>;
  using S = sc::layout<sc::shard<0>>;
  std::vector<double> batch_us;
  double checksum = 0;
  sc::host::run(ranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{ranks});
    const std::array<std::int64_t, 1> ext{n};
    double local_sum = 0;
    // chain: rows of 64 floats, n * ranks floats in all (n per rank)
    const std::array<std::int64_t, 2> ext2{n * ranks / 64, 64};
    const auto bias = sc::distribute<R>(m, std::vector<float>(64, 0.5f), std::array<std::int64_t, 1>{64});
    auto once = [&](int it) {
      if (chain) {
        auto x = sc::empty<S, float>(m, ext2);
        std::fill_n(x.data(), x.local_size(), static_cast<float>(it % 3 + c.rank()) - 1.5f);
        if (given_up) {
          auto y = sc::map(sc::bias_add(sc::scale(std::move(x), 2), bias), sc::fn::relu);
          local_sum += y.data()[static_cast<std::size_t>(it) % y.local_size()];
        } else {
          const auto t1 = sc::scale(x, 2);
          const auto t2 = sc::bias_add(t1, bias);
          const auto y = sc::map(t2, sc::fn::relu);
          local_sum += y.data()[static_cast<std::size_t>(it) % y.local_size()];
        }
        return;
      }
      auto x = sc::empty<P, float>(m, ext);
      std::fill_n(x.data(), x.local_size(), static_cast<float>(it % 3 + c.rank()));
      auto y = given_up ? sc::redistribute<R>(std::move(x)) : sc::redistribute<R>(x);
      local_sum += y.data()[static_cast<std::size_t>(it) % y.local_size()];
    };
    for (int it = 0; it < 3; ++it) once(it);  // warm-up: plan, geometry, pooled blocks
    for (int b = 0; b < 5; ++b) {
      m.comm().barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < iters; ++it) once(it);
      m.comm().barrier();
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
      if (c.rank() == 0) batch_us.push_back(us);
    }
    if (c.rank() == 0) checksum = local_sum;
  });
  std::sort(batch_us.begin(), batch_us.end());
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%-14s %lld floats per rank (%.1f MiB), %d ranks: %.1f us per iteration (median of 5 batches of %d; min %.1f, max %.1f); "
              "peak resident %.1f MiB; checksum %.0f\n",
              mode.c_str(), static_cast<long long>(n), static_cast<double>(n) * 4 / (1 << 20), ranks, batch_us[2], iters, batch_us.front(),
              batch_us.back(), static_cast<double>(ru.ru_maxrss) / 1024, checksum);
  return 0;
}
