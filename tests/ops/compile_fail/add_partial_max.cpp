// expect: partial_not_termwise_on_mesh_axis<1, shardcast::partial<shardcast::max ?>, shardcast::fn::add_fn ?>.*static assertion failed: shardcast::map/zip/add/sub/mul/scale: the tensor is partial<max.min.prod>
// max(a1, a2) + max(b1, b2) != max(a1 + b1, a2 + b2).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  using L = sc::layout<sc::shard<1>, sc::partial<sc::max>>;
#else
  using L = sc::layout<sc::shard<1>, sc::partial<sc::sum>>;
#endif
  auto x = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::add(x, x);
}
