// expect: static assertion failed: shardcast::matmul: A and B have different element types; convert one first, e\.g\. map\(b,
// A of float and B of double (A of const float, which matmul only reads, is accepted).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  using L = sc::layout<sc::replicate, sc::replicate>;
  const sc::dtensor<const float, 2, L, sc::mesh<2>> a = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<L>(m, std::vector<double>(g.begin(), g.end()), std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::matmul(a, b);
}
