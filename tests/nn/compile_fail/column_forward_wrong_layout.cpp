// expect: layout_mismatch<shardcast::nn::where::column_parallel_linear_input, shardcast::layout<shardcast::shard<0>, shardcast::replicate ?>, shardcast::layout<shardcast::shard<0>, shardcast::shard<1> ?> ?>
// A column-parallel layer (tensor parallel on axis 1, data parallel on axis 0) fed its own
// output layout (features split over TP) instead of its input layout.
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/linear.hpp>
namespace sc = shardcast;
using axes = sc::nn::tensor_parallel<1, 0>;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
void f(sc::nn::column_parallel_linear<float, sc::mesh<2>, axes>& fc, const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::shard<1>>, sc::mesh<2>>& h) {
#else  // the legal call
void f(sc::nn::column_parallel_linear<float, sc::mesh<2>, axes>& fc, const sc::dtensor<float, 2, sc::layout<sc::shard<0>, sc::replicate>, sc::mesh<2>>& h) {
#endif
  (void)fc.forward(h);
}
