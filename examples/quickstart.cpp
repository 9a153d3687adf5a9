// shardcast quickstart: a 6x8 matrix on a 2x2 mesh of host threads, carried through a
// chain of layouts. Every step prints the plan the compiler chose and checks the result
// against the global matrix.
#include <array>
#include <cstdio>
#include <mutex>
#include <shardcast/shardcast.hpp>
#include <vector>

namespace sc = shardcast;
using sc::layout, sc::shard, sc::replicate, sc::partial;

int main() {
  constexpr std::array<std::int64_t, 2> extents{6, 8};
  std::vector<float> global(6 * 8);
  for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i % 13);

  std::mutex print;
  int failures = 0;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const bool lead = comm.rank() == 0;
    auto check = [&](const char* name, const auto& t) {
      const std::vector<float> g = sc::to_global(t);  // collective
      std::lock_guard lk(print);
      if (g != global) ++failures;
      if (lead) std::printf("  %-26s rank 0 holds %lldx%lld, global %s\n", name, (long long)t.local().extent(0),
                            (long long)t.local().extent(1), g == global ? "matches" : "DIFFERS");
    };
    auto show = [&]<class From, class To>() {
      if (!lead) return;
      constexpr sc::plan p = sc::static_plan<From, To, 2>;  // chosen at compile time
      std::lock_guard lk(print);
      std::printf("%s", sc::explain(sc::make_plan(From::desc, To::desc, mesh.shape(), extents), mesh.shape(), extents, sizeof(float)).c_str());
      std::printf("  (compile-time plan: %d steps)\n", p.nsteps);
    };

    using rows_cols = layout<shard<0>, shard<1>>;      // 2x2 blocks
    using cols_rows = layout<shard<1>, shard<0>>;      // blocks, axes swapped: all-to-all
    using partials = layout<partial<>, shard<0>>;      // pending sums along axis 0
    using scattered = layout<shard<1>, shard<0>>;      // reduce-scatter of the partial sums
    using everywhere = layout<replicate, replicate>;

    auto a = sc::distribute<rows_cols>(mesh, global, extents);
    check("distribute S(0),S(1)", a);
    show.template operator()<rows_cols, cols_rows>();
    auto b = sc::redistribute<cols_rows>(a);
    check("-> S(1),S(0)", b);
    show.template operator()<cols_rows, partials>();
    auto c = sc::redistribute<partials>(b);
    check("-> P(sum),S(0)", c);
    show.template operator()<partials, scattered>();
    auto d = sc::redistribute<scattered>(c);
    check("-> S(1),S(0)", d);
    show.template operator()<scattered, everywhere>();
    auto e = sc::redistribute<everywhere>(d);
    check("-> R,R", e);
  });
  std::printf(failures ? "quickstart: %d mismatches\n" : "quickstart: all layouts match the global matrix\n", failures);
  return failures ? 1 : 0;
}
