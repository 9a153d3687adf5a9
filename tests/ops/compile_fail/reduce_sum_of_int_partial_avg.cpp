// expect: partial_avg_of_integers_on_mesh_axis<0, shardcast::partial<shardcast::avg ?>, shardcast::sum ?>.*static assertion failed: shardcast::map/zip/add/sub/mul/div/scale/bias_add/broadcast_zip/reduce<D, sum>: the tensor is partial<avg> with an integral element type
// The mean of integers truncates: with terms (1, 1) and (0, 0) the means are 0 and 0, their
// sum 0, but the sums 2 and 0 have the mean 1.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/reduce.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<long>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::avg>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::reduce<1, sc::sum>(x);
#else
  (void)sc::reduce<1, sc::sum>(sc::redistribute<sc::layout<sc::replicate, sc::shard<0>>>(x));  // the mean first
#endif
}
