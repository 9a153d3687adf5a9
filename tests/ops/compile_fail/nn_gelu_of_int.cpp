// expect: static assertion failed: shardcast::fn::gelu: integer elements; convert to a floating type first
// gelu, silu, exp and the activation gradients of integer elements would truncate (gelu(1)
// would be 0); convert first.
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/activation.hpp>
namespace sc = shardcast;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using T = int;
#else
using T = float;
#endif
void f(sc::mesh<1>& m, const std::vector<T>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, std::array<std::int64_t, 1>{4});
  (void)sc::nn::gelu.forward(x);
}
