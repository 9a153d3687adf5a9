// Misuse: a layout whose parameter is not a placement.
// expect: shardcast::layout<P...>: every P must be a placement: replicate, shard<D> or partial<Op>.
#include <shardcast/layout.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using bad = sc::layout<sc::replicate, int>;
#else
using bad = sc::layout<sc::replicate, sc::shard<0>>;
#endif
static_assert(bad::naxes == 2);
int main() { return 0; }
