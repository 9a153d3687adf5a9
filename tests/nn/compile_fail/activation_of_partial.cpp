// expect: shardcast::nn::activation: the input has a partial placement
// gelu applied to a row-parallel layer's unreduced output (a partial sum over the TP axis).
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/activation.hpp>
namespace sc = shardcast;
using Mesh = sc::mesh<2>;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
void f(const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::partial<>>, Mesh>& y) { (void)sc::nn::gelu.forward(y); }
#else  // the legal call
void f(const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::replicate>, Mesh>& y) { (void)sc::nn::gelu.forward(y); }
#endif
