#pragma once
/// @file comm/mpi.hpp
/// MPI backend: ranks are MPI processes, buffers live in host memory.
///
/// `shardcast::mpi::communicator` wraps an existing `MPI_Comm` without owning it;
/// communicators made by `split` own the new `MPI_Comm` and free it when the last
/// copy goes away. MPI errors on communicators this header creates are returned
/// (MPI_ERRORS_RETURN) and rethrown as `shardcast::comm_error` with MPI's message.

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../error.hpp"
#include "communicator.hpp"

namespace shardcast::mpi {

namespace detail {

/// Throws comm_error naming the failed call and MPI's error string.
inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw comm_error(std::string("shardcast::mpi: ") + what + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
}

/// MPI takes int counts; larger counts are refused rather than truncated.
inline int to_int(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw comm_error(std::string("shardcast::mpi: ") + what + ": count " + std::to_string(n) +
                     " exceeds INT_MAX; split the transfer into smaller pieces");
  return static_cast<int>(n);
}

template <class T>
MPI_Datatype datatype() {
  switch (dtype_of<std::remove_cv_t<T>>::value) {
    case dtype::f32: return MPI_FLOAT;
    case dtype::f64: return MPI_DOUBLE;
    case dtype::i32: return MPI_INT32_T;
    case dtype::i64: return MPI_INT64_T;
    case dtype::u32: return MPI_UINT32_T;
    case dtype::u64: return MPI_UINT64_T;
    case dtype::i8: return MPI_INT8_T;
    case dtype::u8: return MPI_UINT8_T;
    default: break;
  }
  throw comm_error(std::string("shardcast::mpi: element type ") + to_string(dtype_of<std::remove_cv_t<T>>::value) +
                   " has no MPI reduction; convert to float before communicating");
}

inline MPI_Op op_of(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: return MPI_SUM;
    case reduce_op::prod: return MPI_PROD;
    case reduce_op::max: return MPI_MAX;
    case reduce_op::min: return MPI_MIN;
  }
  return MPI_SUM;
}

}  // namespace detail

