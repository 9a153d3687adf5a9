/// @file bench/tool/transition.cpp
/// `shardcast-bench redistribute`: times a whole redistribute between two runtime
/// layouts and prints the planner's predicted bytes per rank beside the bytes the
/// collectives really sent (counted by a forwarding communicator). Backends: host (threads),
/// mpi (run under mpirun with as many processes as the mesh has ranks), and p2p / nccl
/// (device.cu, when CUDA was found).
///
///   shardcast-bench redistribute --from "S(0),R" --to "R,S(1)" --mesh 2x2 --extents 4096x4096 -n 5 -w 1 -c 1
///   mpirun -np 4 shardcast-bench redistribute --backend mpi --from "S(0)" --to "S(1)" --mesh 4 --extents 4096x4096

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <shardcast/comm/host.hpp>

#include "common.hpp"
#include "transition.hpp"

#if defined(SHARDCAST_BENCH_WITH_MPI) && __has_include(<shardcast/comm/mpi.hpp>)
#include <mpi.h>
#include <shardcast/comm/mpi.hpp>
#define SHARDCAST_BENCH_MPI_TRANSITION 1
#endif
#if defined(SHARDCAST_BENCH_WITH_DEVICE)
#include "device.hpp"
#endif

namespace shardcast::bench {

namespace {

/// "2x2x4" -> {2, 2, 4}; false unless every part is a whole number of at most 18 digits.
bool parse_dims(const std::string& s, std::vector<long long>& out) {
  out.clear();
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t j = s.find('x', i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 18) return false;
    out.push_back(std::stoll(part));
    i = j + 1;
  }
  return !out.empty();
}

void print_transition_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: shardcast-bench redistribute --from L --to L2 --mesh AxB --extents MxN [options]\n"
               "  --from L, --to L2     layouts, one placement per mesh axis: R, S(d), P(sum|avg|max|min|prod)\n"
               "                        e.g. --from \"S(0),R\" --to \"R,S(1)\"\n"
               "  --mesh AxB            mesh shape, 1 to 3 axes (e.g. 2x2)\n"
               "  --extents MxN         global extents of the float tensor, 1 to 3 dims\n"
               "  -n, --iters N         timed redistributes, default 20\n"
               "  -w, --warmup_iters N  untimed redistributes before them, default 5 (the first call, which also\n"
               "                        agrees on the conversion across the ranks, is never timed or counted)\n"
               "  --batches B           time B batches of -n calls, report the median, default 1\n"
               "  -c, --check 0|1       check one more result against the global tensor, default 1\n"
               "  --backend B           host (default); mpi (under mpirun), nccl, p2p when built\n"
               "  --json FILE           also write the row as JSON\n");
}

/// The host backend: the ranks are threads of this process.
template <int N, int R>
int run_host(const transition_options& o) {
  const transition_problem<N, R> pb(o);
  print_transition_header(o, pb, "host backend");
  std::vector<transition_measure> ranks(static_cast<std::size_t>(pb.nranks));
  host::run(pb.nranks, [&](host::communicator& hc) {
    ranks[static_cast<std::size_t>(hc.rank())] = measure_transition(hc, pb, o, host_stream{}, [] {});
  });
  return report_transition(o, pb, ranks);
}

#ifdef SHARDCAST_BENCH_MPI_TRANSITION
/// The MPI backend: the ranks are the processes mpirun started, as many as the mesh has.
/// Every process prints nothing but rank 0, which prints the row.
template <int N, int R>
int run_mpi(const transition_options& o) {
  const transition_problem<N, R> pb(o);  // before MPI_Init: a bad layout ends every process alike
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  int status = 0;
  mpi::run([&](mpi::communicator& comm) {
    if (comm.size() != pb.nranks) {
      if (comm.rank() == 0)
        std::fprintf(stderr, "shardcast-bench redistribute: mesh %s has %d ranks but %d MPI processes run; use mpirun -np %d\n",
                     joined(o.mesh).c_str(), pb.nranks, comm.size(), pb.nranks);
      status = 2;
      return;
    }
    if (comm.rank() == 0) print_transition_header(o, pb, "MPI processes");
    const transition_measure me = measure_transition(comm, pb, o, host_stream{}, [] {});
    const double mine[3] = {me.seconds, me.bytes, static_cast<double>(me.wrong)};
    std::vector<double> all(3 * static_cast<std::size_t>(comm.size()));
    comm.all_gather(mine, all.data(), 3);
    if (comm.rank() == 0) {
      std::vector<transition_measure> ranks(static_cast<std::size_t>(comm.size()));
      for (std::size_t q = 0; q < ranks.size(); ++q)
        ranks[q] = {all[3 * q], all[3 * q + 1], static_cast<long long>(all[3 * q + 2])};
      status = report_transition(o, pb, ranks);
    }
    comm.broadcast(&status, 1, 0);
  });
  MPI_Finalize();
  return status;
}
#endif

}  // namespace

