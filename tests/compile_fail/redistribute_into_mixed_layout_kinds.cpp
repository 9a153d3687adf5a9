// Misuse: redistribute_into from a static-layout tensor into a dynamic-layout one.
// expect: shardcast::redistribute_into: one of the input and the output has dynamic_layout and the other a static layout
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
    std::vector<float> g(12, 1.0f), out(12);
    const std::array<std::int64_t, 2> ext{3, 4};
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, ext);
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    sc::dtensor<float, 2, sc::dynamic_layout, decltype(m)> y(m, ext, nullptr, out.data(), sc::runtime_layout::parse("R,R"));
#else
    auto y = sc::make_view<sc::layout<sc::replicate, sc::replicate>>(m, out.data(), ext);
#endif
    sc::redistribute_into(x, y, sc::host_stream{});
  });
  return 0;
}
