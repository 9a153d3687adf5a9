/// @file bench/tool/transition.cpp
/// `shardcast-bench redistribute`: times a whole redistribute between two runtime
/// layouts on the host backend and prints the planner's predicted bytes per rank beside
/// the bytes the collectives really sent (counted by a forwarding communicator).
///
///   shardcast-bench redistribute --from "S(0),R" --to "R,S(1)" --mesh 2x2 --extents 4096x4096 -n 5 -w 1 -c 1

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <shardcast/comm/counting.hpp>
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/explain.hpp>
#include <shardcast/mesh.hpp>
#include <shardcast/plan.hpp>
#include <shardcast/redistribute.hpp>

namespace sc = shardcast;

namespace shardcast::bench {

using shardcast::counting_communicator;

namespace {

struct transition_options {
  std::string from, to;
  std::vector<int> mesh;
  std::vector<std::int64_t> extents;
  int iters = 5, warmup = 1, check = 1;
  std::string json;
};

template <class V>
bool parse_dims(const std::string& s, std::vector<V>& out) {
  out.clear();
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t j = s.find('x', i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    if (part.empty()) return false;
    std::size_t pos = 0;
    const long long v = std::stoll(part, &pos);
    if (pos != part.size() || v < 0) return false;
    out.push_back(static_cast<V>(v));
    i = j + 1;
  }
  return !out.empty();
}

/// "2x2x4": the inverse of parse_dims.
template <class V>
std::string joined(const std::vector<V>& dims) {
  std::string s;
  for (const V& v : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

/// Small integers, so partial sums stay exact.
inline float global_value(std::size_t i) { return static_cast<float>(1 + (i * 7) % 13); }

template <int N, int R>
int run(const transition_options& o) {
  std::array<int, N> shape{};
  std::array<std::int64_t, R> ext{};
  int nranks = 1;
  for (int a = 0; a < N; ++a) nranks *= shape[static_cast<std::size_t>(a)] = o.mesh[static_cast<std::size_t>(a)];
  std::size_t total = 1;
  for (int d = 0; d < R; ++d) total *= static_cast<std::size_t>(ext[static_cast<std::size_t>(d)] = o.extents[static_cast<std::size_t>(d)]);
  const runtime_layout src = runtime_layout::parse(o.from), dst = runtime_layout::parse(o.to);
  const plan p = make_plan(src, dst, shape, ext);
  std::printf("# shardcast-bench redistribute: mesh %s, extents %s, float, %d ranks (host backend), %d iters, %d warmup\n",
              joined(o.mesh).c_str(), joined(o.extents).c_str(),
              nranks, o.iters, o.warmup);
  const std::string ex = explain(p, shape, ext, sizeof(float));
  std::size_t b = 0;
  while (b < ex.size()) {  // the plan, as comment lines
    std::size_t e = ex.find('\n', b);
    if (e == std::string::npos) e = ex.size();
    std::printf("# %s\n", ex.substr(b, e - b).c_str());
    b = e + 1;
  }
  std::vector<float> global(total);
  for (std::size_t i = 0; i < total; ++i) global[i] = global_value(i);
  const double predicted = p.elements * sizeof(float);
  std::vector<double> measured(static_cast<std::size_t>(nranks), 0);
  double secs = 0;
  std::atomic<long long> wrong{0};
  host::run(nranks, [&](host::communicator& hc) {
    counting_communicator<host::communicator> cc(hc);
    auto m = make_mesh(cc, shape);
    auto x = distribute(m, src, global, ext);
    for (int i = 0; i < o.warmup; ++i) (void)redistribute(x, dst);
    m.comm().barrier();
    m.comm().reset();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) (void)redistribute(x, dst);
    m.comm().barrier();
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    measured[static_cast<std::size_t>(hc.rank())] = m.comm().bytes() / o.iters;
    double slowest = 0;
    hc.all_reduce(&el, &slowest, 1, reduce_op::max);
    if (hc.rank() == 0) secs = slowest / o.iters;
    if (o.check) {
      auto y = redistribute(x, dst);
      const std::vector<float> g = to_global(y);
      long long w = 0;
      for (std::size_t i = 0; i < total; ++i)
        if (g.size() != total || g[i] != global[i]) ++w;
      wrong += w;
    }
  });
  double busiest = 0;
  for (double v : measured) busiest = std::max(busiest, v);
  const double bytes = static_cast<double>(total * sizeof(float));
  std::printf("#%12s %10s %10s %14s %14s %8s %6s\n", "size(B)", "time(us)", "algbw", "predicted(B)", "measured(B)", "meas/pred", "#wrong");
  std::printf(" %12.0f %10.2f %10.3f %14.0f %14.0f %8.3f %6lld\n", bytes, secs * 1e6, bytes / secs / 1e9, predicted, busiest,
              predicted > 0 ? busiest / predicted : (busiest == 0 ? 1.0 : 0.0), wrong.load());
  std::printf("# measured bytes per rank:");
  for (double v : measured) std::printf(" %.0f", v);
  std::printf("\n# algbw = global tensor bytes / time; predicted/measured: bytes sent by the busiest rank per redistribute\n");
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << "{\"tool\": \"shardcast-bench\", \"mode\": \"redistribute\", \"from\": \"" << o.from << "\", \"to\": \"" << o.to
      << "\", \"ranks\": " << nranks << ", \"size\": " << bytes << ", \"time_us\": " << secs * 1e6
      << ", \"predicted_bytes\": " << predicted << ", \"measured_bytes\": " << busiest << ", \"wrong\": " << wrong.load() << "}\n";
  }
  if (wrong.load()) {
    std::fprintf(stderr, "shardcast-bench: %lld wrong elements after redistribute\n", wrong.load());
    return 1;
  }
  return 0;
}

template <int N>
int run_rank(const transition_options& o) {
  switch (o.extents.size()) {
    case 1: return run<N, 1>(o);
    case 2: return run<N, 2>(o);
    case 3: return run<N, 3>(o);
  }
  std::fprintf(stderr, "shardcast-bench: --extents takes 1 to 3 dims (e.g. 4096x4096)\n");
  return 2;
}

}  // namespace

int run_transition(int argc, char** argv) {
  transition_options o;
  try {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument("option " + a + " needs a value");
        return argv[++i];
      };
      if (a == "--from") o.from = val();
      else if (a == "--to") o.to = val();
      else if (a == "--mesh") {
        if (!parse_dims(val(), o.mesh)) throw std::invalid_argument("--mesh takes sizes like 2x2");
      } else if (a == "--extents") {
        if (!parse_dims(val(), o.extents)) throw std::invalid_argument("--extents takes sizes like 4096x4096");
      } else if (a == "-n" || a == "--iters") o.iters = std::stoi(val());
      else if (a == "-w" || a == "--warmup_iters") o.warmup = std::stoi(val());
      else if (a == "-c" || a == "--check") o.check = std::stoi(val());
      else if (a == "--backend") {
        const std::string b = val();
        if (b != "host") throw std::invalid_argument("redistribute mode runs on the host backend only (backend " + b + " not built for it)");
      } else if (a == "--json") o.json = val();
      else throw std::invalid_argument("unknown option '" + a + "'");
    }
    if (o.from.empty() || o.to.empty() || o.mesh.empty() || o.extents.empty())
      throw std::invalid_argument("redistribute needs --from, --to, --mesh and --extents");
    if (o.iters < 1) throw std::invalid_argument("-n must be at least 1");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardcast-bench redistribute: %s\n", e.what());
    return 2;
  }
  try {
    switch (o.mesh.size()) {
      case 1: return run_rank<1>(o);
      case 2: return run_rank<2>(o);
      case 3: return run_rank<3>(o);
    }
    std::fprintf(stderr, "shardcast-bench redistribute: --mesh takes 1 to 3 axes (e.g. 2x2)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardcast-bench redistribute: %s\n", e.what());
    return 3;
  }
}

}  // namespace shardcast::bench
