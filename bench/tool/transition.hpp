#pragma once
/// @file bench/tool/transition.hpp
/// What every backend's transition mode (`shardcast-bench redistribute`) shares: the
/// options, the problem (layouts, mesh shape, extents, global tensor, plan), one rank's
/// measurement on any communicator, and the report. transition.cpp runs it on the host
/// and MPI backends, device.cu on p2p and nccl.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <shardcast/comm/counting.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/explain.hpp>
#include <shardcast/mesh.hpp>
#include <shardcast/plan.hpp>
#include <shardcast/redistribute.hpp>

#include "common.hpp"

namespace shardcast::bench {

struct transition_options {
  std::string from, to;
  std::vector<int> mesh;
  std::vector<std::int64_t> extents;
  int iters = 5, warmup = 1, check = 1;
  int batches = 1;  ///< --batches: each rank's time is the median of this many batches of `iters`
  std::string json;
  std::string backend = "host";
};

/// What one rank measured.
struct transition_measure {
  double seconds = 0;  ///< the timed redistributes, from a barrier to a barrier after the last one (the median batch)
  double bytes = 0;    ///< bytes this rank sent per redistribute (counting_communicator)
  long long wrong = 0; ///< -c 1: elements of to_global(result) that differ from the global tensor
};

/// The layouts, mesh shape and extents of the run, the global tensor and the plan.
template <int N, int R>
struct transition_problem {
  std::array<int, N> shape{};
  std::array<std::int64_t, R> ext{};
  int nranks = 1;
  runtime_layout src, dst;
  std::vector<float> global;
  plan p;

