#pragma once
/// @file ops/overlap.hpp
/// Communication/compute overlap by collective-matmul decomposition, on host backends.
///
/// - `all_gather_matmul<Axis>(ctx, x, w, chunks)`: Y = all_gather(X) * W, the entry of a
///   sequence-parallel block. X [t, h] is `shard<0>` on mesh axis `Axis` (rows/tokens split),
///   W [h, o] is `shard<1>` there (column-parallel weight), Y [t, o] comes out `shard<1>`
///   there. Each rank's rows are cut into `chunks` pieces; the all-gather of piece c+1 runs
///   on the rank's communication worker while the calling thread multiplies piece c.
/// - `matmul_reduce_scatter<Axis>(ctx, x, w, chunks)`: Z = reduce_scatter(X * W), the exit of
///   the block. X [t, f] is `shard<1>` on `Axis`, W [f, o] is `shard<0>` there, so X * W is
///   `partial<sum>` there; Z [t, o] comes out `shard<0>` there (rows split). The GEMM of
///   piece c runs on the calling thread while the worker reduce-scatters piece c-1.
///
/// On every other mesh axis the (X, W) placements follow the matmul rule table
/// (ops/matmul.hpp) and carry over to the output unchanged; X may be `shard<0>` there
/// (data parallelism) only on axes before `Axis`, so that the rows handled over `Axis`
/// form one contiguous block (several axes sharding a dim nest in increasing axis order).
/// Layouts that do not fit are compile errors saying what to change. With a
/// `dynamic_layout` operand (either or both) the same rules are checked at run time: the
/// result has a `dynamic_layout`, and layouts that do not fit throw `layout_error` naming
/// the axis, the placements and what to change.
///
/// `chunks == 1` is the unsplit sequential version: one collective on the calling thread,
/// then one GEMM per member block (or the reverse); any call left with a single non-empty
/// collective runs that way too, since there is nothing to overlap. With `host_gemm`, or
/// any GEMM whose result for a row does not depend on the other rows of the call, every
/// chunk count gives bit-identical results: each output element comes from one GEMM call
/// over the same inner extent, and the reduce-scatter adds the ranks in the same order.
///
/// Worked example, mesh 2 (data) x 2 (tensor), overlap axis 1, t = 6, h = 4, o = 2:
/// @code
///   // X [6,4] layout<shard<0>, shard<0>>: data coord 0 has rows 0..2, split 2 + 1 over the
///   //   tensor axis, so rank (0,0) holds rows 0..1 and rank (0,1) row 2.
///   // W [4,2] layout<replicate, shard<1>>: rank (d,1) holds column 1.
///   // Y [6,2] layout<shard<0>, shard<1>>: rank (0,1) holds rows 0..2, column 1.
///   sc::overlap_context ctx(mesh);   // once per mesh, collective
///   auto y = sc::all_gather_matmul<1>(ctx, x, w, 2);
///   auto z = sc::matmul_reduce_scatter<1>(ctx, y, w2, 2);   // w2 [2,4] layout<replicate, shard<0>>
///   // z: [6,4] layout<shard<0>, shard<0>>, the layout x had
/// @endcode

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/comm_worker.hpp"
#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../mesh.hpp"
#include "../placement.hpp"
#include "gemm.hpp"
#include "matmul.hpp"

