// A downstream program that makes the compiler plan static redistributes on meshes of
// 3, 4 and 7 axes (the constexpr budgets that takes are part of the shardcast::shardcast
// target, so this also checks that they reach a consumer), runs them on the host backend
// and compares every result with the global tensor (partial inputs hold terms that differ
// by rank). Exit code 0 only if all match.
#include <shardcast/shardcast.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <numeric>
#include <vector>

namespace sc = shardcast;
using sc::layout, sc::shard, sc::replicate, sc::partial;

namespace {
std::atomic<int> failures{0};

/// distribute<From>, redistribute<To>, to_global: the global tensor must come back.
template <class From, class To, std::size_t N>
void round_trip(const char* what, const std::array<int, N>& shape, const std::array<std::int64_t, 2>& ext) {
  std::vector<double> global(static_cast<std::size_t>(ext[0] * ext[1]));
  std::iota(global.begin(), global.end(), 1.0);
  int nranks = 1;
  for (int s : shape) nranks *= s;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    auto x = sc::distribute<From>(m, std::span<const double>(global), ext);
    // Partial terms that only a sum adds up to the global values: distribute leaves the
    // value on coordinate 0 and zeros elsewhere, which a max would reduce to it as well.
    for (int a = 0; a < static_cast<int>(N); ++a)
      if (From::desc[a].is_partial() && m.size(a) > 1)
        for (std::size_t i = 0; i < x.local_size(); ++i)
          x.data()[i] += (m.coord(a) == 0 ? m.size(a) - 1 : -1) * static_cast<double>(1 + i % 3);
    auto y = sc::redistribute<To>(x);
    if (sc::to_global(y) != global) {
      if (comm.rank() == 0) std::fprintf(stderr, "consumer_plans: %s differs from the global tensor\n", what);
      ++failures;
    }
  });
}
}  // namespace

int main() {
  round_trip<layout<shard<0>, shard<1>, replicate>, layout<replicate, shard<0>, shard<1>>>("3 axes, S(0),S(1),R -> R,S(0),S(1)",
                                                                                           std::array<int, 3>{2, 2, 2}, {6, 5});
  round_trip<layout<partial<>, shard<0>, replicate>, layout<shard<1>, replicate, shard<0>>>("3 axes, P,S(0),R -> S(1),R,S(0)",
                                                                                            std::array<int, 3>{2, 1, 2}, {4, 7});
  round_trip<layout<shard<0>, shard<1>, partial<>, replicate>, layout<shard<1>, replicate, shard<0>, partial<>>>(
      "4 axes, S(0),S(1),P,R -> S(1),R,S(0),P", std::array<int, 4>{2, 1, 2, 1}, {8, 6});
  round_trip<layout<shard<0>, shard<1>, partial<>, replicate, shard<0>, shard<1>, replicate>,
             layout<shard<1>, replicate, shard<0>, partial<>, shard<1>, shard<0>, shard<0>>>("7 axes", std::array<int, 7>{2, 1, 1, 2, 1, 1, 1},
                                                                                            {6, 5});
  if (failures == 0) std::printf("consumer_plans: every static redistribute matches the global tensor\n");
  return failures == 0 ? 0 : 1;
}
