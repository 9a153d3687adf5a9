#pragma once
/// @file detail/executor.hpp
/// Runs plan steps on a communicator. The geometry of a plan on this rank (boxes, chunk
/// sizes, group communicators, staging sizes) is computed once by `make_geometry`
/// (static plans keep it in the mesh, so a repeated redistribute does no box arithmetic);
/// then each step packs if it must, calls one collective and unpacks if it must. On host
/// memory the packs and unpacks are planned with the geometry too (detail/region_copy.hpp),
/// so a cached plan copies without deriving strides from boxes.
///
/// Memory: the last step writes into a fresh allocation the result owns. Pieces between
/// steps and pack/unpack buffers come from the mesh's staging arena on host memory (one
/// allocation kept across calls, so no page faults after the first call); device memory
/// allocates them per call on the stream (stream-ordered pool allocation).

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include "../plan.hpp"
#include "../split.hpp"
#include "host_ops.hpp"
#include "rank_cache.hpp"

namespace shardcast::detail {

/// Mesh coordinates of group member `q` of the group over `axes` that contains `coord`.
template <int N>
void member_coord(unsigned axes, const int* shape, const int* coord, int q, int* out) {
  for (int a = 0; a < N; ++a) out[a] = coord[a];
  for (int a = N - 1; a >= 0; --a)
    if (axes >> a & 1u) {
      out[a] = q % shape[a];
      q /= shape[a];
    }
}

/// Is region `r` (inside box `b`) one contiguous run of `b`'s row-major storage? Then
/// `offset` is where it starts. An empty region counts as contiguous at offset 0.
constexpr bool contiguous_in(const box& r, const box& b, std::size_t& offset) {
  offset = 0;
  if (r.volume() == 0) return true;
  int k = 0;
  while (k < r.rank && r.ext[k] == 1) ++k;  // leading dims of extent 1
  for (int d = k + 1; d < r.rank; ++d)
    if (r.ext[d] != b.ext[d]) return false;  // every dim after the first partial one is whole
  std::int64_t off = 0;
  for (int d = 0; d < r.rank; ++d) off = off * b.ext[d] + (r.off[d] - b.off[d]);
  offset = static_cast<std::size_t>(off);
  return true;
}

/// Do the group members' pieces (under the sharded side `l` of a step over `axes`) lie,
/// in group order, as consecutive `chunk`-sized runs of `outer`? True when every axis of
/// the step shards one dim d, the dims before d have extent 1 in `outer`, and no piece is
/// padded (the members tile `outer`, so equal volumes mean chunk * n == volume).
inline bool chunks_in_place(unsigned axes, const runtime_layout& l, int naxes, int n, std::size_t chunk, const box& outer) {
  if (chunk * static_cast<std::size_t>(n) != static_cast<std::size_t>(outer.volume())) return false;
  int d = -1;
  for (int a = 0; a < naxes; ++a)
    if (axes >> a & 1u) {
      if (d >= 0 && l[a].dim != d) return false;
      d = l[a].dim;
    }
  for (int e = 0; e < d; ++e)
    if (outer.ext[e] != 1) return false;
  return true;
}

/// The geometry of steps[0..nsteps) on this rank of `m`, for global extents `ext`.
/// Collective the first time a step uses a group of axes the mesh has not split yet
/// (mesh::group_comm), like the steps themselves.
template <class Mesh>
plan_geometry make_geometry(const Mesh& m, const step* steps, int nsteps, const std::int64_t* ext, int rank) {
  constexpr int N = Mesh::naxes;
  constexpr bool host = std::same_as<typename Mesh::memory_space, host_memory>;
  const int* shape = m.shape().data();
  const int* coord = m.coords().data();
  plan_geometry g;
  g.steps.resize(static_cast<std::size_t>(nsteps));
  g.nsteps = nsteps;
  box cur = local_box(steps[0].from, shape, coord, ext, rank);
  g.src_box = cur;
  for (int i = 0; i < nsteps; ++i) {
    const step& st = steps[i];
    step_geometry& sg = g.steps[static_cast<std::size_t>(i)];
    const int n = group_size(st.axes, shape, N);
    const auto un = static_cast<std::size_t>(n);
    sg.n = n;
    sg.in_elems = static_cast<std::size_t>(cur.volume());
    sg.nb = local_box(st.to, shape, coord, ext, rank);
    sg.out_elems = static_cast<std::size_t>(sg.nb.volume());
    sg.copies = static_cast<std::uint32_t>(g.copies.size());
    // A collective over one rank (every axis of the step has size 1) leaves the piece as it
    // is (detail::calls_collective): the step copies it, no member calls the communicator,
    // and the mesh splits no communicator for the group. (Members agree: n is the same on
    // every rank. The box check only guards the reasoning.)
    sg.alone = is_collective(st.kind) && n == 1 && sg.nb == cur;
    if (sg.alone) {
      sg.idle = true;
      cur = sg.nb;
      if (i + 1 < nsteps) g.slot_elems = std::max(g.slot_elems, sg.out_elems);
      continue;
    }
    if (is_collective(st.kind)) sg.comm = static_cast<void*>(&m.group_comm(st.axes));
    auto member_box = [&](const runtime_layout& l, int q) {
      int c[N];
      member_coord<N>(st.axes, shape, coord, q, c);
      return local_box(l, shape, c, ext, rank);
    };
    // The largest piece of a member of this rank's group: all_gather and reduce_scatter pad
    // every piece to it. Members of one group find the same value; groups of nested
    // uneven shards may differ (the planner prices the busiest one, rank 0's).
    auto group_max_volume = [&](const runtime_layout& l) {
      std::int64_t v = 0;
      for (int q = 0; q < n; ++q) v = std::max(v, member_box(l, q).volume());
      return static_cast<std::size_t>(v);
    };
    switch (st.kind) {
      case step_kind::all_gather:
        sg.chunk = group_max_volume(st.from);
        sg.idle = sg.chunk == 0;
        if (sg.in_elems != sg.chunk) sg.stage_in = sg.chunk;  // pad to the group's largest piece
        sg.in_place = chunks_in_place(st.axes, st.from, N, n, sg.chunk, sg.nb);
        if (!sg.in_place) {
          sg.stage_out = sg.chunk * un;
          sg.boxes = static_cast<std::uint32_t>(g.boxes.size());
          for (int q = 0; q < n; ++q) g.boxes.push_back(member_box(st.from, q));
          if constexpr (host) {
            const box* b = g.boxes.data() + sg.boxes;
            for (int q = 0; q < n; ++q)  // member q's chunk holds b[q] row-major
              g.copies.push_back(shifted(plan_region_copy(b[q], sg.nb, b[q]), static_cast<std::int64_t>(sg.chunk) * q, 0));
          }
        }
        break;
      case step_kind::reduce_scatter:
        sg.chunk = group_max_volume(st.to);  // 0: so is every member's piece before the step
        sg.idle = sg.chunk == 0;
        sg.out_elems = sg.chunk;  // the collective writes a whole (padded) chunk
        sg.in_place = chunks_in_place(st.axes, st.to, N, n, sg.chunk, cur);
        if (!sg.in_place) {
          sg.stage_in = sg.chunk * un;
          sg.boxes = static_cast<std::uint32_t>(g.boxes.size());
          for (int q = 0; q < n; ++q) g.boxes.push_back(member_box(st.to, q));
          if constexpr (host) {
            const box* b = g.boxes.data() + sg.boxes;
            for (int q = 0; q < n; ++q)  // into member q's chunk, which holds b[q] row-major
              g.copies.push_back(shifted(plan_region_copy(cur, b[q], b[q]), 0, static_cast<std::int64_t>(sg.chunk) * q));
          }
        }
        break;
      case step_kind::all_to_all: {
        // Boxes: n send regions, then n receive regions. Counts: send counts, send
        // displacements, receive counts, receive displacements. A side whose regions are
        // each one contiguous run of its piece is sent from / received into the piece
        // itself (displacements are offsets in it); otherwise it goes through staging.
        sg.boxes = static_cast<std::uint32_t>(g.boxes.size());
        sg.counts = static_cast<std::uint32_t>(g.counts.size());
        g.boxes.resize(g.boxes.size() + 2 * un);
        g.counts.resize(g.counts.size() + 4 * un);
        box* sbox = g.boxes.data() + sg.boxes;
        box* rbox = sbox + n;
        std::size_t* sc = g.counts.data() + sg.counts;
        std::size_t *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
        bool send_direct = true, recv_direct = true, idle = true;
        for (int q = 0; q < n; ++q) {
          int c[N];
          member_coord<N>(st.axes, shape, coord, q, c);
          sbox[q] = intersect(cur, local_box(st.to, shape, c, ext, rank));
          const box from_q = local_box(st.from, shape, c, ext, rank);
          idle = idle && from_q.volume() == 0;  // no member holds anything to send
          rbox[q] = intersect(from_q, sg.nb);
          sc[q] = static_cast<std::size_t>(sbox[q].volume());
          rc[q] = static_cast<std::size_t>(rbox[q].volume());
          send_direct = contiguous_in(sbox[q], cur, sd[q]) && send_direct;
          recv_direct = contiguous_in(rbox[q], sg.nb, rd[q]) && recv_direct;
        }
        std::size_t st_total = 0, rt_total = 0;
        if (!send_direct)
          for (int q = 0; q < n; ++q) sd[q] = st_total, st_total += sc[q];
        if (!recv_direct)
          for (int q = 0; q < n; ++q) rd[q] = rt_total, rt_total += rc[q];
        sg.stage_in = st_total;  // 0 when sent directly (or when nothing is sent)
        sg.stage_out = rt_total;
        sg.idle = idle;
        if constexpr (host) {
          if (sg.stage_in)  // as the executor: packed only when staged
            for (int q = 0; q < n; ++q)
              g.copies.push_back(shifted(plan_region_copy(cur, sbox[q], sbox[q]), 0, static_cast<std::int64_t>(sd[q])));
          if (sg.stage_out)
            for (int q = 0; q < n; ++q)
              g.copies.push_back(shifted(plan_region_copy(rbox[q], sg.nb, rbox[q]), static_cast<std::int64_t>(rd[q]), 0));
        }
        break;
      }
      case step_kind::identity: {
        bool keeper = true;  // sum and prod: only the rank at coordinate 0 of every new axis keeps the value
        for (int a = 0; a < N; ++a)
          if (st.axes >> a & 1u) keeper = keeper && coord[a] == 0;
        sg.keeper = keeper;
        break;
      }
      case step_kind::slice:
        if constexpr (host) g.copies.push_back(plan_region_copy(cur, sg.nb, sg.nb));
        break;
      case step_kind::pad:
        if constexpr (host) g.copies.push_back(plan_region_copy(cur, sg.nb, cur));
        break;
      case step_kind::all_reduce: sg.idle = sg.in_elems == 0; break;  // the members' pieces are one box
    }
    if (i + 1 < nsteps) g.slot_elems = std::max(g.slot_elems, sg.out_elems);
    g.in_elems = std::max(g.in_elems, sg.stage_in);
    g.out_elems = std::max(g.out_elems, sg.stage_out);
    cur = sg.nb;
  }
  // Several reductions with avg: on integral elements all but the last sum, and the last
  // divides once more (detail::split_integer_mean, step_geometry::avg_divisor).
  const integer_mean_split means = split_integer_mean(steps, nsteps, shape);
  if (means.last >= 0) {
    for (int i = 0; i < means.last; ++i) g.steps[static_cast<std::size_t>(i)].sums_avg = reduces_avg(steps[i]);
    g.steps[static_cast<std::size_t>(means.last)].avg_divisor = means.divisor;
  }
  return g;
}

/// Memory for a result of `n` elements, owned by the returned pointer. Large host
/// results come from the mesh's result pool (recycled blocks: no page faults); the rest
/// from memory_ops::allocate.
template <class T, class Mesh>
[[gnu::noinline]] std::shared_ptr<T> allocate_pooled(const Mesh& m, std::size_t n) {
  return m.cache().results.template allocate<T>(n);
}
template <class T, class Mesh>
inline std::shared_ptr<T> allocate_result(const Mesh& m, std::size_t n, typename Mesh::stream_type s) {
  if constexpr (std::same_as<typename Mesh::memory_space, host_memory>) {
    if (n * sizeof(T) >= result_pool::min_bytes) [[unlikely]]
      return allocate_pooled<T>(m, n);
  }
  return memory_ops<typename Mesh::memory_space>::template allocate<T>(n, s);
}

/// allocate_result for a result that a `direct` geometry promises is not empty and is
/// smaller than the result pool's blocks for any element of up to
/// plan_geometry::direct_elem_bytes bytes (so on host memory neither is checked again).
template <class T, class Mesh>
inline std::shared_ptr<T> allocate_direct(const Mesh& m, std::size_t n, typename Mesh::stream_type s) {
  if constexpr (std::same_as<typename Mesh::memory_space, host_memory> && sizeof(T) <= plan_geometry::direct_elem_bytes)
    return memory_ops<host_memory>::template allocate_nonempty<T>(n);
  else
    return allocate_result<T>(m, n, s);
}

/// Runs the steps of one plan, in order, on this rank. The last step writes into memory
/// the result owns, or with `Into` into the caller's `dest` (the target's local piece).
template <class T, class Mesh, bool Into = false>
class executor {
  using space = typename Mesh::memory_space;
  using ops = memory_ops<space>;
  using comm_type = typename Mesh::comm_type;
  using stream_type = typename Mesh::stream_type;
  static constexpr bool use_arena = std::same_as<space, host_memory>;

