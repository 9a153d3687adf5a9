// Misuse: layout<> has no placement for any mesh axis.
// expect: shardcast::layout<>: give one placement per mesh axis (at least one).
#include <shardcast/layout.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using empty = sc::layout<>;
#else
using empty = sc::layout<sc::replicate>;
#endif
static_assert(empty::naxes >= 0);
int main() { return 0; }
