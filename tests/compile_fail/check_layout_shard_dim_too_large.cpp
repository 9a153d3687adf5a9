// Misuse: shard<2> on a rank-2 tensor (dims are 0 and 1).
// expect: shardcast: a shard<D> in the layout names a tensor dim D >= the tensor's rank; use shard<D> with 0 <= D < rank.
#include <shardcast/layout.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using L = sc::layout<sc::replicate, sc::shard<2>>;
#else
using L = sc::layout<sc::replicate, sc::shard<1>>;
#endif
static_assert(sc::check_layout<L, 2, 2>());
int main() { return 0; }
