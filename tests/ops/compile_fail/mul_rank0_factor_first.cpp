// expect: static assertion failed: shardcast::zip/add/sub/mul/div: the operands have different tensor ranks; elementwise operands need equal global extents \(for a rank-0 factor use mul\(x, s\)
// expect-first-error
// A rank-0 factor goes second (mul(x, s)); given first, the first error says so.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::replicate, sc::shard<1>>>(m, g, std::array<std::int64_t, 2>{3, 4});
  auto s = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, std::vector<float>{2.f}, std::array<std::int64_t, 0>{});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::mul(s, x);
#else
  (void)sc::mul(x, s);
#endif
}
