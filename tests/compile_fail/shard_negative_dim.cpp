// Misuse: shard<-1> names no tensor dim.
// expect: shardcast::shard<D>: D names a tensor dim and must be >= 0; use shard<0> for the outermost dim.
#include <shardcast/placement.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
constexpr int d = -1;
#else
constexpr int d = 0;
#endif
static_assert(sc::shard<d>::desc.is_shard());
int main() { return 0; }
