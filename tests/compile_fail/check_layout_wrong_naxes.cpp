// Misuse: a 1-placement layout checked against a 2-axis mesh.
// expect: shardcast: the layout's number of placements differs from the mesh's number of axes; give exactly one placement per mesh axis.
#include <shardcast/layout.hpp>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
constexpr int mesh_axes = 2;
#else
constexpr int mesh_axes = 1;
#endif
static_assert(sc::check_layout<sc::layout<sc::shard<0>>, mesh_axes, 2>());
int main() { return 0; }
