// Misuse: redistribute to a layout whose partial axes use different reduce ops.
// expect: shardcast::redistribute: the target layout mixes partial reduce ops across axes; use one op for every partial axis.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/redistribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using To = sc::layout<sc::partial<sc::sum>, sc::partial<sc::max>>;
#else
using To = sc::layout<sc::partial<sc::max>, sc::partial<sc::max>>;
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
