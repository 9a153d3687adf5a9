// expect: partial_max_min_of_integers_on_mesh_axis<1, shardcast::partial<shardcast::max ?>, shardcast::fn::sub_fn ?>.*static assertion failed: shardcast::add/sub/map/zip/bias_add/broadcast_zip: the tensor is partial<max> or partial<min> with an integral element type
// Integer sums wrap around: terms 1 and 5 of a partial<max> of uint32, minus 3, are
// 4294967294 and 2, whose maximum is not 5 - 3. The control: the same over float.
#include <cstdint>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using T = std::uint32_t;
#else
using T = float;
#endif
void f(sc::mesh<2>& m, const std::vector<T>& g) {
  auto x = sc::distribute<sc::layout<sc::shard<1>, sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 2>{2, 2});
  auto b = sc::distribute<sc::layout<sc::shard<1>, sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 2});
  (void)sc::sub(x, b);
}
