// Misuse: distribute a tensor of a struct that has no shardcast::dtype_of specialisation.
// expect: shardcast: the element type has no shardcast::dtype_of specialisation; supported are float, double, std::int8_t, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t (and __half, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2 with <shardcast/cuda/dtypes.hpp>); to add a type, specialise shardcast::dtype_of<T> with the shardcast::dtype it travels as.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

struct rgb {
  std::uint8_t r, g, b;
};

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using E = rgb;
#else
using E = std::uint8_t;
#endif

int main() {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    std::vector<E> g(6);
    auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{6});
    (void)x;
  });
  return 0;
}
