// expect: scalar_shift_of_partial_sum_on_mesh_axis<1>.*static assertion failed: shardcast::add\(x, c\) / sub\(x, c\) / add\(c, x\) / sub\(c, x\): x is partial<sum> on the mesh axis named in scalar_shift_of_partial_sum_on_mesh_axis<Axis>, so c would enter the sum once per partial term
// c - (x1 + x2) is not (c - x1) + (c - x2): c would be counted once per term. The control:
// c - x of a partial<max> is a partial<min> (c - x is nonincreasing in x).
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
namespace sc = shardcast;
void f(sc::mesh<2>& m, const std::vector<float>& g) {
  auto p = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::sum>>>(m, g, std::array<std::int64_t, 1>{4});
  auto q = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::max>>>(m, g, std::array<std::int64_t, 1>{4});
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
  (void)sc::sub(1.0f, p);
#else
  auto y = sc::sub(1.0f, q);
  static_assert(std::is_same_v<decltype(y)::layout_type, sc::layout<sc::shard<0>, sc::partial<sc::min>>>);
  (void)p;
#endif
}
