// expect: partial_not_termwise_on_mesh_axis<0, shardcast::partial<shardcast::max ?>, shardcast::fn::scale_fn<int> ?>.*static assertion failed: shardcast::map/zip/add/sub/mul/scale: the tensor is partial<max.min.prod>
// Scaling each partial maximum by -1 would give the minimum.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 1>{4});
#else
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 1>{4});
#endif
  (void)sc::scale(x, -1);
}
