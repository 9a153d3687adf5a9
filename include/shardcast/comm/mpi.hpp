#pragma once
/// @file comm/mpi.hpp
/// MPI backend: ranks are MPI processes, buffers live in host memory.
///
/// `shardcast::mpi::communicator` wraps an existing `MPI_Comm` without owning it;
/// communicators made by `split` own the new `MPI_Comm` and free it when the last
/// copy goes away. MPI errors on communicators this header creates are returned
/// (MPI_ERRORS_RETURN) and rethrown as `shardcast::comm_error` with MPI's message.
///
/// Counts: MPI (OpenMPI 4.1 included) takes `int` counts, shardcast takes `std::size_t`.
/// Every collective is split into MPI calls of at most INT_MAX elements each (in total,
/// for the gathers and scatters), so counts above 2^31 work; `all_to_allv` is a set of
/// non-blocking sends and receives (what OpenMPI's linear all-to-all-v does), one message
/// of at most INT_MAX elements at a time, so its counts and displacements are never
/// narrowed to `int`.
///
/// Checked calls: MPI does not reliably report ranks that pass different counts (or element
/// types, ops, roots, or different collectives) to one call; OpenMPI may report
/// MPI_ERR_TRUNCATE on some ranks, wait forever, or, for large counts, write past the
/// smaller buffers. With `shardcast::mpi::check_calls` on (the environment variable
/// SHARDCAST_MPI_CHECK_CALLS=1, or set by the program on every rank), every collective
/// (barrier and split included) first gathers each rank's (collective, element type, count,
/// op, root) in one small MPI_Allgather and, if they differ, throws comm_error on every rank
/// naming rank 0's call and each rank whose call differs, before any data moves. It costs
/// one extra small collective per call: a debugging aid, off by default. Point-to-point
/// calls are not checked (send and recv already compare what arrived).
///
/// Failures: `shardcast::mpi::run(f)` runs `f` on MPI_COMM_WORLD and turns an exception on
/// any rank into a message on stderr and `MPI_Abort`, so peers blocked in a collective
/// are terminated instead of waiting forever (MPI's failure model: the whole job ends
/// with a non-zero status; there is no per-rank recovery).

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "communicator.hpp"

