// expect: matmul_illegal_on_mesh_axis<0, shardcast::partial<shardcast::sum ?>, shardcast::partial<shardcast::sum ?> ?>.*static assertion failed: shardcast::matmul: illegal \(A, B\) placement pair
// Both operands partial sums: (A1 + A2)(B1 + B2) != A1 B1 + A2 B2.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::matmul(a, b);
}
