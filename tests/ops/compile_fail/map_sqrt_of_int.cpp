// expect: static assertion failed: shardcast::fn::sqrt: integer elements; convert to a floating type first
// sqrt, rsqrt, log, tanh and sigmoid of integer elements would truncate (and convert NaN
// or inf to an integer); convert first.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using T = int;
#else
using T = double;
#endif
void f(sc::mesh<1>& m, const std::vector<T>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
  (void)sc::map(x, sc::fn::sqrt);
}
