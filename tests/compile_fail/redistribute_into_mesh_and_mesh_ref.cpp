// Misuse: redistribute_into from a tensor on a mesh into one on a mesh_ref of it (the two
// handle types do not mix; make both tensors on the same kind of handle).
// expect: shardcast::redistribute_into: the output's mesh type differs from the input's; make the output on the input's mesh.
#include "sharded_input.hpp"

int main() {
  with_sharded_input([](auto& m, const auto& x) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m.ref(), input_extents);
#else
    auto y = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(m, input_extents);
#endif
    sc::redistribute_into(x, y, sc::host_stream{});
  });
  return 0;
}
