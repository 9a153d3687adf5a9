// expect: layout_mismatch<shardcast::nn::where::row_parallel_linear_output_grad, shardcast::layout<shardcast::shard<0>, shardcast::shard<0> ?>, shardcast::layout<shardcast::shard<0>, shardcast::replicate ?> ?>
// A sequence-parallel row-parallel layer's backward given an output gradient replicated over
// the TP axis; with sequence parallelism its output (and so the gradient) is split by tokens.
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/linear.hpp>
namespace sc = shardcast;
using axes = sc::nn::sequence_parallel<1, 0>;
using Mesh = sc::mesh<2>;
void f(const sc::nn::row_parallel_linear<float, Mesh, axes>& fc, const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::shard<1>>, Mesh>& h,
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
       const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::replicate>, Mesh>& dy) {
#else  // the legal call
       const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::shard<0>>, Mesh>& dy) {
#endif
  (void)fc.backward(h, dy);
}
