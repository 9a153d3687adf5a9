// expect: static assertion failed: shardcast::map/zip/broadcast_zip: f cannot be called as a const functor with the operands' elements \(a lambda marked mutable cannot
// expect-first-error
// A mutable lambda cannot be called as a const functor; the first error says so (it was a
// bare "no type named 'type' in std::invoke_result").
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<1>& m, const std::vector<float>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::map(x, [n = 0.f](float v) mutable { return v + n++; });
#else
  (void)sc::map(x, [n = 0.f](float v) { return v + n; });
#endif
}
