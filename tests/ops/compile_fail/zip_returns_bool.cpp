// expect: static assertion failed: shardcast::map/zip/broadcast_zip: f returns a type that is not an element type
// expect-first-error
// A comparison's bool is not an element type: the first error says so, in the operator's
// words (before, it came from deep in the output's construction: no dtype_of<bool>).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto a = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
  auto b = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::zip(a, b, [](float u, float v) { return u < v; });
#else
  (void)sc::zip(a, b, [](float u, float v) { return float(u < v); });
#endif
}
