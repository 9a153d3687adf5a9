// Host-side cost of a static redistribute against the hand-written sequence of the same
// raw backend calls, on a recording backend that moves no data; and the cost of
// planning at run time. Prints the ratio static / hand-written at the end.
//
// The hand-written side is what a careful user writes for the same result: allocate the
// output with the allocation the library uses (std::make_shared_for_overwrite<T[]>: one
// allocation for the array and its control block), then the raw call(s); where a
// staging buffer is needed it is allocated once, outside the timed loop, and reused. Its
// counts are compile-time constants; the raw_rt_ cases are the single-call ones with the
// counts read from the tensor at run time, as code for run-time shapes must.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <map>
#include <shardcast/shardcast.hpp>
#include <string>
#include <thread>

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
using owning_mesh = sc::mesh<2, recording_comm>;
#ifdef SHARDCAST_DISPATCH_MESH_REF
// bench_dispatch_ref: every tensor lives on a mesh_ref, so results hold no counted handle.
using M = sc::mesh_ref<2, recording_comm>;
M handle(const owning_mesh& m) { return m.ref(); }
constexpr const char* mesh_kind = "tensors on a mesh_ref (bench_dispatch_ref)";
#else
using M = owning_mesh;
M handle(const owning_mesh& m) { return m; }
constexpr const char* mesh_kind = "tensors on a mesh";
#endif
owning_mesh make() { return sc::make_mesh(recording_comm{4, 0, &g_calls}, std::array<int, 2>{2, 2}); }
constexpr std::array<std::int64_t, 2> ext{8, 8};

void record(benchmark::State& st) {
  st.counters["calls/iter"] = benchmark::Counter(static_cast<double>(g_calls), benchmark::Counter::kAvgIterations);
  g_calls = 0;
}

/// Everything the cases use, made once (this rank has mesh coordinates (0,0)).
struct fixture {
  owning_mesh owner = make();
  M m = handle(owner);
  sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::replicate>, M> s0_r = sc::empty<sc::layout<sc::shard<0>, sc::replicate>, float>(m, ext);
  sc::dtensor<float, 2, sc::layout<sc::partial<>, sc::replicate>, M> p_r = sc::empty<sc::layout<sc::partial<>, sc::replicate>, float>(m, ext);
  sc::dtensor<float, 2, sc::layout<sc::partial<>, sc::partial<>>, M> p_p = sc::empty<sc::layout<sc::partial<>, sc::partial<>>, float>(m, ext);
  sc::dtensor<float, 2, sc::layout<sc::replicate, sc::shard<1>>, M> r_s1 = sc::empty<sc::layout<sc::replicate, sc::shard<1>>, float>(m, ext);
  sc::dtensor<float, 2, sc::layout<sc::replicate, sc::replicate>, M> r_r = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m, ext);
  std::unique_ptr<float[]> staging = std::make_unique_for_overwrite<float[]>(64);  // hand-written staging, reused
};
}  // namespace

// One call of each case. Not inlined, so the static and hand-written sides pay the same
// call, and so `--calls N` under callgrind attributes instructions to each case.
#define SHARDCAST_DISPATCH_CASE(name) __attribute__((noinline)) void name##_once(fixture& f)

