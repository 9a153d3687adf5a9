#pragma once
/// @file redistribute.hpp
/// `redistribute<To>(x [, stream])`: converts a dtensor to another layout with a plan
/// the planner made at compile time (one of `static_plans<From, To, R>`, the cheapest on
/// the real mesh), executed as a fold over its steps. For dynamic-layout tensors, `redistribute(x, layout [, stream])`
/// plans at run time with the real mesh shape and extents. The input is never modified;
/// redistributing to the same layout returns a handle sharing the input's storage (a copy, for an
/// input of const elements: see below). An input
/// the caller gives up (`redistribute<To>(std::move(x))`, or a temporary) hands its mesh
/// handle and, for a plan of one all_reduce, its storage to the result, which is then
/// reduced in place.
/// `redistribute_into(x, y [, stream])` runs the same plan into the storage y already has.
///
/// @code
///   auto y = shardcast::redistribute<shardcast::layout<shardcast::replicate, shardcast::shard<1>>>(x);
/// @endcode

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "detail/agreement.hpp"
#include "detail/executor.hpp"
#include "dtensor.hpp"
#include "explain.hpp"
#include "plan.hpp"

namespace shardcast {

namespace detail {
/// The compile-time checks of a redistribute (every form) to the static layout To of a
/// rank-R tensor on an N-axis mesh.
template <class To, int N, int R>
constexpr bool check_target() {
  static_assert(shardcast::check_layout<To, N, R>());
  static_assert(same_op_partials(To::desc),
                "shardcast::redistribute: the target layout mixes partial reduce ops across axes; use one op for every partial axis.");
  return true;
}
/// The output of redistribute_into (every form) has elements it may write.
template <class T>
constexpr bool check_into_output() {
  static_assert(!std::is_const_v<T>, "shardcast::redistribute_into: the output's elements are const; make the output over memory it may write "
                                    "(a dtensor of mutable elements).");
  return true;
}

/// Runs steps[0..nsteps) of a plan on x's piece with geometry `g`; returns the result's
/// owner and local data.
/// With `Into`, the last step writes into `dest` and the owner is empty.
template <bool Into = false, class T, int R, class L, class Mesh>
std::pair<std::shared_ptr<T>, T*> execute_steps(const dtensor<T, R, L, Mesh>& x, const step* steps, int nsteps, const plan_geometry& g,
                                                typename Mesh::stream_type s, T* dest = nullptr) {
  executor<T, Mesh, Into> ex(x.mesh(), g, x.data(), s, dest);
  for (int i = 0; i < nsteps; ++i) ex.run(steps[i], i);
  return {ex.take_owner(), ex.data()};
}
}  // namespace detail

namespace detail {
/// The plan a static redistribute of `ps` runs on mesh `m` for extents `ext`
/// (detail::choose_plan), with the run-time search it compares with taken from the plans
/// shared by the process's ranks (detail::shared_plans).
template <int R, class Mesh>
plan_choice choose_static_plan(const Mesh& m, const plan_set& ps, const std::int64_t* ext) {
  const int* shape = m.shape().data();
  return choose_plan(ps, shape, ext, R, shared_plans().get(ps[0].src, ps[0].dst, shape, ext, R));
}

/// The run-time plan x.layout() -> `to` for x's mesh and extents, from the plans shared by
/// the process's ranks, once `to` is validated against the mesh and the tensor's rank.
template <class T, int R, class Mesh>
plan shared_runtime_plan(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to, const char* who = "shardcast::redistribute") {
  to.validate(Mesh::naxes, R, who);
  SHARDCAST_EXPECTS(same_op_partials(to), std::string(who) + ": layout \"" + to_string(to) +
                                              "\" mixes partial reduce ops; a tensor's partial axes share one op, so use one op for every "
                                              "partial axis of the target");
  return shared_plans().get(x.layout(), to, x.mesh().shape().data(), x.global_extents().data(), R);
}

/// The first static redistribute of `ps` for a mesh and extents: chooses the plan among
/// `ps` on the real mesh (choose_static_plan), computes its geometry and caches both.
template <int R, class Mesh>
[[gnu::cold]] const plan_geometry& insert_static_geometry(const Mesh& m, const plan_set& ps, const std::int64_t* ext) {
  plan_choice c = choose_static_plan<R>(m, ps, ext);
  plan_geometry g = make_geometry(m, c.p.steps, c.p.nsteps, ext, R);
  g.choice = c.choice;
  const std::size_t out = g.steps.back().out_elems;
  const bool small = out > 0 && out < result_pool::min_bytes / plan_geometry::direct_elem_bytes;
  g.direct = !g.staged() && small && !g.steps[0].idle ? c.choice : -1;
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

/// Is `p` one collective on pieces that can lie in place (an all_gather, reduce_scatter or
/// all_reduce)? Such a plan runs as one allocation and one call when nothing needs staging.
constexpr bool single_collective(const plan& p) {
  return p.nsteps == 1 && (p.steps[0].kind == step_kind::all_gather || p.steps[0].kind == step_kind::reduce_scatter ||
                           p.steps[0].kind == step_kind::all_reduce);
}

/// Runs the single collective of candidate I of PS (single_collective) on pieces that lie in
/// place: allocates the result (unless `Into`, which writes into `dest`) and makes one call.
/// `Direct`: g.direct is I (see plan_geometry::direct).
template <const plan_set& PS, int I, bool Into = false, bool Direct = false, class T, int R, class From, class Mesh>
inline run_result<T> run_single(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s, T* dest = nullptr) {
  constexpr const step& st = PS.p[I].steps[0];
  const step_geometry& sg = g.steps[0];
  std::shared_ptr<T> owner;
  T* data = dest;
  if constexpr (!Into) {
    owner = Direct ? allocate_direct<T>(x.mesh(), sg.out_elems, s) : allocate_result<T>(x.mesh(), sg.out_elems, s);
    data = owner.get();
  }
  auto& c = *static_cast<typename Mesh::comm_type*>(sg.comm);
  if constexpr (st.kind == step_kind::all_gather) c.all_gather(x.data(), data, sg.chunk, s);
  else if constexpr (st.kind == step_kind::reduce_scatter) c.reduce_scatter(x.data(), data, sg.chunk, st.op, s);
  else c.all_reduce(x.data(), data, sg.in_elems, st.op, s);
  return {std::move(owner), data, &sg.nb};
}

/// Does the single collective of candidate I of PS write no more than the result's piece?
/// Only a reduce_scatter into a caller's output (`Into`) can write more: a chunk padded to
/// the largest piece, which goes through the executor (it keeps the piece).
template <const plan_set& PS, int I, bool Into>
inline bool single_fits_output(const step_geometry& sg) {
  if constexpr (Into && PS.p[I].steps[0].kind == step_kind::reduce_scatter)
    return sg.out_elems == static_cast<std::size_t>(sg.nb.volume());
  else
    return true;
}

/// Runs candidate I of PS, its steps unrolled at compile time (with `Into`, into `dest`).
template <const plan_set& PS, int I, bool Into = false, class T, int R, class From, class Mesh>
run_result<T> run_static(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s, T* dest = nullptr) {
  constexpr const plan& p = PS.p[I];
  if constexpr (single_collective(PS.p[I])) {
    if (!g.staged() && !g.steps[0].idle && single_fits_output<PS, I, Into>(g.steps[0])) return run_single<PS, I, Into>(x, g, s, dest);
  }
  executor<T, Mesh, Into> ex(x.mesh(), g, x.data(), s, dest);
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (ex.template run<p.steps[J].kind, J + 1 == static_cast<std::size_t>(p.nsteps)>(p.steps[J], static_cast<int>(J)), ...);
  }(std::make_index_sequence<static_cast<std::size_t>(p.nsteps)>{});
  T* data = ex.data();
  return {ex.take_owner(), data, &g.final_box()};
}

/// A static redistribute whose mesh chose the run-time plan (kept out of line).
template <bool Into = false, class T, int R, class From, class Mesh>
[[gnu::noinline]] run_result<T> run_dynamic(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s,
                                            T* dest = nullptr) {
  auto [owner, data] = execute_steps<Into>(x, g.own->steps, g.own->nsteps, g, s, dest);
  return {std::move(owner), data, &g.final_box()};
}

/// The geometry of a static redistribute when it is not the mesh's most recent one: cached
/// or, on first use, chosen and cached (kept out of line).
template <int R, class Mesh>
[[gnu::cold, gnu::noinline]] const plan_geometry& static_geometry_lookup(const Mesh& m, const plan_set& ps, const std::int64_t* ext) {
  if (const plan_geometry* g = m.cache().geometry.find(&ps, ext, R)) return *g;
  return insert_static_geometry<R>(m, ps, ext);
}

/// The geometry of the static redistribute From -> To for x's mesh and extents, chosen and
/// cached on first use.
template <class To, class T, int R, class From, class Mesh>
const plan_geometry& static_geometry(const dtensor<T, R, From, Mesh>& x) {
  constexpr const plan_set& ps = static_plans<From, To, R>;
  const std::int64_t* ext = x.global_extents().data();
  require_mesh(x.mesh(), "shardcast::redistribute");
  const geometry_cache& cache = x.mesh().cache().geometry;
  if (cache.is_recent<R>(&ps, ext)) [[likely]]
    return cache.recent();
  return static_geometry_lookup<R>(x.mesh(), ps, ext);
}

/// Runs the static redistribute From -> To whose geometry is `g`: the chosen candidate with
/// its steps unrolled, or the run-time plan (with `Into`, into `dest`).
template <class To, bool Into = false, class T, int R, class From, class Mesh>
inline run_result<T> run_chosen(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s, T* dest = nullptr) {
  constexpr const plan_set& ps = static_plans<From, To, R>;
  // With one candidate `second` is 0 and the middle arm is never taken. (An if-constexpr
  // form of this dispatch compiled to more instructions per call with GCC 12.)
  constexpr int second = ps.n > 1 ? 1 : 0;
  return g.choice == 0        ? run_static<ps, 0, Into>(x, g, s, dest)
         : g.choice == second ? run_static<ps, second, Into>(x, g, s, dest)
                              : run_dynamic<Into>(x, g, s, dest);
}
/// The same, out of line: the way a redistribute goes when its single-collective candidate
/// cannot run directly, so that the direct path keeps few registers.
template <class To, bool Into = false, class T, int R, class From, class Mesh>
[[gnu::noinline]] run_result<T> run_chosen_outlined(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s,
                                                    T* dest = nullptr) {
  return run_chosen<To, Into>(x, g, s, dest);
}

/// The first candidate of `ps` that is one collective (single_collective), or -1.
constexpr int single_collective_candidate(const plan_set& ps) {
  return single_collective(ps.p[0]) ? 0 : ps.n > 1 && single_collective(ps.p[1]) ? 1 : -1;
}

/// The candidate of `ps` that is one all_reduce, or -1: the plan a redistribute of a tensor
/// the caller gives up may run in place.
constexpr int single_all_reduce_candidate(const plan_set& ps) {
  for (int i = 0; i < ps.n; ++i)
    if (ps.p[i].nsteps == 1 && ps.p[i].steps[0].kind == step_kind::all_reduce) return i;
  return -1;
}

/// What a redistribute of a tensor the caller gives up hands to its result.
template <class T, class Mesh>
struct given_up {
  Mesh mesh;
  std::shared_ptr<T> owner;
  T* data;
};

/// Runs the all_reduce `sg` of a redistribute of `x`, which the caller gives up, in place:
/// in x's storage when x owns it alone, else (a copy of x holds it, or x views the caller's
/// memory) in new storage that first receives x's piece, so that every rank of the group
/// runs it in place alike. Leaves x empty, also when the all_reduce throws after writing
/// into x's storage (which is then released: nobody can read what it left there); when it
/// throws on new storage, x is as it was.
template <class T, int R, class L, class Mesh>
given_up<T, Mesh> all_reduce_given_up(dtensor<T, R, L, Mesh>& x, const step_geometry& sg, reduce_op op, typename Mesh::stream_type s) {
  std::shared_ptr<T> fresh;
  T* data = x.data();
  if (!x.owns() || x.owner().use_count() != 1) {
    fresh = allocate_result<T>(x.mesh(), sg.in_elems, s);
    data = fresh.get();
    memory_ops<typename Mesh::memory_space>::copy(data, x.data(), sg.in_elems, s);
  }
  try {
    if (!sg.idle) static_cast<typename Mesh::comm_type*>(sg.comm)->all_reduce(data, data, sg.in_elems, op, s);
  } catch (...) {
    if (!fresh) x.take();
    throw;
  }
  auto taken = x.take();
  return {std::move(taken.first), fresh ? std::move(fresh) : std::move(taken.second), data};
}

/// Runs the static redistribute From -> To whose geometry is `g` (see redistribute).
/// (Into `r`, which the caller declared: returning it by value costs the direct path four
/// instructions per call with GCC 12.)
template <class To, class T, int R, class From, class Mesh>
inline void run_redistribute(const dtensor<T, R, From, Mesh>& x, const plan_geometry& g, typename Mesh::stream_type s, run_result<T>& r) {
  constexpr const plan_set& ps = static_plans<From, To, R>;
  // The common case: a candidate that is one collective runs, with nothing staged.
  constexpr int single = single_collective_candidate(ps);
  if constexpr (single >= 0) {
    r = g.direct == single ? run_single<ps, single, false, true>(x, g, s) : run_chosen_outlined<To>(x, g, s);
  } else {
    r = run_chosen<To>(x, g, s);
  }
}

/// A copy of x's piece, of const elements, into new storage that the result owns: the
/// redistribute of a tensor of const elements whose plan has no steps.
template <class Y, class T, int R, class L, class Mesh>
Y copy_of_read_only(const dtensor<const T, R, L, Mesh>& x, const runtime_layout& to, typename Mesh::stream_type s) {
  const std::size_t n = x.local_size();
  std::shared_ptr<T> owner = allocate_result<T>(x.mesh(), n, s);
  memory_ops<typename Mesh::memory_space>::copy(owner.get(), x.data(), n, s);
  T* const data = owner.get();
  return handle_of<Y>(x.mesh(), x.global_extents(), std::move(owner), data, x.local_box(), to);
}

/// Why x and y do not fit redistribute_into (cold: only called when they do not).
template <class T, int R, class LX, class LY, class Mesh>
[[gnu::cold, gnu::noinline]] void throw_into_error(const dtensor<T, R, LX, Mesh>& x, const dtensor<T, R, LY, Mesh>& y) {
  const std::string who = "shardcast::redistribute_into: ";
  require_mesh(x.mesh(), "shardcast::redistribute_into: the input");  // (before comparing meshes: an empty one has none)
  require_mesh(y.mesh(), "shardcast::redistribute_into: the output");
  SHARDCAST_EXPECTS(x.mesh() == y.mesh(), who + "the output lives on another mesh; create it on the input's mesh");
  SHARDCAST_EXPECTS(x.global_extents() == y.global_extents(),
                    who + "the output's global extents differ from the input's; give it the input's global extents");
  SHARDCAST_EXPECTS(y.local_size() == 0 || y.data() != nullptr, who + "the output has no memory for its local piece");
  throw layout_error(who + "the output's local piece overlaps the input's, which redistribute never modifies; give the output memory of its own");
}

/// The checks of redistribute_into: same mesh and global extents, memory for y's piece,
/// and y's piece disjoint from x's (or the same piece when `same_layout`).
template <class T, int R, class LX, class LY, class Mesh>
inline void check_into(const dtensor<T, R, LX, Mesh>& x, const dtensor<T, R, LY, Mesh>& y, bool same_layout) {
  const std::size_t nx = x.local_size(), ny = y.local_size();
  const T *px = x.data(), *py = y.data();
  bool same_extents = true;  // (std::array's == calls memcmp here)
  for (std::size_t d = 0; d < static_cast<std::size_t>(R); ++d) same_extents &= x.global_extents()[d] == y.global_extents()[d];
  // (same_layout is a constant where this is inlined: the mesh is checked here only for the
  // plans with no step, which reach no other check of it)
  const bool fits = x.mesh() == y.mesh() && (!same_layout || x.mesh().state() != nullptr) && same_extents && (ny == 0 || py != nullptr) &&
                    ((same_layout && px == py) || nx == 0 || ny == 0 || py + ny <= px || px + nx <= py);
  if (!fits) [[unlikely]]
    throw_into_error(x, y);
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
/// @param x input (unchanged). Its elements may be const (`dtensor<const T, ...>`, e.g. a
///        view of memory the caller may only read): the result then has mutable elements
///        in new storage, also when To is x's layout.
/// @param s stream for device backends (ignored by host backends)
/// @throws comm_error if a collective fails
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
dtensor<std::remove_const_t<T>, R, To, Mesh> redistribute(const dtensor<T, R, From, Mesh>& x, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_target<To, Mesh::naxes, R>());
  constexpr const plan_set& ps = static_plans<From, To, R>;
  if constexpr (std::is_const_v<T>) {
    detail::require_mesh(x.mesh(), "shardcast::redistribute");
    if constexpr (ps.p[0].nsteps == 0) {
      return detail::copy_of_read_only<dtensor<std::remove_const_t<T>, R, To, Mesh>>(x, To::desc, s);
    } else {
      const auto y = detail::unconst(x);  // (an lvalue: only read, never given up)
      return redistribute<To>(y, s);
    }
  } else if constexpr (ps.p[0].nsteps == 0) {
    detail::require_mesh(x.mesh(), "shardcast::redistribute");  // (as every other form: an empty x is refused)
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box());
  } else {
    const detail::plan_geometry& g = detail::static_geometry<To>(x);
    detail::run_result<T> r;
    detail::run_redistribute<To>(x, g, s, r);
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), std::move(r.owner), r.data, *r.nb);
  }
}

