// expect: static assertion failed: shardcast::zip/add/sub/mul/div: the operands have different tensor ranks; elementwise operands need equal global extents
// expect-first-error
// A rank-1 operand is not broadcast along a rank-2 one (bias_add does that for a row).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
struct larger {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 1>{4});
#else
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
#endif
  (void)sc::zip(a, b, larger{});
}