 public:
  /// `in` is this rank's input piece (box g.src_box); it is only read.
  executor(const Mesh& m, const plan_geometry& g, const T* in, stream_type s, T* dest = nullptr)
      : m_(m), g_(g), s_(s), in_(in), ib_(&g.src_box), dest_(dest) {
    if constexpr (use_arena) {
      if (g.staged()) stage();
    }
  }

  /// Step `i` of the plan (`st` is the plan's step, whose kind is K; Last: known to be the last step).
  template <step_kind K, bool Last = false>
  void run(const step& st, int i) {
    const step_geometry& sg = g_.steps[static_cast<std::size_t>(i)];
    T* out = Last ? result(sg) : output(i, sg);
    // A collective with nothing in the group to move: every member skips the call.
    if (!(is_collective(K) && sg.idle)) [[likely]] {
      if constexpr (K == step_kind::all_gather) all_gather(sg, out);
      else if constexpr (K == step_kind::reduce_scatter) reduce_scatter(st, sg, out);
      else if constexpr (K == step_kind::all_reduce) {
        comm(sg).all_reduce(in_, out, sg.in_elems, op_of(st, sg), s_);
        finish_mean(sg, out, sg.in_elems);
      }
      else if constexpr (K == step_kind::all_to_all) all_to_all(sg, out);
      else if constexpr (K == step_kind::slice) {
        if constexpr (use_arena) ops::copy_planned(in_, out, g_.copies[sg.copies]);
        else ops::copy_region(in_, *ib_, out, sg.nb, sg.nb, s_);
      }
      else if constexpr (K == step_kind::pad) pad(st, sg, out);
      else identity(st, sg, out);
    } else if (sg.alone) {  // a collective over one rank: the piece stays
      ops::copy(out, in_, sg.in_elems, s_);
      if constexpr (K == step_kind::reduce_scatter || K == step_kind::all_reduce) finish_mean(sg, out, sg.in_elems);
    }
    if constexpr (Into) {
      if (owner_ && i + 1 == g_.nsteps) {  // a padded reduce_scatter chunk: keep the piece
        ops::copy(dest_, out, static_cast<std::size_t>(sg.nb.volume()), s_);
        out = dest_;
        owner_.reset();
      }
    }
    in_ = out;
    out_ = out;
    ib_ = &sg.nb;
  }
  /// The same, with the kind known only at run time.
  void run(const step& st, int i) {
    switch (st.kind) {
      case step_kind::all_gather: return run<step_kind::all_gather>(st, i);
      case step_kind::reduce_scatter: return run<step_kind::reduce_scatter>(st, i);
      case step_kind::all_reduce: return run<step_kind::all_reduce>(st, i);
      case step_kind::all_to_all: return run<step_kind::all_to_all>(st, i);
      case step_kind::slice: return run<step_kind::slice>(st, i);
      case step_kind::pad: return run<step_kind::pad>(st, i);
      case step_kind::identity: return run<step_kind::identity>(st, i);
    }
  }