/// Converts `x`, which the caller gives up (`redistribute<To>(std::move(x))`, or a
/// temporary such as `redistribute<To>(matmul(a, b))`), to layout `To`: the same plan and
/// the same result as for a tensor the caller keeps, and
/// - the result takes over x's mesh handle, and x's storage is released when the call
///   returns unless a copy of x still holds it; x is left empty, as a default-constructed
///   tensor;
/// - when the plan is one all_reduce (partial -> replicate on the same piece), it runs in
///   place. If x is the only owner of its storage, the result keeps that storage: nothing
///   is allocated, and peak memory is one piece instead of two (an all_reduce of gradients
///   or of a row-parallel layer's output). Storage that a copy of x still holds, or the
///   caller's memory under a view (make_view), is never written: x's piece is copied to
///   new storage first, and the all_reduce runs in place there. x may be given up on some
///   ranks and kept on others (the backends take in-place and out-of-place ranks in one
///   collective).
/// No storage that anyone can still read is written: if a collective throws, x is left as
/// it was, except after a failed in-place all_reduce in its own storage, which leaves x
/// empty (the storage, partly written, is released).
/// (A tensor of const elements is never given up: it goes to the form above, and stays.)
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout> && !std::is_const_v<T>)
dtensor<T, R, To, Mesh> redistribute(dtensor<T, R, From, Mesh>&& x, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_target<To, Mesh::naxes, R>());
  constexpr const plan_set& ps = static_plans<From, To, R>;
  using Y = dtensor<T, R, To, Mesh>;
  const std::array<std::int64_t, static_cast<std::size_t>(R)> ext = x.global_extents();
  if constexpr (ps.p[0].nsteps == 0) {
    detail::require_mesh(x.mesh(), "shardcast::redistribute");
    return detail::take_as<Y>(x, To::desc);
  } else {
    const detail::plan_geometry& g = detail::static_geometry<To>(x);
    constexpr int ar = detail::single_all_reduce_candidate(ps);
    if constexpr (ar >= 0) {
      const detail::step_geometry& sg = g.steps[0];
      if (g.choice == ar && !g.staged() && sg.in_elems > 0) {
        auto r = detail::all_reduce_given_up(x, sg, ps.p[ar].steps[0].op, s);
        return Y(std::move(r.mesh), ext, std::move(r.owner), r.data, sg.nb);
      }
    }
    detail::run_result<T> r;
    detail::run_redistribute<To>(x, g, s, r);
    auto taken = x.take();  // x's storage goes with `taken`, unless a copy of x holds it
    return Y(std::move(taken.first), ext, std::move(r.owner), r.data, *r.nb);
  }
}

