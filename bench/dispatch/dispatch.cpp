// Host-side cost of a static redistribute against the hand-written sequence of the same
// raw backend calls, on a recording backend that moves no data; and the cost of
// planning at run time. Prints the ratio static / hand-written at the end.
//
// The hand-written side is what a careful user writes for the same result: allocate the
// output with the allocation the library uses (std::make_shared_for_overwrite<T[]>: one
// allocation for the array and its control block), then the raw call(s); where a
// staging buffer is needed it is allocated once, outside the timed loop, and reused.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <map>
#include <shardcast/shardcast.hpp>
#include <string>

namespace sc = shardcast;

/// A communicator that only counts calls: what is left is the library's host overhead.
struct recording_comm {
  using memory_space = sc::host_memory;
  using stream_type = sc::host_stream;
  int size_ = 1, rank_ = 0;
  long* calls = nullptr;
  int rank() const { return rank_; }
  int size() const { return size_; }
  template <class T> void all_reduce(const T*, T*, std::size_t, sc::reduce_op, stream_type = {}) { ++*calls; }
  template <class T> void all_gather(const T*, T*, std::size_t, stream_type = {}) { ++*calls; }
  template <class T> void reduce_scatter(const T*, T*, std::size_t, sc::reduce_op, stream_type = {}) { ++*calls; }
  template <class T> void all_to_all(const T*, T*, std::size_t, stream_type = {}) { ++*calls; }
  template <class T> void all_to_allv(const T*, const std::size_t*, const std::size_t*, T*, const std::size_t*, const std::size_t*, stream_type = {}) { ++*calls; }
  template <class T> void broadcast(T*, std::size_t, int, stream_type = {}) { ++*calls; }
  template <class T> void send(const T*, std::size_t, int, stream_type = {}) { ++*calls; }
  template <class T> void recv(T*, std::size_t, int, stream_type = {}) { ++*calls; }
  void barrier() {}
  // The executor takes group sizes from the mesh shape, so a split only needs a rank.
  recording_comm split(int, int key) const { return {size_, key, calls}; }
};
static_assert(sc::communicator<recording_comm>);

static long g_calls = 0;
static std::map<std::string, double> g_ns;

namespace {
using M = sc::mesh<2, recording_comm>;
M make() { return sc::make_mesh(recording_comm{4, 0, &g_calls}, std::array<int, 2>{2, 2}); }
constexpr std::array<std::int64_t, 2> ext{8, 8};

void record(benchmark::State& st, const char* name) {
  st.counters["calls/iter"] = benchmark::Counter(static_cast<double>(g_calls), benchmark::Counter::kAvgIterations);
  g_calls = 0;
  (void)name;
}
}  // namespace

