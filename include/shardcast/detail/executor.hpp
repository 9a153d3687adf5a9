#pragma once
/// @file detail/executor.hpp
/// Runs plan steps on a communicator: packs, calls one collective per step, unpacks.

#include <memory>
#include <vector>

#include "../plan.hpp"
#include "../split.hpp"
#include "host_ops.hpp"

namespace shardcast::detail {

/// The local piece in flight between steps.
template <class T>
struct piece {
  std::shared_ptr<T> owner;
  T* data = nullptr;
  box b{};
};

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

template <class T, class Mesh>
class executor {
  static constexpr int N = Mesh::naxes;
  using ops = memory_ops<typename Mesh::memory_space>;
  using stream_type = typename Mesh::stream_type;

 public:
  executor(const Mesh& m, const std::int64_t* ext, int rank, stream_type s) : m_(m), ext_(ext), rank_(rank), s_(s) {}

  void run(const step& st, piece<T>& p) {
    switch (st.kind) {
      case step_kind::all_gather: return all_gather(st, p);
      case step_kind::reduce_scatter: return reduce_scatter(st, p);
      case step_kind::all_reduce: return all_reduce(st, p);
      case step_kind::all_to_all: return all_to_all(st, p);
      case step_kind::slice: return slice(st, p);
      case step_kind::pad: return pad(st, p);
      case step_kind::identity: return identity(st, p);
    }
  }

 private:
  box box_of(const runtime_layout& l, const int* coord) const { return local_box(l, m_.shape().data(), coord, ext_, rank_); }
  int group_n(unsigned axes) const { return group_size(axes, m_.shape().data(), N); }
  piece<T> fresh(const box& b) const {
    piece<T> q;
    q.owner = ops::template allocate<T>(static_cast<std::size_t>(b.volume()), s_);
    q.data = q.owner.get();
    q.b = b;
    return q;
  }

  box member_box(const step& st, const runtime_layout& l, int q) const {
    int c[N];
    member_coord<N>(st.axes, m_.shape().data(), m_.coords().data(), q, c);
    return box_of(l, c);
  }

  /// Do the group members' pieces (under the sharded side `l` of the step) lie, in group
  /// order, as consecutive `chunk`-sized runs of `outer`? True when every axis of the step
  /// shards one dim d, the dims before d have extent 1 in `outer`, and no piece is padded
  /// (the members tile `outer`, so equal volumes mean chunk * n == volume).
  bool chunks_in_place(const step& st, const runtime_layout& l, int n, std::size_t chunk, const box& outer) const {
    if (chunk * static_cast<std::size_t>(n) != static_cast<std::size_t>(outer.volume())) return false;
    int d = -1;
    for (int a = 0; a < N; ++a)
      if (st.axes >> a & 1u) {
        if (d >= 0 && l[a].dim != d) return false;
        d = l[a].dim;
      }
    for (int e = 0; e < d; ++e)
      if (outer.ext[e] != 1) return false;
    return true;
  }

  void all_gather(const step& st, piece<T>& p) {
    auto& comm = m_.group_comm(st.axes);
    const int n = group_n(st.axes);
    const auto chunk = static_cast<std::size_t>(max_volume(st.from, m_.shape().data(), ext_, rank_));
    const box nb = box_of(st.to, m_.coords().data());
    const T* send = p.data;
    std::shared_ptr<T> padded;
    if (static_cast<std::size_t>(p.b.volume()) != chunk) {
      padded = ops::template allocate<T>(chunk, s_);
      ops::copy(padded.get(), p.data, static_cast<std::size_t>(p.b.volume()), s_);
      ops::fill(padded.get() + p.b.volume(), chunk - static_cast<std::size_t>(p.b.volume()), T{}, s_);
      send = padded.get();
    }
    piece<T> out = fresh(nb);
    if (chunks_in_place(st, st.from, n, chunk, nb)) {
      comm.all_gather(send, out.data, chunk, s_);
    } else {
      auto recv = ops::template allocate<T>(chunk * static_cast<std::size_t>(n), s_);
      comm.all_gather(send, recv.get(), chunk, s_);
      for (int q = 0; q < n; ++q) {
        const box b = member_box(st, st.from, q);
        ops::copy_region(recv.get() + chunk * static_cast<std::size_t>(q), b, out.data, nb, b, s_);
      }
    }
    p = std::move(out);
  }

