/// @file bench/tool/main.cpp
/// shardcast-bench: nccl-tests-style bandwidth sweeps of shardcast's collectives, with a
/// memcpy roofline measured in the same run and, for the host backend, a side-by-side
/// run of the same collective through MPI (--vs mpi).
///
///   shardcast-bench all_reduce --backend host --ranks 4 -b 1M -e 64M -f 2 -n 20 -w 5 -c 1

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <shardcast/comm/host.hpp>

#include "common.hpp"

#if defined(SHARDCAST_BENCH_WITH_DEVICE)
#include "device.hpp"
#endif

#if defined(SHARDCAST_BENCH_WITH_MPI) && __has_include(<shardcast/comm/mpi.hpp>)
#include <mpi.h>
#include <shardcast/comm/mpi.hpp>
#define SHARDCAST_BENCH_MPI_BACKEND 1
#endif

namespace sc = shardcast;
namespace bn = shardcast::bench;

namespace shardcast::bench {
/// Transition mode (transition.cpp): `shardcast-bench redistribute --from L --to L2 --mesh AxB --extents MxN`.
int run_transition(int argc, char** argv);
}  // namespace shardcast::bench

namespace {

using clk = std::chrono::steady_clock;

/// One line of the table.
struct row {
  bn::counts k{};
  double time_us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = 0;
  double cpy1 = 0;   // single-thread memcpy of `size` bytes, GB/s
  double cpyN = 0;   // memcpy of `size` bytes on every rank at once, GB/s per rank
  double mpi_us = 0; // --vs mpi: the same collective through MPI
  std::int64_t mpi_wrong = 0;
};

/// Allocation touched page by page, so first-touch faults stay out of the timings.
template <class T>
std::unique_ptr<T[]> make_buffer(std::size_t n) {
  std::unique_ptr<T[]> p(new T[n ? n : 1]);
  std::memset(static_cast<void*>(p.get()), 0, (n ? n : 1) * sizeof(T));
  return p;
}

/// Tells the compiler that the memory at `p` is read here, so that copies into a buffer
/// nobody reads are not removed as dead stores (GCC does remove them at -O3 when the
/// buffer is freed without being read, which made cpy1 absurdly high).
inline void keep(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

/// Repetitions for a memcpy measurement: at least `iters`, and enough to copy 64 MiB,
/// so small sizes are not lost in the clock's resolution.
int memcpy_reps(std::size_t bytes, int iters) {
  const std::size_t enough = (std::size_t{64} << 20) / (bytes ? bytes : 1);
  return static_cast<int>(std::min<std::size_t>(100000, std::max<std::size_t>(static_cast<std::size_t>(std::max(3, iters)), enough)));
}

/// Single-thread memcpy bandwidth for `bytes` bytes, GB/s.
double memcpy_bandwidth(std::size_t bytes, int iters) {
  if (bytes == 0) return 0;
  auto src = make_buffer<unsigned char>(bytes), dst = make_buffer<unsigned char>(bytes);
  std::memset(src.get(), 1, bytes);
  std::memcpy(dst.get(), src.get(), bytes);
  const int reps = memcpy_reps(bytes, iters);
  const auto t0 = clk::now();
  for (int i = 0; i < reps; ++i) {
    std::memcpy(dst.get(), src.get(), bytes);
    keep(dst.get());
    src[static_cast<std::size_t>(i) % bytes] ^= 1;  // keep the copies from being merged
  }
  const double s = std::chrono::duration<double>(clk::now() - t0).count() / reps;
  return static_cast<double>(bytes) / s / 1e9;
}

/// Runs one size on one rank of any host-memory communicator. Every rank calls it; the
/// returned row is meaningful on rank 0 (times are the slowest rank's, #wrong the sum).
template <class T, class Comm>
row run_size(Comm& comm, const bn::options& o, std::size_t bytes) {
  const int n = comm.size(), me = comm.rank();
  row r;
  r.k = bn::counts_for(o.op_kind, bytes, sizeof(T), n);
  const auto& k = r.k;
  // In place (--inplace): one buffer, which send and recv point into (bn::in_place).
  const bool ip = o.inplace && o.op_kind != bn::coll::broadcast;
  const bn::placement_of_buffers pl = bn::in_place(o.op_kind, k, me);
  auto send_buf = make_buffer<T>(ip ? pl.size : k.send);
  auto recv_buf = make_buffer<T>(ip ? 0 : k.recv);
  T* const send = send_buf.get() + (ip ? pl.send_off : 0);
  T* const recv = ip ? send_buf.get() + pl.recv_off : recv_buf.get();
  bn::fill_input(send, k.send, me, o.op);
  auto once = [&] {
    switch (o.op_kind) {
      case bn::coll::all_reduce: comm.all_reduce(send, recv, k.arg, o.op); break;
      case bn::coll::all_gather: comm.all_gather(send, recv, k.arg); break;
      case bn::coll::reduce_scatter: comm.reduce_scatter(send, recv, k.arg, o.op); break;
      case bn::coll::all_to_all: comm.all_to_all(send, recv, k.arg); break;
      case bn::coll::broadcast: comm.broadcast(recv, k.arg, o.root); break;
      case bn::coll::sendrecv: bn::ring_sendrecv(comm, send, recv, k.arg); break;
    }
  };
  if (o.op_kind == bn::coll::broadcast) bn::fill_input(recv, k.recv, me, o.op);
  bn::warm_up(o, once, [&](double ms) {
    double most = 0;
    comm.all_reduce(&ms, &most, 1, sc::reduce_op::max);
    return most;
  });
  std::vector<double> batch;  // per batch, the slowest rank's time
  for (int b = 0; b < o.batches; ++b) {
    comm.barrier();
    const auto t0 = clk::now();
    for (int i = 0; i < o.iters; ++i) once();
    comm.barrier();
    double elapsed = std::chrono::duration<double>(clk::now() - t0).count();
    double slowest = 0;
    comm.all_reduce(&elapsed, &slowest, 1, sc::reduce_op::max);
    batch.push_back(slowest);
  }
  r.time_us = bn::median(batch) / o.iters * 1e6;

  if (o.check) {
    // Fresh inputs (broadcast, and in-place calls, overwrote them), one more call, then compare.
    if (ip) std::memset(static_cast<void*>(send_buf.get()), 0, pl.size * sizeof(T));  // all_gather: the chunks others write
    bn::fill_input(send, k.send, me, o.op);
    if (o.op_kind == bn::coll::broadcast) bn::fill_input(recv, k.recv, me, o.op);
    else if (!ip) std::memset(static_cast<void*>(recv), 0, k.recv * sizeof(T));
    once();
    std::int64_t w = bn::count_wrong<T>(o.op_kind, o.op, n, o.root, me, k, recv);
    comm.all_reduce(&w, &r.wrong, 1, sc::reduce_op::sum);
  }

  if (o.roofline && k.bytes) {
    // Every rank copies `size` bytes at once: what the memory system gives each rank.
    auto src = make_buffer<unsigned char>(k.bytes), dst = make_buffer<unsigned char>(k.bytes);
    std::memset(src.get(), 1, k.bytes);
    std::memcpy(dst.get(), src.get(), k.bytes);
    const int reps = memcpy_reps(k.bytes, o.iters);
    comm.barrier();
    const auto c0 = clk::now();
    for (int i = 0; i < reps; ++i) {
      std::memcpy(dst.get(), src.get(), k.bytes);
      keep(dst.get());
      src[static_cast<std::size_t>(i) % k.bytes] ^= 1;
    }
    comm.barrier();
    double ce = std::chrono::duration<double>(clk::now() - c0).count(), cmax = 0;
    comm.all_reduce(&ce, &cmax, 1, sc::reduce_op::max);
    r.cpyN = static_cast<double>(k.bytes) * reps / cmax / 1e9;
  }
  const double secs = r.time_us * 1e-6;
  r.algbw = secs > 0 ? static_cast<double>(k.bytes) / secs / 1e9 : 0;
  r.busbw = r.algbw * bn::busbw_factor(o.op_kind, n);
  return r;
}

void print_header(const bn::options& o, int nranks) {
  std::printf("# shardcast-bench %s: backend %s, %d ranks, %d iters, %d warmup (%s), check %d\n", bn::to_string(o.op_kind),
              o.backend.c_str(), nranks, o.iters, o.warmup, bn::warmup_floor_text(o).c_str(), o.check);
  if (o.batches > 1) std::printf("# time: the median of %d batches of %d calls (the slowest rank's, per batch)\n", o.batches, o.iters);
  if (o.inplace) std::printf("# in place: recv == send (all_reduce), send == recv + rank * count (all_gather), recv == send + rank * count (reduce_scatter)\n");
  if (o.backend == "host")
    std::printf("# host: collectives of at most %zu bytes per rank are eager (%s); larger ones read peers' buffers\n",
                sc::host::detail::eager_limit(nranks),
                sc::detail::ranks_outnumber_cpus(nranks) ? "SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES: more ranks than CPUs"
                                                          : "SHARDCAST_HOST_EAGER_BYTES");
  std::printf("# cpy1: single-thread memcpy of size bytes; cpyN: per-rank memcpy with all ranks copying at once;\n"
              "# frac1 = busbw/cpy1, fracN = busbw/cpyN%s\n",
              o.vs.empty() ? "" : "; mpi(us): same collective through MPI; ratio = mpi time / our time (>1: we are faster)");
  std::printf("#\n#%12s %12s %8s %6s %6s %10s %8s %8s %6s %8s %8s %6s %6s", "size", "count", "type", "redop", "root", "time",
              "algbw", "busbw", "#wrong", "cpy1", "cpyN", "frac1", "fracN");
  if (!o.vs.empty()) std::printf(" %10s %6s", "mpi", "ratio");
  std::printf("\n#%12s %12s %8s %6s %6s %10s %8s %8s %6s %8s %8s %6s %6s", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "", "(GB/s)", "(GB/s)", "", "");
  if (!o.vs.empty()) std::printf(" %10s %6s", "(us)", "");
  std::printf("\n");
}

void print_row(const bn::options& o, const row& r) {
  const char* redop = bn::has_op(o.op_kind) ? sc::to_string(o.op) : "none";
  const int root = o.op_kind == bn::coll::broadcast ? o.root : -1;
  std::printf(" %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %6lld %8.3f %8.3f %6.3f %6.3f", r.k.bytes, r.k.total,
              sc::to_string(o.type), redop, root, r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong), r.cpy1, r.cpyN,
              r.cpy1 > 0 ? r.busbw / r.cpy1 : 0.0, r.cpyN > 0 ? r.busbw / r.cpyN : 0.0);
  if (!o.vs.empty()) {
    if (r.mpi_us > 0) std::printf(" %10.2f %6.2f", r.mpi_us, r.mpi_us / r.time_us);
    else std::printf(" %10s %6s", "n/a", "n/a");
  }
  std::printf("\n");
  std::fflush(stdout);
}

bool write_json(const bn::options& o, int nranks, const std::vector<row>& rows, double avg_busbw) {
  std::string s = "{\n  \"tool\": \"shardcast-bench\",\n  \"collective\": \"";
  s += bn::to_string(o.op_kind);
  s += "\",\n  \"backend\": \"";
  bn::json_escape_into(s, o.backend);
  s += "\",\n  \"ranks\": " + std::to_string(nranks) + ",\n  \"dtype\": \"" + sc::to_string(o.type) + "\",\n  \"op\": \"" +
       (bn::has_op(o.op_kind) ? sc::to_string(o.op) : "none") + "\",\n  \"iters\": " + std::to_string(o.iters) +
       ",\n  \"warmup\": " + std::to_string(o.warmup) + ",\n  \"warmup_ms\": " + std::to_string(bn::warmup_floor_ms(o)) + ",\n  \"batches\": " + std::to_string(o.batches) + ",\n  \"inplace\": " + (o.inplace ? "true" : "false") + ",\n  \"avg_busbw_gbs\": " + std::to_string(avg_busbw) + ",\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"size\": %zu, \"count\": %zu, \"time_us\": %.4f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, "
                  "\"wrong\": %lld, \"memcpy1_gbs\": %.6f, \"memcpyN_gbs\": %.6f, \"mpi_time_us\": %.4f, \"mpi_wrong\": %lld}",
                  i ? "," : "", r.k.bytes, r.k.total, r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong), r.cpy1, r.cpyN,
                  r.mpi_us, static_cast<long long>(r.mpi_wrong));
    s += buf;
  }
  s += "\n  ]\n}\n";
  std::ofstream f(o.json);
  f << s;
  return static_cast<bool>(f);
}

