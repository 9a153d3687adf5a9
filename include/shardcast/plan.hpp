#pragma once
/// @file plan.hpp
/// The redistribution planner: from a source to a target layout, the sequence of steps
/// (collectives over sets of mesh axes, and local slice/pad/identity steps) that moves
/// the fewest elements per rank, ties broken by fewer collectives, then fewer steps.
///
/// The search is a shortest path (A*, with a lower bound on what a layout still has to
/// reduce or gather) over intermediate layouts: every layout
/// when there are at most `max_full_search_states` of them, else those in which every
/// axis holds its source placement, its target placement or `replicate`. A step changes a set of axes
/// with one kind of move; same-kind moves on several axes become one collective over
/// the flattened sub-communicator of those axes. Nesting rules (several axes sharding
/// one dim nest in increasing axis order) decide which steps are valid: a step may only
/// gather, scatter, slice or pad an axis that is innermost for the dims it touches
/// among the axes the step leaves alone.
///
/// Example, rank-2 tensor of 64x64 on a 4x4 mesh, "P(sum),S(0)" -> "S(0),R". All-reducing
/// the row shards and gathering them sends 1536 + 3072 elements per rank; the planner
/// passes through layouts that neither end mentions and sends 768 + 256 + 768:
///   1. reduce_scatter(sum) axes {0}    P(sum),S(0) -> S(1),S(0)
///   2. all_to_all          axes {0,1}  S(1),S(0)   -> S(0),S(1)
///   3. all_gather          axes {1}    S(0),S(1)   -> S(0),R
///
/// The same code runs at compile time (static_plans: the optimal plans on canonical meshes
/// whose axes all have size 4 and all have size 2) and at run time with the real mesh
/// shape and extents. A static redistribute runs the candidate that is cheapest on the
/// real mesh, or the run-time plan when that is strictly cheaper (decided once per mesh
/// and extents, then cached).
/// tests/host/test_plan_table.cpp checks the choice for every layout pair against an
/// independent brute-force search and the predicted bytes against a counting communicator.

#include <bit>
#include <cstdint>
#include <type_traits>
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

inline constexpr int max_plan_steps = 4 * SHARDCAST_MAX_AXES + 4;

