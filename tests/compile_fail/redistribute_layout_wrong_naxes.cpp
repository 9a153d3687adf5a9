// Misuse: redistribute to a 3-placement layout on a 2-axis mesh.
// expect: shardcast: the layout's number of placements differs from the mesh's number of axes; give exactly one placement per mesh axis.
#include "sharded_input.hpp"

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using To = sc::layout<sc::replicate, sc::shard<1>, sc::replicate>;
#else
using To = sc::layout<sc::replicate, sc::shard<1>>;
#endif

int main() {
  with_sharded_input([](auto&, const auto& x) {
    auto y = sc::redistribute<To>(x);
    (void)y;
  });
  return 0;
}
