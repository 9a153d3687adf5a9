// expect: partial_avg_of_integers_on_mesh_axis<0, shardcast::partial<shardcast::avg ?>, shardcast::fn::div_fn ?>.*static assertion failed: shardcast::map/zip/add/sub/mul/div/scale/bias_add/broadcast_zip/reduce<D, sum>: the tensor is partial<avg> with an integral element type
// div(x, s) of an integer partial<avg> x: its value is a truncated mean, which no division
// commutes with. The control: an integer x sharded on that axis.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<std::int64_t>& g) {
  auto s = sc::distribute<sc::layout<sc::replicate>>(m, std::vector<std::int64_t>{2}, std::array<std::int64_t, 0>{});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::partial<sc::avg>>>(m, g, std::array<std::int64_t, 1>{4});
#else
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
#endif
  (void)sc::div(x, s);
}