namespace shardcast {

namespace detail {
/// `L` with the placement on mesh axis `Axis` replaced by `P`.
template <class L, int Axis, class P>
struct layout_with;
template <class... Ps, int Axis, class P>
struct layout_with<layout<Ps...>, Axis, P> {
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> layout<std::conditional_t<static_cast<int>(I) == Axis, P, Ps>...>;
  using type = decltype(make(std::index_sequence_for<Ps...>{}));
};
template <class L, int Axis, class P>
using layout_with_t = typename layout_with<L, Axis, P>::type;

/// True when `l` shards tensor dim `d` on some mesh axis after `axis`.
constexpr bool shards_dim_after(const runtime_layout& l, int d, int axis) {
  for (int a = axis + 1; a < l.naxes; ++a)
    if (l[a].is_shard(d)) return true;
  return false;
}

/// What the overlap operators need of X and W besides matmul's rule, as fault bits (0: all
/// met). One source for the compile-time layout structs and the run-time check of
/// dynamic layouts (overlap_result_layout). `gather`: all_gather_matmul, else
/// matmul_reduce_scatter.
enum overlap_fault : unsigned {
  overlap_axis = 1u,         ///< `axis` is not a mesh axis
  overlap_x_placement = 2u,  ///< X is not S(0) (gather) or S(1) (scatter) on `axis`
  overlap_w_placement = 4u,  ///< W is not S(1) (gather) or S(0) (scatter) on `axis`
  overlap_nesting = 8u,      ///< X is also S(0) on a mesh axis after `axis`
};
constexpr unsigned overlap_faults(bool gather, int axis, const runtime_layout& lx, const runtime_layout& lw) {
  if (axis < 0 || axis >= lx.naxes) return overlap_axis;
  unsigned f = 0;
  if (!lx[axis].is_shard(gather ? 0 : 1)) f |= overlap_x_placement;
  if (!lw[axis].is_shard(gather ? 1 : 0)) f |= overlap_w_placement;
  if (shards_dim_after(lx, 0, axis)) f |= overlap_nesting;
  return f;
}

template <class LX, class LW>
struct lazy_matmul_layout {
  using type = matmul_layout_t<LX, LW>;
};
/// After a failed layout check: a valid stand-in, so the failed static_assert is the only error.
template <class L>
struct lazy_stand_in {
  using type = L;
};
}  // namespace detail

/// The layout of `all_gather_matmul<Axis>(ctx, x, w, ...)` for X of layout LX and W of
/// layout LW: matmul's layout for X with `replicate` on `Axis`, i.e. `shard<1>` on `Axis`.
/// Example: `all_gather_matmul_layout_t<1, layout<shard<0>, shard<0>>, layout<replicate, shard<1>>>`
/// is `layout<shard<0>, shard<1>>`.
/// @tparam Axis the mesh axis X's rows are gathered over
template <int Axis, class LX, class LW>
struct all_gather_matmul_layout {
  static_assert(layout_type<LX> && layout_type<LW>, "shardcast::all_gather_matmul_layout: X and W need compile-time layouts (layout<P...>); with a dynamic_layout operand "
                "all_gather_matmul returns a dynamic_layout tensor (all_gather_matmul_result_layout_t).");
  static_assert(LX::naxes == LW::naxes, "shardcast::all_gather_matmul: X and W must live on the same mesh (same number of axes).");
  static constexpr unsigned faults = detail::overlap_faults(true, Axis, LX::desc, LW::desc);
  static constexpr bool axis_ok = !(faults & detail::overlap_axis);
  static_assert(axis_ok, "shardcast::all_gather_matmul<Axis>: Axis is not a mesh axis; pass the index (0-based) of the axis X's rows are sharded on.");
  static constexpr bool x_ok = !(faults & detail::overlap_x_placement);
  static_assert(x_ok, "shardcast::all_gather_matmul<Axis>: X must be shard<0> on mesh axis Axis (its rows, e.g. the tokens of sequence "
                      "parallelism, split there); redistribute X to shard<0> on that axis, or call matmul if X is already gathered.");
  static constexpr bool w_ok = !(faults & detail::overlap_w_placement);
  static_assert(w_ok, "shardcast::all_gather_matmul<Axis>: W must be shard<1> on mesh axis Axis (a column-parallel weight), so the "
                      "product comes out shard<1> there; redistribute W to shard<1> on that axis.");
  static constexpr bool nest_ok = !(faults & detail::overlap_nesting);
  static_assert(nest_ok, "shardcast::all_gather_matmul<Axis>: X is also shard<0> on a mesh axis after Axis, so the rows gathered over "
                         "Axis are not one contiguous block; shard X's rows for data parallelism only on axes before Axis (e.g. data "
                         "on axis 0, overlap on axis 1), or make X replicate on the later axis.");
  using type = typename std::conditional_t<faults == 0,
                                           detail::lazy_matmul_layout<detail::layout_with_t<LX, Axis, replicate>, LW>,
                                           detail::lazy_stand_in<LX>>::type;
};
/// Shorthand for all_gather_matmul_layout<Axis, LX, LW>::type.
template <int Axis, class LX, class LW>
using all_gather_matmul_layout_t = typename all_gather_matmul_layout<Axis, LX, LW>::type;

/// The layout of `matmul_reduce_scatter<Axis>(ctx, x, w, ...)`: matmul's layout (which
/// is `partial<sum>` on `Axis`) with `shard<0>` on `Axis`.
/// Example: `matmul_reduce_scatter_layout_t<1, layout<shard<0>, shard<1>>, layout<replicate, shard<0>>>`
/// is `layout<shard<0>, shard<0>>`.
/// @tparam Axis the mesh axis the product is reduce-scattered over (along its rows)
template <int Axis, class LX, class LW>
struct matmul_reduce_scatter_layout {
  static_assert(layout_type<LX> && layout_type<LW>, "shardcast::matmul_reduce_scatter_layout: X and W need compile-time layouts (layout<P...>); with a dynamic_layout operand "
                "matmul_reduce_scatter returns a dynamic_layout tensor (matmul_reduce_scatter_result_layout_t).");
  static_assert(LX::naxes == LW::naxes, "shardcast::matmul_reduce_scatter: X and W must live on the same mesh (same number of axes).");
  static constexpr unsigned faults = detail::overlap_faults(false, Axis, LX::desc, LW::desc);
  static constexpr bool axis_ok = !(faults & detail::overlap_axis);
  static_assert(axis_ok, "shardcast::matmul_reduce_scatter<Axis>: Axis is not a mesh axis; pass the index (0-based) of the axis X's columns are sharded on.");
  static constexpr bool x_ok = !(faults & detail::overlap_x_placement);
  static_assert(x_ok, "shardcast::matmul_reduce_scatter<Axis>: X must be shard<1> on mesh axis Axis (a row-parallel input: its columns "
                      "split there), so X * W is partial<sum> there; redistribute X to shard<1> on that axis.");
  static constexpr bool w_ok = !(faults & detail::overlap_w_placement);
  static_assert(w_ok, "shardcast::matmul_reduce_scatter<Axis>: W must be shard<0> on mesh axis Axis (a row-parallel weight), so X * W "
                      "is partial<sum> there; redistribute W to shard<0> on that axis.");
  static constexpr bool nest_ok = !(faults & detail::overlap_nesting);
  static_assert(nest_ok, "shardcast::matmul_reduce_scatter<Axis>: X is also shard<0> on a mesh axis after Axis, so the rows scattered "
                         "over Axis would not nest inside the later axis' rows; shard X's rows for data parallelism only on axes before "
                         "Axis, or make X replicate on the later axis.");
  using type = typename std::conditional_t<faults == 0, detail::lazy_matmul_layout<LX, LW>, detail::lazy_stand_in<LX>>::type;
};
/// Shorthand for matmul_reduce_scatter_layout<Axis, LX, LW>::type.
template <int Axis, class LX, class LW>
using matmul_reduce_scatter_layout_t = detail::layout_with_t<typename matmul_reduce_scatter_layout<Axis, LX, LW>::type, Axis, shard<0>>;

namespace detail {
template <int Axis, class LX, class LW>
struct lazy_reduce_scatter_layout {
  using type = matmul_reduce_scatter_layout_t<Axis, LX, LW>;
};
}  // namespace detail

/// The layout type of all_gather_matmul's result: all_gather_matmul_layout_t<Axis, LX, LW>
/// for two compile-time layouts, dynamic_layout when X or W has a dynamic_layout (the
/// layout value is then checked and computed at run time, with the same rules).
template <int Axis, class LX, class LW>
using all_gather_matmul_result_layout_t =
    typename std::conditional_t<detail::is_dynamic_v<LX> || detail::is_dynamic_v<LW>, std::type_identity<dynamic_layout>,
                                all_gather_matmul_layout<Axis, LX, LW>>::type;
/// The same for matmul_reduce_scatter.
template <int Axis, class LX, class LW>
using matmul_reduce_scatter_result_layout_t =
    typename std::conditional_t<detail::is_dynamic_v<LX> || detail::is_dynamic_v<LW>, std::type_identity<dynamic_layout>,
                                detail::lazy_reduce_scatter_layout<Axis, LX, LW>>::type;

namespace detail {
/// The run-time form of all_gather_matmul_layout (`gather`) and matmul_reduce_scatter_layout
/// (`!gather`) for layout values: the result's layout, or layout_error saying what to change.
inline runtime_layout overlap_result_layout(bool gather, int axis, const runtime_layout& lx, const runtime_layout& lw) {
  const std::string who = gather ? "shardcast::all_gather_matmul" : "shardcast::matmul_reduce_scatter";
  const std::string head = who + "<" + std::to_string(axis) + ">: X has layout \"" + to_string(lx) + "\" and W \"" + to_string(lw) + "\": ";
  SHARDCAST_EXPECTS(lx.naxes == lw.naxes, head + "X and W must live on the same mesh (same number of axes)");
  const unsigned f = overlap_faults(gather, axis, lx, lw);
  SHARDCAST_EXPECTS(!(f & overlap_axis), head + "mesh axis " + std::to_string(axis) + " is not an axis of the mesh");
  const std::string on = " on mesh axis " + std::to_string(axis);
  const std::string px = to_string(lx[axis]), pw = to_string(lw[axis]);
  if (gather) {
    SHARDCAST_EXPECTS(!(f & overlap_x_placement), head + "X is " + px + on + " but must be S(0) there (its rows split); redistribute X "
                                                         "to S(0) on that axis, or call matmul if X is already gathered");
    SHARDCAST_EXPECTS(!(f & overlap_w_placement), head + "W is " + pw + on + " but must be S(1) there (a column-parallel weight); "
                                                         "redistribute W to S(1) on that axis");
  } else {
    SHARDCAST_EXPECTS(!(f & overlap_x_placement), head + "X is " + px + on + " but must be S(1) there (its columns split), so X * W is "
                                                         "P(sum) there; redistribute X to S(1) on that axis");
    SHARDCAST_EXPECTS(!(f & overlap_w_placement), head + "W is " + pw + on + " but must be S(0) there (a row-parallel weight); "
                                                         "redistribute W to S(0) on that axis");
  }
  SHARDCAST_EXPECTS(!(f & overlap_nesting), head + "X is also S(0) on a mesh axis after " + std::to_string(axis) +
                                                 ", so its rows over that axis are not one contiguous block; shard X's rows for data "
                                                 "parallelism only on axes before the overlap axis, or make X R on the later axis");
  runtime_layout a = lx;
  if (gather) a[axis] = placement_desc::make_replicate();
  const layout_rule r = matmul_rules(a, lw);
  if (r.err != op_rule::ok)
    throw layout_error(head + "on mesh axis " + std::to_string(r.axis) + " X is " + to_string(lx[r.axis]) + " and W is " +
                       to_string(lw[r.axis]) +
                       ", which matmul does not take; off the overlap axis the legal (X, W) -> result pairs are matmul's: (S(0), R) -> "
                       "S(0), (R, S(1)) -> S(1), (S(1), S(0)) -> P(sum), (R, R) -> R, (P(sum), R) -> P(sum) and (R, P(sum)) -> P(sum), "
                       "so redistribute X or W first (e.g. to R on that axis)");
  runtime_layout out = r.out;
  if (!gather) out[axis] = placement_desc::make_shard(0);
  return out;
}
}  // namespace detail

namespace detail {
struct overlap_access;
}

/// One rank's overlap machinery for one mesh: a private duplicate of the mesh's
/// communicators and a communication worker thread that runs the pipelined collectives
/// on them. Make it once per mesh and reuse it for every call (the thread is started
/// here, not per call). Constructing it is collective over the mesh (it splits the
/// communicator), so every rank of the mesh must make one at the same point.
///
/// While a pipeline runs only the worker touches the duplicate communicators (a call with
/// a single collective runs it on the calling thread while the worker is idle), and every
/// call waits for its collectives before returning, so the mesh's own communicators stay
/// free for the calling thread between calls. Use one context from one thread at a time. The
/// destructor stops and joins the worker, also after a failed call.
///
/// Host memory only: the device version (two streams and events) is not implemented.
/// On MPI the worker thread makes MPI calls, so MPI must be initialised with at least
/// MPI_THREAD_SERIALIZED (the constructor throws comm_error otherwise).
///
/// @code
///   auto mesh = sc::make_mesh(comm, std::array<int, 1>{4});
///   sc::overlap_context ctx(mesh);
/// @endcode
/// @tparam Mesh a shardcast::mesh over a host-memory communicator
template <class Mesh>
class overlap_context {
  static_assert(std::is_same_v<typename Mesh::memory_space, host_memory>,
                "shardcast::overlap_context: the pipelined operators run on host-memory backends (host threads, MPI); for device "
                "meshes use redistribute followed by matmul with a stream.");