/// Runs the same size through shardcast-bench-mpi under mpirun; returns its time in us
/// (0 when it could not run) and its #wrong.
double run_mpi_baseline(const bn::options& o, int nranks, std::size_t bytes, std::int64_t& wrong) {
#ifdef SHARDCAST_BENCH_MPIEXEC
  const std::string mpiexec = SHARDCAST_BENCH_MPIEXEC;
#else
  const std::string mpiexec = "mpirun";
#endif
  std::string bin = o.mpi_bin;
  if (bin.empty())
    if (const char* e = std::getenv("SHARDCAST_BENCH_MPI")) bin = e;
#ifdef SHARDCAST_BENCH_MPI_PROGRAM
  if (bin.empty()) bin = SHARDCAST_BENCH_MPI_PROGRAM;
#endif
  if (bin.empty()) return 0;
  std::string cmd = mpiexec + " --allow-run-as-root --oversubscribe -np " + std::to_string(nranks) + " '" + bin + "' " +
                    bn::to_string(o.op_kind) + " -b " + std::to_string(bytes) + " -e " + std::to_string(bytes) + " -n " +
                    std::to_string(o.iters) + " -w " + std::to_string(o.warmup) + " --warmup-ms " + std::to_string(o.warmup_ms) + " --batches " + std::to_string(o.batches) + (o.inplace ? " --inplace" : "") + " -c " + std::to_string(o.check) + " -d " +
                    sc::to_string(o.type) + " -o " + sc::to_string(o.op) + " -r " + std::to_string(o.root) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 0;
  char line[1024];
  double t = 0;
  std::string all;
  while (std::fgets(line, sizeof line, p)) {
    all += line;
    if (line[0] == '#' || t > 0) continue;
    unsigned long long sz = 0, cnt = 0;
    char type[32], redop[32];
    int root = 0;
    double time = 0, a = 0, b = 0;
    long long w = 0;
    if (std::sscanf(line, "%llu %llu %31s %31s %d %lf %lf %lf %lld", &sz, &cnt, type, redop, &root, &time, &a, &b, &w) == 9) {
      t = time;
      wrong = w;
    }
  }
  const int rc = pclose(p);
  if (rc != 0 || t <= 0) {
    std::fprintf(stderr, "shardcast-bench: the MPI baseline failed (%s):\n%s\n", cmd.c_str(), all.c_str());
    return 0;
  }
  return t;
}

