// expect: static assertion failed: shardcast::add: the operands have different element types; convert one first
// add needs equal element types, whether the operands are kept or given up.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g, const std::vector<double>& h) {
  using L = sc::layout<sc::shard<0>, sc::replicate>;
  auto a = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{2, 2});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  auto b = sc::distribute<L>(m, h, std::array<std::int64_t, 2>{2, 2});
#else
  auto b = sc::distribute<L>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)h;
#endif
  (void)sc::add(std::move(a), b);
}
