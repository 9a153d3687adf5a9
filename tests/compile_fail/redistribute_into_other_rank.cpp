// Misuse: redistribute_into an output whose tensor rank differs from the input's.
// expect: shardcast::redistribute_into: the output's rank differs from the input's; give the output the input's global extents.
#include "sharded_input.hpp"

int main() {
  with_sharded_input([](auto& m, const auto& x) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m, std::array<std::int64_t, 3>{3, 4, 1});
#else
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m, input_extents);
#endif
    sc::redistribute_into(x, y, sc::host_stream{});
  });
  return 0;
}