// S(0),R -> R,R: one all_gather whose chunks land in place.
SHARDCAST_DISPATCH_CASE(static_all_gather) {
  auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(f.s0_r);
  benchmark::DoNotOptimize(y.data());
}
SHARDCAST_DISPATCH_CASE(raw_all_gather) {
  // What a careful hand-written version does: allocate the output, one call.
  auto out = std::make_shared_for_overwrite<float[]>(64);
  f.m.axis_comm(0).all_gather(f.s0_r.data(), out.get(), 32);
  benchmark::DoNotOptimize(out.get());
}
// P(sum),R -> S(0),R: one reduce_scatter whose chunks are contiguous.
SHARDCAST_DISPATCH_CASE(static_reduce_scatter) {
  auto y = sc::redistribute<sc::layout<sc::shard<0>, sc::replicate>>(f.p_r);
  benchmark::DoNotOptimize(y.data());
}
SHARDCAST_DISPATCH_CASE(raw_reduce_scatter) {
  auto out = std::make_shared_for_overwrite<float[]>(32);
  f.m.axis_comm(0).reduce_scatter(f.p_r.data(), out.get(), 32, sc::reduce_op::sum);
  benchmark::DoNotOptimize(out.get());
}
// P(sum),P(sum) -> R,R: one all_reduce over the flattened axes.
SHARDCAST_DISPATCH_CASE(static_all_reduce) {
  auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(f.p_p);
  benchmark::DoNotOptimize(y.data());
}
SHARDCAST_DISPATCH_CASE(raw_all_reduce) {
  auto out = std::make_shared_for_overwrite<float[]>(64);
  f.m.comm().all_reduce(f.p_p.data(), out.get(), 64, sc::reduce_op::sum);
  benchmark::DoNotOptimize(out.get());
}
// The same three hand-written calls with their counts read from the tensor and the mesh at
// run time, as hand-written code for shapes known only at run time must (the counts above
// are compile-time constants, which the compiler folds into the allocation).
SHARDCAST_DISPATCH_CASE(raw_rt_all_gather) {
  const std::size_t piece = f.s0_r.local_size();
  auto out = std::make_shared_for_overwrite<float[]>(piece * static_cast<std::size_t>(f.m.shape()[0]));
  f.m.axis_comm(0).all_gather(f.s0_r.data(), out.get(), piece);
  benchmark::DoNotOptimize(out.get());
}
SHARDCAST_DISPATCH_CASE(raw_rt_reduce_scatter) {
  const std::size_t chunk = f.p_r.local_size() / static_cast<std::size_t>(f.m.shape()[0]);
  auto out = std::make_shared_for_overwrite<float[]>(chunk);
  f.m.axis_comm(0).reduce_scatter(f.p_r.data(), out.get(), chunk, sc::reduce_op::sum);
  benchmark::DoNotOptimize(out.get());
}
SHARDCAST_DISPATCH_CASE(raw_rt_all_reduce) {
  const std::size_t n = f.p_p.local_size();
  auto out = std::make_shared_for_overwrite<float[]>(n);
  f.m.comm().all_reduce(f.p_p.data(), out.get(), n, sc::reduce_op::sum);
  benchmark::DoNotOptimize(out.get());
}
// R,S(1) -> R,R: an all_gather along dim 1, which is not outermost, so every member's
// chunk is unpacked (a strided copy) into the output.
SHARDCAST_DISPATCH_CASE(static_gather_dim1) {
  auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(f.r_s1);
  benchmark::DoNotOptimize(y.data());
}
SHARDCAST_DISPATCH_CASE(raw_gather_dim1) {
  auto out = std::make_shared_for_overwrite<float[]>(64);
  f.m.axis_comm(1).all_gather(f.r_s1.data(), f.staging.get(), 32);
  for (int q = 0; q < 2; ++q)  // member q holds columns [4q, 4q+4) of every row
    for (int r = 0; r < 8; ++r) std::memcpy(out.get() + r * 8 + q * 4, f.staging.get() + q * 32 + r * 4, 4 * sizeof(float));
  benchmark::DoNotOptimize(out.get());
}
// S(0),R -> R,S(1): a 2-step plan, local_slice over axis 1 then all_gather over axis 0.
SHARDCAST_DISPATCH_CASE(static_two_step) {
  auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<1>>>(f.s0_r);
  benchmark::DoNotOptimize(y.data());
}
SHARDCAST_DISPATCH_CASE(raw_two_step) {
  // This rank holds rows 0..3; keep columns 0..3, then gather rows.
  for (int r = 0; r < 4; ++r) std::memcpy(f.staging.get() + r * 4, f.s0_r.data() + r * 8, 4 * sizeof(float));
  auto out = std::make_shared_for_overwrite<float[]>(32);
  f.m.axis_comm(0).all_gather(f.staging.get(), out.get(), 16);
  benchmark::DoNotOptimize(out.get());
}