namespace shardcast::mpi {

/// Compare every collective's arguments across the ranks before running it (see the file
/// comment). Every rank must use the same value. Initialised from the environment variable
/// SHARDCAST_MPI_CHECK_CALLS (on unless unset, empty or "0"). Atomic (read relaxed), as an
/// overlap worker thread may make collectives while the program sets it.
inline std::atomic<bool> check_calls{[] {
  const char* v = std::getenv("SHARDCAST_MPI_CHECK_CALLS");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}()};

namespace detail {

/// Throws comm_error naming the failed call and MPI's error string.
inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw comm_error(std::string("shardcast::mpi: ") + what + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
}

/// The most elements one MPI call carries (MPI counts are int). Collectives above it are
/// split into several calls. Only tests lower it, to run the splitting with small
/// buffers; every rank must use the same value.
inline std::size_t max_count = static_cast<std::size_t>(INT_MAX);

/// max_count as used: at least 1, at most INT_MAX.
inline std::size_t limit() { return std::clamp<std::size_t>(max_count, 1, static_cast<std::size_t>(INT_MAX)); }

/// A point-to-point message of `count` elements travels as count / limit() pieces of
/// limit() elements, then one of count % limit() (possibly empty): below limit() one
/// message, as MPI_Send would make. A piece shorter than limit() ends the message, so the
/// receiver tells the sender's count from the pieces (see communicator::receive_pieces).
inline std::size_t pieces(std::size_t count) { return count / limit() + 1; }
/// The size of piece i of a message of `count` elements.
inline int piece(std::size_t count, std::size_t i) {
  return static_cast<int>(i < count / limit() ? limit() : count % limit());
}

/// Bytes staged per call when a reduce_scatter above the limit is split (256 MiB).
inline constexpr std::size_t stage_bytes = std::size_t{1} << 28;

/// A count the caller has already limited to limit() (so it fits an int).
inline int to_int(std::size_t n) { return static_cast<int>(n); }

/// Tag of the point-to-point messages all_to_allv is made of (user send/recv use another).
inline constexpr int a2av_tag = 0x5d;

/// `c` contiguous elements of `base`, resized so that consecutive items are `stride`
/// bytes apart: one peer's slice of a chunked gather or all-to-all. Freed by the destructor.
struct strided_type {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  strided_type(int c, MPI_Datatype base, std::size_t stride) {
    MPI_Datatype contig = MPI_DATATYPE_NULL;
    check(MPI_Type_contiguous(c, base, &contig), "MPI_Type_contiguous");
    const int rc = MPI_Type_create_resized(contig, 0, static_cast<MPI_Aint>(stride), &t);
    MPI_Type_free(&contig);
    check(rc, "MPI_Type_create_resized");
    check(MPI_Type_commit(&t), "MPI_Type_commit");
  }
  strided_type(const strided_type&) = delete;
  strided_type& operator=(const strided_type&) = delete;
  ~strided_type() {
    if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
  }
};

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

/// inout[i] += in[i] modulo 2^8: MPI_SUM for 8-bit integers as the other backends add them
/// (two's complement, so one function serves int8 and uint8).
inline void wrapping_sum8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<unsigned char>(a[i] + b[i]);
}
/// The MPI_Op of wrapping_sum8, made on first use (after MPI_Init) and kept for the process.
inline MPI_Op wrapping_sum8_op() {
  static const MPI_Op op = [] {
    MPI_Op o = MPI_OP_NULL;
    check(MPI_Op_create(&wrapping_sum8, 1, &o), "MPI_Op_create(wrapping_sum8)");
    return o;
  }();
  return op;
}

/// inout[i] = max (Max) or min of in[i] and inout[i], a NaN in either winning: the host and
/// p2p backends' reduction (as torch.amax). MPI_MAX and MPI_MIN leave NaN to the
/// implementation, and OpenMPI 4.1's dropped finite terms too: the min over the terms
/// {0, NaN, 2} of three ranks gave 2, and which value came out changed with the count and
/// the rank that held the NaN.
template <class T, bool Max>
void nan_max_min(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const T x = a[i], y = b[i];
    b[i] = x != x ? x : y != y ? y : Max ? (x > y ? x : y) : (x < y ? x : y);
  }
}
/// The MPI_Op of nan_max_min<T, Max>, made on first use (after MPI_Init) and kept for the process.
template <class T, bool Max>
MPI_Op nan_max_min_op() {
  static const MPI_Op op = [] {
    MPI_Op o = MPI_OP_NULL;
    check(MPI_Op_create(&nan_max_min<T, Max>, 1, &o), "MPI_Op_create(nan_max_min)");
    return o;
  }();
  return op;
}