  /// After the last step: the result's memory and its local piece.
  std::shared_ptr<T> take_owner() { return std::move(owner_); }
  T* data() const { return out_; }

 private:
  comm_type& comm(const step_geometry& sg) const { return *static_cast<comm_type*>(sg.comm); }

  /// Leases the arena and lays out its regions: [slot 0][slot 1][stage_in][stage_out].
  void stage() {
    auto round = [](std::size_t elems) { return (elems * sizeof(T) + staging_arena::align - 1) / staging_arena::align * staging_arena::align; };
    const std::size_t slot = round(g_.slot_elems);
    staging_.slot_off[1] = slot;
    staging_.in_off = slot + (g_.nsteps >= 3 ? slot : 0);
    staging_.out_off = staging_.in_off + round(g_.in_elems);
    staging_.lease = m_.cache().arena.acquire(staging_.out_off + round(g_.out_elems));
    staging_.base = staging_.lease.get();
  }

  /// Where step i writes: memory the result owns for the last step; else a slot of the
  /// arena (alternating, so a step never writes the slot it reads) or, on device memory,
  /// a fresh allocation kept until the step after next has been issued.
  T* result(const step_geometry& sg) {
    if constexpr (Into) {
      if (sg.out_elems == static_cast<std::size_t>(sg.nb.volume())) return dest_;
    }
    owner_ = allocate_result<T>(m_, sg.out_elems, s_);
    return owner_.get();
  }
  T* output(int i, const step_geometry& sg) {
    if (i + 1 == g_.nsteps) return result(sg);
    if constexpr (use_arena) {
      return reinterpret_cast<T*>(staging_.base + staging_.slot_off[i & 1]);
    } else {
      staging_.held[i & 1] = ops::template allocate<T>(sg.out_elems, s_);
      return staging_.held[i & 1].get();
    }
  }
  T* stage_in(const step_geometry& sg) {
    if constexpr (use_arena) {
      (void)sg;
      return reinterpret_cast<T*>(staging_.base + staging_.in_off);
    } else {
      staging_.in = ops::template allocate<T>(sg.stage_in, s_);
      return staging_.in.get();
    }
  }
  T* stage_out(const step_geometry& sg) {
    if constexpr (use_arena) {
      (void)sg;
      return reinterpret_cast<T*>(staging_.base + staging_.out_off);
    } else {
      staging_.out = ops::template allocate<T>(sg.stage_out, s_);
      return staging_.out.get();
    }
  }

