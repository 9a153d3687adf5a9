// Static plans whose search does the most work on 4 mesh axes (rank-2 tensors) and on 3
// axes (rank 3), found by counting the search's work over every such pair at run time.
// This file is compiled with clang++ and no constexpr budget flag (the test
// packaging.clang_default_budget): clang's default -fconstexpr-steps=1048576 must hold them,
// so code that includes the headers without the shardcast::shardcast target (which raises
// the budgets) still compiles static pairs on up to 4 axes.
#include <shardcast/plan.hpp>

namespace sc = shardcast;
using sc::layout, sc::partial, sc::replicate, sc::shard;

template <class From, class To, int R>
constexpr bool planned() {
  constexpr const sc::plan_set& ps = sc::static_plans<From, To, R>;
  // Every candidate ends at the target layout.
  for (int i = 0; i < ps.n; ++i)
    if (ps.p[i].nsteps < 1 || !(ps.p[i].steps[ps.p[i].nsteps - 1].to == To::desc)) return false;
  return ps.n >= 1;
}

using R4 = layout<replicate, replicate, replicate, replicate>;
static_assert(planned<layout<partial<>, partial<>, replicate, replicate>, R4, 2>());
static_assert(planned<layout<partial<>, replicate, partial<>, replicate>, R4, 2>());
static_assert(planned<layout<shard<1>, shard<0>, partial<>, shard<0>>, R4, 2>());
static_assert(planned<layout<shard<0>, shard<1>, partial<>, shard<1>>, R4, 2>());
static_assert(planned<layout<shard<0>, shard<1>, partial<>, replicate>, layout<shard<1>, replicate, shard<0>, partial<>>, 2>());
using R3 = layout<replicate, replicate, replicate>;
static_assert(planned<layout<replicate, partial<>, shard<2>>, R3, 3>());
static_assert(planned<layout<partial<>, shard<1>, shard<1>>, R3, 2>());

int main() { return 0; }
