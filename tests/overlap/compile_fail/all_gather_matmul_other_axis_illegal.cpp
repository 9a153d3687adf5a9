// expect: matmul_illegal_on_mesh_axis<0, shardcast::shard<1>, shardcast::shard<1> ?>
// On the other mesh axis (0) X and W form an illegal matmul pair.
#include <shardcast/ops/overlap.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, sc::overlap_context<sc::mesh<2>>& ctx, const std::vector<float>& g) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto x = sc::distribute<sc::layout<sc::shard<1>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto w = sc::distribute<sc::layout<sc::shard<1>, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#else  // the legal call
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto w = sc::distribute<sc::layout<sc::replicate, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::all_gather_matmul<1>(ctx, x, w, 2);
}