/// Converts `x` to the layout of `y` and writes the result into y's local piece: y keeps
/// its storage (its own, or the caller's memory wrapped by make_view), so a loop, a memory
/// plan or a captured CUDA graph can reuse one output buffer. Runs the plan that
/// `redistribute<To>(x)` runs; nothing is allocated for the result (an uneven reduce_scatter
/// as last step writes its padded chunk to a temporary first).
/// @param y output on x's mesh with x's global extents; its local piece must not overlap x's
///        (except the same piece when the layouts are equal, which is then left as it is)
/// @throws layout_error if y does not fit x
/// @throws comm_error if a collective fails
template <class T, int R, class From, class To, class Mesh>
  requires(!std::same_as<From, dynamic_layout> && !std::same_as<To, dynamic_layout>)
void redistribute_into(const dtensor<T, R, From, Mesh>& x, const dtensor<T, R, To, Mesh>& y, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_into_output<T>());
  static_assert(detail::same_op_partials(To::desc),
                "shardcast::redistribute_into: the target layout mixes partial reduce ops across axes; use one op for every partial axis.");
  constexpr const plan_set& ps = static_plans<From, To, R>;
  detail::check_into(x, y, ps.p[0].nsteps == 0);
  if constexpr (ps.p[0].nsteps == 0) {
    detail::memory_ops<typename Mesh::memory_space>::copy(y.data(), x.data(), x.local_size(), s);  // (skips y == x)
  } else {
    const detail::plan_geometry& g = detail::static_geometry<To>(x);
    constexpr int single = detail::single_collective_candidate(static_plans<From, To, R>);
    if constexpr (single >= 0) {
      // As in redistribute, unless a reduce_scatter's padded chunk would overrun y's piece.
      if (g.direct == single && detail::single_fits_output<ps, single, true>(g.steps[0])) [[likely]]
        detail::run_single<ps, single, true, true>(x, g, s, y.data());
      else
        detail::run_chosen_outlined<To, true>(x, g, s, y.data());
    } else {
      detail::run_chosen<To, true>(x, g, s, y.data());
    }
  }
}

