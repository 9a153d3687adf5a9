#pragma once
/// @file comm/counting.hpp
/// `counting_communicator<Inner>`: forwards every call to an inner communicator and
/// counts, per rank, the collectives and point-to-point sends called (barrier and split
/// are forwarded but not counted: they move no data) and the bytes this rank sends. Use it to
/// check what a plan really moves (tests, `shardcast-bench redistribute`) or to measure
/// the traffic of a layer. The counters are shared with the communicators split from it,
/// so a mesh built over it counts every axis' traffic in one place.
///
/// Bytes sent per call, for a group of n (the busiest-rank definitions nccl-tests and the
/// planner use): all_gather (n-1)*count, reduce_scatter (n-1)*count, all_reduce
/// 2(n-1)/n*count, all_to_all (n-1)*count, all_to_allv the counts to other ranks,
/// broadcast count on the root, send count; times sizeof(T).
///
/// @code
///   shardcast::counting_communicator<shardcast::host::communicator> cc(comm);
///   auto m = shardcast::make_mesh(cc, std::array<int, 2>{2, 2});
///   auto y = shardcast::redistribute<L2>(shardcast::distribute<L1>(m, g, ext));
///   double sent = cc.bytes();   // this rank's bytes, over every sub-communicator
/// @endcode

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "communicator.hpp"

namespace shardcast {

/// A communicator that forwards to `Inner` and counts collectives and bytes sent.
/// @tparam Inner any communicator
template <class Inner>
class counting_communicator {
 public:
  using memory_space = typename Inner::memory_space;
  using stream_type = typename Inner::stream_type;

  /// Counters shared by a communicator and everything split from it.
  struct counters {
    std::atomic<double> bytes{0};
    std::atomic<long> collectives{0};
  };

  explicit counting_communicator(Inner inner, std::shared_ptr<counters> c = std::make_shared<counters>())
      : inner_(std::move(inner)), c_(std::move(c)) {}
  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  /// Bytes this rank sent since construction or the last reset().
  double bytes() const { return c_->bytes.load(); }
  /// Collectives (and point-to-point sends) this rank called since the last reset(); barriers
  /// and splits are not counted.
  long collectives() const { return c_->collectives.load(); }
  void reset() {
    c_->bytes.store(0);
    c_->collectives.store(0);
  }
  Inner& inner() { return inner_; }

  template <class T>
  void all_reduce(const T* s, T* r, std::size_t c, reduce_op op, stream_type st = {}) {
    add<T>(2.0 * (size() - 1) / size() * static_cast<double>(c));
    inner_.all_reduce(s, r, c, op, st);
  }
  template <class T>
  void all_gather(const T* s, T* r, std::size_t c, stream_type st = {}) {
    add<T>(static_cast<double>(size() - 1) * static_cast<double>(c));
    inner_.all_gather(s, r, c, st);
  }
  template <class T>
  void reduce_scatter(const T* s, T* r, std::size_t c, reduce_op op, stream_type st = {}) {
    add<T>(static_cast<double>(size() - 1) * static_cast<double>(c));
    inner_.reduce_scatter(s, r, c, op, st);
  }
  template <class T>
  void all_to_all(const T* s, T* r, std::size_t c, stream_type st = {}) {
    add<T>(static_cast<double>(size() - 1) * static_cast<double>(c));
    inner_.all_to_all(s, r, c, st);
  }
  template <class T>
  void all_to_allv(const T* s, const std::size_t* sc, const std::size_t* sd, T* r, const std::size_t* rc, const std::size_t* rd,
                   stream_type st = {}) {
    double e = 0;
    for (int q = 0; q < size(); ++q)
      if (q != rank()) e += static_cast<double>(sc[q]);
    add<T>(e);
    inner_.all_to_allv(s, sc, sd, r, rc, rd, st);
  }
  template <class T>
  void broadcast(T* b, std::size_t c, int root, stream_type st = {}) {
    add<T>(rank() == root ? static_cast<double>(c) : 0.0);
    inner_.broadcast(b, c, root, st);
  }
  template <class T>
  void send(const T* b, std::size_t c, int peer, stream_type st = {}) {
    add<T>(static_cast<double>(c));
    inner_.send(b, c, peer, st);
  }
  template <class T>
  void recv(T* b, std::size_t c, int peer, stream_type st = {}) {
    inner_.recv(b, c, peer, st);
  }
  /// Counts the elements sent, as send does. Present when the wrapped communicator has sendrecv.
  template <class T>
    requires has_sendrecv<Inner>
  void sendrecv(const T* s, std::size_t sc, int dest, T* r, std::size_t rc, int source, stream_type st = {}) {
    add<T>(dest == rank() ? 0.0 : static_cast<double>(sc));
    inner_.sendrecv(s, sc, dest, r, rc, source, st);
  }
  void barrier() { inner_.barrier(); }
  counting_communicator split(int color, int key) const { return counting_communicator(inner_.split(color, key), c_); }

 private:
  template <class T>
  void add(double elements) {
    c_->bytes.fetch_add(elements * static_cast<double>(sizeof(T)));
    c_->collectives.fetch_add(1);
  }
  Inner inner_;
  std::shared_ptr<counters> c_;
};

}  // namespace shardcast
