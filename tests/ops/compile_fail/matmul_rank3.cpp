// expect: static assertion failed: shardcast::matmul: A and B must be matrices \(rank 2: \[m, k\] and \[k, n\]\)
// A [2, 3, 4] (rank 3) times W [4, 5].
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  using L = sc::layout<sc::replicate, sc::replicate>;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 3>{2, 3, 4});
#else
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{6, 4});
#endif
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{4, 5});
  (void)sc::matmul(a, w);
}