/// Prints the closing lines; returns the tool's exit status (non-zero on any #wrong).
int finish(const bn::options& o, int nranks, const std::vector<row>& rows) {
  double sum = 0;
  std::int64_t wrong = 0;
  for (const row& r : rows) {
    sum += r.busbw;
    wrong += r.wrong + r.mpi_wrong;
  }
  const double avg = rows.empty() ? 0 : sum / static_cast<double>(rows.size());
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong), wrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g\n#\n", avg);
  if (!o.json.empty() && !write_json(o, nranks, rows, avg)) {
    std::fprintf(stderr, "shardcast-bench: cannot write %s\n", o.json.c_str());
    return 2;
  }
  if (wrong) {
    std::fprintf(stderr, "shardcast-bench: %lld wrong elements\n", static_cast<long long>(wrong));
    return 1;
  }
  return 0;
}

int run_host(const bn::options& o) {
  if (const std::string why = bn::rank_problem(o.op_kind, o.root, o.ranks); !why.empty()) {
    std::fprintf(stderr, "shardcast-bench: %s\n", why.c_str());
    return 2;
  }
  print_header(o, o.ranks);
  std::vector<row> rows;
  // One run for the whole sweep, as nccl-tests keeps its ranks: the same threads measure
  // every size. After each size rank 0 measures memcpy alone (and runs the MPI baseline)
  // while the others wait in a barrier, where they soon sleep. That wait may be as long
  // as an MPI run, hence the long timeout with --vs mpi.
  sc::host::options opt;
  if (o.vs == "mpi") opt.timeout = std::chrono::minutes(30);
  // When every rank has a CPU of its own, each size starts with the ranks on the CPUs
  // host::run started them on (rank 0 on this thread's): the others have waited, asleep,
  // while rank 0 measured memcpy or ran the MPI baseline, and a wake-up may put two of them
  // on one CPU, where the next size would measure two threads taking turns.
  const int cpu0 = sc::detail::current_cpu();
  const bool respread = o.ranks > 1 && !sc::detail::ranks_outnumber_cpus(o.ranks);
  bn::with_dtype(o.type, [&]<class T>() {
    sc::host::run(o.ranks, [&](sc::host::communicator& comm) {
      for (std::size_t bytes : bn::sweep(o)) {
        if (respread) sc::detail::spread_start(comm.rank(), cpu0);
        row r = run_size<T>(comm, o, bytes);
        if (comm.rank() == 0) {
          if (o.roofline) r.cpy1 = memcpy_bandwidth(r.k.bytes, o.iters);
          if (o.vs == "mpi") r.mpi_us = run_mpi_baseline(o, o.ranks, bytes, r.mpi_wrong);
          print_row(o, r);
          rows.push_back(r);
        }
        comm.barrier();
      }
    }, opt);
  });
  return finish(o, o.ranks, rows);
}

