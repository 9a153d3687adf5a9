// Misuse: distribute a rank-2 tensor with shard<2> (dims are 0 and 1).
// expect: shardcast: a shard<D> in the layout names a tensor dim D >= the tensor's rank; use shard<D> with 0 <= D < rank.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using L = sc::layout<sc::shard<2>, sc::replicate>;
#else
using L = sc::layout<sc::shard<1>, sc::replicate>;
#endif

int main() {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    std::vector<float> g(12, 1.0f);
    const std::array<std::int64_t, 2> ext{3, 4};
    auto x = sc::distribute<L>(m, g, ext);
    (void)x;
  });
  return 0;
}
