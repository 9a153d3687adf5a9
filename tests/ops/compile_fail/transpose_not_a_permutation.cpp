// expect: transpose_permutation_invalid<2, 0, 0>.*static assertion failed: shardcast::transpose<Perm...>: Perm must list every dim
// 0, 0 names dim 0 twice.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/transpose.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::transpose<0, 0>(x);
#else
  (void)sc::transpose<1, 0>(x);
#endif
}
