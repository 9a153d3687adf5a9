#pragma once
/// @file plan.hpp
/// The redistribution planner: from a source to a target layout, the sequence of steps
/// (collectives over sets of mesh axes, and local slice/pad/identity steps) that moves
/// the fewest elements per rank, ties broken by fewer collectives, then fewer steps.
///
/// The search is a shortest path over intermediate layouts in which every axis holds its
/// source placement, its target placement or `replicate`. A step changes a set of axes
/// with one kind of move; same-kind moves on several axes become one collective over
/// the flattened sub-communicator of those axes. Nesting rules (several axes sharding
/// one dim nest in increasing axis order) decide which steps are valid: a step may only
/// gather, scatter, slice or pad an axis that is innermost for the dims it touches
/// among the axes the step leaves alone.
///
/// Example, rank-2 tensor, "P(sum),S(0)" -> "S(0),R": reducing the small shards first is
/// cheaper than gathering then reduce-scattering, so the plan is
///   1. all_reduce(sum) axes {0}   P(sum),S(0) -> R,S(0)
///   2. all_gather      axes {1}   R,S(0)      -> R,R
///   3. local_slice     axes {0}   R,R         -> S(0),R
///
/// The same code runs at compile time (static_plan, costed on a canonical mesh where
/// every axis has size 4) and at run time with the real mesh shape and extents.

#include <cstdint>
#include <vector>

#include "layout.hpp"
#include "split.hpp"

namespace shardcast {

enum class step_kind : std::uint8_t {
  all_gather,      ///< S(d) -> R on every axis of the step
  reduce_scatter,  ///< P(op) -> S(d)
  all_reduce,      ///< P(op) -> R
  all_to_all,      ///< S(c) -> S(d), c != d
  slice,           ///< local: R -> S(d)
  pad,             ///< local: S(d) -> P(op), identity-filled
  identity,        ///< local: R -> P(op)
};

constexpr const char* to_string(step_kind k) {
  switch (k) {
    case step_kind::all_gather: return "all_gather";
    case step_kind::reduce_scatter: return "reduce_scatter";
    case step_kind::all_reduce: return "all_reduce";
    case step_kind::all_to_all: return "all_to_all";
    case step_kind::slice: return "local_slice";
    case step_kind::pad: return "local_pad";
    case step_kind::identity: return "local_identity";
  }
  return "?";
}

constexpr bool is_collective(step_kind k) { return k <= step_kind::all_to_all; }

/// One step: its kind, the mesh axes it acts on (bit a = axis a) and the layouts around it.
struct step {
  step_kind kind = step_kind::slice;
  unsigned axes = 0;
  reduce_op op = reduce_op::sum;
  runtime_layout from, to;
};

inline constexpr int max_plan_steps = 3 * SHARDCAST_MAX_AXES + 4;

/// A plan: the steps in order, and what the planner predicted they cost.
struct plan {
  step steps[max_plan_steps]{};
  int nsteps = 0;
  runtime_layout src, dst;
  double elements = 0;  ///< predicted elements sent per rank (the busiest rank)
  int collectives = 0;

