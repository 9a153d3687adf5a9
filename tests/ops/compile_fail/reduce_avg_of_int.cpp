// expect: static assertion failed: shardcast::reduce<D, avg>: the element type is integral
// Integer means of uneven parts do not add up to the mean.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/reduce.hpp>
namespace sc = shardcast;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using T = int;
#else
using T = double;
#endif
void f(sc::mesh<1>& m, const std::vector<T>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::reduce<0, sc::avg>(x);
}
