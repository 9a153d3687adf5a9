// expect: reduce_partial_op_mismatch_on_mesh_axis<1, shardcast::partial<shardcast::sum ?>, shardcast::max ?>.*static assertion failed: shardcast::reduce<D, Op>: x is partial with another reduce op
// The max of partial sums is not the max of the sum.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/reduce.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::reduce<0, sc::max>(x);
#else
  (void)sc::reduce<0, sc::sum>(x);
#endif
}
