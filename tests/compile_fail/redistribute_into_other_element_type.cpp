// Misuse: redistribute_into an output whose element type differs from the input's.
// expect: shardcast::redistribute_into: the output's element type differs from the input's; make the output with the input's element type.
#include "sharded_input.hpp"

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using Out = double;
#else
using Out = float;
#endif

int main() {
  with_sharded_input([](auto& m, const auto& x) {
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, Out>(m, input_extents);
    sc::redistribute_into(x, y);
  });
  return 0;
}