  constexpr const step& operator[](int i) const { return steps[i]; }
  constexpr int size() const { return nsteps; }
};

namespace detail {

constexpr bool same_op_partials(const runtime_layout& l) {
  int op = -1;
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial()) {
      if (op >= 0 && op != static_cast<int>(l[a].op)) return false;
      op = static_cast<int>(l[a].op);
    }
  return true;
}

/// The box of rank 0 is the largest of any rank (part 0 of a balanced split is never smaller).
constexpr std::int64_t max_volume(const runtime_layout& l, const int* shape, const std::int64_t* ext, int rank) {
  int zero[SHARDCAST_MAX_AXES]{};
  return local_box(l, shape, zero, ext, rank).volume();
}

constexpr int group_size(unsigned axes, const int* shape, int naxes) {
  int n = 1;
  for (int a = 0; a < naxes; ++a)
    if (axes >> a & 1u) n *= shape[a];
  return n;
}

/// Is moving axes `axes` from `c` to `x` with a step of kind `k` valid under the nesting rules?
constexpr bool step_valid(step_kind k, unsigned axes, const runtime_layout& c, const runtime_layout& x) {
  if (!same_op_partials(x)) return false;  // never pass through a layout with mixed reductions
  for (int a = 0; a < c.naxes; ++a) {
    if (!(axes >> a & 1u)) continue;
    int d1 = c[a].is_shard() ? c[a].dim : -1;
    int d2 = x[a].is_shard() ? x[a].dim : -1;
    if (k == step_kind::all_reduce || k == step_kind::identity) continue;
    for (int b = a + 1; b < c.naxes; ++b) {
      if (axes >> b & 1u) continue;
      if ((d1 >= 0 && c[b].is_shard(d1)) || (d2 >= 0 && c[b].is_shard(d2))) return false;
    }
  }
  return true;
}

/// Does axis placement c -> t form a move of kind k (with op `op` where it has one)?
constexpr bool move_of(step_kind k, const placement_desc& c, const placement_desc& t, reduce_op op) {
  switch (k) {
    case step_kind::all_gather: return c.is_shard() && t.is_replicate();
    case step_kind::reduce_scatter: return c.is_partial() && c.op == op && t.is_shard();
    case step_kind::all_reduce: return c.is_partial() && c.op == op && t.is_replicate();
    case step_kind::all_to_all: return c.is_shard() && t.is_shard() && c.dim != t.dim;
    case step_kind::slice: return c.is_replicate() && t.is_shard();
    case step_kind::pad: return c.is_shard() && t.is_partial() && t.op == op;
    case step_kind::identity: return c.is_replicate() && t.is_partial() && t.op == op;
  }
  return false;
}

/// Elements sent per rank by a step (the busiest rank; padding included).
constexpr double step_cost(const step& s, const int* shape, const std::int64_t* ext, int rank) {
  const int n = group_size(s.axes, shape, s.from.naxes);
  const double N = n;
  switch (s.kind) {
    case step_kind::all_gather: return (N - 1) * static_cast<double>(max_volume(s.from, shape, ext, rank));
    case step_kind::reduce_scatter: return (N - 1) * static_cast<double>(max_volume(s.to, shape, ext, rank));
    case step_kind::all_reduce: return 2.0 * (N - 1) / N * static_cast<double>(max_volume(s.from, shape, ext, rank));
    case step_kind::all_to_all: return (N - 1) / N * static_cast<double>(max_volume(s.from, shape, ext, rank));
    default: return 0;
  }
}

struct cost {
  double elements = 0;
  int collectives = 0;
  int steps = 0;
  constexpr bool operator<(const cost& o) const {
    // Element counts are sums of exact small products; compare with a relative epsilon.
    const double eps = 1e-9 * (elements > o.elements ? elements : o.elements);
    if (elements < o.elements - eps) return true;
    if (elements > o.elements + eps) return false;
    if (collectives != o.collectives) return collectives < o.collectives;
    return steps < o.steps;
  }
};

}  // namespace detail

