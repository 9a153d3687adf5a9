// expect: partial_not_termwise_on_mesh_axis<0, shardcast::partial<shardcast::max ?>, shardcast::fn::sqrt_fn ?>.*static assertion failed: shardcast::map/zip/add/sub/mul/scale: the tensor is partial<max.min.prod>
// sqrt is nondecreasing only where it is defined: a negative term (or the -inf a rank with
// no element holds) becomes NaN, and the max reduction lets a NaN win, where sqrt of the
// maximum is a number. The control: tanh, defined everywhere, keeps partial<max>.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::map(x, sc::fn::sqrt);
#else
  (void)sc::map(x, sc::fn::tanh);
#endif
}
