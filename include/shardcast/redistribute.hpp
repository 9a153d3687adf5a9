#pragma once
/// @file redistribute.hpp
/// `redistribute<To>(x [, stream])`: converts a dtensor to another layout with a plan
/// the planner made at compile time (one of `static_plans<From, To, R>`, the cheapest on
/// the real mesh), executed as a fold over its steps. For dynamic-layout tensors, `redistribute(x, layout [, stream])`
/// plans at run time with the real mesh shape and extents. The input is never modified;
/// redistributing to the same layout returns a handle sharing the input's storage.
///
/// @code
///   auto y = shardcast::redistribute<shardcast::layout<shardcast::replicate, shardcast::shard<1>>>(x);
/// @endcode

#include <memory>
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

namespace detail {
/// The first static redistribute of `ps` for a mesh and extents: chooses the plan among
/// `ps` on the real mesh (detail::choose_plan), computes its geometry and caches both.
template <int R, class Mesh>
[[gnu::cold]] const plan_geometry& insert_static_geometry(const Mesh& m, const plan_set& ps, const std::int64_t* ext) {
  plan_choice c = choose_plan(ps, m.shape().data(), ext, R);
  plan_geometry g = make_geometry(m, c.p.steps, c.p.nsteps, ext, R);
  g.choice = c.choice;
  if (c.choice < 0) g.own = std::make_unique<plan>(c.p);
  return m.cache().geometry.insert(&ps, ext, R, std::move(g));
}

/// What a run of a plan produced on this rank: the result's owner, its data and its box.
template <class T>
struct run_result {
  std::shared_ptr<T> owner;
  T* data;
  const box* nb;
};

/// Runs candidate I of PS, its steps unrolled at compile time.
template <const plan_set& PS, int I, class T, int R, class From, class Mesh>
run_result<T> run_static(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s) {
  constexpr const plan& p = PS.p[I];
  const Mesh& m = x.mesh();
  if constexpr (p.nsteps == 1 && (p.steps[0].kind == step_kind::all_gather || p.steps[0].kind == step_kind::reduce_scatter ||
                                  p.steps[0].kind == step_kind::all_reduce)) {
    // One collective on pieces that already lie in place: allocate the result, one call.
    const step_geometry& sg = g.steps[0];
    if (!g.staged()) {
      auto owner = allocate_result<T>(m, sg.out_elems, s);
      auto& c = *static_cast<typename Mesh::comm_type*>(sg.comm);
      if constexpr (p.steps[0].kind == step_kind::all_gather) c.all_gather(x.data(), owner.get(), sg.chunk, s);
      else if constexpr (p.steps[0].kind == step_kind::reduce_scatter) c.reduce_scatter(x.data(), owner.get(), sg.chunk, p.steps[0].op, s);
      else c.all_reduce(x.data(), owner.get(), sg.in_elems, p.steps[0].op, s);
      T* data = owner.get();
      return {std::move(owner), data, &sg.nb};
    }
  }
  executor<T, Mesh> ex(m, g, x.data(), s);
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (ex.template run<p.steps[J].kind, J + 1 == static_cast<std::size_t>(p.nsteps)>(p.steps[J], static_cast<int>(J)), ...);
  }(std::make_index_sequence<static_cast<std::size_t>(p.nsteps)>{});
  T* data = ex.data();
  return {ex.take_owner(), data, &g.final_box()};
}

/// A static redistribute whose mesh chose the run-time plan (kept out of line).
template <class T, int R, class From, class Mesh>
[[gnu::noinline]] run_result<T> run_dynamic(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s) {
  auto [owner, data] = execute_steps(x, g.own->steps, g.own->nsteps, g, s);
  return {std::move(owner), data, &g.final_box()};
}
}  // namespace detail

/// Converts `x` to layout `To`. The candidate plans are compile-time constants
/// (`static_plans<From, To, R>`); the first call for a given mesh and global extents picks
/// the one that is cheapest on the real mesh (or the run-time plan, when the run-time
/// planner finds a strictly cheaper one), computes its geometry on this rank (boxes, chunk
/// sizes, group communicators) and keeps both in the mesh; later calls reuse them, and
/// run the chosen candidate with its steps unrolled at compile time.
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
  constexpr const plan_set& ps = static_plans<From, To, R>;
  if constexpr (ps.p[0].nsteps == 0) {
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box());
  } else {
    const std::int64_t* ext = x.global_extents().data();
    const detail::plan_geometry* gp = x.mesh().cache().geometry.template find<R>(&ps, ext);
    if (!gp) [[unlikely]]
      gp = &detail::insert_static_geometry<R>(x.mesh(), ps, ext);
    const detail::plan_geometry& g = *gp;
    // With one candidate `second` is 0 and the middle arm is never taken. (An if-constexpr
    // form of this dispatch compiled to more instructions per call with GCC 12.)
    constexpr int second = ps.n > 1 ? 1 : 0;
    detail::run_result<T> r = g.choice == 0        ? detail::run_static<static_plans<From, To, R>, 0>(x, g, s)
                              : g.choice == second ? detail::run_static<static_plans<From, To, R>, second>(x, g, s)
                                                   : detail::run_dynamic(x, g, s);
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), std::move(r.owner), r.data, *r.nb);
  }
}

/// The plan `redistribute<To>(x)` runs for x's mesh and global extents (see above); its
/// `elements` are what it costs there. Not collective; every rank gets the same plan.
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
plan plan_for(const dtensor<T, R, From, Mesh>& x) {
  static_assert(check_layout<To, Mesh::naxes, R>());
  constexpr const plan_set& ps = static_plans<From, To, R>;
  if constexpr (ps.p[0].nsteps == 0) return ps.p[0];
  else return detail::choose_plan(ps, x.mesh().shape().data(), x.global_extents().data(), R).p;
}

/// The plan `redistribute(x, to)` runs (make_plan with x's mesh shape and extents).
template <class T, int R, class Mesh>
plan plan_for(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to) {
  return make_plan(x.layout(), to, x.mesh().shape(), x.global_extents());
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
