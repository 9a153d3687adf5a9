// expect: bias_add_on_partial_mesh_axis<1, shardcast::partial<shardcast::sum ?> ?>.*static assertion failed: shardcast::bias_add: x is partial on the mesh axis
// The bias would be added once per partial term.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 1>{2});
  (void)sc::bias_add(x, b);
}