/// The plan `redistribute<To>(x)` runs for x's mesh and global extents (see above); its
/// `elements` are what it costs there. Not collective; every rank gets the same plan. The
/// run-time search it compares with comes from the plans shared by the process's ranks
/// (detail::shared_plans), so a conversion that a redistribute has met is not searched
/// again, and ranks that ask at once share one search.
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
plan plan_for(const dtensor<T, R, From, Mesh>& x) {
  static_assert(check_layout<To, Mesh::naxes, R>());
  constexpr const plan_set& ps = static_plans<From, To, R>;
  if constexpr (ps.p[0].nsteps == 0) return ps.p[0];
  detail::require_mesh(x.mesh(), "shardcast::plan_for");
  return detail::choose_static_plan<R>(x.mesh(), ps, x.global_extents().data()).p;
}

namespace detail {
/// plan_for(x, to), with `who` naming the public call in its errors.
template <class T, int R, class Mesh>
plan runtime_plan_for(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to, const char* who) {
  require_mesh(x.mesh(), who);
  if (const auto* e = x.mesh().cache().plans.find(x.layout(), to, x.global_extents().data(), R)) return e->p;
  return shared_runtime_plan(x, to, who);
}
}  // namespace detail

/// The plan `redistribute(x, to)` runs (make_plan with x's mesh shape and extents): the one
/// in x's mesh when a redistribute has run it there, else from the plans shared by the
/// process's ranks. Not collective.
/// @throws layout_error if `to` does not fit the mesh or the tensor's rank
template <class T, int R, class Mesh>
plan plan_for(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to) {
  return detail::runtime_plan_for(x, to, "shardcast::plan_for");
}

