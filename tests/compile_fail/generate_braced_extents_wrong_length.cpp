// Misuse: generate with braced extents of 3 values for an f whose index has 2 dims.
// expect: shardcast::generate: f cannot be called with an index of as many dims as the braced extents have values (a const std::array<std::int64_t, R>&, R the length of the list); give one extent per dim of f's index.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>

#include <array>
#include <cstdint>

namespace sc = shardcast;

int main() {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, {2, 2});
    auto f = [](const std::array<std::int64_t, 2>& i) { return static_cast<float>(i[0] + i[1]); };
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    auto x = sc::generate<sc::layout<sc::shard<0>, sc::replicate>>(m, {3, 4, 1}, f);
#else
    auto x = sc::generate<sc::layout<sc::shard<0>, sc::replicate>>(m, {3, 4}, f);
#endif
    (void)x;
  });
  return 0;
}
