// A downstream program: runs ranks on the host backend and parses a runtime layout.
// Exit code 0 only if every check holds.
#include <shardcast/comm/host.hpp>
#include <shardcast/layout.hpp>

#include <cstdio>
#include <vector>

namespace sc = shardcast;

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "consumer: check failed: %s\n", what);
      ++failures;
    }
  };

  // Four ranks sum their (rank + 1): the reference is 1 + 2 + 3 + 4 = 10 on every rank.
  constexpr int n = 4;
  std::vector<int> got(n, -1);
  sc::host::run(n, [&](sc::host::communicator& comm) {
    int mine = comm.rank() + 1, sum = 0;
    comm.all_reduce(&mine, &sum, 1, sc::reduce_op::sum);
    got[static_cast<std::size_t>(comm.rank())] = sum;
  });
  for (int r = 0; r < n; ++r) check(got[static_cast<std::size_t>(r)] == 10, "all_reduce(sum) over 4 ranks gives 10");

  auto l = sc::runtime_layout::parse("S(1), R, P(max)");
  check(l.size() == 3, "parse gives 3 placements");
  check(l[0].is_shard(1), "axis 0 is S(1)");
  check(l[1].is_replicate(), "axis 1 is R");
  check(l[2].is_partial() && l[2].op == sc::reduce_op::max, "axis 2 is P(max)");
  check(sc::to_string(l) == "S(1),R,P(max)", "to_string round-trips");

  bool threw = false;
  try {
    (void)sc::runtime_layout::parse("S(x)");
  } catch (const sc::layout_error&) {
    threw = true;
  }
  check(threw, "bad text throws layout_error");

  if (failures == 0) std::printf("consumer: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