/// The plan `redistribute(x, to)` runs for a static-layout x: as for x viewed as a
/// dynamic-layout tensor. Not collective.
/// @throws layout_error if `to` does not fit the mesh or the tensor's rank
template <class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
plan plan_for(const dtensor<T, R, From, Mesh>& x, const runtime_layout& to) {
  return detail::runtime_plan_for(dtensor<T, R, dynamic_layout, Mesh>(x), to, "shardcast::plan_for");
}

/// What `redistribute<To>(x)` does: `explain<T>` of `plan_for<To>(x)` on x's mesh shape and
/// global extents (bytes of x's element type; integer means as they run). Not collective.
/// @code
///   std::puts(sc::explain<sc::layout<sc::shard<0>, sc::replicate>>(x).c_str());
/// @endcode
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
std::string explain(const dtensor<T, R, From, Mesh>& x) {
  detail::require_mesh(x.mesh(), "shardcast::explain");
  return explain<T>(plan_for<To>(x), x.mesh().shape(), x.global_extents());
}
/// What `redistribute(x, to)` does, for a dynamic-layout x (see above).
template <class T, int R, class Mesh>
std::string explain(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to) {
  const plan p = detail::runtime_plan_for(x, to, "shardcast::explain");  // (checks the mesh before x.mesh().shape() below)
  return explain<T>(p, x.mesh().shape(), x.global_extents());
}