// S(0),R -> R,R: one all_gather whose chunks land in place.
static void static_all_gather(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::shard<0>, sc::replicate>, float>(m, ext);
  for (auto _ : st) {
    auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(x);
    benchmark::DoNotOptimize(y.data());
  }
  record(st, "static_all_gather");
}
static void raw_all_gather(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::shard<0>, sc::replicate>, float>(m, ext);
  for (auto _ : st) {
    // What a careful hand-written version does: allocate the output, one call.
    auto out = std::make_shared_for_overwrite<float[]>(64);
    m.axis_comm(0).all_gather(x.data(), out.get(), 32);
    benchmark::DoNotOptimize(out.get());
  }
  record(st, "raw_all_gather");
}
// P(sum),R -> S(0),R: one reduce_scatter whose chunks are contiguous.
static void static_reduce_scatter(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::partial<>, sc::replicate>, float>(m, ext);
  for (auto _ : st) {
    auto y = sc::redistribute<sc::layout<sc::shard<0>, sc::replicate>>(x);
    benchmark::DoNotOptimize(y.data());
  }
  record(st, "static_reduce_scatter");
}
static void raw_reduce_scatter(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::partial<>, sc::replicate>, float>(m, ext);
  for (auto _ : st) {
    auto out = std::make_shared_for_overwrite<float[]>(32);
    m.axis_comm(0).reduce_scatter(x.data(), out.get(), 32, sc::reduce_op::sum);
    benchmark::DoNotOptimize(out.get());
  }
  record(st, "raw_reduce_scatter");
}
// P(sum),P(sum) -> R,R: one all_reduce over the flattened axes.
static void static_all_reduce(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::partial<>, sc::partial<>>, float>(m, ext);
  for (auto _ : st) {
    auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(x);
    benchmark::DoNotOptimize(y.data());
  }
  record(st, "static_all_reduce");
}
static void raw_all_reduce(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::partial<>, sc::partial<>>, float>(m, ext);
  for (auto _ : st) {
    auto out = std::make_shared_for_overwrite<float[]>(64);
    m.comm().all_reduce(x.data(), out.get(), 64, sc::reduce_op::sum);
    benchmark::DoNotOptimize(out.get());
  }
  record(st, "raw_all_reduce");
}
// R,S(1) -> R,R: an all_gather along dim 1, which is not outermost, so every member's
// chunk is unpacked (a strided copy) into the output.
static void static_gather_dim1(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::replicate, sc::shard<1>>, float>(m, ext);
  for (auto _ : st) {
    auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(x);
    benchmark::DoNotOptimize(y.data());
  }
  record(st, "static_gather_dim1");
}
static void raw_gather_dim1(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::replicate, sc::shard<1>>, float>(m, ext);
  auto recv = std::make_unique_for_overwrite<float[]>(64);  // staging, reused
  for (auto _ : st) {
    auto out = std::make_shared_for_overwrite<float[]>(64);
    m.axis_comm(1).all_gather(x.data(), recv.get(), 32);
    for (int q = 0; q < 2; ++q)  // member q holds columns [4q, 4q+4) of every row
      for (int r = 0; r < 8; ++r) std::memcpy(out.get() + r * 8 + q * 4, recv.get() + q * 32 + r * 4, 4 * sizeof(float));
    benchmark::DoNotOptimize(out.get());
  }
  record(st, "raw_gather_dim1");
}
// S(0),R -> R,S(1): a 2-step plan, local_slice over axis 1 then all_gather over axis 0.
static void static_two_step(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::shard<0>, sc::replicate>, float>(m, ext);
  for (auto _ : st) {
    auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<1>>>(x);
    benchmark::DoNotOptimize(y.data());
  }
  record(st, "static_two_step");
}
static void raw_two_step(benchmark::State& st) {
  auto m = make();
  auto x = sc::empty<sc::layout<sc::shard<0>, sc::replicate>, float>(m, ext);
  auto part = std::make_unique_for_overwrite<float[]>(16);  // staging, reused
  for (auto _ : st) {
    // This rank (coordinates (0,0)) holds rows 0..3; keep columns 0..3, then gather rows.
    for (int r = 0; r < 4; ++r) std::memcpy(part.get() + r * 4, x.data() + r * 8, 4 * sizeof(float));
    auto out = std::make_shared_for_overwrite<float[]>(32);
    m.axis_comm(0).all_gather(part.get(), out.get(), 16);
    benchmark::DoNotOptimize(out.get());
  }
  record(st, "raw_two_step");
}
// Planning at run time.
static void runtime_plan_2axis(benchmark::State& st) {
  const auto a = sc::runtime_layout::parse("P(sum),S(0)"), b = sc::runtime_layout::parse("S(1),R");
  const std::array<int, 2> shape{2, 4};
  for (auto _ : st) benchmark::DoNotOptimize(sc::make_plan(a, b, shape, ext));
}
static void runtime_plan_3axis(benchmark::State& st) {
  const auto a = sc::runtime_layout::parse("S(0),S(1),P(sum)"), b = sc::runtime_layout::parse("S(1),R,S(0)");
  const std::array<int, 3> shape{2, 2, 2};
  for (auto _ : st) benchmark::DoNotOptimize(sc::make_plan(a, b, shape, ext));
}
static void runtime_plan_4axis(benchmark::State& st) {
  const auto a = sc::runtime_layout::parse("S(0),S(1),P(sum),R"), b = sc::runtime_layout::parse("S(1),R,S(0),P(sum)");
  const std::array<int, 4> shape{2, 2, 2, 2};
  for (auto _ : st) benchmark::DoNotOptimize(sc::make_plan(a, b, shape, ext));
}

BENCHMARK(static_all_gather);
BENCHMARK(raw_all_gather);
BENCHMARK(static_reduce_scatter);
BENCHMARK(raw_reduce_scatter);
BENCHMARK(static_all_reduce);
BENCHMARK(raw_all_reduce);
BENCHMARK(static_gather_dim1);
BENCHMARK(raw_gather_dim1);
BENCHMARK(static_two_step);
BENCHMARK(raw_two_step);
BENCHMARK(runtime_plan_2axis);
BENCHMARK(runtime_plan_3axis);
BENCHMARK(runtime_plan_4axis);

/// Collects each run's real time per iteration so main() can print the ratios.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  ratio_reporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) g_ns[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  ratio_reporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf("\nstatic redistribute / hand-written raw calls (target <= 1.10 for the single-call cases;\n"
              "gather_dim1 (unpack) and two_step (slice + all_gather) are reported):\n");
  for (const char* k : {"all_gather", "reduce_scatter", "all_reduce", "gather_dim1", "two_step"}) {
    const double s = g_ns[std::string("static_") + k], r = g_ns[std::string("raw_") + k];
    if (r > 0) std::printf("  %-15s %8.1f ns vs %8.1f ns  ratio %.2f\n", k, s, r, s / r);
  }
  benchmark::Shutdown();
}