/// The MPI_Op of `op` for elements of type T. A sum (and avg, which sums) of 8-bit integers
/// uses wrapping_sum8: OpenMPI's op/avx component adds MPI_INT8_T and MPI_UINT8_T with
/// saturation from 16 elements on (on AVX-512 machines; open-mpi/ompi#8045, closed as won't
/// fix), so 100 + 100 as int8 gave 127 there and -56 below 16 elements and on the other
/// backends. max and min of float and double use nan_max_min (a NaN wins, as on the other
/// in-process backends); of integers, MPI_MAX and MPI_MIN.
template <class T>
MPI_Op op_of(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      if constexpr (std::is_integral_v<T> && sizeof(T) == 1) return wrapping_sum8_op();
      else return MPI_SUM;
    case reduce_op::prod: return MPI_PROD;
    case reduce_op::max:
      if constexpr (std::is_floating_point_v<T>) return nan_max_min_op<T, true>();
      else return MPI_MAX;
    case reduce_op::min:
      if constexpr (std::is_floating_point_v<T>) return nan_max_min_op<T, false>();
      else return MPI_MIN;
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
    const MPI_Datatype dt = detail::datatype<T>();
    (void)c();  // throws on the null communicator
    check_call<T>(call::all_reduce, count, op);
    // Always MPI_IN_PLACE, which the standard asks of every process of a call or of none:
    // a rank that calls out of place copies its input into recv first (as MPI's own
    // algorithms do), so ranks that run in place and ranks that do not can meet in one call
    // (a redistribute of a tensor given up on some ranks and kept on others). all_gather
    // keeps MPI's rule, in place on every rank or none: nothing in shardcast calls it in
    // place, and its in-place form ran at half the speed in the middle sizes
    // (docs/04_mpi.md).
    if (send != recv && count > 0) std::memmove(recv, send, count * sizeof(T));
    std::size_t off = 0;
    do {  // one call per max_count elements (one call when count is 0)
      const std::size_t n = std::min(count - off, detail::limit());
      SHARDCAST_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, recv + off, detail::to_int(n), dt, detail::op_of<T>(op), c()));
      off += n;
    } while (off < count);
    if (op == reduce_op::avg) shardcast::detail::finish_avg(recv, count, size_);
  }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    (void)c();  // throws on the null communicator, whose size is 0
    check_call<T>(call::all_gather, count);
    const auto p = static_cast<std::size_t>(size_);
    const bool inplace = send == recv + static_cast<std::size_t>(rank_) * count;
    if (count <= detail::limit() / p) {
      const int n = detail::to_int(count);
      SHARDCAST_MPI_TRY(MPI_Allgather(inplace ? MPI_IN_PLACE : send, n, dt, recv, n, dt, c()));
      return;
    }
    // Chunk j gathers elements [off, off + n) of every rank's block: the receive type is n
    // elements resized to one block, so peer q's slice lands at recv + q * count + off.
    // In place, MPI reads this rank's slice from exactly there.
    const std::size_t per = std::max<std::size_t>(1, detail::limit() / p);
    for (std::size_t off = 0; off < count; off += per) {
      const std::size_t n = std::min(per, count - off);
      detail::strided_type rt(detail::to_int(n), dt, count * sizeof(T));
      SHARDCAST_MPI_TRY(MPI_Allgather(inplace ? MPI_IN_PLACE : send + off, detail::to_int(n), dt, recv + off, 1, rt.t, c()));
    }
  }

  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    (void)c();  // throws on the null communicator, whose size is 0
    check_call<T>(call::reduce_scatter, count, op);
    const auto p = static_cast<std::size_t>(size_);
    if (count <= detail::limit() / p) {
      const int n = detail::to_int(count);
      if (recv == send + static_cast<std::size_t>(rank_) * count && count > 0) {
        // MPI's in-place form puts the result at the start of the buffer; stage through a copy.
        std::vector<T> tmp(count);
        SHARDCAST_MPI_TRY(MPI_Reduce_scatter_block(send, tmp.data(), n, dt, detail::op_of<T>(op), c()));
        std::copy(tmp.begin(), tmp.end(), recv);
      } else {
        SHARDCAST_MPI_TRY(MPI_Reduce_scatter_block(send, recv, n, dt, detail::op_of<T>(op), c()));
      }
    } else {
      // Predefined reductions need predefined datatypes, so chunks are packed: chunk j
      // stages elements [off, off + n) of every destination block, rank-major.
      const std::size_t cap = std::min(detail::limit(), std::max<std::size_t>(1, detail::stage_bytes / sizeof(T)));
      const std::size_t per = std::max<std::size_t>(1, cap / p);
      std::vector<T> stage(per * p);
      for (std::size_t off = 0; off < count; off += per) {
        const std::size_t n = std::min(per, count - off);
        for (std::size_t q = 0; q < p; ++q) std::memcpy(stage.data() + q * n, send + q * count + off, n * sizeof(T));
        // In place, recv + off is this rank's block at off, already staged above.
        SHARDCAST_MPI_TRY(MPI_Reduce_scatter_block(stage.data(), recv + off, detail::to_int(n), dt, detail::op_of<T>(op), c()));
      }
    }
    if (op == reduce_op::avg) shardcast::detail::finish_avg(recv, count, size_);
  }

  template <element_type T>
  void all_to_all(const T* send, T* recv, std::size_t count, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    (void)c();  // throws on the null communicator, whose size is 0
    check_call<T>(call::all_to_all, count);
    const auto p = static_cast<std::size_t>(size_);
    if (count <= detail::limit() / p) {
      const int n = detail::to_int(count);
      SHARDCAST_MPI_TRY(MPI_Alltoall(send, n, dt, recv, n, dt, c()));
      return;
    }
    // Chunk j moves elements [off, off + n) of every block; both sides use n elements
    // resized to one block, so block q of the chunk is at buffer + q * count + off.
    const std::size_t per = std::max<std::size_t>(1, detail::limit() / p);
    for (std::size_t off = 0; off < count; off += per) {
      const std::size_t n = std::min(per, count - off);
      detail::strided_type t(detail::to_int(n), dt, count * sizeof(T));
      SHARDCAST_MPI_TRY(MPI_Alltoall(send + off, 1, t.t, recv + off, 1, t.t, c()));
    }
  }

  /// Non-blocking sends of every peer's message in pieces of at most max_count elements
  /// (detail::piece), and receives posted for every peer at once below max_count elements;
  /// larger messages are received piece by piece once every send is posted. Counts and
  /// displacements stay std::size_t. A receive that gets another count than `recv_counts`
  /// says throws comm_error naming both ranks and counts (more, below max_count: MPI's
  /// truncation error).
  template <element_type T>
  void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs, T* recv,
                   const std::size_t* recv_counts, const std::size_t* recv_displs, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    const MPI_Comm comm = c();
    check_call<T>(call::all_to_allv, 0);  // (each pair's count is checked as it arrives)
    if (send_counts[rank_] != recv_counts[rank_])
      throw comm_error("shardcast::mpi::all_to_allv: rank " + std::to_string(rank_) + " sends itself " + std::to_string(send_counts[rank_]) +
                       " elements but expects " + std::to_string(recv_counts[rank_]));
    const std::size_t lim = detail::limit();
    std::vector<MPI_Request> reqs;
    struct posted {
      int peer;
      std::size_t expect;
    };
    std::vector<posted> what;  // one per receive request, in order
    // A message below max_count elements is one piece, received at once; larger ones are
    // taken piece by piece once every send is posted (communicator::receive_pieces).
    for (int q = 0; q < size_; ++q) {
      if (q == rank_ || recv_counts[q] >= lim) continue;
      const std::size_t n = recv_counts[q];
      reqs.emplace_back();
      what.push_back({q, n});
      const int rc = MPI_Irecv(recv + recv_displs[q], detail::to_int(n), dt, q, detail::a2av_tag, comm, &reqs.back());
      if (rc != MPI_SUCCESS) cancel_and_throw(reqs, rc, "MPI_Irecv");
    }
    const std::size_t nrecv = reqs.size();
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const std::size_t n = send_counts[q];
      for (std::size_t k = 0; k < detail::pieces(n); ++k) {
        reqs.emplace_back();
        const int rc = MPI_Isend(send + send_displs[q] + k * lim, detail::piece(n, k), dt, q, detail::a2av_tag, comm, &reqs.back());
        if (rc != MPI_SUCCESS) cancel_and_throw(reqs, rc, "MPI_Isend");
      }
    }
    const auto me = static_cast<std::size_t>(rank_);
    if (send_counts[me] > 0 && recv + recv_displs[me] != send + send_displs[me])
      std::memcpy(recv + recv_displs[me], send + send_displs[me], send_counts[me] * sizeof(T));
    for (int q = 0; q < size_; ++q)
      if (q != rank_ && recv_counts[q] >= lim) receive_pieces(recv + recv_displs[q], recv_counts[q], q, detail::a2av_tag, "all_to_allv");
    std::vector<MPI_Status> st(reqs.size());
    const int rc = MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), st.data());
    if (rc != MPI_SUCCESS) {
      int err = rc;
      if (rc == MPI_ERR_IN_STATUS)
        for (const auto& x : st)
          if (x.MPI_ERROR != MPI_SUCCESS && x.MPI_ERROR != MPI_ERR_PENDING) {
            err = x.MPI_ERROR;
            break;
          }
      detail::check(err, "all_to_allv (MPI_Waitall)");
    }
    for (std::size_t i = 0; i < nrecv; ++i) {
      int got = 0;
      MPI_Get_count(&st[i], dt, &got);
      if (static_cast<std::size_t>(got) != what[i].expect)
        throw comm_error("shardcast::mpi::all_to_allv: rank " + std::to_string(rank_) + " expected " + std::to_string(recv_counts[what[i].peer]) +
                         " elements from rank " + std::to_string(what[i].peer) + ", which sent a different count (a message of the exchange " +
                         "carried " + std::to_string(got) + " elements where " + std::to_string(what[i].expect) + " were expected)");
    }
  }

  template <element_type T>
  void broadcast(T* buf, std::size_t count, int root, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    (void)c();  // throws on the null communicator
    check_call<T>(call::broadcast, count, reduce_op::sum, root);
    std::size_t off = 0;
    do {
      const std::size_t n = std::min(count - off, detail::limit());
      SHARDCAST_MPI_TRY(MPI_Bcast(buf + off, detail::to_int(n), dt, root, c()));
      off += n;
    } while (off < count);
  }

  /// Blocking send, in pieces (see detail::piece): one message below max_count elements.
  template <element_type T>
  void send(const T* buf, std::size_t count, int peer, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    for (std::size_t i = 0; i < detail::pieces(count); ++i)
      SHARDCAST_MPI_TRY(MPI_Send(buf + i * detail::limit(), detail::piece(count, i), dt, peer, tag, c()));
  }

  /// Blocking receive; throws comm_error when the sender sent a different count (more:
  /// MPI's truncation error).
  template <element_type T>
  void recv(T* buf, std::size_t count, int peer, stream_type = {}) {
    receive_pieces(buf, count, peer, tag, "recv");
  }

  /// Sends `send_count` elements to `dest` and receives `recv_count` from `source` at once
  /// (MPI_Sendrecv; from max_count elements on, every piece of the send posted with
  /// MPI_Isend, then the receive taken piece by piece), so exchanges in which every rank
  /// sends and receives complete whatever the sizes. The messages are those of send and
  /// recv: a sendrecv matches a recv on `dest` and a send on `source`. Throws comm_error
  /// when `source` sent fewer elements (more: MPI's truncation error).
  template <element_type T>
  void sendrecv(const T* send, std::size_t send_count, int dest, T* recv, std::size_t recv_count, int source, stream_type = {}) {
    const MPI_Datatype dt = detail::datatype<T>();
    const std::size_t lim = detail::limit();
    if (send_count < lim && recv_count < lim) {
      MPI_Status st;
      SHARDCAST_MPI_TRY(MPI_Sendrecv(send, detail::to_int(send_count), dt, dest, tag, recv, detail::to_int(recv_count), dt, source, tag, c(), &st));
      int got = 0;
      MPI_Get_count(&st, dt, &got);
      if (static_cast<std::size_t>(got) != recv_count)
        throw comm_error("shardcast::mpi::sendrecv: rank " + std::to_string(rank_) + " posted a receive of " + std::to_string(recv_count) +
                         " elements from rank " + std::to_string(source) + ", which sent fewer");
      return;
    }
    // The pieces of the message as send makes them (detail::piece), all posted before the
    // receive, which takes its pieces one by one: a peer that calls recv then send takes
    // every piece of this rank's message before it sends its own.
    const std::size_t ns = detail::pieces(send_count);
    std::vector<MPI_Request> req(ns, MPI_REQUEST_NULL);
    for (std::size_t i = 0; i < ns; ++i)
      SHARDCAST_MPI_TRY(MPI_Isend(send + i * lim, detail::piece(send_count, i), dt, dest, tag, c(), &req[i]));
    receive_pieces(recv, recv_count, source, tag, "sendrecv");
    SHARDCAST_MPI_TRY(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE));
  }

  void barrier() {
    check_call<std::int8_t>(call::barrier, 0);
    SHARDCAST_MPI_TRY(MPI_Barrier(c()));
  }

  /// Throws comm_error, naming `who`, unless MPI's thread level `level` lets a second thread
  /// of the process make MPI calls (MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE), as the
  /// worker of an overlap_context does. Every rank initialised MPI alike, so all throw or none.
  static void require_threads(const char* who, int level = query_thread_level()) {
    if (level >= MPI_THREAD_SERIALIZED) return;
    throw comm_error(std::string(who) + ": MPI runs at thread level " + std::to_string(level) +
                     ", but a second thread of this process would make MPI calls; initialise MPI with "
                     "MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) and check that provided is at least "
                     "MPI_THREAD_SERIALIZED");
  }
  /// MPI_Query_thread's level for this process.
  static int query_thread_level() {
    int level = MPI_THREAD_SINGLE;
    detail::check(MPI_Query_thread(&level), "MPI_Query_thread");
    return level;
  }

  /// Collective: ranks with equal `color` form one communicator, ordered by key then rank.
  /// A negative color gives the null communicator. The result owns its MPI_Comm.
  communicator split(int color, int key) const {
    MPI_Comm out = MPI_COMM_NULL;
    check_call<std::int8_t>(call::split, 0);
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

  enum class call : std::int64_t { all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, barrier, split };
  static const char* name(call k) {
    switch (k) {
      case call::all_reduce: return "all_reduce";
      case call::all_gather: return "all_gather";
      case call::reduce_scatter: return "reduce_scatter";
      case call::all_to_all: return "all_to_all";
      case call::all_to_allv: return "all_to_allv";
      case call::broadcast: return "broadcast";
      case call::barrier: return "barrier";
      case call::split: return "split";
    }
    return "?";
  }

  /// With check_calls: gathers every rank's (collective, element type, count, op, root) in
  /// one MPI_Allgather and throws comm_error on every rank if they differ, naming rank 0's
  /// call and every rank whose call differs from it (the first 16), so the odd rank out is
  /// named however many ranks there are. Element type and count only for the collectives
  /// that move data, op only for reductions, root only for broadcast.
  template <class T>
  void check_call(call k, std::size_t count, reduce_op op = reduce_op::sum, int root = 0) const {
    if (!check_calls.load(std::memory_order_relaxed)) return;
    constexpr int w = 5;
    const bool data = k != call::barrier && k != call::split, reduces = k == call::all_reduce || k == call::reduce_scatter;
    const std::int64_t mine[w] = {static_cast<std::int64_t>(k), data ? static_cast<std::int64_t>(dtype_of<std::remove_cv_t<T>>::value) : -1,
                                  data && k != call::all_to_allv ? static_cast<std::int64_t>(count) : -1,
                                  reduces ? static_cast<std::int64_t>(op) : -1, k == call::broadcast ? root : -1};
    std::vector<std::int64_t> all(static_cast<std::size_t>(size_) * w);
    SHARDCAST_MPI_TRY(MPI_Allgather(mine, w, MPI_INT64_T, all.data(), w, MPI_INT64_T, c()));
    auto differs = [&](int q) { return !std::equal(all.begin(), all.begin() + w, all.begin() + static_cast<std::ptrdiff_t>(q) * w); };
    int odd = 0;
    for (int q = 1; q < size_; ++q) odd += differs(q) ? 1 : 0;
    if (odd == 0) return;
    auto describe = [&](int q) {
      const std::int64_t* v = all.data() + static_cast<std::size_t>(q) * w;
      std::string d = "rank " + std::to_string(q) + ": ";
      if (v[0] < 0 || v[0] > static_cast<std::int64_t>(call::split)) return d + "?";
      d += std::string(name(static_cast<call>(v[0]))) + "(";
      std::string args;
      auto arg = [&](const std::string& a) { args += (args.empty() ? "" : ", ") + a; };
      if (v[2] >= 0) arg("count=" + std::to_string(v[2]));
      if (v[1] >= 0) arg(to_string(static_cast<dtype>(v[1])));
      if (v[3] >= 0) arg(to_string(static_cast<reduce_op>(v[3])));
      if (v[4] >= 0) arg("root=" + std::to_string(v[4]));
      return d + args + ")";
    };
    std::string msg = "shardcast::mpi: the ranks' calls differ (checked because shardcast::mpi::check_calls is on): " + describe(0);
    int listed = 0;
    for (int q = 1; q < size_ && listed < 16; ++q)
      if (differs(q)) {
        msg += "; " + describe(q);
        ++listed;
      }
    if (odd > listed) msg += "; and " + std::to_string(odd - listed) + " more ranks whose call differs from rank 0's";
    if (size_ - 1 > odd) msg += " (the other " + std::to_string(size_ - 1 - odd) + " ranks call what rank 0 calls)";
    throw comm_error(msg);
  }

  /// Receives a message of `count` elements that the sender split with detail::piece, one
  /// piece at a time, and checks it: a piece shorter than max_count ends the message, so a
  /// sender of fewer elements is seen when its last piece arrives, and one of more when a
  /// piece does not fit (MPI's truncation error). Throws comm_error naming `who`.
  template <class T>
  void receive_pieces(T* buf, std::size_t count, int peer, int tg, const char* who) {
    const MPI_Datatype dt = detail::datatype<T>();
    const std::size_t lim = detail::limit();
    std::size_t off = 0;
    for (;;) {
      MPI_Status st;
      SHARDCAST_MPI_TRY(MPI_Recv(buf + off, detail::to_int(std::min(lim, count - off)), dt, peer, tg, c(), &st));
      int got = 0;
      MPI_Get_count(&st, dt, &got);
      off += static_cast<std::size_t>(got);
      if (static_cast<std::size_t>(got) < lim) break;  // the sender's last piece
    }
    if (off != count)
      throw comm_error("shardcast::mpi::" + std::string(who) + ": rank " + std::to_string(rank_) + " posted a receive of " + std::to_string(count) +
                       " elements from rank " + std::to_string(peer) + ", which sent fewer (" + std::to_string(off) + ")");
  }

  MPI_Comm c() const {
    if (!comm_ || *comm_ == MPI_COMM_NULL) throw comm_error("shardcast::mpi: operation on a null communicator");
    return *comm_;
  }
  /// Cancels and frees the requests already posted (the last one failed to post), then throws.
  [[noreturn]] static void cancel_and_throw(std::vector<MPI_Request>& reqs, int rc, const char* what) {
    reqs.pop_back();
    for (auto& r : reqs)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    detail::check(rc, what);
    throw comm_error(std::string("shardcast::mpi: ") + what + " failed");
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

/// Runs `f(comm)` with `comm` wrapping MPI_COMM_WORLD, on every process of the job (the
/// MPI counterpart of host::run). MPI must be initialised (MPI_Init or MPI_Init_thread)
/// and is left initialised. MPI_COMM_WORLD's error handler is set to MPI_ERRORS_RETURN,
/// so failing MPI calls become comm_error.
///
/// Failure model (MPI's): if `f` throws on any rank, that rank prints
/// `shardcast::mpi::run: rank R failed: <what()>` to stderr and calls
/// `MPI_Abort(MPI_COMM_WORLD, abort_code)`, which ends every process of the job,
/// including peers blocked in a collective with it; mpirun then exits with a non-zero
/// status. There is no per-rank recovery and run does not return on that path.
/// @param f callable as f(shardcast::mpi::communicator&)
/// @param abort_code the error code passed to MPI_Abort (non-zero)
/// @throws comm_error if MPI is not initialised (before calling f; every rank alike)
/// @code
///   MPI_Init(&argc, &argv);
///   shardcast::mpi::run([](shardcast::mpi::communicator& comm) {
///     auto mesh = shardcast::make_mesh(comm, std::array<int, 2>{2, comm.size() / 2});
///     // ... distribute / redistribute; an exception here ends the whole job
///   });
///   MPI_Finalize();
/// @endcode
template <class F>
void run(F&& f, int abort_code = 1) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw comm_error("shardcast::mpi::run: MPI is not initialised (or already finalised); call MPI_Init before run and MPI_Finalize after it");
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string why;
  try {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    communicator comm(MPI_COMM_WORLD);
    f(comm);
    return;
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "an exception not derived from std::exception";
  }
  std::fprintf(stderr, "shardcast::mpi::run: rank %d failed: %s\n", rank, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, abort_code != 0 ? abort_code : 1);
  std::_Exit(abort_code != 0 ? abort_code : 1);  // MPI_Abort does not return; if it ever did, still end this process
}

}  // namespace shardcast::mpi