  void all_gather(const step_geometry& sg, T* out) {
    const T* send = in_;
    if (sg.stage_in) {  // pad to the largest piece
      T* buf = stage_in(sg);
      ops::copy(buf, in_, sg.in_elems, s_);
      ops::fill(buf + sg.in_elems, sg.chunk - sg.in_elems, T{}, s_);
      send = buf;
    }
    if (sg.in_place) {
      comm(sg).all_gather(send, out, sg.chunk, s_);
      return;
    }
    T* recv = stage_out(sg);
    comm(sg).all_gather(send, recv, sg.chunk, s_);
    if constexpr (use_arena) {
      const region_copy* c = g_.copies.data() + sg.copies;
      for (int q = 0; q < sg.n; ++q) ops::copy_planned(recv, out, c[q]);
    } else {
      const box* b = g_.boxes.data() + sg.boxes;
      for (int q = 0; q < sg.n; ++q) ops::copy_region(recv + sg.chunk * static_cast<std::size_t>(q), b[q], out, sg.nb, b[q], s_);
    }
  }

  void reduce_scatter(const step& st, const step_geometry& sg, T* out) {
    const T* send = in_;
    if (!sg.in_place) {
      T* buf = stage_in(sg);
      const box* b = g_.boxes.data() + sg.boxes;
      for (int q = 0; q < sg.n; ++q) {
        T* dst = buf + sg.chunk * static_cast<std::size_t>(q);
        if constexpr (use_arena) ops::copy_planned(in_, buf, g_.copies[sg.copies + static_cast<std::size_t>(q)]);
        else ops::copy_region(in_, *ib_, dst, b[q], b[q], s_);  // the chunk holds b[q] row-major
        ops::fill(dst + b[q].volume(), sg.chunk - static_cast<std::size_t>(b[q].volume()), T{}, s_);
      }
      send = buf;
    }
    comm(sg).reduce_scatter(send, out, sg.chunk, op_of(st, sg), s_);
    finish_mean(sg, out, sg.chunk);
  }