/// The plan `redistribute<To>(d)` runs for a dynamic-layout d: plan_for(d, To). Not collective.
template <class To, class T, int R, class Mesh>
plan plan_for(const dtensor<T, R, dynamic_layout, Mesh>& d) {
  static_assert(check_layout<To, Mesh::naxes, R>());
  return detail::runtime_plan_for(d, runtime_layout(To::desc), "shardcast::plan_for");
}
/// What `redistribute<To>(d)` does for a dynamic-layout d: explain(d, To).
template <class To, class T, int R, class Mesh>
std::string explain(const dtensor<T, R, dynamic_layout, Mesh>& d) {
  static_assert(check_layout<To, Mesh::naxes, R>());
  return explain(d, runtime_layout(To::desc));
}

/// What `redistribute(x, to)` does, for a static-layout x (see plan_for above).
template <class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
std::string explain(const dtensor<T, R, From, Mesh>& x, const runtime_layout& to) {
  const plan p = detail::runtime_plan_for(dtensor<T, R, dynamic_layout, Mesh>(x), to, "shardcast::explain");
  return explain<T>(p, x.mesh().shape(), x.global_extents());
}

namespace detail {
/// The comparison of a dynamic conversion x.layout() -> to across the mesh's ranks
/// (agree_on_arguments with redistribute's words), `err` this rank's own verdict on `to`.
template <class T, int R, class Mesh>
void agree_on_conversion(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to, const std::string& err, const char* who,
                         typename Mesh::stream_type s) {
  const runtime_layout& from = x.layout();
  agree_on_arguments(x.mesh(), x.global_extents(),
                     {agreed_layout{&from, "the ranks' tensors have different layouts", "holds a tensor of layout",
                                    "every rank must pass its piece of the same tensor (a make_view on each rank with the same layout)"},
                      agreed_layout{&to, "the ranks passed different target layouts", "passed",
                                    "pass the same target layout on every rank"}},
                     err, who, s,
                     agreed_extents{"the ranks' tensors have different global extents", "holds a tensor of extents",
                                    "every rank must pass its piece of the same tensor"});
}

/// The first redistribute of a conversion on this rank (x's layout -> `to` for x's
/// extents, not in the mesh's plan cache): collective over the mesh. The ranks compare x's
/// layout, `to`, x's global extents and their own verdicts on `to` in one small all_reduce
/// (agree_on_arguments) before any of them runs a plan, so ranks that disagree all throw
/// layout_error instead of running different plans (which could wait for each other
/// forever, or exchange pieces of equal size and give wrong values). Every rank of a mesh
/// meets the same conversions in the same order, so they all miss the cache together and
/// later calls cost nothing. Then plans (from detail::shared_plans), computes the geometry
/// and caches both. (The identity conversion is agree_identity's.)
template <class T, int R, class Mesh>
[[gnu::cold]] const runtime_plan_cache::entry& insert_runtime_plan(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to,
                                                                  const char* who, typename Mesh::stream_type s) {
  plan p;
  const std::string err = local_verdict([&] { p = shared_runtime_plan(x, to, who); });
  agree_on_conversion(x, to, err, who, s);
  return x.mesh().cache().plans.insert(x.global_extents().data(), R, p, make_geometry(x.mesh(), p.steps, p.nsteps, x.global_extents().data(), R));
}

/// The first redistribute of x to its own layout on this rank (for x's layout and extents):
/// collective over the mesh, as insert_runtime_plan. There is nothing to plan, but a peer
/// that passed another target waits in the comparison, so this rank takes part in it too
/// (and throws with the peer) instead of returning at once. Then remembered in the mesh's
/// runtime_plan_cache (agreed_identity), so later calls cost a short lookup.
template <class T, int R, class Mesh>
[[gnu::cold]] void agree_identity(const dtensor<T, R, dynamic_layout, Mesh>& x, const char* who, typename Mesh::stream_type s) {
  agree_on_conversion(x, x.layout(), std::string{}, who, s);
  x.mesh().cache().plans.add_identity(x.layout(), x.global_extents().data(), R);
}

/// The cached run-time plan x.layout() -> to for x's mesh and extents (on first use on this
/// rank, insert_runtime_plan: the ranks agree on the conversion, then it is planned and
/// cached in the rank's runtime_plan_cache); nullptr when the plan has no steps, i.e. x's
/// piece is already the result's. That is exactly when `to` is x's layout (any other target
/// is another state of the planner's search, at least one step away); that conversion is
/// not planned, but it is compared across the ranks on first use like any other, so a rank
/// whose `to` is x's layout while a peer's differs throws with the peer.
template <class T, int R, class Mesh>
const runtime_plan_cache::entry* runtime_plan_entry(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to, const char* who,
                                                    typename Mesh::stream_type s) {
  require_mesh(x.mesh(), who);
  auto& cache = x.mesh().cache().plans;
  if (x.layout() == to) {
    if (!cache.agreed_identity(to, x.global_extents().data(), R)) agree_identity(x, who, s);
    return nullptr;
  }
  if (const auto* e = cache.find(x.layout(), to, x.global_extents().data(), R)) return e;
  return &insert_runtime_plan(x, to, who, s);
}
}  // namespace detail