#ifdef SHARDCAST_BENCH_MPI_BACKEND
/// The MPI backend: ranks are the processes mpirun started (--ranks is ignored).
int run_mpi_backend(const bn::options& o) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  int status = 0;
  {
    sc::mpi::communicator comm(MPI_COMM_WORLD);
    if (const std::string why = bn::rank_problem(o.op_kind, o.root, comm.size()); !why.empty()) {
      if (comm.rank() == 0) std::fprintf(stderr, "shardcast-bench: %s\n", why.c_str());
      status = 2;
    } else {
      if (comm.rank() == 0) print_header(o, comm.size());
      std::vector<row> rows;
      for (std::size_t bytes : bn::sweep(o)) {
        row r;
        bn::with_dtype(o.type, [&]<class T>() { r = run_size<T>(comm, o, bytes); });
        if (comm.rank() == 0) {
          if (o.roofline) r.cpy1 = memcpy_bandwidth(r.k.bytes, o.iters);
          print_row(o, r);
        }
        rows.push_back(r);
      }
      if (comm.rank() == 0) status = finish(o, comm.size(), rows);
    }
    int s = status;
    MPI_Allreduce(&s, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return status;
}
#endif

#if defined(SHARDCAST_BENCH_WITH_DEVICE)
/// The device backends (device.cu): the same table, from device buffers timed with CUDA events.
int run_device_backend(const bn::options& o) {
  const int n = bn::device_ranks(o);
  if (n < 0) return 2;
  print_header(o, n);
  std::vector<row> rows;
  const int rc = bn::device_sweep(o, [&](const bn::device_row& d) {
    row r;
    r.k = d.k;
    r.time_us = d.time_us;
    r.wrong = d.wrong;
    r.cpy1 = d.cpy1;
    r.cpyN = d.cpyN;
    const double secs = r.time_us * 1e-6;
    r.algbw = secs > 0 ? static_cast<double>(r.k.bytes) / secs / 1e9 : 0;
    r.busbw = r.algbw * bn::busbw_factor(o.op_kind, n);
    print_row(o, r);
    rows.push_back(r);
  });
  return rc ? rc : finish(o, n, rows);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "redistribute") return bn::run_transition(argc, argv);
  bn::options o;
  if (!bn::parse_args(argc, argv, o, false)) return o.help ? 0 : 2;
  try {
    if (o.backend == "host") return run_host(o);
    if (!o.vs.empty()) {
      std::fprintf(stderr, "shardcast-bench: --vs mpi compares the host backend with MPI; use --backend host\n");
      return 2;
    }
    if (o.backend == "mpi") {
#ifdef SHARDCAST_BENCH_MPI_BACKEND
      return run_mpi_backend(o);
#else
      return bn::not_built("shardcast-bench", "mpi", "needs MPI at configure time (SHARDCAST_HAS_MPI) and shardcast/comm/mpi.hpp");
#endif
    }
    if ((o.backend == "nccl" || o.backend == "p2p") && o.inplace) {
      std::fprintf(stderr, "shardcast-bench: --inplace is for the host and mpi backends (the device backends run out of place)\n");
      return 2;
    }
#if defined(SHARDCAST_BENCH_WITH_DEVICE)
    if (o.backend == "nccl" || o.backend == "p2p") return run_device_backend(o);
#endif
    if (o.backend == "nccl") return bn::not_built("shardcast-bench", "nccl", "needs CUDA and NCCL at configure time and shardcast/comm/nccl.hpp");
    if (o.backend == "p2p") return bn::not_built("shardcast-bench", "p2p", "needs CUDA at configure time and shardcast/comm/p2p.hpp");
    std::fprintf(stderr, "shardcast-bench: unknown backend '%s' (host, mpi, nccl, p2p)\n", o.backend.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardcast-bench: %s\n", e.what());
    return 3;
  }
}
