// Failure injection under mpirun: one process fails while its peers wait in (or are
// about to enter) a collective. shardcast::mpi::run must end the whole job: the failing
// rank prints its rank and message and calls MPI_Abort. run_mpi_case.cmake checks the
// exit status and the output; CTest's timeout catches a hang.
//
// Usage: mpirun -np N mpi_failure_injection MODE, MODE one of
//   ok               no failure (the control: exits 0)
//   throw_before     rank 1 throws before an all_reduce the others are blocked in
//   throw_during     rank 1 throws while the others are inside a redistribute
//   count_mismatch   rank 1 passes a larger all_gather count; MPI reports it on some ranks
//   extent_mismatch  rank 0 passes other global extents to distribute
//   count_mismatch_checked  rank 1 passes a larger all_reduce count (100000 floats
//                    against 50000, where OpenMPI may write past the smaller buffers and
//                    hang) with shardcast::mpi::check_calls on: every rank throws first
#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <shardcast/comm/mpi.hpp>
#include <shardcast/shardcast.hpp>

namespace sc = shardcast;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  sc::mpi::run([&](sc::mpi::communicator& comm) {
    const int me = comm.rank(), p = comm.size();
    if (p < 2) throw std::runtime_error("mpi_failure_injection needs at least 2 ranks");
    if (mode == "ok") {
      int one = 1, total = 0;
      comm.all_reduce(&one, &total, 1, sc::reduce_op::sum);
      if (total != p) throw std::runtime_error("all_reduce gave a wrong sum");
    } else if (mode == "throw_before") {
      if (me == 1) throw std::runtime_error("injected failure before all_reduce");
      std::vector<float> a(64, 1.0f), b(64);
      comm.all_reduce(a.data(), b.data(), a.size(), sc::reduce_op::sum);  // blocks: rank 1 never arrives
    } else if (mode == "throw_during") {
      auto m = sc::make_mesh(comm, std::array<int, 1>{p});
      std::vector<int> g(static_cast<std::size_t>(8 * p), 1);
      auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{8 * p});
      if (me == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are in the all_gather by now
        throw std::runtime_error("injected failure during redistribute");
      }
      auto y = sc::redistribute<sc::layout<sc::replicate>>(x);
      (void)y;
    } else if (mode == "count_mismatch") {
      const std::size_t n = me == 1 ? 8 : 4;
      std::vector<int> a(n, me), all(8 * static_cast<std::size_t>(p));
      comm.all_gather(a.data(), all.data(), n);
      comm.barrier();  // a rank that MPI did not tell waits here until the job is aborted
    } else if (mode == "count_mismatch_checked") {
      sc::mpi::check_calls = true;
      std::vector<float> a(me == 1 ? 100000 : 50000, 1.0f);
      try {
        comm.all_reduce(a.data(), a.data(), a.size(), sc::reduce_op::sum);
      } catch (const sc::comm_error& e) {
        // Every rank throws (none waits): rank 0 reports it, the others end quietly once
        // every rank has caught it.
        comm.barrier();
        if (me == 0) throw;
        MPI_Finalize();
        std::exit(0);
      }
    } else if (mode == "extent_mismatch") {
      auto m = sc::make_mesh(comm, std::array<int, 1>{p});
      const std::int64_t rows = me == 0 ? 6 : 4;
      std::vector<float> g(static_cast<std::size_t>(rows * 2), 1.0f);
      (void)sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{rows, 2});
    } else {
      throw std::runtime_error("unknown mode '" + mode + "'");
    }
  });
  MPI_Finalize();
  return 0;
}
