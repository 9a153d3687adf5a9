// Misuse: empty of const elements, which nothing could write.
// expect: shardcast::empty: the element type is const, so nothing could write the new tensor; make it with mutable elements (a dtensor<T, ...> converts to dtensor<const T, ...>).
#include "sharded_input.hpp"

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using Elem = const float;
#else
using Elem = float;
#endif

int main() {
  with_sharded_input([](auto& m, const auto&) { (void)sc::empty<sc::layout<sc::replicate, sc::replicate>, Elem>(m, input_extents); });
  return 0;
}
