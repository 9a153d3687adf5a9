// What planning a new conversion costs the ranks of a host mesh (threads of one process),
// each planning it alone (make_plan on every rank) against the ranks sharing the search
// (detail::shared_plans, which dynamic and static redistributes use): ranks search while a
// CPU is free of searches, and the others wait for a plan being searched.
//   bench_shared_plans [ranks (even)] [batches]          (defaults: 4 ranks, 11 batches)
// Each batch plans the same 20 new conversions on each side (in turn first): a rank-3
// tensor on a 4-axis mesh of shape 2x1x(ranks/2)x1 with global extents 24x24xk, k new each time,
// "S(0),S(1),P(sum),R" -> "S(1),R,S(2),P(sum)" (625 layouts searched). After each plan
// the ranks meet at a barrier, as a redistribute's collectives would make them; rank 0
// times the batch. Prints the median time per conversion and the ratio.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#include "count_arg.hpp"

namespace sc = shardcast;

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? count_arg(argv[1]) : 4, batches = argc > 2 ? count_arg(argv[2]) : 11;
  if (ranks < 2 || ranks % 2 != 0 || batches < 1 || argc > 3) {
    std::fprintf(stderr, "usage: bench_shared_plans [ranks: even, >= 2] [batches >= 1]\n");
    return 2;
  }
  constexpr int per_batch = 20;
  const auto src = sc::runtime_layout::parse("S(0),S(1),P(sum),R"), dst = sc::runtime_layout::parse("S(1),R,S(2),P(sum)");
  const std::array<int, 4> shape{2, 1, ranks / 2, 1};
  using clock = std::chrono::steady_clock;
  std::vector<double> alone, shared;
  std::atomic<bool> wrong{false};
  const std::size_t searches_before = sc::detail::shared_plans().searches();
  sc::host::run(ranks, [&](sc::host::communicator& c) {
    // Side 0: every rank plans alone; side 1: the ranks share the search. Both sides plan
    // the same conversions (the search's cost depends on the extents), each new to the
    // shared plans.
    auto side = [&](int which, int b, std::vector<double>& out) {
      c.barrier();
      const auto t0 = clock::now();
      for (int i = 0; i < per_batch; ++i) {
        const std::array<std::int64_t, 3> ext{24, 24, 1000 + b * per_batch + i};
        const sc::plan p = which == 0 ? sc::make_plan(src, dst, shape, ext)
                                      : sc::detail::shared_plans().get(src, dst, shape.data(), ext.data(), 3);
        if (p.nsteps == 0) wrong = true;
        c.barrier();
      }
      const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / per_batch;
      if (c.rank() == 0) out.push_back(us);
    };
    for (int b = 0; b < batches; ++b) {
      if (b % 2 == 0) side(0, b, alone), side(1, b, shared);
      else side(1, b, shared), side(0, b, alone);
    }
  });
  const std::size_t searches = sc::detail::shared_plans().searches() - searches_before;
  // The shared plans are make_plan's.
  for (int b = 0; b < batches; ++b) {
    const std::array<std::int64_t, 3> ext{24, 24, 1000 + b * per_batch};
    const sc::plan a = sc::make_plan(src, dst, shape, ext), s = sc::detail::shared_plans().get(src, dst, shape.data(), ext.data(), 3);
    if (!sc::detail::same_steps(a, s) || a.elements != s.elements) wrong = true;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double a = median(alone), s = median(shared);
  std::printf("host backend, %d ranks (threads), mesh 2x1x%dx1, rank-3 tensor, %s -> %s: median of %d batches of %d new conversions\n",
              ranks, ranks / 2, sc::to_string(src).c_str(), sc::to_string(dst).c_str(), batches, per_batch);
  std::printf("  each rank plans alone   %9.1f us per conversion\n", a);
  std::printf("  shared search           %9.1f us per conversion   ratio alone / shared %5.2f\n", s, a / s);
  const int cpus = sc::detail::available_cpus(), most = std::min(ranks, cpus);
  std::printf("  searches made when shared: %zu for %d conversions (%.2f per conversion; %d CPUs, so at most %d)\n", searches,
              batches * per_batch, static_cast<double>(searches) / (batches * per_batch), cpus, most);
  if (wrong || searches < static_cast<std::size_t>(batches * per_batch) || searches > static_cast<std::size_t>(batches * per_batch * most)) {
    std::printf("WRONG: a plan differs from make_plan's, or the shared searches are not between one and %d per conversion\n", most);
    return 1;
  }
  return 0;
}
