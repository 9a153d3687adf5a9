#pragma once
/// @file distribute.hpp
/// Making distributed tensors: `distribute` (every rank keeps its piece of a global
/// row-major tensor), `make_view` (no copy, over memory the caller has), `empty`, and
/// `to_global` (collective: the whole tensor on every rank, partials reduced).
///
/// For a partial<sum|prod> axis, distribute puts the value on coordinate 0 and the
/// op's identity elsewhere; for avg, max and min every rank holds the value.

#include <array>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "dtensor.hpp"
#include "redistribute.hpp"

namespace shardcast {

namespace detail {
template <std::size_t R>
std::int64_t checked_volume(const std::array<std::int64_t, R>& ext, const char* who) {
  std::int64_t v = 1;
  for (std::size_t d = 0; d < R; ++d) {
    if (ext[d] < 0) throw layout_error(std::string(who) + ": extent " + std::to_string(ext[d]) + " of dim " + std::to_string(d) + " is negative");
    if (ext[d] != 0 && v > std::numeric_limits<std::int64_t>::max() / ext[d])
      throw layout_error(std::string(who) + ": the product of the extents overflows 64 bits");
    v *= ext[d];
  }
  return v;
}

template <class T, int R, class L, class Mesh>
dtensor<T, R, L, Mesh> distribute_impl(const Mesh& m, const runtime_layout& l, std::span<const T> global,
                                        const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext, typename Mesh::stream_type s) {
  using ops = memory_ops<typename Mesh::memory_space>;
  l.validate(Mesh::naxes, R);
  SHARDCAST_EXPECTS(same_op_partials(l), "shardcast::distribute: layout \"" + to_string(l) + "\" mixes partial reduce ops; use one op for every partial axis");
  const std::int64_t vol = checked_volume(ext, "shardcast::distribute");
  SHARDCAST_EXPECTS(static_cast<std::int64_t>(global.size()) == vol,
                    "shardcast::distribute: the global span has " + std::to_string(global.size()) +
                        " elements but the extents describe " + std::to_string(vol) + "; pass the whole row-major tensor");
  const box b = local_box(l, m.shape().data(), m.coords().data(), ext.data(), R);
  const box g = full_box(ext.data(), R);
  const auto n = static_cast<std::size_t>(b.volume());
  std::vector<T> host(n);
  memory_ops<host_memory>::copy_region(global.data(), g, host.data(), b, b);
  bool keeper = true;
  reduce_op op = reduce_op::sum;
  for (int a = 0; a < Mesh::naxes; ++a)
    if (l[a].is_partial()) {
      op = l[a].op;
      keeper = keeper && m.coord(a) == 0;
    }
  if (!keeper && (op == reduce_op::sum || op == reduce_op::prod)) std::fill(host.begin(), host.end(), identity_of<T>(op));
  auto owner = ops::template allocate<T>(n, s);
  ops::from_host(owner.get(), host.data(), n, s);
  if constexpr (std::same_as<L, dynamic_layout>) return dtensor<T, R, L, Mesh>(m, ext, owner, owner.get(), l);
  else return dtensor<T, R, L, Mesh>(m, ext, owner, owner.get());
}

template <int N>
constexpr runtime_layout all_replicate() {
  runtime_layout l;
  l.naxes = N;
  return l;
}
}  // namespace detail

/// Each rank keeps its piece (under `Layout`) of the global row-major tensor `global`.
/// @throws layout_error if global.size() differs from the product of `extents`
template <class Layout, class Mesh, class T, std::size_t R>
dtensor<std::remove_const_t<T>, static_cast<int>(R), Layout, Mesh> distribute(const Mesh& m, std::span<T> global,
                                                                              const std::array<std::int64_t, R>& extents,
                                                                              typename Mesh::stream_type s = {}) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  using U = std::remove_const_t<T>;
  return detail::distribute_impl<U, static_cast<int>(R), Layout, Mesh>(m, Layout::desc, std::span<const U>(global.data(), global.size()),
                                                                        extents, s);
}
/// Overload for a std::vector (or anything convertible to a span of const T).
template <class Layout, class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, const std::vector<T>& global, const std::array<std::int64_t, R>& extents, typename Mesh::stream_type s = {}) {
  return distribute<Layout>(m, std::span<const T>(global), extents, s);
}

/// Dynamic-layout form: the layout is a runtime value.
template <class Mesh, class T, std::size_t R>
dtensor<T, static_cast<int>(R), dynamic_layout, Mesh> distribute(const Mesh& m, const runtime_layout& l, std::span<const T> global,
                                                                 const std::array<std::int64_t, R>& extents, typename Mesh::stream_type s = {}) {
  return detail::distribute_impl<T, static_cast<int>(R), dynamic_layout, Mesh>(m, l, global, extents, s);
}
template <class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, const runtime_layout& l, const std::vector<T>& global, const std::array<std::int64_t, R>& extents,
                typename Mesh::stream_type s = {}) {
  return distribute(m, l, std::span<const T>(global), extents, s);
}

/// A non-owning dtensor over `local` (this rank's piece, row-major, in the mesh's memory space).
template <class Layout, class Mesh, class T, std::size_t R>
dtensor<T, static_cast<int>(R), Layout, Mesh> make_view(const Mesh& m, T* local, const std::array<std::int64_t, R>& extents) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  detail::checked_volume(extents, "shardcast::make_view");
  return dtensor<T, static_cast<int>(R), Layout, Mesh>(m, extents, nullptr, local);
}

/// An owning dtensor with uninitialised local memory.
template <class Layout, class T, class Mesh, std::size_t R>
dtensor<T, static_cast<int>(R), Layout, Mesh> empty(const Mesh& m, const std::array<std::int64_t, R>& extents, typename Mesh::stream_type s = {}) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  detail::checked_volume(extents, "shardcast::empty");
  const box b = local_box(Layout::desc, m.shape().data(), m.coords().data(), extents.data(), static_cast<int>(R));
  auto owner = detail::memory_ops<typename Mesh::memory_space>::template allocate<T>(static_cast<std::size_t>(b.volume()), s);
  return dtensor<T, static_cast<int>(R), Layout, Mesh>(m, extents, owner, owner.get());
}

/// Collective: the whole global tensor on every rank (partial axes reduced).
template <class T, int R, class L, class Mesh>
std::vector<T> to_global(const dtensor<T, R, L, Mesh>& x, typename Mesh::stream_type s = {}) {
  using D = dtensor<T, R, dynamic_layout, Mesh>;
  D d(x.mesh(), x.global_extents(), x.owner(), x.data(), x.layout());
  D r = redistribute(d, detail::all_replicate<Mesh::naxes>(), s);
  std::vector<T> out(r.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(out.data(), r.data(), out.size(), s);
  return out;
}

}  // namespace shardcast
