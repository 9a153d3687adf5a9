// expect: shardcast::bias_add: the bias must have rank 1 with x's last extent
// A full-shape (rank-2) tensor passed as the bias of a rank-2 x.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 1>{2});
#endif
  (void)sc::bias_add(x, b);
}
