// expect: mul_scalar_not_replicated_on_mesh_axis<0, shardcast::partial<shardcast::sum ?>, shardcast::partial<shardcast::sum ?> ?>.*static assertion failed: shardcast::mul\(x, s\): the rank-0 factor s is not replicate
// A partial sum times a partial scalar is not term by term.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 1>{2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto s = sc::distribute<sc::layout<sc::partial<sc::sum>>>(m, std::vector<float>{2.0f}, std::array<std::int64_t, 0>{});
#else
  auto s = sc::distribute<sc::layout<sc::replicate>>(m, std::vector<float>{2.0f}, std::array<std::int64_t, 0>{});
#endif
  (void)sc::mul(x, s);
}