/// Plans the conversion of a rank-`rank` tensor of global extents `ext` on a mesh of
/// shape `shape` from layout `src` to layout `dst`. Throws layout_error for layouts
/// that do not fit (at compile time: a compile error).
constexpr plan make_plan(const runtime_layout& src, const runtime_layout& dst, const int* shape, const std::int64_t* ext, int rank) {
  const int n = src.naxes;
  if (src.naxes != dst.naxes) throw layout_error("shardcast::make_plan: source and target layouts have different numbers of placements");
  if (!detail::same_op_partials(src) || !detail::same_op_partials(dst))
    throw layout_error("shardcast::make_plan: partial placements of one layout must share one reduce op (the order of mixed reductions is undefined); redistribute in two steps");
  for (int a = 0; a < n; ++a)
    if ((src[a].is_shard() && src[a].dim >= rank) || (dst[a].is_shard() && dst[a].dim >= rank))
      throw layout_error("shardcast::make_plan: a shard dim is not below the tensor's rank");

  // Candidate placements per axis: source, target, replicate (deduplicated).
  placement_desc cand[SHARDCAST_MAX_AXES][3]{};
  int ncand[SHARDCAST_MAX_AXES]{};
  int radix[SHARDCAST_MAX_AXES]{};
  int nstates = 1;
  for (int a = 0; a < n; ++a) {
    placement_desc opts[3] = {src[a], dst[a], placement_desc::make_replicate()};
    for (auto& o : opts) {
      bool dup = false;
      for (int i = 0; i < ncand[a]; ++i) dup = dup || cand[a][i] == o;
      if (!dup) cand[a][ncand[a]++] = o;
    }
    radix[a] = nstates;
    nstates *= ncand[a];
  }
  auto decode = [&](int s) {
    runtime_layout l;
    l.naxes = n;
    for (int a = 0; a < n; ++a) l[a] = cand[a][(s / radix[a]) % ncand[a]];
    return l;
  };
  // Source is candidate 0 on every axis; the target's index per axis:
  int target = 0;
  for (int a = 0; a < n; ++a)
    for (int i = 0; i < ncand[a]; ++i)
      if (cand[a][i] == dst[a]) target += i * radix[a];

  std::vector<detail::cost> dist(static_cast<std::size_t>(nstates));
  std::vector<bool> reached(static_cast<std::size_t>(nstates), false), done(static_cast<std::size_t>(nstates), false);
  std::vector<int> prev(static_cast<std::size_t>(nstates), -1);
  std::vector<step> via(static_cast<std::size_t>(nstates));
  reached[0] = true;

  reduce_op ops[2] = {reduce_op::sum, reduce_op::sum};
  int nops = 0;
  for (const runtime_layout* l : {&src, &dst})
    for (int a = 0; a < n; ++a)
      if ((*l)[a].is_partial()) {
        bool have = false;
        for (int i = 0; i < nops; ++i) have = have || ops[i] == (*l)[a].op;
        if (!have) ops[nops++] = (*l)[a].op;
      }
  if (nops == 0) nops = 1;

  constexpr step_kind kinds[] = {step_kind::all_gather, step_kind::reduce_scatter, step_kind::all_reduce, step_kind::all_to_all,
                                 step_kind::slice, step_kind::pad, step_kind::identity};
  while (true) {
    int u = -1;
    for (int s = 0; s < nstates; ++s)
      if (reached[static_cast<std::size_t>(s)] && !done[static_cast<std::size_t>(s)] &&
          (u < 0 || dist[static_cast<std::size_t>(s)] < dist[static_cast<std::size_t>(u)]))
        u = s;
    if (u < 0 || u == target) break;
    done[static_cast<std::size_t>(u)] = true;
    const runtime_layout cur = decode(u);
    for (step_kind k : kinds) {
      const bool has_op = k == step_kind::reduce_scatter || k == step_kind::all_reduce || k == step_kind::pad || k == step_kind::identity;
      for (int oi = 0; oi < (has_op ? nops : 1); ++oi) {
        const reduce_op op = ops[oi];
        // Per axis, the candidate indices this kind of move can reach.
        int opt[SHARDCAST_MAX_AXES][3]{};
        int nopt[SHARDCAST_MAX_AXES]{};
        int combos = 1;
        for (int a = 0; a < n; ++a) {
          for (int i = 0; i < ncand[a]; ++i)
            if (detail::move_of(k, cur[a], cand[a][i], op)) opt[a][nopt[a]++] = i;
          combos *= nopt[a] + 1;
        }
        for (int c = 1; c < combos; ++c) {  // c = 0 changes nothing
          runtime_layout nxt = cur;
          unsigned axes = 0;
          int v = u, rem = c;
          for (int a = 0; a < n; ++a) {
            const int pick = rem % (nopt[a] + 1);
            rem /= nopt[a] + 1;
            if (pick == 0) continue;
            const int ci = opt[a][pick - 1];
            const int cur_i = (u / radix[a]) % ncand[a];
            v += (ci - cur_i) * radix[a];
            nxt[a] = cand[a][ci];
            axes |= 1u << a;
          }
          if (!detail::step_valid(k, axes, cur, nxt)) continue;
          step st{k, axes, op, cur, nxt};
          detail::cost nc = dist[static_cast<std::size_t>(u)];
          nc.elements += detail::step_cost(st, shape, ext, rank);
          nc.collectives += is_collective(k) ? 1 : 0;
          nc.steps += 1;
          auto vi = static_cast<std::size_t>(v);
          if (done[vi]) continue;
          if (!reached[vi] || nc < dist[vi]) {
            reached[vi] = true;
            dist[vi] = nc;
            prev[vi] = u;
            via[vi] = st;
          }
        }
      }
    }
  }
  if (!reached[static_cast<std::size_t>(target)])
    throw layout_error("shardcast::make_plan: no plan from \"" + to_string(src) + "\" to \"" + to_string(dst) + "\"");
  plan p;
  p.src = src;
  p.dst = dst;
  p.elements = dist[static_cast<std::size_t>(target)].elements;
  p.collectives = dist[static_cast<std::size_t>(target)].collectives;
  int chain[max_plan_steps]{};
  int len = 0;
  for (int s = target; s != 0; s = prev[static_cast<std::size_t>(s)]) chain[len++] = s;
  for (int i = 0; i < len; ++i) p.steps[i] = via[static_cast<std::size_t>(chain[len - 1 - i])];
  p.nsteps = len;
  return p;
}

/// Run-time planning for a mesh shape and global extents held in arrays.
template <std::size_t N, std::size_t R>
plan make_plan(const runtime_layout& src, const runtime_layout& dst, const std::array<int, N>& shape,
               const std::array<std::int64_t, R>& ext) {
  src.validate(static_cast<int>(N), static_cast<int>(R));
  dst.validate(static_cast<int>(N), static_cast<int>(R));
  return make_plan(src, dst, shape.data(), ext.data(), static_cast<int>(R));
}

namespace detail {
/// The canonical mesh a static plan is costed on: every axis of size 4, every extent 4^(N+1).
constexpr plan canonical_plan(const runtime_layout& src, const runtime_layout& dst, int rank) {
  int shape[SHARDCAST_MAX_AXES]{};
  std::int64_t ext[SHARDCAST_MAX_RANK]{};
  std::int64_t e = 4;
  for (int a = 0; a < src.naxes; ++a) {
    shape[a] = 4;
    e *= 4;
  }
  for (int d = 0; d < rank; ++d) ext[d] = e;
  return make_plan(src, dst, shape, ext, rank);
}
}  // namespace detail

/// The compile-time plan from layout type `From` to `To` for a rank-`R` tensor.
template <class From, class To, int R>
inline constexpr plan static_plan = detail::canonical_plan(From::desc, To::desc, R);

}  // namespace shardcast
