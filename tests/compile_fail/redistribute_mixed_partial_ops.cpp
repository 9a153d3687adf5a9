// Misuse: redistribute to a layout whose partial axes use different reduce ops.
// expect: shardcast::redistribute: the target layout mixes partial reduce ops across axes; use one op for every partial axis.
#include "sharded_input.hpp"

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using To = sc::layout<sc::partial<sc::sum>, sc::partial<sc::max>>;
#else
using To = sc::layout<sc::partial<sc::max>, sc::partial<sc::max>>;
#endif

int main() {
  with_sharded_input([](auto&, const auto& x) {
    auto y = sc::redistribute<To>(x);
    (void)y;
  });
  return 0;
}
