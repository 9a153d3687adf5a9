#pragma once
/// @file redistribute.hpp
/// `redistribute<To>(x [, stream])`: converts a dtensor to another layout with the plan
/// the planner chose at compile time (`static_plan<From, To, R>`), executed as a fold
/// over its steps. For dynamic-layout tensors, `redistribute(x, layout [, stream])`
/// plans at run time with the real mesh shape and extents. The input is never modified;
/// redistributing to the same layout returns a handle sharing the input's storage.
///
/// @code
///   auto y = shardcast::redistribute<shardcast::layout<shardcast::replicate, shardcast::shard<1>>>(x);
/// @endcode

#include <utility>

#include "detail/executor.hpp"
#include "dtensor.hpp"
#include "plan.hpp"

namespace shardcast {

namespace detail {
/// Runs steps[0..nsteps) of a plan on x's piece with geometry `g`; returns the result's
/// owner and local data.
template <class T, int R, class L, class Mesh>
std::pair<std::shared_ptr<T>, T*> execute_steps(const dtensor<T, R, L, Mesh>& x, const step* steps, int nsteps, const plan_geometry& g,
                                                typename Mesh::stream_type s) {
  executor<T, Mesh> ex(x.mesh(), g, x.data(), s);
  for (int i = 0; i < nsteps; ++i) ex.run(steps[i], i);
  return {ex.take_owner(), ex.data()};
}
}  // namespace detail

/// Converts `x` to layout `To`; the plan is a compile-time constant. The first call for a
/// given mesh and global extents computes the plan's geometry on this rank (boxes, chunk
/// sizes, group communicators) and keeps it in the mesh; later calls reuse it.
/// @tparam To target layout, e.g. on a 2x2 mesh, global 4x6: x of layout<shard<0>, replicate>
///         holds 2x6 per rank; redistribute<layout<replicate, shard<1>>>(x) gives 4x3 per rank
/// @param x input (unchanged)
/// @param s stream for device backends (ignored by host backends)
/// @throws comm_error if a collective fails
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
dtensor<T, R, To, Mesh> redistribute(const dtensor<T, R, From, Mesh>& x, typename Mesh::stream_type s = {}) {
  static_assert(check_layout<To, Mesh::naxes, R>());
  static_assert(detail::same_op_partials(To::desc),
                "shardcast::redistribute: the target layout mixes partial reduce ops across axes; use one op for every partial axis.");
  constexpr const plan& p = static_plan<From, To, R>;
  if constexpr (p.nsteps == 0) {
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box());
  } else {
    const Mesh& m = x.mesh();
    const std::int64_t* ext = x.global_extents().data();
    detail::geometry_cache& cache = m.cache().geometry;
    const detail::plan_geometry* g = cache.find<R>(&p, ext);
    if (!g) g = &cache.insert(&p, ext, R, detail::make_geometry(m, p.steps, p.nsteps, ext, R));
    if constexpr (p.nsteps == 1 && (p.steps[0].kind == step_kind::all_gather || p.steps[0].kind == step_kind::reduce_scatter ||
                                    p.steps[0].kind == step_kind::all_reduce)) {
      // One collective on pieces that already lie in place: allocate the result, one call.
      const detail::step_geometry& sg = g->steps[0];
      if (!g->staged()) {
        auto owner = detail::allocate_result<T>(m, sg.out_elems, s);
        auto& c = *static_cast<typename Mesh::comm_type*>(sg.comm);
        if constexpr (p.steps[0].kind == step_kind::all_gather) c.all_gather(x.data(), owner.get(), sg.chunk, s);
        else if constexpr (p.steps[0].kind == step_kind::reduce_scatter) c.reduce_scatter(x.data(), owner.get(), sg.chunk, p.steps[0].op, s);
        else c.all_reduce(x.data(), owner.get(), sg.in_elems, p.steps[0].op, s);
        T* data = owner.get();
        return dtensor<T, R, To, Mesh>(m, x.global_extents(), std::move(owner), data, sg.nb);
      }
    }
    detail::executor<T, Mesh> ex(m, *g, x.data(), s);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (ex.template run<p.steps[I].kind, I + 1 == static_cast<std::size_t>(p.nsteps)>(p.steps[I], static_cast<int>(I)), ...);
    }(std::make_index_sequence<static_cast<std::size_t>(p.nsteps)>{});
    return dtensor<T, R, To, Mesh>(m, x.global_extents(), ex.take_owner(), ex.data(), g->final_box());
  }
}

/// Converts a dynamic-layout tensor to `to`, planned at run time for the real mesh and extents.
/// @throws layout_error if `to` does not fit the mesh or the tensor's rank
template <class T, int R, class Mesh>
dtensor<T, R, dynamic_layout, Mesh> redistribute(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to,
                                                  typename Mesh::stream_type s = {}) {
  auto& cache = x.mesh().cache().plans;
  const auto* e = cache.find(x.layout(), to, x.global_extents().data(), R);
  if (!e) {
    const plan p = make_plan(x.layout(), to, x.mesh().shape(), x.global_extents());
    if (p.nsteps == 0) return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box(), to);
    e = &cache.insert(x.global_extents().data(), R, p, detail::make_geometry(x.mesh(), p.steps, p.nsteps, x.global_extents().data(), R));
  }
  auto [owner, data] = detail::execute_steps(x, e->p.steps, e->p.nsteps, e->g, s);
  return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), std::move(owner), data, e->g.final_box(), to);
}

/// Runs an explicit plan on a dynamic-layout tensor (the plan's source must be x's layout).
template <class T, int R, class Mesh>
dtensor<T, R, dynamic_layout, Mesh> execute(const plan& p, const dtensor<T, R, dynamic_layout, Mesh>& x, typename Mesh::stream_type s = {}) {
  SHARDCAST_EXPECTS(p.src == x.layout(), "shardcast::execute: the plan starts from \"" + to_string(p.src) + "\" but the tensor has layout \"" +
                                             to_string(x.layout()) + "\"");
  if (p.nsteps == 0) return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box(), p.dst);
  const detail::plan_geometry g = detail::make_geometry(x.mesh(), p.steps, p.nsteps, x.global_extents().data(), R);
  auto [owner, data] = detail::execute_steps(x, p.steps, p.nsteps, g, s);
  return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), std::move(owner), data, g.final_box(), p.dst);
}

}  // namespace shardcast