// S(0),R -> R,R into an output made once: redistribute_into (plan lookup, checks, the
// call) against the raw call into the same buffer. Neither side allocates or builds a
// result handle.
SHARDCAST_DISPATCH_CASE(static_into_all_gather) {
  sc::redistribute_into(f.s0_r, f.r_r);
  benchmark::DoNotOptimize(f.r_r.data());
}
SHARDCAST_DISPATCH_CASE(raw_into_all_gather) {
  f.m.axis_comm(0).all_gather(f.s0_r.data(), f.r_r.data(), 32);
  benchmark::DoNotOptimize(f.r_r.data());
}

struct case_entry {
  const char* name;
  void (*once)(fixture&);
};
#define SHARDCAST_DISPATCH_ENTRY(name) case_entry{#name, name##_once}
const case_entry cases[] = {
    SHARDCAST_DISPATCH_ENTRY(static_all_gather),  SHARDCAST_DISPATCH_ENTRY(raw_all_gather),
    SHARDCAST_DISPATCH_ENTRY(static_reduce_scatter), SHARDCAST_DISPATCH_ENTRY(raw_reduce_scatter),
    SHARDCAST_DISPATCH_ENTRY(static_all_reduce),  SHARDCAST_DISPATCH_ENTRY(raw_all_reduce),
    SHARDCAST_DISPATCH_ENTRY(raw_rt_all_gather),  SHARDCAST_DISPATCH_ENTRY(raw_rt_reduce_scatter),
    SHARDCAST_DISPATCH_ENTRY(raw_rt_all_reduce),
    SHARDCAST_DISPATCH_ENTRY(static_gather_dim1), SHARDCAST_DISPATCH_ENTRY(raw_gather_dim1),
    SHARDCAST_DISPATCH_ENTRY(static_two_step),    SHARDCAST_DISPATCH_ENTRY(raw_two_step),
    SHARDCAST_DISPATCH_ENTRY(static_into_all_gather), SHARDCAST_DISPATCH_ENTRY(raw_into_all_gather),
};

