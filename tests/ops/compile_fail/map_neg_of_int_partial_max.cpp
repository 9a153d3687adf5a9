// expect: partial_max_min_of_integers_on_mesh_axis<0, shardcast::partial<shardcast::max ?>, shardcast::fn::neg_fn ?>.*static assertion failed: shardcast::add/sub/map/zip/bias_add/broadcast_zip: the tensor is partial<max> or partial<min> with an integral element type
// Integer negation wraps: -lowest() is lowest(), and lowest() is the term a rank with no
// element holds, so the negated terms' minimum is not minus the maximum. The control: the
// same over float, where neg turns partial<max> into partial<min>.
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using T = int;
#else
using T = float;
#endif
void f(sc::mesh<1>& m, const std::vector<T>& g) {
  auto x = sc::distribute<sc::layout<sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 1>{4});
  sc::dtensor<T, 1, sc::layout<sc::partial<sc::min>>, sc::mesh<1>> y = sc::map(x, sc::fn::neg);
  (void)y;
}
