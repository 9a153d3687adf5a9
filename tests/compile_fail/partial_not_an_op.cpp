// Misuse: partial<int>; the reduction must be one of the op tags.
// expect: shardcast::partial<Op>: Op must be one of shardcast::sum, avg, max, min, prod.
#include <shardcast/placement.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using op = int;
#else
using op = sc::max;
#endif
static_assert(sc::partial<op>::desc.is_partial());
int main() { return 0; }