  /// The reduce op of a reduction step: sum for an integer mean another mean follows.
  static reduce_op op_of(const step& st, const step_geometry& sg) {
    if constexpr (std::is_integral_v<T>) return sg.sums_avg ? reduce_op::sum : st.op;
    else return st.op;
  }
  /// After the last integer mean of a plan whose earlier means summed: divide by their
  /// groups' sizes too.
  void finish_mean(const step_geometry& sg, T* out, std::size_t n) {
    if constexpr (std::is_integral_v<T>) {
      if (sg.avg_divisor > 1) [[unlikely]]
        ops::divide(out, n, sg.avg_divisor, s_);
    }
  }

  void all_to_all(const step_geometry& sg, T* out) {
    const auto n = static_cast<std::size_t>(sg.n);
    const std::size_t* sc = g_.counts.data() + sg.counts;
    const std::size_t *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    const box* sbox = g_.boxes.data() + sg.boxes;
    const box* rbox = sbox + n;
    const T* send = in_;
    if (sg.stage_in) {
      T* buf = stage_in(sg);
      if constexpr (use_arena) {
        const region_copy* c = g_.copies.data() + sg.copies;
        for (std::size_t q = 0; q < n; ++q) ops::copy_planned(in_, buf, c[q]);
      } else {
        for (std::size_t q = 0; q < n; ++q) ops::copy_region(in_, *ib_, buf + sd[q], sbox[q], sbox[q], s_);
      }
      send = buf;
    }
    T* recv = sg.stage_out ? stage_out(sg) : out;
    comm(sg).all_to_allv(send, sc, sd, recv, rc, rd, s_);
    if (sg.stage_out) {
      if constexpr (use_arena) {
        const region_copy* c = g_.copies.data() + sg.copies + (sg.stage_in ? n : 0);
        for (std::size_t q = 0; q < n; ++q) ops::copy_planned(recv, out, c[q]);
      } else {
        for (std::size_t q = 0; q < n; ++q) ops::copy_region(recv + rd[q], rbox[q], out, sg.nb, rbox[q], s_);
      }
    }
  }

