// Misuse: redistribute_into from a tensor on a mesh into one on a mesh_ref of it (the two
// handle types do not mix; make both tensors on the same kind of handle).
// expect: shardcast::redistribute_into: the output's mesh type differs from the input's; make the output on the input's mesh.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/redistribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

int main() {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    std::vector<float> g(12, 1.0f);
    const std::array<std::int64_t, 2> ext{3, 4};
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, ext);
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m.ref(), ext);
#else
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m, ext);
#endif
    sc::redistribute_into(x, y, sc::host_stream{});
  });
  return 0;
}
