// Misuse: a mesh with no axes.
// expect: shardcast::mesh<N>: N must be between 1 and SHARDCAST_MAX_AXES.
#include <shardcast/comm/host.hpp>
#include <shardcast/mesh.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
constexpr int axes = 0;
#else
constexpr int axes = 1;
#endif
static_assert(sizeof(sc::mesh<axes>) > 0);
int main() { return 0; }
