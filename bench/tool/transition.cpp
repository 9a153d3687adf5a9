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

#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/explain.hpp>
#include <shardcast/mesh.hpp>
#include <shardcast/plan.hpp>
#include <shardcast/redistribute.hpp>

namespace sc = shardcast;

namespace shardcast::bench {

/// Forwards every call to an inner communicator and adds the elements this rank sends
/// to a counter shared with the communicators split from it. Sent elements per call,
/// for a group of n: all_gather (n-1)*count, reduce_scatter (n-1)*count, all_reduce
/// 2(n-1)/n*count, all_to_all (n-1)*count, all_to_allv the counts to other ranks,
/// broadcast count on the root, send count.
template <class Inner>
class counting_communicator {
 public:
  using memory_space = typename Inner::memory_space;
  using stream_type = typename Inner::stream_type;

  counting_communicator(Inner inner, std::shared_ptr<std::atomic<double>> bytes) : inner_(std::move(inner)), bytes_(std::move(bytes)) {}

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  double bytes() const { return bytes_->load(); }
  void reset() { bytes_->store(0); }

  template <class T>
  void all_reduce(const T* s, T* r, std::size_t c, reduce_op op, stream_type st = {}) {
    add<T>(2.0 * (size() - 1) / size() * static_cast<double>(c));
    inner_.all_reduce(s, r, c, op, st);
  }
  template <class T>
  void all_gather(const T* s, T* r, std::size_t c, stream_type st = {}) {
    add<T>(static_cast<double>(size() - 1) * static_cast<double>(c));
    inner_.all_gather(s, r, c, st);
  }
  template <class T>
  void reduce_scatter(const T* s, T* r, std::size_t c, reduce_op op, stream_type st = {}) {
    add<T>(static_cast<double>(size() - 1) * static_cast<double>(c));
    inner_.reduce_scatter(s, r, c, op, st);
  }
  template <class T>
  void all_to_all(const T* s, T* r, std::size_t c, stream_type st = {}) {
    add<T>(static_cast<double>(size() - 1) * static_cast<double>(c));
    inner_.all_to_all(s, r, c, st);
  }
  template <class T>
  void all_to_allv(const T* s, const std::size_t* sc_, const std::size_t* sd, T* r, const std::size_t* rc, const std::size_t* rd,
                   stream_type st = {}) {
    double e = 0;
    for (int q = 0; q < size(); ++q)
      if (q != rank()) e += static_cast<double>(sc_[q]);
    add<T>(e);
    inner_.all_to_allv(s, sc_, sd, r, rc, rd, st);
  }
  template <class T>
  void broadcast(T* b, std::size_t c, int root, stream_type st = {}) {
    if (rank() == root) add<T>(static_cast<double>(c));
    inner_.broadcast(b, c, root, st);
  }
  template <class T>
  void send(const T* b, std::size_t c, int peer, stream_type st = {}) {
    add<T>(static_cast<double>(c));
    inner_.send(b, c, peer, st);
  }
  template <class T>
  void recv(T* b, std::size_t c, int peer, stream_type st = {}) {
    inner_.recv(b, c, peer, st);
  }
  void barrier() { inner_.barrier(); }
  counting_communicator split(int color, int key) const { return counting_communicator(inner_.split(color, key), bytes_); }

 private:
  template <class T>
  void add(double elements) {
    bytes_->fetch_add(elements * sizeof(T));
  }
  Inner inner_;
  std::shared_ptr<std::atomic<double>> bytes_;
};

static_assert(communicator<counting_communicator<host::communicator>>);

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
              [&] { std::string s; for (int v : o.mesh) s += (s.empty() ? "" : "x") + std::to_string(v); return s; }().c_str(),
              [&] { std::string s; for (auto v : o.extents) s += (s.empty() ? "" : "x") + std::to_string(v); return s; }().c_str(),
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
    counting_communicator<host::communicator> cc(hc, std::make_shared<std::atomic<double>>(0.0));
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
