// expect: static assertion failed: shardcast::matmul: A and B must each have rank 2 or more \(A \[\.\.\., m, k\], B \[\.\.\., k, n\], the leading dims broadcast by rank as in torch\.matmul\); a vector is a \[1, n\] or \[n, 1\] matrix
// A [6, 4] times a vector B [4]: write B as the [4, 1] matrix.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  using L = sc::layout<sc::replicate, sc::replicate>;
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{6, 4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 1>{4});
#else
  auto w = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{4, 1});
#endif
  (void)sc::matmul(a, w);
}
