// expect: partial_max_min_of_integers_on_mesh_axis<0, shardcast::partial<shardcast::max ?>
// A mark (fn::linear) claims a property but keeps the arithmetic: integer negation still
// wraps, so an integer partial<max> may not go through fn::linear(fn::neg).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<int>& gi, const std::vector<float>& gf) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, gi, {4});
#else
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, gf, {4});
  (void)gi;
#endif
  (void)sc::map(x, sc::fn::linear(sc::fn::neg));
}