  explicit transition_problem(const transition_options& o) : src(runtime_layout::parse(o.from)), dst(runtime_layout::parse(o.to)) {
    for (int a = 0; a < N; ++a) nranks *= shape[static_cast<std::size_t>(a)] = o.mesh[static_cast<std::size_t>(a)];
    std::size_t total = 1;
    for (int d = 0; d < R; ++d) total *= static_cast<std::size_t>(ext[static_cast<std::size_t>(d)] = o.extents[static_cast<std::size_t>(d)]);
    p = make_plan(src, dst, shape, ext);
    global.resize(total);
    // Small integers, so partial sums stay exact.
    for (std::size_t i = 0; i < total; ++i) global[i] = static_cast<float>(1 + (i * 7) % 13);
  }
};

/// "2x2x4" from {2, 2, 4}.
template <class V>
std::string joined(const std::vector<V>& dims) {
  std::string s;
  for (const V& v : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

/// The run's header and the plan (`explain`), as comment lines.
template <int N, int R>
void print_transition_header(const transition_options& o, const transition_problem<N, R>& pb, const char* backend_text) {
  std::printf("# shardcast-bench redistribute: mesh %s, extents %s, float, %d ranks (%s), %d iters, %d warmup\n", joined(o.mesh).c_str(),
              joined(o.extents).c_str(), pb.nranks, backend_text, o.iters, o.warmup);
  if (o.batches > 1) std::printf("# time: the median of %d batches of %d redistributes\n", o.batches, o.iters);
  const std::string ex = explain(pb.p, pb.shape, pb.ext, sizeof(float));
  std::size_t b = 0;
  while (b < ex.size()) {
    std::size_t e = ex.find('\n', b);
    if (e == std::string::npos) e = ex.size();
    std::printf("# %s\n", ex.substr(b, e - b).c_str());
    b = e + 1;
  }
  std::fflush(stdout);
}

/// One rank: distributes the global tensor over a mesh of `comm` (wrapped in a
/// counting_communicator), runs `o.warmup` redistributes, then times `o.iters` (each result
/// dropped before the next call), and with -c 1 checks to_global of one more result.
/// `sync()` waits for the work queued on `s` (device backends; a no-op on host memory), so
/// the clock stops after the data moved. Collective over `comm`.
template <int N, int R, class Comm, class Sync>
transition_measure measure_transition(const Comm& comm, const transition_problem<N, R>& pb, const transition_options& o,
                                      typename Comm::stream_type s, Sync sync) {
  counting_communicator<Comm> cc(comm);
  auto m = make_mesh(cc, pb.shape);
  auto x = distribute(m, pb.src, std::span<const float>(pb.global), pb.ext, s);
  // The first redistribute of a conversion also agrees on it across the ranks (a small
  // collective, once): made here, untimed and uncounted, whatever -w says.
  (void)redistribute(x, pb.dst, s);
  for (int i = 0; i < o.warmup; ++i) (void)redistribute(x, pb.dst, s);
  sync();
  m.comm().barrier();
  m.comm().reset();
  std::vector<double> batch;  // each ends at a barrier, so it lasts as long as the slowest rank's
  for (int b = 0; b < o.batches; ++b) {
    if (b) m.comm().barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) (void)redistribute(x, pb.dst, s);
    sync();
    m.comm().barrier();
    batch.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  transition_measure r;
  r.seconds = median(batch);
  r.bytes = m.comm().bytes() / (static_cast<double>(o.iters) * o.batches);
  if (o.check) {
    auto y = redistribute(x, pb.dst, s);
    const std::vector<float> g = to_global(y, s);
    if (g.size() != pb.global.size()) r.wrong = static_cast<long long>(pb.global.size());
    else
      for (std::size_t i = 0; i < g.size(); ++i) r.wrong += g[i] != pb.global[i];
  }
  return r;
}

/// Prints the row from every rank's measurement (ranks in order), writes --json, and
/// returns the exit status: 1 when an element was wrong, else 0.
template <int N, int R>
int report_transition(const transition_options& o, const transition_problem<N, R>& pb, const std::vector<transition_measure>& ranks) {
  double secs = 0, busiest = 0;
  long long wrong = 0;
  for (const auto& r : ranks) {
    secs = std::max(secs, r.seconds / o.iters);
    busiest = std::max(busiest, r.bytes);
    wrong += r.wrong;
  }
  const double predicted = pb.p.elements * sizeof(float);
  const double bytes = static_cast<double>(pb.global.size() * sizeof(float));
  std::printf("#%12s %10s %10s %14s %14s %8s %6s\n", "size(B)", "time(us)", "algbw", "predicted(B)", "measured(B)", "meas/pred", "#wrong");
  std::printf(" %12.0f %10.2f %10.3f %14.0f %14.0f %8.3f %6lld\n", bytes, secs * 1e6, secs > 0 ? bytes / secs / 1e9 : 0.0, predicted, busiest,
              predicted > 0 ? busiest / predicted : (busiest == 0 ? 1.0 : 0.0), wrong);
  std::printf("# measured bytes per rank:");
  for (const auto& r : ranks) std::printf(" %.0f", r.bytes);
  std::printf("\n# algbw = global tensor bytes / time; predicted/measured: bytes sent by the busiest rank per redistribute\n");
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f.precision(17);  // sizes and byte counts exactly, times to the last digit
    f << "{\"tool\": \"shardcast-bench\", \"mode\": \"redistribute\", \"backend\": \"" << o.backend << "\", \"from\": \"" << o.from
      << "\", \"to\": \"" << o.to << "\", \"mesh\": \"" << joined(o.mesh) << "\", \"extents\": \"" << joined(o.extents)
      << "\", \"ranks\": " << pb.nranks << ", \"size\": " << bytes << ", \"time_us\": " << secs * 1e6 << ", \"predicted_bytes\": " << predicted
      << ", \"measured_bytes\": " << busiest << ", \"wrong\": " << wrong << "}\n";
    f.flush();
    if (!f) {
      std::fflush(stdout);
      std::fprintf(stderr, "shardcast-bench redistribute: cannot write %s\n", o.json.c_str());
      return 2;
    }
  }
  std::fflush(stdout);
  if (wrong) {
    std::fprintf(stderr, "shardcast-bench: %lld wrong elements after redistribute\n", wrong);
    return 1;
  }
  return 0;
}

/// Calls `f.template operator()<N, R>()` with the mesh's axis count and the tensor's rank
/// (1 to 3 each); returns its status, or 2 after saying what is out of range.
template <class F>
int with_transition_shape(const transition_options& o, F&& f) {
  auto by_rank = [&]<int N>() -> int {
    switch (o.extents.size()) {
      case 1: return f.template operator()<N, 1>();
      case 2: return f.template operator()<N, 2>();
      case 3: return f.template operator()<N, 3>();
    }
    std::fprintf(stderr, "shardcast-bench redistribute: --extents takes 1 to 3 dims (e.g. 4096x4096)\n");
    return 2;
  };
  switch (o.mesh.size()) {
    case 1: return by_rank.template operator()<1>();
    case 2: return by_rank.template operator()<2>();
    case 3: return by_rank.template operator()<3>();
  }
  std::fprintf(stderr, "shardcast-bench redistribute: --mesh takes 1 to 3 axes (e.g. 2x2)\n");
  return 2;
}

}  // namespace shardcast::bench
