// Context for bench_dispatch: the static redistribute against the hand-written call on the
// real host backend, where every collective synchronises the ranks (threads). On the
// recording backend the library's host work per call is a few nanoseconds; this shows
// what it is next to a real call. Kept out of bench_dispatch's translation unit, whose
// instruction counts shift when other instantiations share its helpers.
//   bench_dispatch_host [--control | --raw-copies-mesh | --mesh-ref] [--into] [ranks] [batches]
//                                                  (defaults: 2 ranks, 21 batches)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <shardcast/shardcast.hpp>
#include <string>
#include <utility>
#include <vector>

#include "count_arg.hpp"

namespace sc = shardcast;

namespace {
/// The same single-collective cases on the real host
/// backend (threads as ranks, a 1-axis mesh of `ranks`), where every call synchronises the
/// ranks. Each batch runs 2000 hand-written calls and 2000 static redistributes (in turn
/// first), on every rank; rank 0 times them. Prints the median time per call over the batches and the ratio:
/// what the library's host work (a few ns on the recording backend) adds to a real call.
int run_host_backend(int ranks, int batches, bool control, bool raw_copies_mesh, bool on_ref, bool into) {
  constexpr int per_batch = 2000;
  using HM = sc::mesh<1>;
  using clock = std::chrono::steady_clock;
  struct timing {
    std::vector<double> raw, stat;
  };
  timing ag, ar;
  std::atomic<bool> wrong{false};
  sc::host::run(ranks, [&](sc::host::communicator& c) {
    HM m = sc::make_mesh(c, std::array<int, 1>{ranks});
    const std::array<std::int64_t, 2> e{8 * ranks, 8};
    auto x = sc::empty<sc::layout<sc::shard<0>>, float>(m, e);
    auto p = sc::empty<sc::layout<sc::partial<>>, float>(m, e);
    // --mesh-ref: the static side's tensors live on a mesh_ref (no counted mesh handle).
    const auto r = m.ref();
    auto xr = sc::empty<sc::layout<sc::shard<0>>, float>(r, e);
    auto pr = sc::empty<sc::layout<sc::partial<>>, float>(r, e);
    // --into: both sides write into an output made once (redistribute_into on the static side).
    auto out = sc::empty<sc::layout<sc::replicate>, float>(m, e);
    auto out_r = sc::empty<sc::layout<sc::replicate>, float>(r, e);
    std::fill_n(x.data(), x.local_size(), 1.0f);
    std::fill_n(p.data(), p.local_size(), 1.0f);
    std::fill_n(xr.data(), xr.local_size(), 1.0f);
    std::fill_n(pr.data(), pr.local_size(), 1.0f);
    const std::size_t n = static_cast<std::size_t>(e[0] * e[1]), piece = x.local_size();
    auto time = [&](std::vector<double>& out, auto&& call) {
      m.comm().barrier();
      const auto t0 = clock::now();
      for (int i = 0; i < per_batch; ++i) call();
      const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count() / per_batch;
      if (c.rank() == 0) out.push_back(ns);
    };
    // The results are right (so the timed calls are real ones): the gathered ones, and the
    // sum of a one from every rank.
    const auto gy = sc::redistribute<sc::layout<sc::replicate>>(x);
    const auto ry = sc::redistribute<sc::layout<sc::replicate>>(p);
    const auto gr = sc::redistribute<sc::layout<sc::replicate>>(xr);
    const auto rr = sc::redistribute<sc::layout<sc::replicate>>(pr);
    for (std::size_t i = 0; i < n; ++i)
      if (gy.data()[i] != 1.0f || ry.data()[i] != static_cast<float>(ranks) || gr.data()[i] != 1.0f || rr.data()[i] != static_cast<float>(ranks))
        wrong = true;
    // The hand-written side: allocate the output, then the raw call `call(out)` (--into:
    // the call into the output made once).
    auto hand_written = [&](auto&& call) {
      if (into) {
        call(out.data());
        benchmark::DoNotOptimize(out.data());
        return;
      }
      HM keep;  // --raw-copies-mesh: what a result's mesh handle costs (an atomic increment and decrement)
      if (raw_copies_mesh) keep = m;
      benchmark::DoNotOptimize(&keep);
      auto out = std::make_shared_for_overwrite<float[]>(n);
      call(out.get());
      benchmark::DoNotOptimize(out.get());
    };
    // The static side: redistribute to replicate from `t` (on the mesh) or `tr` (on its mesh_ref).
    auto redistributed = [&](const auto& t, const auto& tr) {
      auto run = [](const auto& in) {
        auto y = sc::redistribute<sc::layout<sc::replicate>>(in);
        benchmark::DoNotOptimize(y.data());
      };
      if (into && on_ref) sc::redistribute_into(tr, out_r);
      else if (into) sc::redistribute_into(t, out);
      else if (on_ref) run(tr);
      else run(t);
    };
    auto raw_gather = [&] { hand_written([&](float* out) { m.comm().all_gather(x.data(), out, piece); }); };
    auto raw_reduce = [&] { hand_written([&](float* out) { m.comm().all_reduce(p.data(), out, n, sc::reduce_op::sum); }); };
    auto static_gather = [&] { control ? raw_gather() : redistributed(x, xr); };
    auto static_reduce = [&] { control ? raw_reduce() : redistributed(p, pr); };
    for (int b = 0; b < batches; ++b) {
      // Odd batches run the static side first, so neither side always follows the other.
      if (b % 2 == 0) {
        time(ag.raw, raw_gather), time(ag.stat, static_gather), time(ar.raw, raw_reduce), time(ar.stat, static_reduce);
      } else {
        time(ag.stat, static_gather), time(ag.raw, raw_gather), time(ar.stat, static_reduce), time(ar.raw, raw_reduce);
      }
    }
  });
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf("host backend, %d ranks (threads), %d floats, median of %d batches of %d calls%s:\n", ranks, 64 * ranks, batches, per_batch,
              control           ? " (--control: the static side runs the hand-written calls too)"
              : raw_copies_mesh ? " (--raw-copies-mesh: the hand-written side also copies the mesh handle)"
              : into && on_ref  ? " (--into --mesh-ref: both sides write into an output made once; tensors on a mesh_ref)"
              : into            ? " (--into: both sides write into an output made once)"
              : on_ref          ? " (--mesh-ref: the static side's tensors live on a mesh_ref)"
                                : "");
  for (auto [name, t] : {std::pair<const char*, timing*>{"all_gather", &ag}, {"all_reduce", &ar}}) {
    const double s = median(t->stat), r = median(t->raw);
    std::printf("  %-12s static %9.1f ns  hand-written %9.1f ns  ratio %5.3f\n", name, s, r, s / r);
  }
  if (wrong) {
    std::printf("WRONG: a redistribute's result differs from the expected values\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --control: both sides run the hand-written calls, so the ratio shows the harness' own bias.
  // --raw-copies-mesh: the hand-written side also copies (and drops) the mesh handle, as a
  // result of redistribute does.
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool control = std::erase(args, std::string("--control")) > 0;
  const bool raw_copies_mesh = std::erase(args, std::string("--raw-copies-mesh")) > 0;
  // --mesh-ref: the static side's tensors live on a mesh_ref.
  const bool on_ref = std::erase(args, std::string("--mesh-ref")) > 0;
  // --into: no allocation and no result handle on either side (redistribute_into against
  // the raw call into the same output); combines with --mesh-ref.
  const bool into = std::erase(args, std::string("--into")) > 0;
  const int ranks = args.size() > 0 ? count_arg(args[0]) : 2, batches = args.size() > 1 ? count_arg(args[1]) : 21;
  if (ranks < 1 || batches < 1 || args.size() > 2) {
    std::fprintf(stderr, "usage: bench_dispatch_host [--control | --raw-copies-mesh | --mesh-ref] [--into] [ranks >= 1] [batches >= 1]\n");
    return 2;
  }
  return run_host_backend(ranks, batches, control, raw_copies_mesh, on_ref, into);
}
