// expect: shardcast::nn::sequence_parallel<Tp, Dp>: sequence parallelism needs the data-parallel mesh axis before the tensor-parallel one
// Sequence parallelism with the tensor-parallel axis (0) before the data-parallel one (1):
// the token split would nest TP outside DP, and entry and exit would take three collectives.
#include <shardcast/nn/layers.hpp>
namespace sc = shardcast;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using L = sc::nn::layouts<sc::nn::sequence_parallel<0, 1>, 2>::sequence;
#else  // the legal call
using L = sc::nn::layouts<sc::nn::sequence_parallel<1, 0>, 2>::sequence;
#endif
L* p = nullptr;
