// Misuse: matmul(a, b, stream) on a device mesh without including <shardcast/cuda/gemm.hpp>,
// which defines the device default GEMM (cuBLAS).
// expect: shardcast::matmul(a, b, stream): no default GEMM for this memory space; include <shardcast/cuda/gemm.hpp> (cuBLAS) for device meshes, or pass a GEMM functor: matmul(a, b, gemm, stream).
#include <shardcast/ops/matmul.hpp>

#include <cstddef>

namespace sc = shardcast;

// A device-memory communicator as far as the type system sees it (declarations only; this
// file is only compiled, never linked).
struct fake_stream_tag;
using fake_stream = fake_stream_tag*;
struct fake_device_comm {
  using memory_space = sc::device_memory;
  using stream_type = fake_stream;
  int rank() const;
  int size() const;
  template <class T> void all_reduce(const T*, T*, std::size_t, sc::reduce_op, stream_type = {});
  template <class T> void all_gather(const T*, T*, std::size_t, stream_type = {});
  template <class T> void reduce_scatter(const T*, T*, std::size_t, sc::reduce_op, stream_type = {});
  template <class T> void all_to_all(const T*, T*, std::size_t, stream_type = {});
  template <class T> void all_to_allv(const T*, const std::size_t*, const std::size_t*, T*, const std::size_t*, const std::size_t*,
                                      stream_type = {});
  template <class T> void broadcast(T*, std::size_t, int, stream_type = {});
  template <class T> void send(const T*, std::size_t, int, stream_type = {});
  template <class T> void recv(T*, std::size_t, int, stream_type = {});
  void barrier();
  fake_device_comm split(int, int) const;
};
static_assert(sc::communicator<fake_device_comm>);

using mesh_t = sc::mesh<1, fake_device_comm>;
using tensor = sc::dtensor<float, 2, sc::layout<sc::replicate>, mesh_t>;

void multiply(const tensor& a, const tensor& b, fake_stream s) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto c = sc::matmul(a, b, s);
  (void)c;
#else
  (void)a;
  (void)b;
  (void)s;
#endif
}
int main() { return 0; }