/// Runs an MPI call and throws shardcast::comm_error with MPI's message when it fails.
#define SHARDCAST_MPI_TRY(call)                                    \
  do {                                                             \
    ::shardcast::mpi::detail::check((call), #call);                \
  } while (0)

/// One rank's handle on an MPI communicator (models shardcast::communicator).
class communicator {
 public:
  using memory_space = host_memory;
  using stream_type = host_stream;

  /// Wraps `comm` without taking ownership; the caller keeps it alive.
  explicit communicator(MPI_Comm comm) : comm_(std::make_shared<MPI_Comm>(comm)) { query(); }
  /// The null communicator (what split returns for MPI_UNDEFINED colors).
  communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The wrapped MPI communicator.
  MPI_Comm native() const { return comm_ ? *comm_ : MPI_COMM_NULL; }
  explicit operator bool() const { return comm_ && *comm_ != MPI_COMM_NULL; }

  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, stream_type = {}) {
    const int n = detail::to_int(count, "all_reduce");
    SHARDCAST_MPI_TRY(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, detail::datatype<T>(), detail::op_of(op), c()));
    if (op == reduce_op::avg) shardcast::detail::finish_avg(recv, count, size_);
  }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count, stream_type = {}) {
    const int n = detail::to_int(count, "all_gather");
    detail::to_int(count * static_cast<std::size_t>(size_), "all_gather");
    const bool inplace = send == recv + static_cast<std::size_t>(rank_) * count;
    SHARDCAST_MPI_TRY(MPI_Allgather(inplace ? MPI_IN_PLACE : send, n, detail::datatype<T>(), recv, n, detail::datatype<T>(), c()));
  }

  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type = {}) {
    const int n = detail::to_int(count, "reduce_scatter");
    detail::to_int(count * static_cast<std::size_t>(size_), "reduce_scatter");
    if (recv == send + static_cast<std::size_t>(rank_) * count && count > 0) {
      // MPI's in-place form puts the result at the start of the buffer; stage through a copy.
      std::vector<T> tmp(count);
      SHARDCAST_MPI_TRY(MPI_Reduce_scatter_block(send, tmp.data(), n, detail::datatype<T>(), detail::op_of(op), c()));
      std::copy(tmp.begin(), tmp.end(), recv);
    } else {
      SHARDCAST_MPI_TRY(MPI_Reduce_scatter_block(send, recv, n, detail::datatype<T>(), detail::op_of(op), c()));
    }
    if (op == reduce_op::avg) shardcast::detail::finish_avg(recv, count, size_);
  }

  template <element_type T>
  void all_to_all(const T* send, T* recv, std::size_t count, stream_type = {}) {
    const int n = detail::to_int(count, "all_to_all");
    detail::to_int(count * static_cast<std::size_t>(size_), "all_to_all");
    SHARDCAST_MPI_TRY(MPI_Alltoall(send, n, detail::datatype<T>(), recv, n, detail::datatype<T>(), c()));
  }

  template <element_type T>
  void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, T* recv,
                   const std::size_t* recv_counts, const std::size_t* recv_displs, stream_type = {}) {
    const auto p = static_cast<std::size_t>(size_);
    std::vector<int> sc(p), sd(p), rc(p), rd(p);
    for (std::size_t i = 0; i < p; ++i) {
      sc[i] = detail::to_int(send_counts[i], "all_to_allv");
      sd[i] = detail::to_int(send_displs[i], "all_to_allv");
      rc[i] = detail::to_int(recv_counts[i], "all_to_allv");
      rd[i] = detail::to_int(recv_displs[i], "all_to_allv");
    }
    SHARDCAST_MPI_TRY(MPI_Alltoallv(send, sc.data(), sd.data(), detail::datatype<T>(), recv, rc.data(), rd.data(),
                                    detail::datatype<T>(), c()));
  }

  template <element_type T>
  void broadcast(T* buf, std::size_t count, int root, stream_type = {}) {
    SHARDCAST_MPI_TRY(MPI_Bcast(buf, detail::to_int(count, "broadcast"), detail::datatype<T>(), root, c()));
  }

  template <element_type T>
  void send(const T* buf, std::size_t count, int peer, stream_type = {}) {
    SHARDCAST_MPI_TRY(MPI_Send(buf, detail::to_int(count, "send"), detail::datatype<T>(), peer, tag, c()));
  }

  template <element_type T>
  void recv(T* buf, std::size_t count, int peer, stream_type = {}) {
    SHARDCAST_MPI_TRY(MPI_Recv(buf, detail::to_int(count, "recv"), detail::datatype<T>(), peer, tag, c(), MPI_STATUS_IGNORE));
  }

  void barrier() { SHARDCAST_MPI_TRY(MPI_Barrier(c())); }

  /// Collective: ranks with equal `color` form one communicator, ordered by key then rank.
  /// A negative color gives the null communicator. The result owns its MPI_Comm.
  communicator split(int color, int key) const {
    MPI_Comm out = MPI_COMM_NULL;
    SHARDCAST_MPI_TRY(MPI_Comm_split(c(), color < 0 ? MPI_UNDEFINED : color, key, &out));
    communicator r;
    if (out == MPI_COMM_NULL) return r;
    r.comm_ = std::shared_ptr<MPI_Comm>(new MPI_Comm(out), [](MPI_Comm* p) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized && *p != MPI_COMM_NULL) MPI_Comm_free(p);
      delete p;
    });
    SHARDCAST_MPI_TRY(MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN));
    r.query();
    return r;
  }

 private:
  static constexpr int tag = 0x5c;

  MPI_Comm c() const {
    if (!comm_ || *comm_ == MPI_COMM_NULL) throw comm_error("shardcast::mpi: operation on a null communicator");
    return *comm_;
  }
  void query() {
    SHARDCAST_MPI_TRY(MPI_Comm_rank(c(), &rank_));
    SHARDCAST_MPI_TRY(MPI_Comm_size(c(), &size_));
  }

  std::shared_ptr<MPI_Comm> comm_;
  int rank_ = 0;
  int size_ = 0;
};

static_assert(shardcast::communicator<communicator>);

}  // namespace shardcast::mpi
