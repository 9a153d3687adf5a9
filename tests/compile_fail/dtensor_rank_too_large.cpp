// Misuse: a tensor of higher rank than SHARDCAST_MAX_RANK (8 by default), whose local box
// and plans would not fit their fixed-size arrays.
// expect: shardcast::dtensor: the tensor rank R must be between 0 and SHARDCAST_MAX_RANK
#include <array>
#include <cstdint>
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <vector>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
constexpr std::size_t rank = 9;
#else
constexpr std::size_t rank = 8;
#endif

int main() {
  sc::host::run(1, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{1});
    std::array<std::int64_t, rank> ext{};
    ext.fill(1);
    auto x = sc::distribute<sc::layout<sc::replicate>>(m, std::vector<float>(1, 1.0f), ext);
    (void)x;
  });
  return 0;
}
