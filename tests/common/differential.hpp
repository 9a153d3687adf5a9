#pragma once
// End-to-end differential check shared by the host, MPI and GPU suites: distribute a
// global tensor under one layout (with partial terms that differ from rank to rank, see
// spread_partial_terms), redistribute to another, gather every rank's local piece with
// the backend's raw all_gather, and compare with the single-rank reference (the global
// tensor itself; for partial axes, the op-reduction over the ranks that differ only in
// partial coordinates).
#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include <shardcast/shardcast.hpp>

#include "reduce_ops.hpp"

namespace shardcast::testing {

/// The mesh `owner` itself or, with OnRef, its mesh_ref (a handle that keeps nothing
/// alive): for suites that run the same code on both handles.
template <bool OnRef, class Mesh>
auto mesh_handle(const Mesh& owner) {
  if constexpr (OnRef) return owner.ref();
  else return owner;
}

/// Small positive integers: every sum, product and mean of the test is exact.
template <class T>
std::vector<T> make_global(std::int64_t n, int salt = 0) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<T>((i * 7 + 3 + salt) % 11 + 1);
  return g;
}

template <class T>
T combine(T a, T b, reduce_op op) {
  switch (op) {
    case reduce_op::sum: case reduce_op::avg: return static_cast<T>(a + b);
    case reduce_op::prod: return static_cast<T>(a * b);
    case reduce_op::max: return a > b ? a : b;
    case reduce_op::min: return a < b ? a : b;
  }
  return a;
}

/// The global row-major index of local element `i` (row-major in the piece) of the piece
/// `b` of a tensor with global extents `e`.
inline std::int64_t global_index(const box& b, const std::int64_t* e, std::int64_t i) {
  std::int64_t loc[SHARDCAST_MAX_RANK]{};
  for (int d = b.rank - 1; d >= 0; --d) {
    loc[d] = i % b.ext[d];
    i /= b.ext[d];
  }
  std::int64_t g = 0;
  for (int d = 0; d < b.rank; ++d) g = g * e[d] + b.off[d] + loc[d];
  return g;
}

/// Calls f(coord) for the coordinates of every member of `rank`'s group over the mesh axes
/// `axes` (the ranks that differ from it on those axes only), found by scanning every rank
/// of the mesh: a reference independent of the library's group arithmetic.
template <class F>
void for_each_group_member(unsigned axes, const int* shape, int naxes, int rank, F&& f) {
  int nranks = 1;
  for (int a = 0; a < naxes; ++a) nranks *= shape[a];
  int mine[SHARDCAST_MAX_AXES] = {};
  rank_to_coord(rank, shape, naxes, mine);
  for (int q = 0; q < nranks; ++q) {
    int c[SHARDCAST_MAX_AXES] = {};
    rank_to_coord(q, shape, naxes, c);
    bool member = true;
    for (int a = 0; a < naxes; ++a)
      if (!(axes >> a & 1u)) member = member && c[a] == mine[a];
    if (member) f(static_cast<const int*>(c));
  }
}

/// The collectives rank `rank` calls for plan step `s` (0 or 1), by definition: a group in
/// which no member holds any element before the step or gets any after it skips the call;
/// any other group of more than one rank makes it (the reference for the executor's
/// step_geometry::idle and ::alone: a rank alone in its group copies its piece).
inline int expected_calls(const step& s, const int* shape, const std::int64_t* ext, int tensor_rank, int rank) {
  if (!is_collective(s.kind)) return 0;
  bool moves = false;
  int members = 0;
  for_each_group_member(s.axes, shape, s.from.naxes, rank, [&](const int* c) {
    ++members;
    moves = moves || local_box(s.from, shape, c, ext, tensor_rank).volume() > 0 || local_box(s.to, shape, c, ext, tensor_rank).volume() > 0;
  });
  return moves && members > 1 ? 1 : 0;
}

