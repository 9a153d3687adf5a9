#pragma once
/// @file comm/communicator.hpp
/// The communicator concept every backend models, element-type traits, and the
/// host-side reduction helpers backends share.
///
/// A communicator `C` provides, for every element type it supports:
/// @code
///   int rank() const; int size() const;
///   void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s = {});
///   void all_gather(const T* send, T* recv, std::size_t count, stream_type s = {});      // recv: size()*count
///   void reduce_scatter(const T* send, T* recv, std::size_t count, reduce_op op, stream_type s = {}); // send: size()*count
///   void all_to_all(const T* send, T* recv, std::size_t count, stream_type s = {});      // count per peer
///   void all_to_allv(const T* send, const std::size_t* send_counts, const std::size_t* send_displs,
///                    T* recv, const std::size_t* recv_counts, const std::size_t* recv_displs, stream_type s = {});
///   void broadcast(T* buf, std::size_t count, int root, stream_type s = {});
///   void send(const T* buf, std::size_t count, int peer, stream_type s = {});
///   void recv(T* buf, std::size_t count, int peer, stream_type s = {});
///   void barrier();
///   C split(int color, int key) const;   // collective; ranks with equal color form one communicator, ordered by key then rank
/// @endcode
/// A negative color gives the null communicator on every backend: size() 0, `explicit
/// operator bool` false, and every call on it throws comm_error.
/// plus `using memory_space = host_memory | device_memory;` and `using stream_type = ...;`.
/// Optional (see has_sendrecv; host, mpi, nccl and counting_communicator over one of them
/// have it):
/// @code
///   void sendrecv(const T* send, std::size_t send_count, int dest, T* recv, std::size_t recv_count, int source, stream_type s = {});
/// @endcode
/// a send to `dest` and a receive from `source` that cannot wait on each other, as
/// MPI_Sendrecv; its messages match send and recv on the peers.
/// Counts are in elements. In-place use is allowed where MPI allows it
/// (all_reduce with send == recv; all_gather with send == recv + rank*count;
/// reduce_scatter with recv == send + rank*count); all_to_all and all_to_allv have no
/// in-place form. Other overlapping send and receive buffers are erroneous (the host
/// backend refuses them with layout_error).

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../detail/wrapping.hpp"
#include "../placement.hpp"

namespace shardcast {

/// Memory spaces: where a backend's buffers live.
struct host_memory {};
struct device_memory {};

/// Stream type of host backends: collectives are synchronous, so it carries nothing.
struct host_stream {};

/// Element types, for backends that need a runtime tag (MPI datatypes, NCCL types).
enum class dtype : std::uint8_t { f32, f64, i32, i64, u32, u64, i8, u8, f16, bf16, f8e4m3, f8e5m2 };

constexpr const char* to_string(dtype t) {
  switch (t) {
    case dtype::f32: return "float";
    case dtype::f64: return "double";
    case dtype::i32: return "int32";
    case dtype::i64: return "int64";
    case dtype::u32: return "uint32";
    case dtype::u64: return "uint64";
    case dtype::i8: return "int8";
    case dtype::u8: return "uint8";
    case dtype::f16: return "half";
    case dtype::bf16: return "bfloat16";
    case dtype::f8e4m3: return "fp8_e4m3";
    case dtype::f8e5m2: return "fp8_e5m2";
  }
  return "?";
}

constexpr std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::f64: case dtype::i64: case dtype::u64: return 8;
    case dtype::f32: case dtype::i32: case dtype::u32: return 4;
    case dtype::f16: case dtype::bf16: return 2;
    default: return 1;
  }
}

/// dtype_of<T>::value names T's dtype; specialised for extended types by the headers that define them.
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr dtype value = dtype::f32; };
template <> struct dtype_of<double> { static constexpr dtype value = dtype::f64; };
template <> struct dtype_of<std::int32_t> { static constexpr dtype value = dtype::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr dtype value = dtype::i64; };
template <> struct dtype_of<std::uint32_t> { static constexpr dtype value = dtype::u32; };
template <> struct dtype_of<std::uint64_t> { static constexpr dtype value = dtype::u64; };
template <> struct dtype_of<std::int8_t> { static constexpr dtype value = dtype::i8; };
template <> struct dtype_of<std::uint8_t> { static constexpr dtype value = dtype::u8; };

template <class T>
concept element_type = requires { dtype_of<std::remove_cv_t<T>>::value; };

