// Misuse: more placements than SHARDCAST_MAX_AXES (8 by default).
// expect: shardcast::layout<P...>: too many mesh axes; raise SHARDCAST_MAX_AXES.
#include <shardcast/layout.hpp>

namespace sc = shardcast;
using R = sc::replicate;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using wide = sc::layout<R, R, R, R, R, R, R, R, R>;
static_assert(wide::naxes == 9);
#else
using wide = sc::layout<R, R, R, R, R, R, R, R>;
static_assert(wide::naxes == 8);
#endif
int main() { return 0; }
