// The MPI -> NCCL bootstrap: compiled and linked everywhere; run only when every rank
// sees a CUDA device (otherwise it says so and passes).
#include <doctest/doctest.h>

#include <shardcast/comm/mpi_nccl.hpp>
#include <vector>

TEST_CASE("make_nccl_communicator bootstraps a shardcast::nccl::communicator over MPI (gpu)") {
  shardcast::mpi::communicator c(MPI_COMM_WORLD);
  int ndev = 0;
  int ok = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0 ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    MESSAGE("no CUDA device on some rank: skipping the NCCL bootstrap run");
    return;
  }
  shardcast::nccl::communicator n = shardcast::mpi::make_nccl_communicator(c, c.rank() % ndev);
  CHECK(n.size() == c.size());
  CHECK(n.rank() == c.rank());
  // One all_reduce over NCCL against the sum computed here: ranks contribute rank + 1.
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, sizeof(float)) == cudaSuccess);
  const float mine = static_cast<float>(c.rank() + 1);
  REQUIRE(cudaMemcpy(d, &mine, sizeof mine, cudaMemcpyHostToDevice) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  n.all_reduce(d, d, 1, shardcast::reduce_op::sum, s);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  float got = 0;
  REQUIRE(cudaMemcpy(&got, d, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got == static_cast<float>(c.size() * (c.size() + 1) / 2));
  cudaStreamDestroy(s);
  cudaFree(d);
}