  void reduce_scatter(const step& st, piece<T>& p) {
    auto& comm = m_.group_comm(st.axes);
    const int n = group_n(st.axes);
    const auto chunk = static_cast<std::size_t>(max_volume(st.to, m_.shape().data(), ext_, rank_));
    const T* send = p.data;
    std::shared_ptr<T> packed;
    if (!chunks_in_place(st, st.to, n, chunk, p.b)) {
      packed = ops::template allocate<T>(chunk * static_cast<std::size_t>(n), s_);
      for (int q = 0; q < n; ++q) {
        const box b = member_box(st, st.to, q);
        T* dst = packed.get() + chunk * static_cast<std::size_t>(q);
        ops::copy_region(p.data, p.b, dst, b, b, s_);  // the chunk holds b row-major
        ops::fill(dst + b.volume(), chunk - static_cast<std::size_t>(b.volume()), T{}, s_);
      }
      send = packed.get();
    }
    piece<T> out;
    out.owner = ops::template allocate<T>(chunk, s_);
    out.data = out.owner.get();
    out.b = box_of(st.to, m_.coords().data());
    comm.reduce_scatter(send, out.data, chunk, st.op, s_);
    p = std::move(out);
  }

  void all_reduce(const step& st, piece<T>& p) {
    auto& comm = m_.group_comm(st.axes);
    piece<T> out = fresh(p.b);
    comm.all_reduce(p.data, out.data, static_cast<std::size_t>(p.b.volume()), st.op, s_);
    p = std::move(out);
  }

  void all_to_all(const step& st, piece<T>& p) {
    auto& comm = m_.group_comm(st.axes);
    const int n = group_n(st.axes);
    const box nb = box_of(st.to, m_.coords().data());
    std::vector<std::size_t> sc(static_cast<std::size_t>(n)), sd(static_cast<std::size_t>(n)), rc(static_cast<std::size_t>(n)),
        rd(static_cast<std::size_t>(n));
    std::vector<box> sbox(static_cast<std::size_t>(n)), rbox(static_cast<std::size_t>(n));
    std::size_t st_total = 0, rt_total = 0;
    for (int q = 0; q < n; ++q) {
      int c[N];
      member_coord<N>(st.axes, m_.shape().data(), m_.coords().data(), q, c);
      const auto uq = static_cast<std::size_t>(q);
      sbox[uq] = intersect(p.b, box_of(st.to, c));
      rbox[uq] = intersect(box_of(st.from, c), nb);
      sc[uq] = static_cast<std::size_t>(sbox[uq].volume());
      rc[uq] = static_cast<std::size_t>(rbox[uq].volume());
      sd[uq] = st_total;
      rd[uq] = rt_total;
      st_total += sc[uq];
      rt_total += rc[uq];
    }
    auto send = ops::template allocate<T>(st_total, s_);
    auto recv = ops::template allocate<T>(rt_total, s_);
    for (int q = 0; q < n; ++q) {
      const auto uq = static_cast<std::size_t>(q);
      ops::copy_region(p.data, p.b, send.get() + sd[uq], sbox[uq], sbox[uq], s_);
    }
    comm.all_to_allv(send.get(), sc.data(), sd.data(), recv.get(), rc.data(), rd.data(), s_);
    piece<T> out = fresh(nb);
    for (int q = 0; q < n; ++q) {
      const auto uq = static_cast<std::size_t>(q);
      ops::copy_region(recv.get() + rd[uq], rbox[uq], out.data, nb, rbox[uq], s_);
    }
    p = std::move(out);
  }

  void slice(const step& st, piece<T>& p) {
    const box nb = box_of(st.to, m_.coords().data());
    piece<T> out = fresh(nb);
    ops::copy_region(p.data, p.b, out.data, nb, nb, s_);
    p = std::move(out);
  }

  void pad(const step& st, piece<T>& p) {
    const box nb = box_of(st.to, m_.coords().data());
    piece<T> out = fresh(nb);
    const auto n = static_cast<std::size_t>(nb.volume());
    ops::fill(out.data, n, identity_of<T>(st.op), s_);
    ops::copy_region(p.data, p.b, out.data, nb, p.b, s_);
    // avg: the mean over the new axes of (k * piece, 0, ..., 0) is the piece.
    if (st.op == reduce_op::avg) ops::scale(out.data, n, static_cast<T>(group_n(st.axes)), s_);
    p = std::move(out);
  }

  void identity(const step& st, piece<T>& p) {
    piece<T> out = fresh(p.b);
    const auto n = static_cast<std::size_t>(p.b.volume());
    bool keeper = true;  // sum and prod: only the rank at coordinate 0 of every new axis keeps the value
    for (int a = 0; a < N; ++a)
      if (st.axes >> a & 1u) keeper = keeper && m_.coord(a) == 0;
    if (st.op == reduce_op::sum || st.op == reduce_op::prod) {
      if (keeper) ops::copy(out.data, p.data, n, s_);
      else ops::fill(out.data, n, identity_of<T>(st.op), s_);
    } else {
      ops::copy(out.data, p.data, n, s_);
    }
    p = std::move(out);
  }

  const Mesh& m_;
  const std::int64_t* ext_;
  int rank_;
  stream_type s_;
};

}  // namespace shardcast::detail
