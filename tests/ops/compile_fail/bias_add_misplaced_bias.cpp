// expect: bias_add_bias_placement_on_mesh_axis<1, shardcast::shard<1>, shardcast::replicate ?>.*static assertion failed: shardcast::bias_add: the bias placement does not fit
// x's columns are split over axis 1, so the bias must be split the same way (shard<0>).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::replicate, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 1>{2});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{2});
#endif
  (void)sc::bias_add(x, b);
}
