// expect: zip_layouts_differ_on_mesh_axis<0, shardcast::shard<0>, shardcast::shard<1> ?>.*static assertion failed: shardcast::zip/add/sub/mul/div: the operands' placements differ
// Elementwise operands must have equal layouts.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
struct larger {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::shard<1>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::zip(a, b, larger{});
}
