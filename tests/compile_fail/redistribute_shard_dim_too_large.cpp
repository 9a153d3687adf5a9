// Misuse: redistribute a rank-2 tensor to a layout with shard<3>.
// expect: shardcast: a shard<D> in the layout names a tensor dim D >= the tensor's rank; use shard<D> with 0 <= D < rank.
#include "sharded_input.hpp"

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using To = sc::layout<sc::replicate, sc::shard<3>>;
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