/// A plan: the steps in order, and what the planner predicted they cost.
struct plan {
  step steps[max_plan_steps]{};
  int nsteps = 0;
  runtime_layout src, dst;
  double elements = 0;  ///< predicted elements sent: the sum over steps of what the busiest rank of each step sends
  int collectives = 0;   ///< collectives it calls (steps over a group of one rank are local: detail::calls_collective)

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

/// Does step `s` call a collective on a mesh of `shape`? Not when it is local, nor when its
/// group has one rank (every axis of the step has size 1): the piece is then the same
/// before and after (a split into one part is the whole; a reduction over one rank is its
/// value), and the executor copies it instead of calling the communicator. Such a step
/// sends nothing and does not count as a collective.
constexpr bool calls_collective(const step& s, const int* shape) {
  return is_collective(s.kind) && group_size(s.axes, shape, s.from.naxes) > 1;
}

/// A reduction with avg (reduce_scatter or all_reduce).
constexpr bool reduces_avg(const step& s) {
  return (s.kind == step_kind::reduce_scatter || s.kind == step_kind::all_reduce) && s.op == reduce_op::avg;
}

/// How a plan that reduces with avg in several steps runs on integral elements: every such
/// step but the last sums, and the last divides by the product of the earlier ones' group
/// sizes too, so that the mean truncates once (trunc(trunc(S / a) / b) = trunc(S / (a b)),
/// while a mean of truncated means is not the mean). `last` is that last step, or -1 when
/// the plan has fewer than two such steps; `divisor` is the product.
struct integer_mean_split {
  int last = -1;
  int divisor = 1;
  constexpr bool sums(int i, const step& s) const { return last >= 0 && i < last && reduces_avg(s); }
};
constexpr integer_mean_split split_integer_mean(const step* steps, int nsteps, const int* shape) {
  integer_mean_split m;
  int prev = -1, summed = 1;
  for (int i = 0; i < nsteps; ++i) {
    if (!reduces_avg(steps[i])) continue;
    if (prev >= 0) summed *= group_size(steps[prev].axes, shape, steps[prev].from.naxes);
    prev = i;
  }
  if (summed > 1) m.last = prev, m.divisor = summed;
  return m;
}

/// Meshes of up to this many axes let an all_to_all take the axes that keep S(d) inner to
/// an axis of the step that leaves or joins d (make_plan). On more axes nearly every
/// all_to_all combination becomes legal and the search, whose lower bound does not count
/// all_to_alls, expands far more layouts: an 8-axis pair that flips S(0) and S(1) on every
/// axis took 15 ms at run time instead of 0.3 ms and exceeded the compile-time budget of
/// static plans. There the moves keep the nesting rule as it was (plans may then send more).
inline constexpr int resplit_max_axes = 4;

/// What the busiest rank sends in an all-to-all from `from` to `to`: the parts of its
/// piece that the other members of its group hold afterwards. The members' target
/// pieces are disjoint and cover the rank's piece, so that is the piece's volume minus
/// its overlap with the rank's own target piece, maximised over the ranks.
///
/// When every axis that shards a dim has the same size s and every such dim divides
/// evenly, a rank's interval on dim d is the set of indices whose leading base-s digits
/// are its coordinates on the axes sharding d, in nesting order. Two such intervals meet
/// only if the coordinates agree on the common prefix of the two axis lists, so some rank
/// keeps nothing (and sends its whole piece) as soon as one dim's lists differ within
/// their common prefix; otherwise every rank keeps the finer of the two intervals on
/// every dim. Other meshes enumerate the coordinates of the axes that shard anything.
/// The closed form above, on each axis' shard dim before and after (-1: not a shard).
/// Returns false (and leaves `sent` alone) when it does not apply: axes that shard
/// anything differ in size, or a split is uneven.
constexpr bool all_to_all_closed_form(const int* from_dim, const int* to_dim, int n, const int* shape, const std::int64_t* ext, int rank,
                                      double& sent) {
  int s = 0;
  for (int a = 0; a < n; ++a)
    if (from_dim[a] >= 0 || to_dim[a] >= 0) {
      if (s == 0) s = shape[a];
      if (shape[a] != s) return false;
    }
  if (s == 0) {
    sent = 0;
    return true;
  }
  double piece = 1, keep = 1;  // (double: see volume_of in make_plan)
  bool disjoint_possible = false;
  for (int d = 0; d < rank; ++d) {
    int fa[SHARDCAST_MAX_AXES]{}, ta[SHARDCAST_MAX_AXES]{};
    int nf = 0, nt = 0;
    for (int a = 0; a < n; ++a) {
      if (from_dim[a] == d) fa[nf++] = a;
      if (to_dim[a] == d) ta[nt++] = a;
    }
    const int deep = nf > nt ? nf : nt;
    std::int64_t parts_f = 1, parts_deep = 1;
    for (int i = 0; i < deep; ++i) {
      if (i < nf) parts_f *= s;
      parts_deep *= s;
    }
    if (ext[d] % parts_deep != 0) return false;  // an uneven split: enumerate instead
    piece *= static_cast<double>(ext[d] / parts_f);
    keep *= static_cast<double>(ext[d] / parts_deep);
    for (int i = 0; i < (nf < nt ? nf : nt); ++i) disjoint_possible = disjoint_possible || (fa[i] != ta[i] && s > 1);
  }
  sent = disjoint_possible ? piece : piece - keep;
  return true;
}

/// What the busiest rank sends in an all-to-all, by enumeration over every combination of
/// the coordinates of the axes that shard anything: exact on any mesh, for any extents.
/// Each dim's intervals before and after are tabulated once, per combination of the
/// coordinates of the axes that shard that dim (mixed radix, the first axis most
/// significant, as they nest), so each rank costs a few multiply-adds per axis and per dim.
constexpr double all_to_all_enumerate(const int* from_dim, const int* to_dim, int n, const int* shape, const std::int64_t* ext, int rank) {
  int base[2][SHARDCAST_MAX_RANK]{};  // per side (0 before, 1 after) and dim: where its table starts
  int total = 0;
  for (int side = 0; side < 2; ++side) {
    const int* dim = side ? to_dim : from_dim;
    for (int d = 0; d < rank; ++d) {
      int m = 1;
      for (int a = 0; a < n; ++a)
        if (dim[a] == d) m *= shape[a];
      base[side][d] = total;
      total += m;
    }
  }
  auto* off = new std::int64_t[static_cast<std::size_t>(total)];
  auto* len = new std::int64_t[static_cast<std::size_t>(total)];
  for (int side = 0; side < 2; ++side) {
    const int* dim = side ? to_dim : from_dim;
    for (int d = 0; d < rank; ++d) {
      std::int64_t* o = off + base[side][d];
      std::int64_t* l = len + base[side][d];
      o[0] = 0;
      l[0] = ext[d];
      int m = 1;
      for (int a = 0; a < n; ++a) {
        if (dim[a] != d) continue;
        const int s = shape[a];
        for (int i = m - 1; i >= 0; --i) {  // entry i becomes entries i*s .. i*s+s-1 (from the back: in place)
          const std::int64_t oi = o[i], li = l[i];
          for (int c = s - 1; c >= 0; --c) {
            o[i * s + c] = oi + split_offset(li, s, c);
            l[i * s + c] = split_size(li, s, c);
          }
        }
        m *= s;
      }
    }
  }
  // An axis' coordinate moves its dim's table index by its stride: the product of the
  // sizes of the later axes sharding the same dim. The odometer keeps the indices.
  int rel[SHARDCAST_MAX_AXES]{}, coord[SHARDCAST_MAX_AXES]{}, fs[SHARDCAST_MAX_AXES]{}, ts[SHARDCAST_MAX_AXES]{};
  int nrel = 0;
  for (int a = 0; a < n; ++a) {
    if (from_dim[a] < 0 && to_dim[a] < 0) continue;
    rel[nrel++] = a;
    fs[a] = ts[a] = 1;
    for (int b = a + 1; b < n; ++b) {
      if (from_dim[a] >= 0 && from_dim[b] == from_dim[a]) fs[a] *= shape[b];
      if (to_dim[a] >= 0 && to_dim[b] == to_dim[a]) ts[a] *= shape[b];
    }
  }
  int fi[SHARDCAST_MAX_RANK]{}, ti[SHARDCAST_MAX_RANK]{};
  for (int d = 0; d < rank; ++d) fi[d] = base[0][d], ti[d] = base[1][d];
  std::int64_t worst = 0;
  while (true) {
    std::int64_t piece = 1, keep = 1;
    for (int d = 0; d < rank; ++d) {
      const int f = fi[d], t = ti[d];
      piece *= len[f];
      const std::int64_t lo = off[f] > off[t] ? off[f] : off[t];
      const std::int64_t hi = off[f] + len[f] < off[t] + len[t] ? off[f] + len[f] : off[t] + len[t];
      keep *= hi > lo ? hi - lo : 0;
    }
    worst = piece - keep > worst ? piece - keep : worst;
    int i = nrel - 1;  // odometer over the axes that shard anything
    for (; i >= 0; --i) {
      const int a = rel[i], fd = from_dim[a], td = to_dim[a];
      if (++coord[a] < shape[a]) {
        if (fd >= 0) fi[fd] += fs[a];
        if (td >= 0) ti[td] += ts[a];
        break;
      }
      coord[a] = 0;
      if (fd >= 0) fi[fd] -= (shape[a] - 1) * fs[a];
      if (td >= 0) ti[td] -= (shape[a] - 1) * ts[a];
    }
    if (i < 0) break;
  }
  delete[] off;
  delete[] len;
  return static_cast<double>(worst);
}

/// What the rank at coordinates 0 sends in an all-to-all: a lower bound on what the
/// busiest rank sends, cheap because its pieces before and after both start at index 0
/// and so overlap in the smaller extent per dim (part 0 of every split).
constexpr double all_to_all_rank0(const int* from_dim, const int* to_dim, int n, const int* shape, const std::int64_t* ext, int rank) {
  std::int64_t ef[SHARDCAST_MAX_RANK]{}, et[SHARDCAST_MAX_RANK]{};
  for (int d = 0; d < rank; ++d) ef[d] = et[d] = ext[d];
  for (int a = 0; a < n; ++a) {
    if (from_dim[a] >= 0) ef[from_dim[a]] = split_size(ef[from_dim[a]], shape[a], 0);
    if (to_dim[a] >= 0) et[to_dim[a]] = split_size(et[to_dim[a]], shape[a], 0);
  }
  std::int64_t piece = 1, keep = 1;
  for (int d = 0; d < rank; ++d) {
    piece *= ef[d];
    keep *= ef[d] < et[d] ? ef[d] : et[d];
  }
  return static_cast<double>(piece - keep);
}

/// What the busiest rank sends in an all-to-all from `from` to `to`: the closed form when
/// it applies, else the enumeration.
constexpr double all_to_all_busiest(const runtime_layout& from, const runtime_layout& to, const int* shape, const std::int64_t* ext,
                                    int rank) {
  const int n = from.naxes;
  int from_dim[SHARDCAST_MAX_AXES]{}, to_dim[SHARDCAST_MAX_AXES]{};
  for (int a = 0; a < n; ++a) {
    from_dim[a] = from[a].is_shard() ? from[a].dim : -1;
    to_dim[a] = to[a].is_shard() ? to[a].dim : -1;
  }
  double closed = 0;
  if (all_to_all_closed_form(from_dim, to_dim, n, shape, ext, rank, closed)) return closed;
  return all_to_all_enumerate(from_dim, to_dim, n, shape, ext, rank);
}

/// Elements sent by the busiest rank in a step (padding of uneven pieces included):
/// all_gather (n-1) x largest piece, reduce_scatter (n-1) x largest target piece,
/// all_reduce 2(n-1)/n x piece (the bandwidth-optimal algorithms' traffic), all_to_all
/// exactly what leaves the busiest rank; local steps send nothing.
constexpr double step_cost(const step& s, const int* shape, const std::int64_t* ext, int rank) {
  const int n = group_size(s.axes, shape, s.from.naxes);
  const double N = n;
  switch (s.kind) {
    case step_kind::all_gather: return (N - 1) * static_cast<double>(max_volume(s.from, shape, ext, rank));
    case step_kind::reduce_scatter: return (N - 1) * static_cast<double>(max_volume(s.to, shape, ext, rank));
    case step_kind::all_reduce: return 2.0 * (N - 1) / N * static_cast<double>(max_volume(s.from, shape, ext, rank));
    case step_kind::all_to_all: return all_to_all_busiest(s.from, s.to, shape, ext, rank);
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

/// Largest search space (number of intermediate layouts) the planner explores in full
/// at run time; above it, each axis only passes through its source, its target and
/// replicate. At compile time (static plans) the bound is max_full_search_states_static,
/// which keeps a static plan's evaluation within compilers' default constexpr budgets.
inline constexpr long max_full_search_states = 4096;
inline constexpr long max_full_search_states_static = 256;

namespace detail {
/// What the planner's search keeps per state (one intermediate layout).
struct search_node {
  cost dist;                 ///< the cheapest cost found so far from the source
  int prev = -1;             ///< the state it was reached from
  bool reached = false, done = false;
  step_kind kind = step_kind::slice;  ///< the step from `prev`
  unsigned axes = 0;
  reduce_op op = reduce_op::sum;
  double vol = -1;           ///< the largest piece of the state's layout, once computed
};

/// An entry of the search's min-heap: a cost and the state it reaches.
struct search_item {
  cost c;
  int state;
};

/// The search's storage: one record per state and a binary min-heap of items, in arrays
/// made with `new[]` (std::unique_ptr and std::vector cost far more to build and index
/// during constant evaluation, which runs every static redistribute's planning).
class search_space {
 public:
  constexpr search_space(int nstates, int nreach)
      : node(new search_node[static_cast<std::size_t>(nstates)]{}), reach(new unsigned[static_cast<std::size_t>(nreach)]),
        heap_(new search_item[static_cast<std::size_t>(nstates)]), cap_(nstates) {}
  search_space(const search_space&) = delete;
  search_space& operator=(const search_space&) = delete;
  constexpr ~search_space() {
    delete[] node;
    delete[] reach;
    delete[] heap_;
  }

  constexpr bool empty() const { return size_ == 0; }
  constexpr void push(const cost& c, int state) {
    if (size_ == cap_) {
      auto* bigger = new search_item[static_cast<std::size_t>(2 * cap_)];
      for (int i = 0; i < size_; ++i) bigger[i] = heap_[i];
      delete[] heap_;
      heap_ = bigger;
      cap_ *= 2;
    }
    int i = size_++;
    while (i > 0) {
      const int up = (i - 1) / 2;
      if (!(c < heap_[up].c)) break;
      heap_[i] = heap_[up];
      i = up;
    }
    heap_[i] = search_item{c, state};
  }
  /// Removes the cheapest item and returns its state (the last item moves to the root and
  /// sifts down).
  constexpr int pop() {
    const int top = heap_[0].state;
    heap_[0] = heap_[--size_];
    int i = 0;
    while (true) {
      const int l = 2 * i + 1, r = l + 1;
      int m = i;
      if (l < size_ && heap_[l].c < heap_[m].c) m = l;
      if (r < size_ && heap_[r].c < heap_[m].c) m = r;
      if (m == i) break;
      const search_item t = heap_[i];
      heap_[i] = heap_[m];
      heap_[m] = t;
      i = m;
    }
    return top;
  }

  search_node* node;  ///< per state
  unsigned* reach;    ///< per axis, candidate and kind of move: the candidates it reaches (make_plan)

 private:
  search_item* heap_;
  int size_ = 0, cap_;
};
}  // namespace detail

/// Plans the conversion of a rank-`rank` tensor of global extents `ext` on a mesh of
/// shape `shape` from layout `src` to layout `dst`. Throws layout_error for layouts
/// that do not fit (at compile time: a compile error).
///
/// The plan is optimal (fewest elements sent by the busiest rank, then fewest
/// collectives, then fewest steps) over every sequence of steps whose intermediate
/// layouts use any placement on any axis, whenever that space has at most
/// `max_full_search_states` layouts ((rank + 2)^naxes for one reduce op: e.g. every
/// rank-2 tensor on up to 6 axes, rank 4 on up to 4); beyond that, over intermediate
/// layouts whose axes hold their source placement, target placement or replicate.
///
/// The search loop works on plain arrays of small integers and makes few calls: during
/// constant evaluation (static plans) every function call, including every std::array or
/// std::vector index and every small accessor, costs far more than the arithmetic it
/// wraps. Its step costs are those of detail::step_cost, written out.
constexpr plan make_plan(const runtime_layout& src, const runtime_layout& dst, const int* shape, const std::int64_t* ext, int rank) {
  const int n = src.naxes;
  if (src.naxes != dst.naxes) throw layout_error("shardcast::make_plan: source and target layouts have different numbers of placements");
  if (rank < 0 || rank > SHARDCAST_MAX_RANK)
    throw layout_error("shardcast::make_plan: the tensor rank is outside 0..SHARDCAST_MAX_RANK; define SHARDCAST_MAX_RANK larger before including shardcast");
  if (!detail::same_op_partials(src) || !detail::same_op_partials(dst))
    throw layout_error("shardcast::make_plan: partial placements of one layout must share one reduce op (the order of mixed reductions is undefined); redistribute in two steps");
  for (int a = 0; a < n; ++a)
    if ((src[a].is_shard() && (src[a].dim < 0 || src[a].dim >= rank)) || (dst[a].is_shard() && (dst[a].dim < 0 || dst[a].dim >= rank)))
      throw layout_error("shardcast::make_plan: a shard dim is negative or not below the tensor's rank");
  int unit_axes = 0;  // the axes of size 1
  for (int a = 0; a < n; ++a) {
    if (shape[a] < 1) throw layout_error("shardcast::make_plan: a mesh axis has size below 1; every mesh axis needs size >= 1");
    if (shape[a] == 1) unit_axes |= 1 << a;
  }
  for (int d = 0; d < rank; ++d)
    if (ext[d] < 0) throw layout_error("shardcast::make_plan: a global extent is negative");

  reduce_op ops[2] = {reduce_op::sum, reduce_op::sum};
  int nops = 0;
  for (const runtime_layout* l : {&src, &dst})
    for (int a = 0; a < n; ++a)
      if ((*l)[a].is_partial()) {
        bool have = false;
        for (int i = 0; i < nops; ++i) have = have || ops[i] == (*l)[a].op;
        if (!have) ops[nops++] = (*l)[a].op;
      }

  // Candidate placements per axis: every placement when the whole space is small enough,
  // else source, target and replicate.
  const int per_axis = 1 + rank + nops;
  // Not `const long bound = is_constant_evaluated() ? ...`: the initializer of a const
  // integral variable is manifestly constant-evaluated, so that form would pick the
  // static bound at run time too.
  long bound = max_full_search_states;
  if (std::is_constant_evaluated()) bound = max_full_search_states_static;
  long full = 1;
  for (int a = 0; a < n && full <= bound; ++a) full *= per_axis;
  const bool search_all = full <= bound;
  constexpr int max_cand = 1 + SHARDCAST_MAX_RANK + 2;
  placement_desc cand[SHARDCAST_MAX_AXES][max_cand]{};
  int ncand[SHARDCAST_MAX_AXES]{};
  int radix[SHARDCAST_MAX_AXES]{};
  int nstates = 1;
  for (int a = 0; a < n; ++a) {
    auto add = [&](const placement_desc& o) {
      bool dup = false;
      for (int i = 0; i < ncand[a]; ++i) dup = dup || cand[a][i] == o;
      if (!dup) cand[a][ncand[a]++] = o;
    };
    add(src[a]);
    add(dst[a]);
    add(placement_desc::make_replicate());
    if (search_all) {
      for (int d = 0; d < rank; ++d) add(placement_desc::make_shard(d));
      for (int i = 0; i < nops; ++i) add(placement_desc::make_partial(ops[i]));
    }
    radix[a] = nstates;
    // (SHARDCAST_MAX_AXES may be up to 30: 3^20 layouts overflow int, and far fewer do not fit in memory)
    if (static_cast<long long>(nstates) * ncand[a] > (1ll << 24))
      throw layout_error("shardcast::make_plan: the search space has more than 2^24 layouts (too many mesh axes change placement); "
                         "redistribute in several steps that each change fewer axes");
    nstates *= ncand[a];
  }
  if (nops == 0) nops = 1;
  // The candidates as plain integers: kind (0 replicate, 1 shard, 2 partial), the shard
  // dim, the index of the partial's op in `ops`.
  constexpr int R_ = 0, S_ = 1, P_ = 2;
  int ck[SHARDCAST_MAX_AXES][max_cand]{}, cd[SHARDCAST_MAX_AXES][max_cand]{}, co[SHARDCAST_MAX_AXES][max_cand]{};
  for (int a = 0; a < n; ++a)
    for (int i = 0; i < ncand[a]; ++i) {
      const placement_desc& c = cand[a][i];
      ck[a][i] = c.is_shard() ? S_ : c.is_partial() ? P_ : R_;
      cd[a][i] = c.is_shard() ? c.dim : -1;
      co[a][i] = c.is_partial() && nops > 1 && c.op == ops[1] ? 1 : 0;
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

  // Per axis, candidate and kind of move (step kind kk, op index oi: entry kk * 2 + oi),
  // the candidates the move reaches, as a bit set: all_gather S -> R, reduce_scatter
  // P(op) -> S, all_reduce P(op) -> R, all_to_all S(c) -> S(d) with c != d, slice R -> S,
  // pad S -> P(op), identity R -> P(op). Made once; every state the search visits reads it.
  // (An all_to_all also takes, without a choice, the axes that keep S(d) inner to an axis
  // of the step that leaves or joins d: see `step_axes` below.)
  detail::search_space sp(nstates, n * max_cand * 14);
  unsigned* reach = sp.reach;
  unsigned moves[SHARDCAST_MAX_AXES * max_cand]{};  // per axis and candidate: the kinds of move (bit kk * 2 + oi) that change it
  for (int a = 0; a < n; ++a)
    for (int f = 0; f < ncand[a]; ++f) {
      const int fk = ck[a][f], fd = cd[a][f], fo = co[a][f];
      for (int kk = 0; kk < 7; ++kk)
        for (int oi = 0; oi < nops; ++oi) {
          unsigned m = 0;
          for (int i = 0; i < ncand[a]; ++i) {
            const int tk = ck[a][i];
            bool ok = false;
            switch (static_cast<step_kind>(kk)) {
              case step_kind::all_gather: ok = fk == S_ && tk == R_; break;
              case step_kind::reduce_scatter: ok = fk == P_ && fo == oi && tk == S_; break;
              case step_kind::all_reduce: ok = fk == P_ && fo == oi && tk == R_; break;
              case step_kind::all_to_all: ok = fk == S_ && tk == S_ && fd != cd[a][i]; break;
              case step_kind::slice: ok = fk == R_ && tk == S_; break;
              case step_kind::pad: ok = fk == S_ && tk == P_ && co[a][i] == oi; break;
              case step_kind::identity: ok = fk == R_ && tk == P_ && co[a][i] == oi; break;
            }
            if (ok) m |= 1u << i;
          }
          reach[(a * max_cand + f) * 14 + kk * 2 + oi] = m;
          if (m != 0) moves[a * max_cand + f] |= 1u << (kk * 2 + oi);
        }
    }

  // The search is A*: the heap orders states by their cost so far plus a lower bound on
  // what any plan from them to the target still sends, so states that cannot lead to a
  // cheaper plan than the target's are never expanded. With t = (elements of the tensor)
  // / (ranks of the mesh), no piece of any layout holds fewer than t x (the product of
  // the sizes of its axes that shard nothing) elements (the largest piece is at least the
  // mean). Axes that hold P but whose target is not that P must still be reduced, and
  // axes that hold S but whose target is R must still be gathered (an all_gather, or a
  // pad then a reduction). The bound is
  //   h = t x ((product of N_a over the axes still to reduce) - 1
  //            + (sum of N_a - 1 over the axes still to gather)).
  // It is consistent (no step lowers h by more than the step costs), so the first time
  // the target leaves the heap its cost is optimal, as in Dijkstra's search:
  //   - a reduce_scatter over axes A sends (N_A - 1) x its largest target piece, at least
  //     (N_A - 1) x t x (the product over the axes still to reduce that it leaves P), and
  //     lowers the product term by at most that; an all_reduce sends 2 (N_A - 1) / N_A x
  //     a piece at least N_A times larger;
  //   - an all_gather over A sends (N_A - 1) x a piece of at least t, at least the sum
  //     of N_a - 1 it removes;
  //   - a pad turns S into P: the sum loses N_a - 1, the product gains at least as much;
  //     slice, identity and all_to_all never lower h.
  // The bound counts elements only, so ties in elements still go to fewer collectives,
  // then fewer steps. Which of two equally cheap plans is found depends on the heap's
  // order, as before.
  double mean_piece = 1;
  for (int d = 0; d < rank; ++d) mean_piece *= static_cast<double>(ext[d]);
  for (int a = 0; a < n; ++a) mean_piece /= shape[a];
  int to_reduce[SHARDCAST_MAX_AXES][max_cand]{};  // per axis and candidate: N_a when it is a P still to reduce, else 1
  int to_gather[SHARDCAST_MAX_AXES][max_cand]{};  // N_a - 1 when it is an S whose target is R, else 0
  for (int a = 0; a < n; ++a)
    for (int i = 0; i < ncand[a]; ++i) {
      to_reduce[a][i] = ck[a][i] == P_ && !(cand[a][i] == dst[a]) ? shape[a] : 1;
      to_gather[a][i] = ck[a][i] == S_ && dst[a].is_replicate() ? shape[a] - 1 : 0;
    }
  auto still_sent = [&](const int* idx) {  // h of the state with candidate indices idx
    std::int64_t product = 1, sum = 0;
    for (int a = 0; a < n; ++a) product *= to_reduce[a][idx[a]], sum += to_gather[a][idx[a]];
    return mean_piece * static_cast<double>(product - 1 + sum);
  };
  detail::search_node* node = sp.node;
  node[0].reached = true;
  {
    const int source[SHARDCAST_MAX_AXES]{};
    sp.push(detail::cost{still_sent(source), 0, 0}, 0);
  }

  while (!sp.empty()) {
    const int u = sp.pop();
    detail::search_node& nu = node[u];
    if (nu.done) continue;
    nu.done = true;
    if (u == target) break;
    int ui[SHARDCAST_MAX_AXES]{};  // candidate index per axis
    int shard_axes[SHARDCAST_MAX_RANK]{};  // per dim, the axes that shard it
    for (int a = 0; a < n; ++a) {
      ui[a] = (u / radix[a]) % ncand[a];
      if (ck[a][ui[a]] == S_) shard_axes[cd[a][ui[a]]] |= 1 << a;
    }
    // Largest piece of a state (what detail::max_volume gives), computed once per state.
    auto volume_of = [&](int st) {
      detail::search_node& ns = node[st];
      if (ns.vol < 0) {
        std::int64_t e[SHARDCAST_MAX_RANK]{};
        for (int d = 0; d < rank; ++d) e[d] = ext[d];
        for (int a = 0; a < n; ++a) {
          const int i = (st / radix[a]) % ncand[a];
          if (ck[a][i] != S_) continue;
          const int d = cd[a][i];
          e[d] = e[d] / shape[a] + (e[d] % shape[a] != 0 ? 1 : 0);  // part 0 of a balanced split
        }
        double v = 1;  // (double: a canonical mesh's extents s^(N+1) per dim overflow int64 for rank 8 on 3 axes, rank 4 on 7)
        for (int d = 0; d < rank; ++d) v *= static_cast<double>(e[d]);
        ns.vol = v;
      }
      return ns.vol;
    };
    const double vol_cur = volume_of(u);
    // The odometer below leaves these as they were (the state u) when it has run through.
    int pick[SHARDCAST_MAX_AXES]{};  // per axis: 0 unchanged, else 1 + its option
    int vi[SHARDCAST_MAX_AXES]{};  // the next state's candidate index per axis
    unsigned any_moves = 0;  // the kinds of move that change some axis of u
    for (int a = 0; a < n; ++a) {
      vi[a] = ui[a];
      any_moves |= moves[a * max_cand + ui[a]];
    }
    for (int kk = 0; kk < 7; ++kk) {
      const auto k = static_cast<step_kind>(kk);
      const bool has_op = k == step_kind::reduce_scatter || k == step_kind::all_reduce || k == step_kind::pad || k == step_kind::identity;
      const bool nests = k != step_kind::all_reduce && k != step_kind::identity;
      const bool collective = is_collective(k);
      for (int oi = 0; oi < (has_op ? nops : 1); ++oi) {
        if (!(any_moves >> (kk * 2 + oi) & 1u)) continue;
        // Per axis that this move can change (mv), the candidates it reaches (opt).
        int opt[SHARDCAST_MAX_AXES][max_cand]{};
        int nopt[SHARDCAST_MAX_AXES]{};
        int mv[SHARDCAST_MAX_AXES]{};
        int nmv = 0;
        for (int a = 0; a < n; ++a) {
          unsigned m = reach[(a * max_cand + ui[a]) * 14 + kk * 2 + oi];
          if (m == 0) continue;
          mv[nmv++] = a;
          for (; m != 0; m &= m - 1) opt[a][nopt[a]++] = std::countr_zero(m);
        }
        // Every combination of one option or none per axis, but none on every axis: an
        // odometer over the axes with options, the first fastest, which keeps the next
        // state's candidate indices `vi`, its number `v` and the changed `axes`.
        int axes = 0;
        int v = u;
        while (true) {
          int j = 0;
          for (; j < nmv; ++j) {
            const int a = mv[j];
            if (pick[a] < nopt[a]) {
              const int next = opt[a][pick[a]++];
              v += (next - vi[a]) * radix[a];
              vi[a] = next;
              axes |= 1 << a;
              break;
            }
            v += (ui[a] - vi[a]) * radix[a];
            vi[a] = ui[a];
            pick[a] = 0;
            axes &= ~(1 << a);
          }
          if (j == nmv) break;
          detail::search_node& nv = node[v];
          if (nv.done) continue;
          bool valid = true;
          // The step's axes: the changed ones and, for an all_to_all, the axes that keep
          // S(d) inner to a changed axis that leaves or joins d. Their label stays but their
          // interval does not (outer axes split a dim first): S(0),S(0) -> S(1),S(0) is one
          // all_to_all over both axes. Left out, they would fail the nesting rule below.
          // Only on meshes of up to resplit_max_axes axes (see there).
          // Axes of size 1 split nothing (part 0 of one is the whole), so they neither need
          // re-splitting nor make others need it.
          int step_axes = axes;
          if (k == step_kind::all_to_all && n <= detail::resplit_max_axes)
            for (int a = 0; a < n; ++a) {
              if ((axes >> a & 1) != 0 || ck[a][ui[a]] != S_ || shape[a] == 1) continue;
              const int d = cd[a][ui[a]];
              for (int b = 0; b < a; ++b)
                if ((axes >> b & 1) != 0 && shape[b] > 1 && (cd[b][ui[b]] == d) != (cd[b][vi[b]] == d)) {
                  step_axes |= 1 << a;
                  break;
                }
            }
          // Nesting: an axis the step gathers, scatters, slices, pads or all-to-alls must be
          // innermost, among the axes the step leaves alone, for the dims it touches. Axes of
          // size 1 do not count, on either side: they split nothing.
          if (nests)
            for (int q = 0; q < nmv && valid; ++q) {
              const int a = mv[q], later_kept = ~step_axes & ~((2 << a) - 1) & ~unit_axes;
              valid = pick[a] == 0 || shape[a] == 1 || !((ck[a][ui[a]] == S_ && (shard_axes[cd[a][ui[a]]] & later_kept) != 0) ||
                                        (ck[a][vi[a]] == S_ && (shard_axes[cd[a][vi[a]]] & later_kept) != 0));
            }
          // Never pass through a layout with mixed reductions.
          if (nops > 1) {
            int seen = 0;
            for (int a = 0; a < n; ++a)
              if (ck[a][vi[a]] == P_) seen |= 1 << co[a][vi[a]];
            valid = valid && seen != 3;
          }
          if (!valid) continue;
          detail::cost nc{nu.dist.elements, nu.dist.collectives, nu.dist.steps + 1};
          if (collective) {
            int group = 1;
            for (int a = 0; a < n; ++a)
              if (step_axes >> a & 1) group *= shape[a];
            const double N = group;
            switch (k) {
              case step_kind::all_gather: nc.elements += (N - 1) * vol_cur; break;
              case step_kind::reduce_scatter: nc.elements += (N - 1) * volume_of(v); break;
              case step_kind::all_reduce: nc.elements += 2.0 * (N - 1) / N * vol_cur; break;
              default: {  // detail::all_to_all_busiest, written out
                int from_dim[SHARDCAST_MAX_AXES]{}, to_dim[SHARDCAST_MAX_AXES]{};
                for (int a = 0; a < n; ++a) {
                  from_dim[a] = ck[a][ui[a]] == S_ ? cd[a][ui[a]] : -1;
                  to_dim[a] = ck[a][vi[a]] == S_ ? cd[a][vi[a]] : -1;
                }
                double sent = 0;
                if (!detail::all_to_all_closed_form(from_dim, to_dim, n, shape, ext, rank, sent)) {
                  // Before enumerating: when even the lower bound cannot make v cheaper,
                  // neither can the exact figure. The plan found is the same; this only
                  // skips the work.
                  if (nv.reached) {
                    detail::cost least = nc;
                    least.elements += detail::all_to_all_rank0(from_dim, to_dim, n, shape, ext, rank);
                    least.collectives += group > 1 ? 1 : 0;  // (the collective; nc counts the step already)
                    if (!(least < nv.dist)) continue;
                  }
                  sent = detail::all_to_all_enumerate(from_dim, to_dim, n, shape, ext, rank);
                }
                nc.elements += sent;
                break;
              }
            }
            if (group > 1) nc.collectives += 1;  // (over one rank: a local copy, see calls_collective)
          }
          if (!nv.reached || nc < nv.dist) {
            nv = detail::search_node{nc, u, true, false, k, static_cast<unsigned>(step_axes), ops[oi], nv.vol};  // (one statement: cheaper in constant evaluation)
            sp.push(detail::cost{nc.elements + still_sent(vi), nc.collectives, nc.steps}, v);
          }
        }
      }
    }
  }
  const detail::search_node& nt = node[target];
  if (!nt.reached)
    throw layout_error("shardcast::make_plan: no plan from \"" + to_string(src) + "\" to \"" + to_string(dst) + "\"");
  plan p;
  p.src = src;
  p.dst = dst;
  p.elements = nt.dist.elements;
  p.collectives = nt.dist.collectives;
  int chain[max_plan_steps]{};
  int len = 0;
  for (int s = target; s != 0; s = node[s].prev) {
    if (len == max_plan_steps) throw layout_error("shardcast::make_plan: the plan needs more than max_plan_steps steps");
    chain[len++] = s;
  }
  for (int i = 0; i < len; ++i) {
    const int s = chain[len - 1 - i];
    step& st = p.steps[i];
    st.kind = node[s].kind;
    st.axes = node[s].axes;
    st.op = node[s].op;
    st.from = decode(node[s].prev);
    st.to = decode(s);
  }
  p.nsteps = len;
  return p;
}

/// Run-time planning for a mesh shape and global extents held in arrays.
template <std::size_t N, std::size_t R>
plan make_plan(const runtime_layout& src, const runtime_layout& dst, const std::array<int, N>& shape,
               const std::array<std::int64_t, R>& ext) {
  static_assert(R <= SHARDCAST_MAX_RANK, "shardcast::make_plan: the tensor rank exceeds SHARDCAST_MAX_RANK; define it larger before including shardcast.");
  src.validate(static_cast<int>(N), static_cast<int>(R), "shardcast::make_plan");
  dst.validate(static_cast<int>(N), static_cast<int>(R), "shardcast::make_plan");
  return make_plan(src, dst, shape.data(), ext.data(), static_cast<int>(R));
}

namespace detail {
/// A canonical mesh a static plan is costed on: every axis of size `s`, every extent s^(N+1).
constexpr plan canonical_plan(const runtime_layout& src, const runtime_layout& dst, int rank, int s = 4) {
  int shape[SHARDCAST_MAX_AXES]{};
  std::int64_t ext[SHARDCAST_MAX_RANK]{};
  std::int64_t e = s;
  for (int a = 0; a < src.naxes; ++a) {
    shape[a] = s;
    e *= s;
  }
  for (int d = 0; d < rank; ++d) ext[d] = e;
  return make_plan(src, dst, shape, ext, rank);
}

constexpr bool same_steps(const plan& a, const plan& b) {
  if (a.nsteps != b.nsteps) return false;
  for (int i = 0; i < a.nsteps; ++i)
    if (a[i].kind != b[i].kind || a[i].axes != b[i].axes || a[i].op != b[i].op || !(a[i].to == b[i].to)) return false;
  return true;
}

/// What `p` costs on a mesh of `shape` with global extents `ext` (the planner's measure).
constexpr cost plan_cost(const plan& p, const int* shape, const std::int64_t* ext, int rank) {
  cost c;
  for (int i = 0; i < p.nsteps; ++i) {
    c.elements += step_cost(p[i], shape, ext, rank);
    c.collectives += calls_collective(p[i], shape) ? 1 : 0;
  }
  c.steps = p.nsteps;
  return c;
}
}  // namespace detail

/// The plans a static redistribute chooses from, made at compile time: the optimal plan
/// on a canonical mesh whose axes all have size 4 (`p[0]`, which is `static_plan`) and,
/// when it differs, the optimal plan on one whose axes all have size 2. Large axes make
/// hierarchical plans pay (e.g. "P(sum),R" -> "S(0),R" on 4x4 sends 3/8 of the tensor as
/// slice + reduce_scatter + all_gather instead of 3/4 as one reduce_scatter); on size-2
/// axes both send 1/2 and one collective wins the tie.
struct plan_set {
  plan p[2]{};
  int n = 0;

  constexpr const plan& operator[](int i) const { return p[i]; }
  constexpr int size() const { return n; }
};

namespace detail {
constexpr plan_set candidate_plans(const runtime_layout& src, const runtime_layout& dst, int rank) {
  plan_set s;
  s.p[0] = canonical_plan(src, dst, rank, 4);
  s.n = 1;
  const plan two = canonical_plan(src, dst, rank, 2);
  if (!same_steps(two, s.p[0])) s.p[s.n++] = two;
  return s;
}

/// Which plan a static redistribute runs on a real mesh: `choice` indexes the candidates,
/// or is -1 when the run-time planner found a strictly cheaper plan (`p` then holds it).
struct plan_choice {
  int choice = 0;
  plan p;
};

/// The cheapest candidate on the real mesh (ties: the lower index), unless make_plan
/// with the real shape and extents finds one strictly cheaper. Deterministic: every
/// rank of a mesh makes the same choice.
/// `opt` is make_plan(ps[0].src, ps[0].dst, shape, ext, rank), made by the caller (a
/// redistribute takes it from detail::shared_plans, so the ranks of one process plan once).
inline plan_choice choose_plan(const plan_set& ps, const int* shape, const std::int64_t* ext, int rank, const plan& opt) {
  plan_choice r;
  cost best = plan_cost(ps[0], shape, ext, rank);
  for (int i = 1; i < ps.size(); ++i) {
    const cost c = plan_cost(ps[i], shape, ext, rank);
    if (c < best) best = c, r.choice = i;
  }
  r.p = ps[r.choice];
  const cost oc{opt.elements, opt.collectives, opt.nsteps};
  if (oc < best) r.choice = -1, r.p = opt, best = oc;
  r.p.elements = best.elements;  // a candidate's own figures are its cost on the canonical mesh
  r.p.collectives = best.collectives;
  return r;
}
inline plan_choice choose_plan(const plan_set& ps, const int* shape, const std::int64_t* ext, int rank) {
  return choose_plan(ps, shape, ext, rank, make_plan(ps[0].src, ps[0].dst, shape, ext, rank));
}
}  // namespace detail

/// The compile-time candidate plans from layout type `From` to `To` for a rank-`R` tensor.
template <class From, class To, int R>
inline constexpr plan_set static_plans = detail::candidate_plans(From::desc, To::desc, R);

/// The compile-time plan from layout type `From` to `To` for a rank-`R` tensor, optimal on
/// a canonical mesh whose axes all have size 4 (the first of `static_plans`).
template <class From, class To, int R>
inline constexpr const plan& static_plan = static_plans<From, To, R>.p[0];

}  // namespace shardcast
