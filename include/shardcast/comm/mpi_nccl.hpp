#pragma once
/// @file comm/mpi_nccl.hpp
/// Bootstraps NCCL from MPI: rank 0 of an MPI communicator creates an ncclUniqueId,
/// MPI_Bcast hands it to every rank, and each rank calls ncclCommInitRank on its device.
/// MPI then only carries the bootstrap; tensor data moves over NCCL.

#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "../error.hpp"
#include "mpi.hpp"

namespace shardcast::mpi {

/// Owns an ncclComm_t made by make_nccl_communicator; destroys it on destruction.
class nccl_comm {
 public:
  nccl_comm() = default;
  explicit nccl_comm(ncclComm_t c) : c_(c) {}
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;
  nccl_comm(nccl_comm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  nccl_comm& operator=(nccl_comm&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ~nccl_comm() { reset(); }

  /// The NCCL communicator (still owned by this object).
  ncclComm_t get() const { return c_; }
  /// Gives up ownership; the caller must ncclCommDestroy the result.
  ncclComm_t release() { return std::exchange(c_, nullptr); }
  explicit operator bool() const { return c_ != nullptr; }

 private:
  void reset() {
    if (c_) ncclCommDestroy(c_);
    c_ = nullptr;
  }
  ncclComm_t c_ = nullptr;
};

/// Collective over `comm`: makes an NCCL communicator with the same ranks and rank
/// order, using CUDA device `device` on this rank. Throws comm_error on failure.
inline nccl_comm make_nccl_communicator(MPI_Comm comm, int device) {
  int rank = 0, size = 0;
  SHARDCAST_MPI_TRY(MPI_Comm_rank(comm, &rank));
  SHARDCAST_MPI_TRY(MPI_Comm_size(comm, &size));
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw comm_error(std::string("shardcast::mpi: ncclGetUniqueId failed: ") + ncclGetErrorString(r));
  }
  SHARDCAST_MPI_TRY(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm));
  const cudaError_t ce = cudaSetDevice(device);
  if (ce != cudaSuccess)
    throw comm_error(std::string("shardcast::mpi: cudaSetDevice(") + std::to_string(device) + ") failed: " + cudaGetErrorString(ce));
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRank(&c, size, id, rank);
  if (r != ncclSuccess) throw comm_error(std::string("shardcast::mpi: ncclCommInitRank failed: ") + ncclGetErrorString(r));
  return nccl_comm(c);
}

/// Same, from a shardcast MPI communicator.
inline nccl_comm make_nccl_communicator(const communicator& comm, int device) { return make_nccl_communicator(comm.native(), device); }

}  // namespace shardcast::mpi
