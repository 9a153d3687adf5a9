// Misuse: shardcast::sendrecv on a communicator that has no sendrecv member.
// expect: shardcast::sendrecv: this communicator has no sendrecv member
#include <shardcast/comm/host.hpp>

namespace sc = shardcast;

// The host communicator with its sendrecv hidden: a communicator that has only send and recv.
struct without_sendrecv : sc::host::communicator {
  explicit without_sendrecv(sc::host::communicator c) : sc::host::communicator(std::move(c)) {}
  template <class T>
  void sendrecv(const T*, std::size_t, int, T*, std::size_t, int, stream_type = {}) = delete;
  without_sendrecv split(int color, int key) const { return without_sendrecv(sc::host::communicator::split(color, key)); }
};
static_assert(sc::communicator<without_sendrecv>);
static_assert(!sc::has_sendrecv<without_sendrecv>);

int main() {
  sc::host::run(1, [](sc::host::communicator& c) {
    float a = 1, b = 0;
#ifndef SHARDCAST_COMPILE_FAIL_CONTROL
    without_sendrecv p(c);
    sc::sendrecv(p, &a, 1, 0, &b, 1, 0);
#else
    sc::sendrecv(c, &a, 1, 0, &b, 1, 0);
#endif
  });
  return 0;
}
