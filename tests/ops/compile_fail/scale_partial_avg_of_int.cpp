// expect: partial_avg_of_integers_on_mesh_axis<1, shardcast::partial<shardcast::avg ?>, shardcast::fn::scale_fn<int> ?>.*static assertion failed: shardcast::map/zip/add/sub/mul/div/scale/bias_add/broadcast_zip/reduce<D, sum>: the tensor is partial<avg> with an integral element type
// An integer partial<avg> is the truncated mean trunc((x1 + x2) / 2): with terms 1 and 0 it
// is 0, so 2 * mean is 0, but the terms scaled, 2 and 0, have the mean 1.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<int>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::avg>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::scale(x, 2);
#else
  (void)sc::map(x, sc::fn::identity);  // the identity is the one map that keeps it
#endif
}
