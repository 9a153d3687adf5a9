// Misuse: an owning dtensor of std::string, which has a dtype_of specialisation here but
// cannot be moved with memcpy.
// expect: shardcast: the element type is not trivially copyable, but pieces are moved with memcpy and collectives; use a plain numeric type.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace sc = shardcast;

#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
using E = std::string;
template <>
struct shardcast::dtype_of<std::string> {
  static constexpr dtype value = dtype::u64;
};
#else
using E = std::uint64_t;
#endif

int main() {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    auto x = sc::empty<sc::layout<sc::shard<0>>, E>(m, std::array<std::int64_t, 1>{6});
    (void)x;
  });
  return 0;
}