 public:
  /// Collective over `m`: duplicates its communicators and starts the worker thread.
  /// @throws comm_error if the split fails on this or a peer rank
  /// @throws comm_error on an MPI mesh whose MPI runs below MPI_THREAD_SERIALIZED (on
  ///         every rank, before anything collective)
  explicit overlap_context(const Mesh& m)
      : mesh_(checked(m)), own_(m.comm().split(0, m.rank()), m.shape()), worker_(std::make_unique<detail::comm_worker>()) {}
  /// Not copyable or movable: it owns a running thread (hold it by unique_ptr to move it).
  overlap_context(const overlap_context&) = delete;
  overlap_context& operator=(const overlap_context&) = delete;

  /// The mesh this context serves (tensors passed to the operators must live on it).
  const Mesh& mesh() const { return mesh_; }

 private:
  friend struct detail::overlap_access;
  /// `m`, once its communicator allows a second thread to call it (communicators that
  /// say so with a static require_threads(who), such as MPI's).
  static const Mesh& checked(const Mesh& m) {
    detail::require_mesh(m, "shardcast::overlap_context");
    if constexpr (requires { Mesh::comm_type::require_threads("shardcast::overlap_context"); })
      Mesh::comm_type::require_threads("shardcast::overlap_context");
    return m;
  }
  Mesh mesh_;
  shardcast::mesh<Mesh::naxes, typename Mesh::comm_type> own_;  ///< the duplicate: same shape and ranks, its own communicators (owned also when Mesh is a mesh_ref)
  std::unique_ptr<detail::comm_worker> worker_;  // last: joined before own_ goes away
};

template <class Mesh>
overlap_context(const Mesh&) -> overlap_context<Mesh>;

namespace detail {
struct overlap_access {
  template <class Mesh>
  static comm_worker& worker(overlap_context<Mesh>& c) {
    return *c.worker_;
  }
  template <class Mesh>
  static typename Mesh::comm_type& axis_comm(overlap_context<Mesh>& c, int axis) {
    return c.own_.axis_comm(axis);
  }
};

/// Waits for every collective the call queued when it ends, normally or by an exception,
/// so no task outlives the buffers it reads and writes. After an exception of this thread
/// (a GEMM threw) the queued collectives still run: the peers run theirs, and ranks on
/// which the same call failed stay in step for the context's next call (comm_worker::drain).
struct drain_on_exit {
  comm_worker& w;
  ~drain_on_exit() { w.drain(); }
};

/// Starts a pipeline collective: on the worker when the call has several collectives to
/// overlap with its GEMMs; with only one there is nothing to overlap, so it runs here, at
/// once, on the same (then idle) communicator, and the returned ticket is 0 (no wait).
template <class F>
comm_worker::ticket start_collective(comm_worker& w, bool pipelined, F&& task) {
  if (pipelined) return w.submit(std::forward<F>(task));
  task();
  return 0;
}

/// Row blocks of one mesh axis' members and their `chunks` pieces.
struct row_pieces {
  std::vector<std::int64_t> rows, off;  ///< per member q: its row count and offset (local rows of the full block)
  std::vector<std::int64_t> max_rows;   ///< per piece c: the largest piece c over the members (the collective's rows)
  int chunks = 1;

