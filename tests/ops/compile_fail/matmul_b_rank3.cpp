// expect: static assertion failed: shardcast::matmul: A must have rank 2 or more \(\[\.\.\., m, k\]; every dim but the last is a row dim\) and B must be a matrix \(\[k, n\]\) or have A.s rank
// A [6, 4] times B [4, 5, 2] (rank 3).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  using L = sc::layout<sc::replicate, sc::replicate>;
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{6, 4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 3>{4, 5, 2});
#else
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{4, 10});
#endif
  (void)sc::matmul(a, w);
}
