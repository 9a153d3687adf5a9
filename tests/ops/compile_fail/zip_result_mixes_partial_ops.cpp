// expect: zip_result_mixes_partial_ops_on_mesh_axis<1, shardcast::replicate, shardcast::partial<shardcast::max ?> ?>.*static assertion failed: shardcast::zip/add/sub/mul/broadcast_zip: the result would be partial with one reduce op
// Each pair is legal alone (avg(a_i + b) = avg(a) + b, max(a + b_j) = a + max(b)), but a
// layout holds one partial op: the result cannot be partial<avg> on axis 0 and partial<max> on axis 1.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::partial<sc::avg>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate, sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::partial<sc::avg>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::add(a, b);
}