void run_case(benchmark::State& st, void (*once)(fixture&)) {
  fixture f;
  for (auto _ : st) once(f);
  record(st);
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

// A rank-3 tensor on 4 axes: 5^4 = 625 layouts, searched in full at run time.
static void runtime_plan_4axis_rank3(benchmark::State& st) {
  const auto a = sc::runtime_layout::parse("S(0),S(1),P(sum),R"), b = sc::runtime_layout::parse("S(1),R,S(2),P(sum)");
  const std::array<int, 4> shape{2, 3, 2, 2};
  const std::array<std::int64_t, 3> ext3{24, 24, 24};
  for (auto _ : st) benchmark::DoNotOptimize(sc::make_plan(a, b, shape, ext3));
}

// Meshes whose axes differ in size, with uneven extents: the all-to-alls are counted rank by
// rank. A rank-4 tensor on 4 axes (6^4 = 1296 layouts) and a rank-2 tensor on 6 axes
// (4^6 = 4096 layouts, the largest space searched in full).
static void runtime_plan_4axis_rank4(benchmark::State& st) {
  const auto a = sc::runtime_layout::parse("S(0),S(1),P(sum),S(3)"), b = sc::runtime_layout::parse("S(3),S(2),S(0),P(sum)");
  const std::array<int, 4> shape{2, 3, 4, 2};
  const std::array<std::int64_t, 4> ext4{30, 20, 14, 9};
  for (auto _ : st) benchmark::DoNotOptimize(sc::make_plan(a, b, shape, ext4));
}
static void runtime_plan_6axis(benchmark::State& st) {
  const auto a = sc::runtime_layout::parse("S(0),S(1),P(sum),R,S(0),S(1)"), b = sc::runtime_layout::parse("S(1),R,S(0),P(sum),S(1),S(0)");
  const std::array<int, 6> shape{2, 3, 2, 4, 2, 3};
  const std::array<std::int64_t, 2> ext2{100, 90};
  for (auto _ : st) benchmark::DoNotOptimize(sc::make_plan(a, b, shape, ext2));
}

static std::map<std::string, double> g_cpu_ns;

/// Collects each run's real and CPU time per iteration so main() can print the ratios
/// (with --benchmark_repetitions, the medians).
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  ratio_reporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      g_ns[r.benchmark_name()] = r.GetAdjustedRealTime();
      g_cpu_ns[r.benchmark_name()] = r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

/// The median of a benchmark's repetitions when there are several, else its one run.
static double pick(const std::map<std::string, double>& m, const std::string& name) {
  auto it = m.find(name + "_median");
  if (it == m.end()) it = m.find(name);
  return it == m.end() ? 0.0 : it->second;
}

/// `--calls N`: runs every case N times (after one untimed call) and exits, for counting
/// instructions per call with callgrind (bench/dispatch/instructions.sh).
static int run_calls(long n) {
  fixture f;
  for (const auto& c : cases) {
    c.once(f);
    for (long i = 0; i < n; ++i) c.once(f);
  }
  std::printf("ran every case %ld times\n", n);
  return 0;
}

int main(int argc, char** argv) {
  // --threaded: start and join one thread first. While a process has only one thread,
  // libstdc++ changes shared_ptr reference counts without atomic instructions; a program
  // that runs ranks on threads (host::run) pays the atomic ones, on both sides of the ratio.
  bool threaded = false;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--threaded") {
      threaded = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  if (threaded) std::thread([] {}).join();
  if (argc == 3 && std::string(argv[1]) == "--calls") return run_calls(std::stol(argv[2]));
  for (const auto& c : cases) benchmark::RegisterBenchmark(c.name, run_case, c.once);
  benchmark::RegisterBenchmark("runtime_plan_2axis", runtime_plan_2axis);
  benchmark::RegisterBenchmark("runtime_plan_3axis", runtime_plan_3axis);
  benchmark::RegisterBenchmark("runtime_plan_4axis", runtime_plan_4axis);
  benchmark::RegisterBenchmark("runtime_plan_4axis_rank3", runtime_plan_4axis_rank3);
  benchmark::RegisterBenchmark("runtime_plan_4axis_rank4", runtime_plan_4axis_rank4);
  benchmark::RegisterBenchmark("runtime_plan_6axis", runtime_plan_6axis);
  benchmark::Initialize(&argc, argv);
  ratio_reporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf("\n%s\n", mesh_kind);
  std::printf("%s\n", threaded ? "reference counts: atomic (--threaded: the process has started a thread)"
                                  : "reference counts: plain (one thread; --threaded measures the atomic counts of a threaded program)");
  std::printf("static redistribute / hand-written raw calls (target <= 1.10 for the single-call cases;\n"
              "gather_dim1 (unpack), two_step (slice + all_gather) and into_all_gather (redistribute_into,\n"
              "no allocation on either side) are reported). raw: counts are constants; raw (rt): the\n"
              "single-call cases with counts read from the tensor at run time:\n");
  std::printf("  %-22s %27s %27s\n", "", "real time", "CPU time");
  auto line = [](const std::string& label, const std::string& sn, const std::string& rn) {
    const double s = pick(g_ns, sn), r = pick(g_ns, rn), sc = pick(g_cpu_ns, sn), rc = pick(g_cpu_ns, rn);
    if (r > 0 && rc > 0)
      std::printf("  %-22s %7.1f vs %7.1f ns  %5.2f  %7.1f vs %7.1f ns  %5.2f\n", label.c_str(), s, r, s / r, sc, rc, sc / rc);
  };
  for (const char* k : {"all_gather", "reduce_scatter", "all_reduce", "gather_dim1", "two_step", "into_all_gather"})
    line(k, std::string("static_") + k, std::string("raw_") + k);
  for (const char* k : {"all_gather", "reduce_scatter", "all_reduce"})
    line(std::string(k) + " vs raw (rt)", std::string("static_") + k, std::string("raw_rt_") + k);
  benchmark::Shutdown();
}