int run_transition(int argc, char** argv) {
  transition_options o;
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      print_transition_usage(stdout);
      return 0;
    }
  try {
    std::vector<long long> dims;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument("option " + a + " needs a value");
        return argv[++i];
      };
      auto integer = [&] { return parse_int(a, val()); };
      if (a == "--from") o.from = val();
      else if (a == "--to") o.to = val();
      else if (a == "--mesh") {
        if (!parse_dims(val(), dims)) throw std::invalid_argument("--mesh takes sizes like 2x2");
        o.mesh.clear();
        for (long long v : dims) {  // (checked before it is narrowed to an int)
          if (v < 1 || v > 1 << 16) throw std::invalid_argument("--mesh: every axis needs 1 to 65536 ranks");
          o.mesh.push_back(static_cast<int>(v));
        }
      } else if (a == "--extents") {
        if (!parse_dims(val(), dims)) throw std::invalid_argument("--extents takes sizes like 4096x4096");
        o.extents.assign(dims.begin(), dims.end());
      } else if (a == "-n" || a == "--iters") o.iters = integer();
      else if (a == "-w" || a == "--warmup_iters") o.warmup = integer();
      else if (a == "--batches") o.batches = integer();
      else if (a == "-c" || a == "--check") {
        o.check = integer();
        if (o.check != 0 && o.check != 1) throw std::invalid_argument("-c takes 0 or 1");
      }
      else if (a == "--backend") o.backend = val();
      else if (a == "--json") o.json = val();
      else throw std::invalid_argument("unknown option '" + a + "'");
    }
    if (o.from.empty() || o.to.empty() || o.mesh.empty() || o.extents.empty())
      throw std::invalid_argument("redistribute needs --from, --to, --mesh and --extents");
    if (o.iters < 1) throw std::invalid_argument("-n must be at least 1");
    if (o.warmup < 0) throw std::invalid_argument("-w must not be negative");
    long long ranks = 1;
    for (int v : o.mesh) ranks *= v;
    if (ranks > 1 << 20) throw std::invalid_argument("--mesh: more than 2^20 ranks");
    if (o.batches < 1) throw std::invalid_argument("--batches must be at least 1");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardcast-bench redistribute: %s\n", e.what());
    print_transition_usage(stderr);
    return 2;
  }
  try {
    if (o.backend == "host")
      return with_transition_shape(o, [&]<int N, int R>() { return run_host<N, R>(o); });
    if (o.backend == "mpi") {
#ifdef SHARDCAST_BENCH_MPI_TRANSITION
      return with_transition_shape(o, [&]<int N, int R>() { return run_mpi<N, R>(o); });
#else
      return not_built("shardcast-bench redistribute", "mpi", "needs MPI at configure time (SHARDCAST_HAS_MPI) and shardcast/comm/mpi.hpp");
#endif
    }
    if (o.backend == "p2p" || o.backend == "nccl") {
#if defined(SHARDCAST_BENCH_WITH_DEVICE)
      return device_transition(o);
#else
      return not_built("shardcast-bench redistribute", o.backend, "needs CUDA at configure time (SHARDCAST_HAS_CUDA)");
#endif
    }
    std::fprintf(stderr, "shardcast-bench redistribute: unknown backend '%s' (host, mpi, nccl, p2p)\n", o.backend.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardcast-bench redistribute: %s\n", e.what());
    return 3;
  }
}

}  // namespace shardcast::bench
