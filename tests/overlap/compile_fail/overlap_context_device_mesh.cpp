// expect: overlap_context: the pipelined operators run on host-memory backends
// A mesh over a device-memory communicator (declared only: this file is never linked).
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
struct device_comm {
  using memory_space = sc::device_memory;
  struct stream_type {};
  int rank() const;
  int size() const;
  template <class T> void all_reduce(const T*, T*, std::size_t, sc::reduce_op, stream_type = {});
  template <class T> void all_gather(const T*, T*, std::size_t, stream_type = {});
  template <class T> void reduce_scatter(const T*, T*, std::size_t, sc::reduce_op, stream_type = {});
  template <class T> void all_to_all(const T*, T*, std::size_t, stream_type = {});
  template <class T>
  void all_to_allv(const T*, const std::size_t*, const std::size_t*, T*, const std::size_t*, const std::size_t*, stream_type = {});
  template <class T> void broadcast(T*, std::size_t, int, stream_type = {});
  template <class T> void send(const T*, std::size_t, int, stream_type = {});
  template <class T> void recv(T*, std::size_t, int, stream_type = {});
  void barrier();
  device_comm split(int, int) const;
};
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
void f(sc::mesh<1, device_comm>& m) { sc::overlap_context ctx(m); }
#else  // the legal call: the same construction on a host-memory mesh
void f(sc::mesh<1, sc::host::communicator>& m) { sc::overlap_context ctx(m); }
#endif
