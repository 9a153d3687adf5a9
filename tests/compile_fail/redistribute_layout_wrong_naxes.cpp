// Misuse: redistribute to a 3-placement layout on a 2-axis mesh.
// expect: shardcast: the layout's number of placements differs from the mesh's number of axes; give exactly one placement per mesh axis.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/redistribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using To = sc::layout<sc::replicate, sc::shard<1>, sc::replicate>;
#else
using To = sc::layout<sc::replicate, sc::shard<1>>;
#endif

int main() {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    std::vector<float> g(12, 1.0f);
    const std::array<std::int64_t, 2> ext{3, 4};
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, ext);
    auto y = sc::redistribute<To>(x);
    (void)y;
  });
  return 0;
}
