// expect: shardcast::nn::zero_param: the parameter must be replicated over the data-parallel axis
// ZeRO over mesh axis 1 for a column-parallel weight that axis 1 already splits (the
// tensor-parallel axis was given as the data-parallel one).
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/zero.hpp>
namespace sc = shardcast;
using Mesh = sc::mesh<2>;
void f(const sc::dtensor<float, 2, sc::layout<sc::replicate, sc::shard<1>>, Mesh>& w) {
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::nn::make_zero_param<1>(w, sc::nn::sgd<float>{0.1f});
#else  // the legal call
  (void)sc::nn::make_zero_param<0>(w, sc::nn::sgd<float>{0.1f});
#endif
}