  std::int64_t rows_of(int q, int c) const { return split_size(rows[static_cast<std::size_t>(q)], chunks, c); }
  /// Offset of member q's piece c within the block of all members' rows.
  std::int64_t off_of(int q, int c) const {
    return off[static_cast<std::size_t>(q)] + split_offset(rows[static_cast<std::size_t>(q)], chunks, c);
  }
};

/// Rows of the members along `axis` of this rank's group under layout `l`, relative to
/// `block_off` (the first row of the block they tile, `block_rows` rows).
template <class Mesh>
row_pieces member_rows(const Mesh& m, int axis, const runtime_layout& l, const std::int64_t* ext, std::int64_t block_off,
                       std::int64_t block_rows, int chunks) {
  const int P = m.size(axis);
  row_pieces rp;
  rp.chunks = chunks;
  rp.rows.resize(static_cast<std::size_t>(P));
  rp.off.resize(static_cast<std::size_t>(P));
  auto c = m.coords();
  std::int64_t next = 0;
  for (int q = 0; q < P; ++q) {
    c[static_cast<std::size_t>(axis)] = q;
    const box b = local_box(l, m.shape().data(), c.data(), ext, 2);
    rp.rows[static_cast<std::size_t>(q)] = b.ext[0];
    rp.off[static_cast<std::size_t>(q)] = b.off[0] - block_off;
    // The members' rows tile the block in member order; anything else is a bug upstream.
    SHARDCAST_EXPECTS(rp.off[static_cast<std::size_t>(q)] == next, "shardcast::overlap: member row blocks do not tile the local rows");
    next += b.ext[0];
  }
  SHARDCAST_EXPECTS(next == block_rows, "shardcast::overlap: member row blocks do not tile the local rows");
  rp.max_rows.assign(static_cast<std::size_t>(chunks), 0);
  for (int k = 0; k < chunks; ++k)
    for (int q = 0; q < P; ++q) rp.max_rows[static_cast<std::size_t>(k)] = std::max(rp.max_rows[static_cast<std::size_t>(k)], rp.rows_of(q, k));
  return rp;
}

template <class Ctx, class MX, class MW>
void check_overlap_args(const Ctx& ctx, const MX& mx, const MW& mw, const std::int64_t* ex, const std::int64_t* ew, int chunks,
                        const char* who) {
  SHARDCAST_EXPECTS(ctx.mesh() == mx && mx == mw, std::string(who) + ": X, W and the overlap_context must be on the same mesh; make the "
                                                                     "context from the mesh the tensors were distributed on");
  SHARDCAST_EXPECTS(chunks >= 1, std::string(who) + ": chunks is " + std::to_string(chunks) + "; use 1 (no split) or more");
  SHARDCAST_EXPECTS(ex[1] == ew[0], std::string(who) + ": X is " + std::to_string(ex[0]) + "x" + std::to_string(ex[1]) + " but W is " +
                                        std::to_string(ew[0]) + "x" + std::to_string(ew[1]) + "; X's columns must equal W's rows");
}

/// The checks both overlap operators start with (check_overlap_args and, for dynamic
/// layouts, overlap_result_layout), then the result Y = X W of layout LY, uninitialised.
/// X and W may have const elements (they are only read); Y's are mutable.
template <class LY, int Axis, bool Gather, class TX, class TW, class LX, class LW, class Mesh>
dtensor<std::remove_const_t<TX>, 2, LY, Mesh> overlap_output(const overlap_context<Mesh>& ctx, const dtensor<TX, 2, LX, Mesh>& x,
                                                             const dtensor<TW, 2, LW, Mesh>& w, int chunks) {
  static_assert(same_elements_v<TX, TW>,
                "shardcast::all_gather_matmul / matmul_reduce_scatter: X and W have different element types; convert one first, e.g. "
                "map(w, [](U v) { return T(v); }).");
  const auto ex = x.global_extents(), ew = w.global_extents();
  check_overlap_args(ctx, x.mesh(), w.mesh(), ex.data(), ew.data(), chunks,
                     Gather ? "shardcast::all_gather_matmul" : "shardcast::matmul_reduce_scatter");
  runtime_layout l{};
  if constexpr (is_dynamic_v<LY>) l = overlap_result_layout(Gather, Axis, x.layout(), w.layout());
  return make_output<std::remove_const_t<TX>, 2, LY>(x.mesh(), std::array<std::int64_t, 2>{ex[0], ew[1]}, l, {});
}
}  // namespace detail

/// Y = all_gather(X) * W, pipelined: the all-gather of X's row piece c+1 over mesh axis
/// `Axis` runs on the context's worker while this thread multiplies piece c. Collective
/// over the mesh; every rank passes the same `chunks`.
///
/// Example (1-axis mesh of 2, Axis 0): X [5,3] layout<shard<0>> (rank 0 rows 0..2, rank 1
/// rows 3..4), W [3,4] layout<shard<1>> (2 columns each): Y [5,4] layout<shard<1>>, rank r
/// holding all 5 rows of its 2 columns. With chunks = 2, step 0 gathers rows {0,1} and {3}
/// and step 1 rows {2} and {4} while step 0's rows are multiplied.
/// @tparam Axis the mesh axis X's rows are sharded on (and W's columns)
/// @param ctx the overlap context of x's mesh
/// @param x X [t, h], shard<0> on Axis (unchanged)
/// @param w W [h, o], shard<1> on Axis (unchanged)
/// @param chunks pieces each rank's rows are cut into; 1 = all-gather, then multiply
/// @param gemm local GEMM functor, taken by reference as by matmul, called on this thread as gemm(m, n, k, a, lda, b, ldb, c, ldc)
///        (row-major, C overwritten) once per member piece; pieces with no inner extent are
///        zero-filled without a call
/// @throws layout_error if the extents, meshes or `chunks` do not fit
/// @throws comm_error if a collective fails or a peer fails mid-pipeline
template <int Axis, class TX, class TW, class LX, class LW, class Mesh, class Gemm = host_gemm>
dtensor<std::remove_const_t<TX>, 2, all_gather_matmul_result_layout_t<Axis, LX, LW>, Mesh> all_gather_matmul(overlap_context<Mesh>& ctx,
                                                                                                              const dtensor<TX, 2, LX, Mesh>& x,
                                                                                                              const dtensor<TW, 2, LW, Mesh>& w,
                                                                                                              int chunks, Gemm&& gemm = Gemm{}) {
  using T = std::remove_const_t<TX>;  // (X and W may have const elements: they are only read)
  auto&& g = detail::callable_gemm<T>(std::forward<Gemm>(gemm));  // by reference (see matmul)
  static_assert(detail::gemm_plain_v<T, decltype(g)&>,
                "shardcast::all_gather_matmul: the GEMM functor must be callable as gemm(m, n, k, a, lda, b, ldb, c, ldc), the 9-argument form of "
                "shardcast/ops/gemm.hpp; the overlapped matmuls do not call the transposed 12-argument form (give the functor both).");
  static_assert(Axis >= 0 && Axis < Mesh::naxes,
                "shardcast::all_gather_matmul<Axis>: Axis is not a mesh axis; pass the index (0-based) of the axis X's rows are sharded on.");
  using ops = detail::memory_ops<host_memory>;
  auto y = detail::overlap_output<all_gather_matmul_result_layout_t<Axis, LX, LW>, Axis, true>(ctx, x, w, chunks);
  const auto ex = x.global_extents();
  const Mesh& m = x.mesh();
  const box &bx = x.local_box(), &bw = w.local_box(), &by = y.local_box();
  SHARDCAST_EXPECTS(bx.off[1] == bw.off[0] && bx.ext[1] == bw.ext[0] && by.off[1] == bw.off[1] && by.ext[1] == bw.ext[1],
                    "shardcast::all_gather_matmul: local pieces of X and W do not line up");
  const int P = m.size(Axis), me = m.coord(Axis);
  const std::int64_t k = bx.ext[1], n = bw.ext[1];
  const detail::row_pieces rp = detail::member_rows(m, Axis, x.layout(), ex.data(), by.off[0], by.ext[0], chunks);

  // Per piece c: P blocks of max_rows[c] rows of X, gathered; and, where this rank's piece
  // is shorter than the longest, a zero-padded copy to send.
  std::vector<std::size_t> goff(static_cast<std::size_t>(chunks) + 1, 0), soff(static_cast<std::size_t>(chunks) + 1, 0);
  for (int c = 0; c < chunks; ++c) {
    const auto cnt = static_cast<std::size_t>(rp.max_rows[static_cast<std::size_t>(c)] * k);
    goff[static_cast<std::size_t>(c) + 1] = goff[static_cast<std::size_t>(c)] + cnt * static_cast<std::size_t>(P);
    soff[static_cast<std::size_t>(c) + 1] = soff[static_cast<std::size_t>(c)] + (rp.rows_of(me, c) < rp.max_rows[static_cast<std::size_t>(c)] ? cnt : 0);
  }
  auto gathered = ops::allocate<T>(goff.back());
  auto staged = ops::allocate<T>(soff.back());
  std::vector<const T*> send(static_cast<std::size_t>(chunks));
  for (int c = 0; c < chunks; ++c) {
    const std::int64_t r = rp.rows_of(me, c);
    const T* mine = x.data() + (rp.off_of(me, c) - rp.off[static_cast<std::size_t>(me)]) * k;
    if (soff[static_cast<std::size_t>(c) + 1] == soff[static_cast<std::size_t>(c)]) {
      send[static_cast<std::size_t>(c)] = mine;
    } else {
      T* s = staged.get() + soff[static_cast<std::size_t>(c)];
      ops::copy(s, mine, static_cast<std::size_t>(r * k));
      ops::fill(s + r * k, static_cast<std::size_t>((rp.max_rows[static_cast<std::size_t>(c)] - r) * k), T{});
      send[static_cast<std::size_t>(c)] = s;
    }
  }

  detail::comm_worker& worker = detail::overlap_access::worker(ctx);
  auto* comm = &detail::overlap_access::axis_comm(ctx, Axis);
  detail::drain_on_exit guard{worker};  // after the buffers: runs before they are freed
  std::vector<detail::comm_worker::ticket> tickets(static_cast<std::size_t>(chunks), 0);
  const bool pipelined = std::count_if(rp.max_rows.begin(), rp.max_rows.end(), [&](std::int64_t r) { return r * k > 0; }) > 1;
  for (int c = 0; c < chunks; ++c) {
    const auto cnt = static_cast<std::size_t>(rp.max_rows[static_cast<std::size_t>(c)] * k);
    if (cnt == 0) continue;  // the same on every member: all skip it
    const T* s = send[static_cast<std::size_t>(c)];
    T* g = gathered.get() + goff[static_cast<std::size_t>(c)];
    tickets[static_cast<std::size_t>(c)] = detail::start_collective(worker, pipelined, [comm, s, g, cnt] { comm->all_gather(s, g, cnt); });
  }
  for (int c = 0; c < chunks; ++c) {
    if (tickets[static_cast<std::size_t>(c)]) worker.wait(tickets[static_cast<std::size_t>(c)]);
    const std::int64_t mr = rp.max_rows[static_cast<std::size_t>(c)];
    for (int q = 0; q < P; ++q) {
      const std::int64_t r = rp.rows_of(q, c);
      if (r == 0 || n == 0) continue;
      T* out = y.data() + rp.off_of(q, c) * n;
      if (k == 0) ops::fill(out, static_cast<std::size_t>(r * n), T{});
      else g(r, n, k, gathered.get() + goff[static_cast<std::size_t>(c)] + static_cast<std::size_t>(q * mr * k), k, w.data(), n, out, n);
    }
  }
  return y;
}

/// Z = reduce_scatter(X * W) along rows over mesh axis `Axis`, pipelined: this thread
/// multiplies row piece c while the context's worker reduce-scatters piece c-1.
/// Collective over the mesh; every rank passes the same `chunks`.
///
/// Example (1-axis mesh of 2, Axis 0): X [5,4] layout<shard<1>> (2 columns each), W [4,3]
/// layout<shard<0>> (2 rows each): X * W is partial<sum>; Z [5,3] layout<shard<0>>, rank 0
/// holding rows 0..2 and rank 1 rows 3..4 of the sum.
/// @tparam Axis the mesh axis X's columns (and W's rows) are sharded on
/// @param ctx the overlap context of x's mesh
/// @param x X [t, f], shard<1> on Axis (unchanged)
/// @param w W [f, o], shard<0> on Axis (unchanged)
/// @param chunks pieces each rank's output rows are cut into; 1 = multiply, then reduce-scatter
/// @param gemm local GEMM functor, as for all_gather_matmul
/// @throws layout_error if the extents, meshes or `chunks` do not fit
/// @throws comm_error if a collective fails or a peer fails mid-pipeline
template <int Axis, class TX, class TW, class LX, class LW, class Mesh, class Gemm = host_gemm>
dtensor<std::remove_const_t<TX>, 2, matmul_reduce_scatter_result_layout_t<Axis, LX, LW>, Mesh> matmul_reduce_scatter(
    overlap_context<Mesh>& ctx, const dtensor<TX, 2, LX, Mesh>& x, const dtensor<TW, 2, LW, Mesh>& w, int chunks, Gemm&& gemm = Gemm{}) {
  using T = std::remove_const_t<TX>;  // (X and W may have const elements: they are only read)
  auto&& g = detail::callable_gemm<T>(std::forward<Gemm>(gemm));  // by reference (see matmul)
  static_assert(detail::gemm_plain_v<T, decltype(g)&>,
                "shardcast::matmul_reduce_scatter: the GEMM functor must be callable as gemm(m, n, k, a, lda, b, ldb, c, ldc), the 9-argument form of "
                "shardcast/ops/gemm.hpp; the overlapped matmuls do not call the transposed 12-argument form (give the functor both).");
  static_assert(Axis >= 0 && Axis < Mesh::naxes,
                "shardcast::matmul_reduce_scatter<Axis>: Axis is not a mesh axis; pass the index (0-based) of the axis X's columns are sharded on.");
  using ops = detail::memory_ops<host_memory>;
  auto z = detail::overlap_output<matmul_reduce_scatter_result_layout_t<Axis, LX, LW>, Axis, false>(ctx, x, w, chunks);
  const auto ex = x.global_extents();
  const Mesh& m = x.mesh();
  const box &bx = x.local_box(), &bw = w.local_box(), &bz = z.local_box();
  SHARDCAST_EXPECTS(bx.off[1] == bw.off[0] && bx.ext[1] == bw.ext[0] && bz.off[1] == bw.off[1] && bz.ext[1] == bw.ext[1],
                    "shardcast::matmul_reduce_scatter: local pieces of X and W do not line up");
  const int P = m.size(Axis), me = m.coord(Axis);
  const std::int64_t k = bx.ext[1], n = bw.ext[1];
  // The members' Z rows tile this rank's X rows (the partial product's rows).
  const detail::row_pieces rp = detail::member_rows(m, Axis, z.layout(), ex.data(), bx.off[0], bx.ext[0], chunks);

  // Per piece c: P blocks of max_rows[c] rows of the partial product to reduce-scatter;
  // where this rank's piece is shorter, the result lands in a staging block first.
  std::vector<std::size_t> poff(static_cast<std::size_t>(chunks) + 1, 0), roff(static_cast<std::size_t>(chunks) + 1, 0);
  for (int c = 0; c < chunks; ++c) {
    const auto cnt = static_cast<std::size_t>(rp.max_rows[static_cast<std::size_t>(c)] * n);
    poff[static_cast<std::size_t>(c) + 1] = poff[static_cast<std::size_t>(c)] + cnt * static_cast<std::size_t>(P);
    roff[static_cast<std::size_t>(c) + 1] = roff[static_cast<std::size_t>(c)] + (rp.rows_of(me, c) < rp.max_rows[static_cast<std::size_t>(c)] ? cnt : 0);
  }
  auto partial_rows = ops::allocate<T>(poff.back());
  auto staged = ops::allocate<T>(roff.back());

  detail::comm_worker& worker = detail::overlap_access::worker(ctx);
  auto* comm = &detail::overlap_access::axis_comm(ctx, Axis);
  detail::drain_on_exit guard{worker};  // after the buffers: runs before they are freed
  std::vector<detail::comm_worker::ticket> tickets(static_cast<std::size_t>(chunks), 0);
  const bool pipelined = std::count_if(rp.max_rows.begin(), rp.max_rows.end(), [&](std::int64_t r) { return r * n > 0; }) > 1;
  const std::int64_t my_first = rp.off[static_cast<std::size_t>(me)];
  for (int c = 0; c < chunks; ++c) {
    const std::int64_t mr = rp.max_rows[static_cast<std::size_t>(c)];
    const auto cnt = static_cast<std::size_t>(mr * n);
    if (cnt == 0) continue;  // the same on every member: all skip it
    T* part = partial_rows.get() + poff[static_cast<std::size_t>(c)];
    for (int q = 0; q < P; ++q) {
      const std::int64_t r = rp.rows_of(q, c);
      T* dst = part + q * mr * n;
      if (r > 0) {
        if (k == 0) ops::fill(dst, static_cast<std::size_t>(r * n), T{});
        else g(r, n, k, x.data() + rp.off_of(q, c) * k, k, w.data(), n, dst, n);
      }
      ops::fill(dst + r * n, static_cast<std::size_t>((mr - r) * n), T{});
    }
    T* recv = roff[static_cast<std::size_t>(c) + 1] == roff[static_cast<std::size_t>(c)]
                  ? z.data() + (rp.off_of(me, c) - my_first) * n
                  : staged.get() + roff[static_cast<std::size_t>(c)];
    tickets[static_cast<std::size_t>(c)] =
        detail::start_collective(worker, pipelined, [comm, part, recv, cnt] { comm->reduce_scatter(part, recv, cnt, reduce_op::sum); });
  }
  for (int c = 0; c < chunks; ++c) {
    if (rp.max_rows[static_cast<std::size_t>(c)] * n == 0) continue;
    if (tickets[static_cast<std::size_t>(c)]) worker.wait(tickets[static_cast<std::size_t>(c)]);
    if (roff[static_cast<std::size_t>(c) + 1] != roff[static_cast<std::size_t>(c)])
      ops::copy(z.data() + (rp.off_of(me, c) - my_first) * n, staged.get() + roff[static_cast<std::size_t>(c)],
                static_cast<std::size_t>(rp.rows_of(me, c) * n));
  }
  return z;
}

}  // namespace shardcast
