#pragma once
/// @file comm/mpi_nccl.hpp
/// Bootstraps NCCL from MPI: rank 0 of an MPI communicator creates an ncclUniqueId,
/// MPI_Bcast hands it to every rank, and each rank joins a `shardcast::nccl::communicator`
/// (non-blocking, aborted on a timeout or a peer's failure) on its device. MPI then only
/// carries the bootstrap; tensor data moves over NCCL.
///
/// @code
///   shardcast::mpi::communicator world(MPI_COMM_WORLD);
///   auto gpus = shardcast::mpi::make_nccl_communicator(world, local_rank);  // collective
///   auto m = shardcast::make_mesh(gpus, std::array<int, 2>{2, world.size() / 2});
/// @endcode

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>

#include "../error.hpp"
#include "mpi.hpp"
#include "nccl.hpp"

namespace shardcast::mpi {

/// Collective over `comm`: selects CUDA device `device` on this rank and returns an owned
/// NCCL communicator with the same ranks, in the same order, as `comm`.
/// @param device this rank's GPU (one GPU per rank: NCCL refuses two ranks on one device)
/// @param o timeout of the NCCL communicator (nccl::options)
/// @throws comm_error if MPI, CUDA or NCCL fails (the NCCL message is included)
inline nccl::communicator make_nccl_communicator(MPI_Comm comm, int device, nccl::options o = {}) {
  int rank = 0, size = 0;
  SHARDCAST_MPI_TRY(MPI_Comm_rank(comm, &rank));
  SHARDCAST_MPI_TRY(MPI_Comm_size(comm, &size));
  ncclUniqueId id{};
  int ok = 1;
  std::string why;
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      ok = 0;
      why = std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r);
    }
  }
  // Rank 0's failure reaches every rank before anyone waits in NCCL.
  SHARDCAST_MPI_TRY(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  if (!ok) throw comm_error("shardcast::mpi::make_nccl_communicator: " + (rank == 0 ? why : std::string("rank 0 could not create the NCCL id")));
  SHARDCAST_MPI_TRY(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm));
  const cudaError_t ce = cudaSetDevice(device);
  if (ce != cudaSuccess)
    throw comm_error("shardcast::mpi::make_nccl_communicator: cudaSetDevice(" + std::to_string(device) + ") failed: " + cudaGetErrorString(ce));
  return nccl::communicator(id, size, rank, o);
}

/// Same, from a shardcast MPI communicator.
inline nccl::communicator make_nccl_communicator(const communicator& comm, int device, nccl::options o = {}) {
  return make_nccl_communicator(comm.native(), device, o);
}

}  // namespace shardcast::mpi