/// Converts a dynamic-layout tensor to `to`, planned at run time for the real mesh and extents.
/// Collective; the first call of a conversion also compares it across the mesh's ranks
/// (detail::insert_runtime_plan).
/// @throws layout_error on every rank if `to` does not fit the mesh or the tensor's rank on
/// some rank, or the ranks passed different targets or pieces of different tensors
/// x's elements may be const, as for the static form: the result then has mutable elements
/// in new storage, also when `to` is x's layout.
template <class T, int R, class Mesh>
dtensor<std::remove_const_t<T>, R, dynamic_layout, Mesh> redistribute(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to,
                                                                      typename Mesh::stream_type s = {}) {
  using Y = dtensor<std::remove_const_t<T>, R, dynamic_layout, Mesh>;
  const auto* e = detail::runtime_plan_entry(x, to, "shardcast::redistribute", s);
  if constexpr (std::is_const_v<T>) {
    if (!e) return detail::copy_of_read_only<Y>(x, to, s);
    const auto y = detail::unconst(x);  // (an lvalue: only read, never given up)
    auto [owner, data] = detail::execute_steps(y, e->p.steps, e->p.nsteps, e->g, s);
    return Y(x.mesh(), x.global_extents(), std::move(owner), data, e->g.final_box(), to);
  } else {
    if (!e) return Y(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box(), to);
    auto [owner, data] = detail::execute_steps(x, e->p.steps, e->p.nsteps, e->g, s);
    return Y(x.mesh(), x.global_extents(), std::move(owner), data, e->g.final_box(), to);
  }
}

/// Converts a dynamic-layout tensor the caller gives up (an rvalue) to `to`, as the static
/// redistribute of an rvalue does: the result takes x's mesh handle, x is left empty, and a
/// plan that is one all_reduce runs in place (in x's storage when x owns it alone). (A tensor
/// of const elements is never given up: it goes to the form above, and stays.)
/// @throws layout_error as the form above (x is then left as it was)
template <class T, int R, class Mesh>
  requires(!std::is_const_v<T>)
dtensor<T, R, dynamic_layout, Mesh> redistribute(dtensor<T, R, dynamic_layout, Mesh>&& x, const runtime_layout& to,
                                                  typename Mesh::stream_type s = {}) {
  using Y = dtensor<T, R, dynamic_layout, Mesh>;
  const auto* e = detail::runtime_plan_entry(x, to, "shardcast::redistribute", s);
  const std::array<std::int64_t, static_cast<std::size_t>(R)> ext = x.global_extents();
  if (!e) return detail::take_as<Y>(x, to);
  if (e->p.nsteps == 1 && e->p.steps[0].kind == step_kind::all_reduce && !e->g.staged() && e->g.steps[0].in_elems > 0) {
    auto r = detail::all_reduce_given_up(x, e->g.steps[0], e->p.steps[0].op, s);
    return Y(std::move(r.mesh), ext, std::move(r.owner), r.data, e->g.steps[0].nb, to);
  }
  auto [owner, data] = detail::execute_steps(x, e->p.steps, e->p.nsteps, e->g, s);
  auto taken = x.take();  // x's storage goes with `taken`, unless a copy of x holds it
  return Y(std::move(taken.first), ext, std::move(owner), data, e->g.final_box(), to);
}

/// Static and dynamic layouts meet: a dynamic-layout x to the static layout To
/// (`redistribute<To>(x)`), planned at run time as `redistribute(x, To)` and cached the same
/// way, with a result of layout To; a static-layout x to the run-time layout `to`
/// (`redistribute(x, to)`), as x viewed as a dynamic-layout tensor. The same results as the
/// forms above, including an x the caller gives up (left as it was if the call throws, as
/// there) and x of const elements.
/// @throws layout_error if a run-time target does not fit the mesh or the tensor's rank (a
///         static one is checked at compile time)
template <class To, class T, int R, class Mesh>
dtensor<std::remove_const_t<T>, R, To, Mesh> redistribute(const dtensor<T, R, dynamic_layout, Mesh>& x, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_target<To, Mesh::naxes, R>());
  return dtensor<std::remove_const_t<T>, R, To, Mesh>(redistribute(x, runtime_layout(To::desc), s));
}
template <class To, class T, int R, class Mesh>
  requires(!std::is_const_v<T>)
dtensor<T, R, To, Mesh> redistribute(dtensor<T, R, dynamic_layout, Mesh>&& x, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_target<To, Mesh::naxes, R>());
  return dtensor<T, R, To, Mesh>(redistribute(std::move(x), runtime_layout(To::desc), s));
}
template <class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
dtensor<std::remove_const_t<T>, R, dynamic_layout, Mesh> redistribute(const dtensor<T, R, From, Mesh>& x, const runtime_layout& to,
                                                                      typename Mesh::stream_type s = {}) {
  const dtensor<T, R, dynamic_layout, Mesh> d = x;  // (an lvalue: x is kept)
  return redistribute(d, to, s);
}
template <class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout> && !std::is_const_v<T>)
dtensor<T, R, dynamic_layout, Mesh> redistribute(dtensor<T, R, From, Mesh>&& x, const runtime_layout& to, typename Mesh::stream_type s = {}) {
  using D = dtensor<T, R, dynamic_layout, Mesh>;
  D d = detail::take_as<D>(x, From::desc);
  try {
    return redistribute(std::move(d), to, s);
  } catch (...) {
    // The dynamic form left d as it was (or emptied it after a failed in-place all_reduce
    // in its own storage): x gets back what d still holds.
    if (d.mesh().state() != nullptr) x = detail::take_as<dtensor<T, R, From, Mesh>>(d, From::desc);
    throw;
  }
}

