// Collective matmul on the host backend: time of the pipelined operators
// (all_gather_matmul, matmul_reduce_scatter) with several chunk counts against the
// sequential versions (chunks = 1 on the same worker, and redistribute + matmul), in one
// run. Every timed call is checked against the sequential result (exact: small integers
// in float), so a wrong pipeline cannot produce a figure.
//
//   bench_overlap [--ranks 2,4] [--iters 11] [--quick]
//
// One iteration times each mode once, modes interleaved so drift hits them alike; the
// time of a call is from a barrier before it to a barrier after it, on rank 0. Printed:
// the median over iterations, and "speedup" = median(chunks = 1) / median(this mode).
// "only the all_gather" / "only the reduce_scatter" / "only the GEMM" time the two parts
// alone ("only the GEMM, 8 pieces": the same GEMM cut as chunks=8 cuts it, no communication); "bound" is (collective + GEMM) / max(collective, GEMM), the speedup a perfect
// overlap would give if neither part slowed the other down.
#include <algorithm>
#include <atomic>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <shardcast/ops/overlap.hpp>
#include <string>
#include <thread>
#include <vector>

namespace sc = shardcast;

namespace {
using clk = std::chrono::steady_clock;

struct shape {
  std::int64_t t, k, o;  // X [t,k], W [k,o]
  const char* what;
};

std::vector<float> ints(std::int64_t n, int salt) {
  std::vector<float> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<float>((i * 5 + salt) % 5 - 2);
  return g;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class D>
std::vector<float> local(const D& d) {
  return std::vector<float>(d.data(), d.data() + d.local_size());
}

std::atomic<bool> g_ok{true};

// Every mode multiplies through this one out-of-line host GEMM, so all of them run the same
// machine code: how the compiler inlines host_gemm into each caller would otherwise show
// up as a difference between modes.
struct bench_gemm {
  [[gnu::noinline]] void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, const float* b,
                                    std::int64_t ldb, float* c, std::int64_t ldc) const {
    sc::host_gemm{}(m, n, k, a, lda, b, ldb, c, ldc);
  }
};

// The GEMM work of the pipeline with `chunks` pieces per member, without communication:
// rows [m] split over `members`, each block cut into `chunks` pieces, one call per piece.
void gemm_in_pieces(const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n, int members, int chunks) {
  std::vector<float> c(static_cast<std::size_t>(std::max<std::int64_t>(m * n, 1)));
  for (int q = 0; q < members; ++q) {
    const std::int64_t rq = sc::split_size(m, members, q), oq = sc::split_offset(m, members, q);
    for (int i = 0; i < chunks; ++i) {
      const std::int64_t r = sc::split_size(rq, chunks, i), o = oq + sc::split_offset(rq, chunks, i);
      if (r > 0 && n > 0) bench_gemm{}(r, n, k, a + o * k, k, b, n, c.data() + o * n, n);
    }
  }
}

// A timed call: runs the operator and returns how to fetch its local result (not timed);
// an empty fetch marks a part timed on its own (only the collective, only the GEMM).
using fetch = std::function<std::vector<float>()>;
using call = std::function<fetch()>;

// Runs the modes `setup` makes (names and calls) on `ranks` ranks; mode 1 is chunks = 1.
void run_modes(int ranks, int iters, const char* op, const shape& s,
               const std::function<void(sc::host::communicator&, int, std::vector<std::string>&,
                                        std::vector<call>&)>& setup) {
  std::vector<std::string> names;
  std::vector<std::vector<double>> times;
  sc::host::run(ranks, [&](sc::host::communicator& comm) {
    std::vector<std::string> my_names;
    std::vector<call> calls;
    setup(comm, ranks, my_names, calls);
    const std::size_t m = calls.size();
    std::vector<std::vector<double>> t(m);
    std::vector<float> reference;
    bool ok = true;
    for (int it = -2; it < iters; ++it) {  // two warm-up iterations
      for (std::size_t i = 0; i < m; ++i) {
        comm.barrier();
        const auto t0 = clk::now();
        fetch f = calls[i]();
        comm.barrier();
        const double ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
        if (it >= 0) t[i].push_back(ms);
        if (!f) continue;
        const std::vector<float> r = f();
        if (i == 0 && it == -2) reference = r;
        else if (r != reference) ok = false;
      }
    }
    if (comm.rank() == 0) {
      names = my_names;
      times = t;
    }
    if (!ok) {
      std::fprintf(stderr, "rank %d: %s result differs between modes\n", comm.rank(), op);
      g_ok = false;
    }
  });
  const double seq = median(times[1]);
  double comm_ms = 0, gemm_ms = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double med = median(times[i]);
    const bool part = names[i].rfind("only ", 0) == 0;
    if (names[i] == "only the GEMM") gemm_ms = med;
    else if (part && names[i].find("GEMM") == std::string::npos) comm_ms = med;
    char speed[32];
    std::snprintf(speed, sizeof speed, part ? "-" : "%.2f", seq / med);
    std::printf("%-22s %5d %6lld %6lld %6lld  %-13s %-24s %10.3f %8s\n", op, ranks, static_cast<long long>(s.t),
                static_cast<long long>(s.k), static_cast<long long>(s.o), s.what, names[i].c_str(), med, speed);
  }
  // With perfect overlap the pipeline takes max(collective, GEMM) instead of their sum.
  std::printf("%-22s %5d %6lld %6lld %6lld  %-13s %-24s %10.3f %8.2f\n", op, ranks, static_cast<long long>(s.t),
              static_cast<long long>(s.k), static_cast<long long>(s.o), s.what, "bound: max(parts)", std::max(comm_ms, gemm_ms),
              (comm_ms + gemm_ms) / std::max(comm_ms, gemm_ms));
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ranks{2, 4};
  int iters = 11;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) {
      ranks.clear();
      for (const char* p = argv[++i]; *p;) {
        ranks.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--ranks 2,4] [--iters 11] [--quick]\n", argv[0]);
      return 2;
    }
  }
  // all_gather_matmul: gather t*k floats per call, GEMM 2*t*k*o/P flops per rank.
  const std::vector<shape> ag = quick ? std::vector<shape>{{64, 32, 16, "smoke"}}
                                      : std::vector<shape>{{512, 512, 512, "compute"}, {2048, 1024, 64, "balanced"}, {4096, 1024, 8, "comm"}};
  // matmul_reduce_scatter: reduce-scatter t*o floats per call, GEMM 2*t*k*o/P flops per rank.
  const std::vector<shape> rs = quick ? std::vector<shape>{{64, 32, 16, "smoke"}}
                                      : std::vector<shape>{{512, 512, 512, "compute"}, {2048, 64, 1024, "balanced"}, {4096, 8, 1024, "comm"}};
  std::printf("# bench_overlap: host backend, float, %u hardware threads, median of %d iterations (ms)\n",
              std::thread::hardware_concurrency(), iters);
  // Other processes on the machine shift every figure; the load average says how busy it was.
  if (std::ifstream la("/proc/loadavg"); la) {
    std::string l1, l5, l15;
    la >> l1 >> l5 >> l15;
    std::printf("# load average at start (1, 5, 15 min): %s %s %s\n", l1.c_str(), l5.c_str(), l15.c_str());
  }
  std::printf("# speedup = median(chunks=1) / median(mode); > 1 means faster than the sequential pipeline\n");
  std::printf("%-22s %5s %6s %6s %6s  %-13s %-24s %10s %8s\n", "op", "ranks", "t", "k", "o", "shape", "mode", "median_ms", "speedup");
  for (int p : ranks) {
    const std::array<int, 1> mesh_shape{p};
    for (const shape& s : ag) {
      const auto xg = ints(s.t * s.k, 1), wg = ints(s.k * s.o, 2);
      run_modes(p, iters, "all_gather_matmul", s, [&](sc::host::communicator& comm, int, auto& names, auto& calls) {
        auto mesh = sc::make_mesh(comm, mesh_shape);
        auto ctx = std::make_shared<sc::overlap_context<sc::mesh<1>>>(mesh);
        auto x = sc::distribute<sc::layout<sc::shard<0>>>(mesh, xg, std::array<std::int64_t, 2>{s.t, s.k});
        auto w = sc::distribute<sc::layout<sc::shard<1>>>(mesh, wg, std::array<std::int64_t, 2>{s.k, s.o});
        names.push_back("redistribute+matmul");
        calls.push_back([=]() -> fetch {
          auto y = sc::matmul(sc::redistribute<sc::layout<sc::replicate>>(x), w, bench_gemm{});
          return [y] { return local(y); };
        });
        for (int c : {1, 2, 4, 8}) {
          names.push_back("chunks=" + std::to_string(c));
          calls.push_back([=]() -> fetch {
            auto y = sc::all_gather_matmul<0>(*ctx, x, w, c, bench_gemm{});
            return [y] { return local(y); };
          });
        }
        names.push_back("only the all_gather");
        calls.push_back([=]() -> fetch {
          (void)sc::redistribute<sc::layout<sc::replicate>>(x);
          return {};
        });
        auto xr = sc::redistribute<sc::layout<sc::replicate>>(x);
        names.push_back("only the GEMM");
        calls.push_back([=]() -> fetch {
          (void)sc::matmul(xr, w, bench_gemm{});
          return {};
        });
        names.push_back("only the GEMM, 8 pieces");
        calls.push_back([=]() -> fetch {
          gemm_in_pieces(xr.data(), w.data(), s.t, s.k, w.local_extents()[1], p, 8);
          return {};
        });
      });
    }
    for (const shape& s : rs) {
      const auto xg = ints(s.t * s.k, 3), wg = ints(s.k * s.o, 4);
      run_modes(p, iters, "matmul_reduce_scatter", s, [&](sc::host::communicator& comm, int, auto& names, auto& calls) {
        auto mesh = sc::make_mesh(comm, mesh_shape);
        auto ctx = std::make_shared<sc::overlap_context<sc::mesh<1>>>(mesh);
        auto x = sc::distribute<sc::layout<sc::shard<1>>>(mesh, xg, std::array<std::int64_t, 2>{s.t, s.k});
        auto w = sc::distribute<sc::layout<sc::shard<0>>>(mesh, wg, std::array<std::int64_t, 2>{s.k, s.o});
        names.push_back("matmul+redistribute");
        calls.push_back([=]() -> fetch {
          auto z = sc::redistribute<sc::layout<sc::shard<0>>>(sc::matmul(x, w, bench_gemm{}));
          return [z] { return local(z); };
        });
        for (int c : {1, 2, 4, 8}) {
          names.push_back("chunks=" + std::to_string(c));
          calls.push_back([=]() -> fetch {
            auto z = sc::matmul_reduce_scatter<0>(*ctx, x, w, c, bench_gemm{});
            return [z] { return local(z); };
          });
        }
        names.push_back("only the GEMM");
        calls.push_back([=]() -> fetch {
          (void)sc::matmul(x, w, bench_gemm{});
          return {};
        });
        names.push_back("only the GEMM, 8 pieces");
        calls.push_back([=]() -> fetch {
          gemm_in_pieces(x.data(), w.data(), s.t, x.local_extents()[1], s.o, p, 8);
          return {};
        });
        auto xw = sc::matmul(x, w, bench_gemm{});
        names.push_back("only the reduce_scatter");
        calls.push_back([=]() -> fetch {
          (void)sc::redistribute<sc::layout<sc::shard<0>>>(xw);
          return {};
        });
      });
    }
  }
  if (!g_ok) {
    std::fprintf(stderr, "bench_overlap: FAILED: a pipelined result differs from the sequential one\n");
    return 1;
  }
  return 0;
}
