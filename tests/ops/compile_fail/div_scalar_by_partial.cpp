// expect: division_of_partial_on_mesh_axis<0, shardcast::partial<shardcast::avg ?>, void, shardcast::fn::rdiv_fn<double> ?>.*static assertion failed: shardcast::div/zip/map/broadcast_zip: a division meets a partial operand
// c / x is neither linear nor monotone in x: c / avg(x_i) is not avg(c / x_i). The control:
// a sharded x.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::partial<sc::avg>>>(m, g, std::array<std::int64_t, 1>{4});
#else
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
#endif
  (void)sc::div(1.0, x);
}
