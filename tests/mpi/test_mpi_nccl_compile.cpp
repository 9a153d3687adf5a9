// Compile-and-link check of the MPI -> NCCL bootstrap. Runs it only when every rank
// sees a CUDA device; otherwise says so and passes.
#include <doctest/doctest.h>

#include <shardcast/comm/mpi_nccl.hpp>

TEST_CASE("make_nccl_communicator bootstraps NCCL over MPI (gpu)") {
  shardcast::mpi::communicator c(MPI_COMM_WORLD);
  int ndev = 0;
  int ok = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0 ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    MESSAGE("no CUDA device on some rank: skipping the NCCL bootstrap run");
    return;
  }
  auto n = shardcast::mpi::make_nccl_communicator(c, c.rank() % ndev);
  REQUIRE(static_cast<bool>(n));
  int count = 0, rank = -1;
  CHECK(ncclCommCount(n.get(), &count) == ncclSuccess);
  CHECK(ncclCommUserRank(n.get(), &rank) == ncclSuccess);
  CHECK(count == c.size());
  CHECK(rank == c.rank());
}