/// Converts a dynamic-layout tensor to the layout of `y` and writes the result into y's
/// local piece, as the static redistribute_into does; the plan is the one
/// `redistribute(x, y.layout())` runs (cached in the mesh).
/// @throws layout_error if y does not fit x
template <class T, int R, class Mesh>
void redistribute_into(const dtensor<T, R, dynamic_layout, Mesh>& x, const dtensor<T, R, dynamic_layout, Mesh>& y,
                       typename Mesh::stream_type s = {}) {
  static_assert(detail::check_into_output<T>());
  const runtime_layout to = y.layout();
  detail::check_into(x, y, x.layout() == to);
  if (const auto* e = detail::runtime_plan_entry(x, to, "shardcast::redistribute_into", s)) detail::execute_steps<true>(x, e->p.steps, e->p.nsteps, e->g, s, y.data());
  else detail::memory_ops<typename Mesh::memory_space>::copy(y.data(), x.data(), x.local_size(), s);  // (skips y == x)
}

/// A static-layout input into a dynamic-layout output, or the reverse: runs as the dynamic
/// form, with the static side viewed as a dynamic-layout tensor.
template <class T, int R, class From, class To, class Mesh>
  requires(std::same_as<From, dynamic_layout> != std::same_as<To, dynamic_layout>)
void redistribute_into(const dtensor<T, R, From, Mesh>& x, const dtensor<T, R, To, Mesh>& y, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_into_output<T>());
  using D = dtensor<T, R, dynamic_layout, Mesh>;
  auto dynamic = [](const auto& t) { return D(t.mesh(), t.global_extents(), t.owner(), t.data(), t.local_box(), t.layout()); };
  redistribute_into(dynamic(x), dynamic(y), s);
}

/// An input of const elements (see redistribute) into an output of mutable ones: as for an
/// input of mutable elements.
template <class T, int R, class From, class To, class Mesh>
void redistribute_into(const dtensor<const T, R, From, Mesh>& x, const dtensor<T, R, To, Mesh>& y, typename Mesh::stream_type s = {}) {
  redistribute_into(detail::unconst(x), y, s);
}

/// Every other pairing of input and output: a compile-time message that says what to change.
template <class TX, int RX, class LX, class MX, class TY, int RY, class LY, class MY>
void redistribute_into(const dtensor<TX, RX, LX, MX>&, const dtensor<TY, RY, LY, MY>&, typename MX::stream_type = {}) {
  static_assert(detail::check_into_output<TY>());
  static_assert(std::is_same_v<std::remove_const_t<TX>, TY>,
                "shardcast::redistribute_into: the output's element type differs from the input's; make the output with the input's element type.");
  static_assert(RX == RY, "shardcast::redistribute_into: the output's rank differs from the input's; give the output the input's global extents.");
  static_assert(std::is_same_v<MX, MY>, "shardcast::redistribute_into: the output's mesh type differs from the input's; make the output on the input's mesh.");
}

/// Runs an explicit plan on a dynamic-layout tensor (the plan's source must be x's layout).
/// x's elements may be const, as for redistribute: the result then has mutable elements in
/// new storage, also for a plan with no steps.
template <class T, int R, class Mesh>
dtensor<std::remove_const_t<T>, R, dynamic_layout, Mesh> execute(const plan& p, const dtensor<T, R, dynamic_layout, Mesh>& x,
                                                                 typename Mesh::stream_type s = {}) {
  detail::require_mesh(x.mesh(), "shardcast::execute");
  if constexpr (std::is_const_v<T>) {
    const auto y = detail::unconst(x);
    auto r = execute(p, y, s);  // (checks p against x)
    if (p.nsteps == 0) return detail::copy_of_read_only<decltype(r)>(x, p.dst, s);
    return r;
  } else {
    SHARDCAST_EXPECTS(p.src == x.layout(), "shardcast::execute: the plan starts from \"" + to_string(p.src) + "\" but the tensor has layout \"" +
                                               to_string(x.layout()) + "\"");
    p.dst.validate(Mesh::naxes, R, "shardcast::execute");  // a plan made for another tensor rank or mesh
    for (int i = 0; i < p.nsteps; ++i) p.steps[i].to.validate(Mesh::naxes, R, "shardcast::execute");
    if (p.nsteps == 0) return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data(), x.local_box(), p.dst);
    const detail::plan_geometry g = detail::make_geometry(x.mesh(), p.steps, p.nsteps, x.global_extents().data(), R);
    auto [owner, data] = detail::execute_steps(x, p.steps, p.nsteps, g, s);
    return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), std::move(owner), data, g.final_box(), p.dst);
  }
}

}  // namespace shardcast