  void pad(const step& st, const step_geometry& sg, T* out) {
    ops::fill(out, sg.out_elems, identity_of<T>(st.op), s_);
    if constexpr (use_arena) ops::copy_planned(in_, out, g_.copies[sg.copies]);
    else ops::copy_region(in_, *ib_, out, sg.nb, *ib_, s_);
    // avg: the mean over the new axes of (k * piece, 0, ..., 0) is the piece.
    if (st.op == reduce_op::avg) ops::scale(out, sg.out_elems, static_cast<T>(sg.n), s_);
  }

  void identity(const step& st, const step_geometry& sg, T* out) {
    if ((st.op == reduce_op::sum || st.op == reduce_op::prod) && !sg.keeper) ops::fill(out, sg.out_elems, identity_of<T>(st.op), s_);
    else ops::copy(out, in_, sg.out_elems, s_);
  }

  const Mesh& m_;
  const plan_geometry& g_;
  stream_type s_;
  const T* in_;       // the current piece
  const box* ib_;     // its box
  T* out_ = nullptr;  // the last step's output
  T* dest_;           // Into: the target's local piece
  std::shared_ptr<T> owner_;
  // Staging: host memory uses the arena, device memory allocates per call.
  struct host_staging {
    staging_arena::lease lease;
    std::byte* base = nullptr;
    std::size_t slot_off[2]{}, in_off = 0, out_off = 0;
  };
  struct device_staging {
    std::shared_ptr<T> held[2], in, out;
  };
  std::conditional_t<use_arena, host_staging, device_staging> staging_;
};

}  // namespace shardcast::detail
