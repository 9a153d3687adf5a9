// Misuse: redistribute_into an output whose element type differs from the input's.
// expect: shardcast::redistribute_into: the output's element type differs from the input's; make the output with the input's element type.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/redistribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using Out = double;
#else
using Out = float;
#endif

int main() {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    std::vector<float> g(12, 1.0f);
    const std::array<std::int64_t, 2> ext{3, 4};
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, ext);
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, Out>(m, ext);
    sc::redistribute_into(x, y);
  });
  return 0;
}
