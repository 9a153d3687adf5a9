// Misuse: check_layout given a placement where a layout type is expected.
// expect: shardcast: expected shardcast::layout<P...> as the layout type.
#include <shardcast/layout.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using L = sc::shard<0>;
#else
using L = sc::layout<sc::shard<0>>;
#endif
static_assert(sc::check_layout<L, 1, 1>());
int main() { return 0; }