/// Returns "" when every rank's piece of `y` matches the reference, else a description.
/// Collective over the mesh (all ranks must call it with the same arguments). On device
/// meshes `s` is the stream `y` was produced on.
template <class T, int R, class L, class Mesh>
std::string check_against_reference(const dtensor<T, R, L, Mesh>& y, const std::vector<T>& global,
                                    typename Mesh::stream_type s = {}) {
  const auto& m = y.mesh();
  const runtime_layout l = y.layout();
  const auto ext = y.global_extents();
  const int P = m.nranks();
  const std::size_t chunk = static_cast<std::size_t>(detail::max_volume(l, m.shape().data(), ext.data(), R));
  std::vector<T> mine(chunk > 0 ? chunk : 1, T{}), all((chunk > 0 ? chunk : 1) * static_cast<std::size_t>(P));
  std::vector<T> host(y.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(host.data(), y.data(), host.size(), s);
  std::copy(host.begin(), host.end(), mine.begin());
  // The gather goes through the device when the backend lives there.
  using ops = detail::memory_ops<typename Mesh::memory_space>;
  auto dsend = ops::template allocate<T>(mine.size(), s);
  auto drecv = ops::template allocate<T>(all.size(), s);
  ops::from_host(dsend.get(), mine.data(), mine.size(), s);
  m.comm().all_gather(dsend.get(), drecv.get(), mine.size(), s);
  ops::to_host(all.data(), drecv.get(), all.size(), s);

  reduce_op op = reduce_op::sum;
  unsigned pmask = 0;
  int pcount = 1;
  for (int a = 0; a < Mesh::naxes; ++a)
    if (l[a].is_partial()) {
      op = l[a].op;
      pmask |= 1u << a;
      pcount *= m.size(a);
    }
  const std::int64_t* e = ext.data();
  for (int r = 0; r < P; ++r) {
    int c[SHARDCAST_MAX_AXES] = {};
    rank_to_coord(r, m.shape().data(), Mesh::naxes, c);
    bool lead = true;  // check each partial group once, from its member with zero partial coords
    for (int a = 0; a < Mesh::naxes; ++a)
      if (pmask >> a & 1u) lead = lead && c[a] == 0;
    if (!lead) continue;
    const box b = local_box(l, m.shape().data(), c, e, R);
    const std::int64_t vol = b.volume();
    for (std::int64_t i = 0; i < vol; ++i) {
      const std::int64_t gidx = global_index(b, e, i);
      // Reduce over the partial group.
      T acc{};
      for (int k = 0; k < pcount; ++k) {
        int cc[SHARDCAST_MAX_AXES];
        for (int a = 0; a < Mesh::naxes; ++a) cc[a] = c[a];
        int kk = k;
        for (int a = Mesh::naxes - 1; a >= 0; --a)
          if (pmask >> a & 1u) {
            cc[a] = kk % m.size(a);
            kk /= m.size(a);
          }
        const int q = coord_to_rank(cc, m.shape().data(), Mesh::naxes);
        const T v = all[static_cast<std::size_t>(q) * mine.size() + static_cast<std::size_t>(i)];
        acc = k == 0 ? v : combine(acc, v, op);
      }
      if (pmask && op == reduce_op::avg) acc = static_cast<T>(acc / static_cast<T>(pcount));
      const T want = global[static_cast<std::size_t>(gidx)];
      if (acc != want)
        return "layout " + to_string(l) + ": rank " + std::to_string(r) + " local element " + std::to_string(i) + " (global " +
               std::to_string(gidx) + ") is " + std::to_string(static_cast<double>(acc)) + ", expected " + std::to_string(static_cast<double>(want));
    }
  }
  return "";
}

/// Replaces the partial terms that distribute gave x (the value on the rank whose partial
/// coordinates are all 0, the op's identity or the value itself elsewhere) by terms that
/// differ from rank to rank and from element to element and still reduce to the value
/// under x's op, so that a reduction with another op, a term taken for the whole, or a
/// term moved to another element on any one rank gives a wrong result. For the element of
/// global index g, with h = g mod (size of the partial group) the rank that holds it
/// (its index in the group, row-major over the partial axes):
/// - sum: the value on rank h, plus on every rank a sum over the partial axes of
///   f_a(coordinate), where f_a is size_a - 1 at coordinate g mod size_a and -1 at the
///   others, which adds up to 0 over each axis;
/// - avg: the value plus the same sum on every rank;
/// - max (min): the value on rank h, smaller (larger) values elsewhere;
/// - prod: minus the value on rank h, -1 on the next rank of the group, 1 elsewhere.
/// A reduction over any subset of the partial axes (a plan may reduce them in stages)
/// leaves whole numbers, so the sums and means stay exact in every element type.
template <class T, int R, class L, class Mesh>
void spread_partial_terms(dtensor<T, R, L, Mesh>& x, const std::vector<T>& global, typename Mesh::stream_type s = {}) {
  const runtime_layout l = x.layout();
  const auto& m = x.mesh();
  reduce_op op = reduce_op::sum;
  int index = 0, group = 1;  // this rank's index in its partial group (row-major over the partial axes), the group's size
  for (int a = 0; a < Mesh::naxes; ++a)
    if (l[a].is_partial()) {
      op = l[a].op;
      index = index * m.size(a) + m.coord(a);
      group *= m.size(a);
    }
  if (group == 1 || x.local_size() == 0) return;
  std::vector<T> host(x.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(host.data(), x.data(), host.size(), s);
  const box b = x.local_box();
  const auto e = x.global_extents();
  for (std::size_t i = 0; i < host.size(); ++i) {
    const std::int64_t gidx = global_index(b, e.data(), static_cast<std::int64_t>(i));
    const T v = global[static_cast<std::size_t>(gidx)];
    const int holder = static_cast<int>(gidx % group);
    std::int64_t shift = 0;  // the sum over the partial axes of f_a(this rank's coordinate)
    for (int a = 0; a < Mesh::naxes; ++a)
      if (l[a].is_partial()) shift += m.coord(a) == static_cast<int>(gidx % m.size(a)) ? m.size(a) - 1 : -1;
    const T wobble = static_cast<T>(1 + (gidx + index) % 2);  // 1 or 2
    switch (op) {
      case reduce_op::sum: host[i] = static_cast<T>((index == holder ? v : T(0)) + static_cast<T>(shift)); break;
      case reduce_op::avg: host[i] = static_cast<T>(v + static_cast<T>(shift)); break;
      case reduce_op::max: host[i] = index == holder ? v : static_cast<T>(v - wobble); break;
      case reduce_op::min: host[i] = index == holder ? v : static_cast<T>(v + wobble); break;
      case reduce_op::prod: host[i] = index == holder ? static_cast<T>(-v) : index == (holder + 1) % group ? T(-1) : T(1); break;
    }
  }
  detail::memory_ops<typename Mesh::memory_space>::from_host(x.data(), host.data(), host.size(), s);
}

/// What is wrong with a tensor that was given up, or "". (An empty rank-0 tensor still has
/// local_size() 1, the one element of its empty box; its size says nothing.)
template <class D>
std::string check_emptied(const D& x) {
  if (x.owns() || x.data() != nullptr || (D::rank > 0 && x.local_size() != 0)) return "the given-up tensor was not left empty";
  return "";
}

/// distribute(src) -> redistribute(dst) -> compare; also checks the input is unchanged.
/// With `calls` > 1 it redistributes that many inputs in all, each from other global
/// values, while the first result lives (the later calls run on the plan, geometry and
/// staging the first one cached), checks each result, and then the first one again: no
/// later call may write into an earlier result. With `give_up_later`, the later calls give
/// their inputs up (std::move: a plan of one all_reduce then runs in place), and each such
/// input must be left empty.
template <class T, std::size_t R, class Mesh>
std::string differential_case(const Mesh& m, const runtime_layout& src, const runtime_layout& dst, const std::array<std::int64_t, R>& ext,
                              typename Mesh::stream_type s = {}, int calls = 1, bool give_up_later = false) {
  std::int64_t n = 1;
  for (auto v : ext) n *= v;
  const std::vector<T> g = make_global<T>(n);
  auto x = distribute(m, src, g, ext, s);
  spread_partial_terms(x, g, s);
  std::vector<T> before(x.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(before.data(), x.data(), before.size(), s);
  auto y = redistribute(x, dst, s);
  std::string err = check_against_reference(y, g, s);
  if (!err.empty()) return to_string(src) + " -> " + to_string(dst) + ": " + err;
  for (int c = 1; c < calls; ++c) {
    const std::vector<T> gc = make_global<T>(n, c);
    auto xc = distribute(m, src, gc, ext, s);
    spread_partial_terms(xc, gc, s);
    auto again = give_up_later ? redistribute(std::move(xc), dst, s) : redistribute(xc, dst, s);
    err = check_against_reference(again, gc, s);
    if (err.empty() && give_up_later) err = check_emptied(xc);
    if (!err.empty())
      return to_string(src) + " -> " + to_string(dst) + ", call " + std::to_string(c + 1) + (give_up_later ? " (input given up)" : "") + ": " + err;
  }
  if (calls > 1) {
    err = check_against_reference(y, g, s);
    if (!err.empty()) return to_string(src) + " -> " + to_string(dst) + ", first result after later calls: " + err;
  }
  std::vector<T> after(x.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(after.data(), x.data(), after.size(), s);
  if (after != before) return to_string(src) + " -> " + to_string(dst) + ": redistribute modified its input";
  return "";
}

/// Host memory for an output piece of `n` elements with `guard` sentinels on either side.
template <class T>
struct guarded {
  static constexpr std::size_t guard = 8;
  static constexpr T sentinel = static_cast<T>(-77);
  std::vector<T> buf;
  explicit guarded(std::size_t n) : buf(n + 2 * guard, sentinel) {}
  T* piece() { return buf.data() + guard; }
  /// "" when the sentinels around a piece of `n` elements are intact.
  std::string check(std::size_t n) const {
    for (std::size_t i = 0; i < guard; ++i)
      if (buf[i] != sentinel || buf[guard + n + i] != sentinel) return "wrote outside the output's local piece";
    return "";
  }
};

/// A copy of x's local piece (host memory), to check later that it was not modified.
template <class D>
std::vector<std::remove_const_t<typename D::value_type>> snapshot(const D& x) {
  std::vector<std::remove_const_t<typename D::value_type>> v(x.local_size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = x.data()[i];
  return v;
}

/// distribute(src) -> redistribute_into a view of layout dst over guarded host memory ->
/// compare; also checks the memory around the piece and the input.
template <class T, std::size_t R, class Mesh>
std::string differential_into_case(const Mesh& m, const runtime_layout& src, const runtime_layout& dst, const std::array<std::int64_t, R>& ext) {
  using D = dtensor<T, static_cast<int>(R), dynamic_layout, Mesh>;
  std::int64_t n = 1;
  for (auto v : ext) n *= v;
  const std::vector<T> g = make_global<T>(n);
  auto x = distribute(m, src, g, ext);
  spread_partial_terms(x, g);
  const auto before = snapshot(x);
  const box b = local_box(dst, m.shape().data(), m.coords().data(), ext.data(), static_cast<int>(R));
  guarded<T> out(static_cast<std::size_t>(b.volume()));
  const D y(m, ext, nullptr, out.piece(), dst);
  redistribute_into(x, y);
  std::string err = check_against_reference(y, g);  // collective: every rank calls it
  if (err.empty()) err = out.check(y.local_size());
  if (err.empty() && snapshot(x) != before) err = "the input was modified";
  return err.empty() ? err : to_string(src) + " -> " + to_string(dst) + " (redistribute_into): " + err;
}

/// Is the plan x -> dst one all_reduce (the plans that run in place)?
template <class T, int R, class Mesh>
bool one_all_reduce(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& dst) {
  const plan p = plan_for(x, dst);
  return p.nsteps == 1 && p.steps[0].kind == step_kind::all_reduce;
}

/// distribute(src) -> redistribute(std::move(x), dst) -> compare: the result matches the
/// reference, x is left empty, and a plan of one all_reduce runs in place in storage x
/// owned alone. `keep`: 0 nothing else refers to x's storage, 1 a copy of x holds it, 2 x
/// is a view over memory the test owns (neither may be written).
template <class T, std::size_t R, class Mesh>
std::string differential_given_up_case(const Mesh& m, const runtime_layout& src, const runtime_layout& dst,
                                       const std::array<std::int64_t, R>& ext, int keep) {
  std::int64_t n = 1;
  for (auto v : ext) n *= v;
  const std::vector<T> g = make_global<T>(n);
  auto owned = distribute(m, src, g, ext);
  spread_partial_terms(owned, g);
  std::vector<T> viewed = snapshot(owned);  // the memory a view (keep 2) wraps
  using D = dtensor<T, static_cast<int>(R), dynamic_layout, Mesh>;
  D x = keep == 2 ? D(m, ext, nullptr, viewed.data(), src) : owned;
  if (keep != 1) owned = D();  // x alone owns its storage (keep 0), or owns none (keep 2)
  const auto before = snapshot(x);
  const T* const old = x.data();
  const bool in_place = keep == 0 && x.local_size() > 0 && one_all_reduce(x, dst);
  auto y = redistribute(std::move(x), dst);
  const std::string what = to_string(src) + " -> " + to_string(dst) + (keep == 0 ? "" : keep == 1 ? " (copy kept)" : " (view)") + ": ";
  std::string err = check_against_reference(y, g);
  if (err.empty()) err = check_emptied(x);
  if (err.empty() && in_place && y.data() != old) err = "one all_reduce on storage the tensor owned alone did not run in place";
  if (err.empty() && keep == 1 && snapshot(owned) != before) err = "wrote into storage a copy of the tensor holds";
  if (err.empty() && keep == 2 && viewed != before) err = "wrote into the memory under a view";
  if (err.empty() && keep != 0 && !(src == dst) && y.local_size() > 0 && y.data() == old) err = "the result shares storage it may not write";
  return err.empty() ? err : what + err;
}

/// distribute(src) -> redistribute(dst), the input given up (std::move, storage owned
/// alone) on the mesh's even ranks and kept on its odd ones: a plan of one all_reduce then
/// runs in place on some ranks of a group and out of place on others, in one call. Checks
/// the result, that given-up inputs are emptied and kept ones unchanged.
template <class T, std::size_t R, class Mesh>
std::string differential_mixed_give_up_case(const Mesh& m, const runtime_layout& src, const runtime_layout& dst,
                                            const std::array<std::int64_t, R>& ext) {
  std::int64_t n = 1;
  for (auto v : ext) n *= v;
  const std::vector<T> g = make_global<T>(n);
  auto x = distribute(m, src, g, ext);
  spread_partial_terms(x, g);
  const bool give_up = m.rank() % 2 == 0;
  const auto before = snapshot(x);
  auto y = give_up ? redistribute(std::move(x), dst) : redistribute(x, dst);
  std::string err = check_against_reference(y, g);
  if (err.empty() && give_up) err = check_emptied(x);
  if (err.empty() && !give_up && snapshot(x) != before) err = "the kept input was modified";
  return err.empty() ? err : to_string(src) + " -> " + to_string(dst) + (give_up ? " (given up)" : " (kept)") + ": " + err;
}

/// Every placement for a rank-`rank` tensor: R, S(0..rank-1), P(op).
inline std::vector<placement_desc> placements(int rank, reduce_op op) {
  std::vector<placement_desc> v{placement_desc::make_replicate()};
  for (int d = 0; d < rank; ++d) v.push_back(placement_desc::make_shard(d));
  v.push_back(placement_desc::make_partial(op));
  return v;
}

/// Every layout over `naxes` axes whose placements come from `ps` (axis 0 varying fastest).
inline std::vector<runtime_layout> every_layout(const std::vector<placement_desc>& ps, int naxes) {
  std::vector<runtime_layout> out;
  std::size_t total = 1;
  for (int a = 0; a < naxes; ++a) total *= ps.size();
  for (std::size_t i = 0; i < total; ++i) {
    runtime_layout l;
    l.naxes = naxes;
    std::size_t k = i;
    for (int a = 0; a < naxes; ++a) {
      l[a] = ps[k % ps.size()];
      k /= ps.size();
    }
    out.push_back(l);
  }
  return out;
}

/// Every layout over `naxes` axes built from `placements(rank, op)`.
inline std::vector<runtime_layout> all_layouts(int naxes, int rank, reduce_op op) { return every_layout(placements(rank, op), naxes); }

/// Calls f(src, dst) for the layout pairs a differential sweep covers for rank-`rank`
/// tensors on `naxes`-axis meshes: every `stride`-th pair of each reduce op's layouts, and on
/// meshes of several axes each op only on its own slice of the pairs (pair index mod the
/// number of ops), so that with stride 1 the ops together cover every pair once.
template <class F>
void for_each_layout_pair(int naxes, int rank, std::size_t stride, F&& f) {
  constexpr std::size_t nops = std::size(all_reduce_ops);
  std::size_t k = 0;
  for (std::size_t oi = 0; oi < nops; ++oi) {
    const auto layouts = all_layouts(naxes, rank, all_reduce_ops[oi]);
    for (std::size_t i = 0; i < layouts.size(); ++i)
      for (std::size_t j = 0; j < layouts.size(); ++j) {
        if (k++ % stride != 0) continue;
        if (naxes > 1 && (i * layouts.size() + j) % nops != oi) continue;
        f(layouts[i], layouts[j]);
      }
  }
}

/// Integer means over several partial<avg> axes. The term that the rank of index `pc` in
/// the partial group (row-major over the partial axes) holds for the element of global
/// index g: scrambled, in [-10, 10], so that sums over the group are rarely multiples of its
/// size and the truncation of a mean matters.
template <class T>
T mean_term(std::int64_t g, int pc) {
  const std::uint64_t h = (static_cast<std::uint64_t>(g) * 2654435761u + static_cast<std::uint64_t>(pc) * 40503u + 12345u) * 2246822519u;
  return static_cast<T>(static_cast<std::int64_t>(h >> 40) % 21 - 10);
}

/// The sources and targets of integer_mean_case on `naxes` axes for rank-2 tensors: every
/// layout with two or more partial<avg> axes (R, S(0), S(1) on the others), and every
/// layout without a partial axis.
inline void integer_mean_layouts(int naxes, std::vector<runtime_layout>& sources, std::vector<runtime_layout>& targets) {
  for (const auto& l : all_layouts(naxes, 2, reduce_op::avg)) {
    int partial = 0;
    for (int a = 0; a < naxes; ++a) partial += l[a].is_partial();
    if (partial >= 2) sources.push_back(l);
    if (partial == 0) targets.push_back(l);
  }
}

/// The global value of a source of integer_mean_case: trunc(sum of the terms / group
/// size), once. With `nested`, also how many elements a mean of per-axis means (over the
/// last partial axis first) would get wrong: the data must make that happen somewhere, or
/// the test could not fail.
template <class T, int N>
std::vector<T> integer_mean_reference(const std::array<int, N>& shape, const runtime_layout& src, std::int64_t n, std::size_t* nested = nullptr) {
  int group = 1, last = -1;
  for (int a = 0; a < N; ++a)
    if (src[a].is_partial()) group *= shape[static_cast<std::size_t>(a)], last = a;
  const int inner = shape[static_cast<std::size_t>(last)];
  std::vector<T> ref(static_cast<std::size_t>(n));
  for (std::int64_t g = 0; g < n; ++g) {
    std::int64_t sum = 0, of_means = 0;
    for (int q0 = 0; q0 < group; q0 += inner) {
      std::int64_t part = 0;
      for (int q = q0; q < q0 + inner; ++q) part += static_cast<std::int64_t>(mean_term<T>(g, q));
      sum += part;
      of_means += part / inner;
    }
    ref[static_cast<std::size_t>(g)] = static_cast<T>(sum / group);
    if (nested && of_means / (group / inner) != sum / group) ++*nested;
  }
  return ref;
}

/// One integer_means pair: x of layout `src` holding mean_term's terms, redistributed to
/// `dst` (no partial axis), against integer_mean_reference; x must be unchanged. Collective.
template <class T, std::size_t R, class Mesh>
std::string integer_mean_case(const Mesh& m, const runtime_layout& src, const runtime_layout& dst, const std::array<std::int64_t, R>& e) {
  static_assert(std::is_integral_v<T>);
  std::int64_t n = 1;
  for (auto v : e) n *= v;
  int pc = 0;  // this rank's index in the partial group
  for (int a = 0; a < Mesh::naxes; ++a)
    if (src[a].is_partial()) pc = pc * m.size(a) + m.coord(a);
  auto x = distribute(m, src, std::vector<T>(static_cast<std::size_t>(n)), e);
  std::vector<T> mine(x.local_size());
  const box b = x.local_box();
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = mean_term<T>(global_index(b, e.data(), static_cast<std::int64_t>(i)), pc);
  detail::memory_ops<typename Mesh::memory_space>::from_host(x.data(), mine.data(), mine.size());
  const std::vector<T> got = to_global(redistribute(x, dst));
  const std::vector<T> ref = integer_mean_reference<T, Mesh::naxes>(m.shape(), src, n);
  std::string err;
  if (got.size() != ref.size()) err = "size " + std::to_string(got.size()) + ", expected " + std::to_string(ref.size());
  for (std::size_t g = 0; g < got.size() && err.empty(); ++g)
    if (got[g] != ref[g]) err = "element " + std::to_string(g) + " is " + std::to_string(got[g]) + ", expected " + std::to_string(ref[g]);
  std::vector<T> after(x.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(after.data(), x.data(), after.size());
  if (after != mine) err += " (the input changed)";
  return err.empty() ? err : to_string(src) + " -> " + to_string(dst) + ": " + err;
}

/// integer_mean_case for every source and target of integer_mean_layouts on m, extents e;
/// calls fail(message) for each pair that fails. Returns the number of pairs. Collective.
template <class T, class Mesh, class Fail>
std::size_t integer_mean_sweep(const Mesh& m, const std::array<std::int64_t, 2>& e, Fail&& fail) {
  std::vector<runtime_layout> sources, targets;
  integer_mean_layouts(Mesh::naxes, sources, targets);
  for (const auto& src : sources)
    for (const auto& dst : targets) {
      const std::string err = integer_mean_case<T>(m, src, dst, e);
      if (!err.empty()) fail(err);
    }
  return sources.size() * targets.size();
}

}  // namespace shardcast::testing
