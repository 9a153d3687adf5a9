// shardcast quickstart: a 6x8 matrix on a 2x2 mesh of four ranks, carried through a
// chain of layouts. Every step prints the plan the compiler chose and checks the result
// against the global matrix.
//
//   quickstart [--backend host]        four threads of this process (sc::host::run)
//   mpirun -np 4 quickstart --backend mpi   four MPI processes on MPI_COMM_WORLD (sc::mpi::run);
//                                      needs a build with MPI (SHARDCAST_EXAMPLE_MPI)
#include <array>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#if SHARDCAST_EXAMPLE_MPI
#include <mpi.h>

#include <shardcast/comm/mpi.hpp>
#endif

namespace sc = shardcast;
using sc::layout, sc::shard, sc::replicate, sc::partial;

namespace {
constexpr std::array<std::int64_t, 2> extents{6, 8};

/// The walk through the layouts on one rank; the same code for every backend. Returns the
/// number of mismatches over all ranks (collective, so every rank returns the same count).
template <class Comm>
int walk(Comm& comm, const std::vector<float>& global, std::mutex& print) {
  auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
  const bool lead = comm.rank() == 0;
  std::int32_t failures = 0;
  auto check = [&](const char* name, const auto& t) {
    const std::vector<float> g = sc::to_global(t);  // collective
    std::lock_guard lk(print);
    if (g != global) ++failures;
    if (lead) std::printf("  %-26s rank 0 holds %lldx%lld, global %s\n", name, (long long)t.local().extent(0),
                          (long long)t.local().extent(1), g == global ? "matches" : "DIFFERS");
  };
  // The plan redistribute<To>(x) runs: the cheaper, on this mesh, of the plans made at
  // compile time for From -> To (or the run-time planner's, when strictly cheaper).
  // sc::explain<To>(x) describes sc::plan_for<To>(x) on x's mesh and extents.
  auto show = [&]<class To>(const auto& x) {
    if (!lead) return;
    const std::string plan = sc::explain<To>(x);
    std::lock_guard lk(print);
    std::printf("%s", plan.c_str());
  };

  using rows_cols = layout<shard<0>, shard<1>>;      // 2x2 blocks
  using cols_rows = layout<shard<1>, shard<0>>;      // blocks, axes swapped: all-to-all
  using partials = layout<partial<>, shard<0>>;      // pending sums along axis 0
  using scattered = layout<shard<1>, shard<0>>;      // reduce-scatter of the partial sums
  using everywhere = layout<replicate, replicate>;

  auto a = sc::distribute<rows_cols>(mesh, global, extents);
  check("distribute S(0),S(1)", a);
  show.template operator()<cols_rows>(a);
  auto b = sc::redistribute<cols_rows>(a);
  check("-> S(1),S(0)", b);
  show.template operator()<partials>(b);
  auto c = sc::redistribute<partials>(b);
  check("-> P(sum),S(0)", c);
  show.template operator()<scattered>(c);
  auto d = sc::redistribute<scattered>(c);
  check("-> S(1),S(0)", d);
  show.template operator()<everywhere>(d);
  auto e = sc::redistribute<everywhere>(d);
  check("-> R,R", e);

  std::int32_t total = 0;
  comm.all_reduce(&failures, &total, 1, sc::reduce_op::sum);
  return total;
}

int usage(const char* why) {
  std::fprintf(stderr, "quickstart: %s\nusage: quickstart [--backend host|mpi]   (mpi: mpirun -np 4 quickstart --backend mpi)\n", why);
  return 2;
}

int report(int failures) {
  std::printf(failures ? "quickstart: %d mismatches\n" : "quickstart: all layouts match the global matrix\n", failures);
  return failures ? 1 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::string backend = "host";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
    else if (std::strncmp(argv[i], "--backend=", 10) == 0) backend = argv[i] + 10;
    else return usage((std::string("unknown argument '") + argv[i] + "'").c_str());
  }

  std::vector<float> global(6 * 8);
  // Mixed signs: a partial reduced with max instead of sum (the padding terms are 0) would differ.
  for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(static_cast<int>(i % 13) - 6);
  std::mutex print;

  if (backend == "host") {
    int failures = 0;
    sc::host::run(4, [&](sc::host::communicator& comm) {
      const int f = walk(comm, global, print);
      if (comm.rank() == 0) failures = f;
    });
    return report(failures);
  }
  if (backend == "mpi") {
#if SHARDCAST_EXAMPLE_MPI
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
      if (rank == 0) std::fprintf(stderr, "quickstart: --backend mpi needs 4 processes for the 2x2 mesh (mpirun -np 4), got %d\n", size);
      MPI_Finalize();
      return 2;
    }
    int failures = 0;
    // An exception on any process ends the whole job with a message (MPI_Abort).
    sc::mpi::run([&](sc::mpi::communicator& comm) { failures = walk(comm, global, print); });
    const int status = rank == 0 ? report(failures) : (failures ? 1 : 0);
    MPI_Finalize();
    return status;
#else
    std::fprintf(stderr,
                 "quickstart: this build has no MPI backend (CMake found no MPI, or SHARDCAST_ENABLE_MPI=OFF); "
                 "rebuild with MPI to use --backend mpi\n");
    return 2;
#endif
  }
  return usage(("unknown backend '" + backend + "'; use host or mpi").c_str());
}
