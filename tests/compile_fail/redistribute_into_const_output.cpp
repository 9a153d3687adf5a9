// Misuse: redistribute_into an output whose elements are const (a view of read-only memory).
// expect: shardcast::redistribute_into: the output's elements are const; make the output over memory it may write (a dtensor of mutable elements).
#include "sharded_input.hpp"

int main() {
  with_sharded_input([](auto& m, const auto& x) {
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m, input_extents);
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    const sc::dtensor<const float, 2, sc::layout<sc::replicate, sc::replicate>, std::remove_cvref_t<decltype(m)>> out = y;
#else
    const auto& out = y;
#endif
    sc::redistribute_into(x, out);
  });
  return 0;
}
