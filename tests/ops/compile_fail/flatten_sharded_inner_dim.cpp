// expect: flatten_merges_a_sharded_inner_dim_on_mesh_axis<1, shardcast::shard<2>, 1, 2 ?>.*static assertion failed: shardcast::flatten<First, Last>: the mesh axis named
// x [b, s, h] with h sharded over mesh axis 1: merging s and h would give each rank a
// piece that is not one run of the merged dim.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/reshape.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<2>>>(m, g, {2, 3, 4});
#else
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, {2, 3, 4});
#endif
  (void)sc::flatten<1, 2>(x);
}