/// The communicator concept (see the file comment for the full list of members).
template <class C>
concept communicator = requires(C& c, const C& cc, float* p, const float* q, std::size_t n, const std::size_t* v) {
  typename C::memory_space;
  typename C::stream_type;
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
  c.all_reduce(q, p, n, reduce_op::sum, typename C::stream_type{});
  c.all_gather(q, p, n, typename C::stream_type{});
  c.reduce_scatter(q, p, n, reduce_op::sum, typename C::stream_type{});
  c.all_to_all(q, p, n, typename C::stream_type{});
  c.all_to_allv(q, v, v, p, v, v, typename C::stream_type{});
  c.broadcast(p, n, 0, typename C::stream_type{});
  c.send(q, n, 0, typename C::stream_type{});
  c.recv(p, n, 0, typename C::stream_type{});
  c.barrier();
  { cc.split(0, 0) } -> std::same_as<C>;
};

/// Whether communicator `C` has the optional sendrecv (see the list above).
template <class C>
concept has_sendrecv = requires(C& c, float* p, const float* q, std::size_t n) {
  c.sendrecv(q, n, 0, p, n, 0, typename C::stream_type{});
};

/// Sends `send_count` elements of `send` to rank `dest` and receives `recv_count` into
/// `recv` from rank `source` of `c`, in a way that cannot wait on itself: every rank of a
/// ring shift (dest = rank + 1, source = rank - 1) or a pairwise exchange may call it at
/// once, whatever the sizes, where a blocking send then recv on every rank waits for ever
/// once sends stop being buffered. Calls `c.sendrecv`; a communicator without it is a
/// compile error.
template <communicator C, element_type T>
void sendrecv(C& c, const T* send, std::size_t send_count, int dest, T* recv, std::size_t recv_count, int source,
              typename C::stream_type s = {}) {
  static_assert(has_sendrecv<C>,
                "shardcast::sendrecv: this communicator has no sendrecv member (host, mpi and nccl have one); add "
                "`void sendrecv(const T*, std::size_t, int, T*, std::size_t, int, stream_type)` to it, or order its send and recv "
                "so that every send has its receive posted (e.g. even ranks send first)");
  c.sendrecv(send, send_count, dest, recv, recv_count, source, s);
}

namespace detail {

/// `start + timeout`, or the clock's last time point when that is out of its range (a
/// timeout of milliseconds::max(), "never", is about 292 million years, far more than
/// steady_clock's nanoseconds hold: added as it is, it would wrap into the past).
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::steady_clock::time_point start, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  if (timeout.count() <= 0) return start;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - start);
  return timeout >= room ? clock::time_point::max() : start + std::chrono::duration_cast<clock::duration>(timeout);
}

/// The identities of max and min for T: -inf / +inf where T has infinities, else its
/// lowest / largest value. Specialised by cuda/dtypes.hpp for CUDA's half, bfloat16 and fp8
/// types, for which std::numeric_limits is not specialised (its lowest() would be T(), 0).
template <class T>
struct reduce_limits {
  static constexpr T lowest() {
    return std::numeric_limits<T>::has_infinity ? T(-std::numeric_limits<T>::infinity()) : std::numeric_limits<T>::lowest();
  }
  static constexpr T highest() {
    return std::numeric_limits<T>::has_infinity ? T(std::numeric_limits<T>::infinity()) : std::numeric_limits<T>::max();
  }
};

/// Identity element of `op` for T (what padding holds so the reduction is unchanged).
template <class T>
constexpr T identity_of(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: return T(0);
    case reduce_op::prod: return T(1);
    case reduce_op::max: return reduce_limits<T>::lowest();
    case reduce_op::min: return reduce_limits<T>::highest();
  }
  return T(0);
}

/// acc[i] = op(acc[i], x[i]); avg accumulates as sum (divide with finish_avg).
template <class T>
inline void accumulate(T* __restrict acc, const T* __restrict x, std::size_t n, reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      for (std::size_t i = 0; i < n; ++i) acc[i] = wrapping_add(acc[i], x[i]);
      break;
    case reduce_op::prod:
      for (std::size_t i = 0; i < n; ++i) acc[i] = wrapping_mul(acc[i], x[i]);
      break;
    case reduce_op::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = (x[i] > acc[i] || x[i] != x[i]) ? x[i] : acc[i];
      break;
    case reduce_op::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = (x[i] < acc[i] || x[i] != x[i]) ? x[i] : acc[i];
      break;
  }
}

/// x / d, the mean of d terms whose sum is x. An integral T divides in its promoted type:
/// d converted to T would wrap for narrow types (200 is -56 as an int8, and 256 is 0 as a
/// uint8, a division by zero).
template <class T>
SHARDCAST_HOST_DEVICE constexpr T divide_mean(T x, std::int64_t d) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(x / d);
  else return static_cast<T>(x / static_cast<T>(d));
}

/// Divides by the group size after a sum, which is what avg means.
template <class T>
inline void finish_avg(T* acc, std::size_t n, int group_size) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = divide_mean(acc[i], group_size);
}

}  // namespace detail
}  // namespace shardcast
