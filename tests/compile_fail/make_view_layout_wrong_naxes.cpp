// Misuse: a view over existing memory with a 1-placement layout on a 2-axis mesh.
// expect: shardcast: the layout's number of placements differs from the mesh's number of axes; give exactly one placement per mesh axis.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using L = sc::layout<sc::replicate>;
#else
using L = sc::layout<sc::replicate, sc::replicate>;
#endif

int main() {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    std::vector<float> g(12, 1.0f);
    const std::array<std::int64_t, 2> ext{3, 4};
    auto v = sc::make_view<L>(m, g.data(), ext);
    (void)v;
  });
  return 0;
}
