#pragma once
/// @file mesh.hpp
/// `mesh<N, Comm>`: N axes of runtime sizes over a communicator, rank <-> coordinate
/// row-major (axis 0 outermost), one sub-communicator per axis made at construction,
/// and flattened sub-communicators over several axes made on first use and cached.
/// `mesh_ref<N, Comm>` (`m.ref()`): the same mesh through a handle that does not keep it alive.
///
/// @code
///   auto m = shardcast::make_mesh(comm, {2, 2});  // 4 ranks: (0,0) (0,1) (1,0) (1,1)
/// @endcode

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "comm/communicator.hpp"
#include "comm/host.hpp"
#include "detail/rank_cache.hpp"
#include "error.hpp"
#include "split.hpp"

namespace shardcast {

namespace detail {
/// What a mesh's handles share: the communicator, the shape, this rank's coordinates, the
/// sub-communicators and the per-rank cache of redistribute.
template <int N, class Comm>
struct mesh_state {
  explicit mesh_state(Comm c) : comm(std::move(c)) {}
  std::atomic<long> handles{1};  ///< the `mesh` handles on this state (see state_handle)
  Comm comm;
  std::array<int, N> shape{};
  std::array<int, N> coords{};
  std::array<std::unique_ptr<Comm>, N> axis{};
  std::map<unsigned, std::unique_ptr<Comm>> groups;
  rank_cache cache;

  /// The flattened sub-communicator over the axes in `mask` (collective: a split).
  Comm make_group(unsigned mask) const {
    int color_coord[N], key = 0;
    for (int a = 0; a < N; ++a) {
      const bool in = mask >> a & 1u;
      color_coord[a] = in ? 0 : coords[static_cast<std::size_t>(a)];
      if (in) key = key * shape[static_cast<std::size_t>(a)] + coords[static_cast<std::size_t>(a)];
    }
    return comm.split(coord_to_rank(color_coord, shape.data(), N), key);
  }
};

/// A counted pointer to a mesh_state: what a `mesh` handle holds. The count lives in the
/// state, so copying a handle is one atomic increment and dropping one an atomic
/// decrement with the destruction out of line (a std::shared_ptr adds a call and, in a
/// program with one thread, a check of whether it has others).
template <class State>
class state_handle {
 public:
  state_handle() = default;
  /// Takes the one handle a new state starts with.
  explicit state_handle(State* p) noexcept : p_(p) {}
  state_handle(const state_handle& o) noexcept : p_(o.p_) {
    if (p_) p_->handles.fetch_add(1, std::memory_order_relaxed);
  }
  state_handle(state_handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  state_handle& operator=(state_handle o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~state_handle() {
    if (p_ && p_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(p_);
  }
  State* get() const noexcept { return p_; }
  State* operator->() const noexcept { return p_; }

 private:
  [[gnu::noinline]] static void destroy(State* p) { delete p; }
  State* p_ = nullptr;
};

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_no_mesh(const char* who) {
  throw layout_error(std::string(who) +
                     ": the tensor or mesh has no mesh state: it is default-constructed, or was given up (std::move) to an earlier call, "
                     "which leaves it empty; use a tensor made by distribute, empty, make_view or an operator, on a mesh from make_mesh");
}
/// Throws layout_error unless `m` is a handle on a mesh that make_mesh made (a
/// default-constructed mesh, or the mesh of a default-constructed or given-up tensor, has
/// none). One comparison: the public calls that reach the mesh's state make it first.
template <class Mesh>
inline void require_mesh(const Mesh& m, const char* who) {
  if (m.state() == nullptr) [[unlikely]]
    throw_no_mesh(who);
}

/// Collective over `comm`: throws layout_error on every rank if a rank rejected its own
/// shape (`err` non-empty there: that rank throws `err`) or the ranks passed different
/// shapes; returns on every rank otherwise. Host memory: one all_reduce(max) of [shape,
/// verdict, -shape, -verdict], so the message names the axis that differs. Other memory
/// spaces: one split by a hash of (shape, verdict), whose group is the whole communicator
/// only when every rank agrees (it needs no device buffer, so a mesh can be made where the
/// device memory operations are not included). A null communicator (size 0) has no peers
/// to tell: `err` is thrown alone.
template <std::size_t N, class Comm>
void agree_on_mesh_shape(Comm& comm, const std::array<int, N>& shape, const std::string& text, const std::string& err) {
  if (comm.size() == 0 && !err.empty()) throw layout_error(err);
  if constexpr (!std::is_same_v<typename Comm::memory_space, host_memory>) {
    std::uint32_t h = err.empty() ? 2166136261u : 1u;  // FNV-1a of the shape; a rank that rejected its shape stands apart
    if (err.empty())
      for (int n : shape) h = (h ^ static_cast<std::uint32_t>(n)) * 16777619u;
    const bool all = comm.split(static_cast<int>(h & 0x7fffffffu), comm.rank()).size() == comm.size();
    if (!err.empty()) throw layout_error(err);
    if (!all)
      throw layout_error("shardcast::make_mesh: the ranks passed different mesh shapes, or a rank rejected its shape (rank " +
                         std::to_string(comm.rank()) + " passed " + text + "); pass the same valid shape on every rank");
    return;
  }
  constexpr std::size_t k = N + 1;
  std::array<std::int64_t, 2 * k> v{};
  for (std::size_t a = 0; a < N; ++a) v[a] = shape[a];
  v[k - 1] = err.empty() ? 0 : comm.rank() + 1;
  for (std::size_t i = 0; i < k; ++i) v[k + i] = -v[i];
  std::array<std::int64_t, 2 * k> r = v;  // in place, so a communicator that moves no data leaves this rank's own values
  comm.all_reduce(r.data(), r.data(), r.size(), reduce_op::max, typename Comm::stream_type{});
  if (!err.empty()) throw layout_error(err);
  if (r[k - 1] > 0)
    throw layout_error("shardcast::make_mesh: rank " + std::to_string(r[k - 1] - 1) +
                       " rejected its mesh shape (its own exception says why), so every rank throws; fix the shape on that rank");
  for (std::size_t a = 0; a < N; ++a)
    if (r[a] != -r[k + a])
      throw layout_error("shardcast::make_mesh: the ranks passed different mesh shapes: axis " + std::to_string(a) + " is " +
                         std::to_string(-r[k + a]) + " on some ranks and " + std::to_string(r[a]) + " on others (rank " +
                         std::to_string(comm.rank()) + " passed " + text + "); pass the same shape on every rank");
}

/// The interface `mesh` and `mesh_ref` share, over `Self::state()` (a `mesh_state*`).
template <class Self, int N, class Comm>
class mesh_interface {
 public:
  using comm_type = Comm;
  using memory_space = typename Comm::memory_space;
  using stream_type = typename Comm::stream_type;
  static constexpr int naxes = N;

  int size(int axis) const { return st().shape[static_cast<std::size_t>(axis)]; }
  const std::array<int, N>& shape() const { return st().shape; }
  int coord(int axis) const { return st().coords[static_cast<std::size_t>(axis)]; }
  const std::array<int, N>& coords() const { return st().coords; }
  int rank() const { return st().comm.rank(); }
  int nranks() const { return st().comm.size(); }

  /// The communicator of the whole mesh.
  Comm& comm() const { return st().comm; }
  /// The sub-communicator of one axis (ranks that differ only in that coordinate).
  /// `axis` must be in [0, N), unchecked, as for size(axis) and coord(axis): hand-written
  /// collectives call it on their fast path.
  Comm& axis_comm(int axis) const { return *st().axis[static_cast<std::size_t>(axis)]; }
  /// The flattened sub-communicator over the axes in `mask` (bit a = axis a), ranks
  /// ordered row-major over those axes. Collective the first time a mask is used.
  /// @throws layout_error if `mask` names no axis, or a bit at or above N
  Comm& group_comm(unsigned mask) const {
    const unsigned all = (1u << N) - 1u;
    if (mask == 0u || (mask & ~all) != 0u)
      throw layout_error("shardcast::mesh::group_comm: mask " + std::to_string(mask) + " on a " + std::to_string(N) +
                         "-axis mesh; set bit a for each axis a of the group, at least one, all below bit " + std::to_string(N));
    if (mask == all) return st().comm;
    if ((mask & (mask - 1u)) == 0u) return axis_comm(__builtin_ctz(mask));
    auto& groups = st().groups;
    auto it = groups.find(mask);
    if (it == groups.end()) it = groups.emplace(mask, std::make_unique<Comm>(st().make_group(mask))).first;
    return *it->second;
  }

  /// Internal to shardcast: what redistribute keeps on this rank between calls (plan
  /// geometry, staging arena, pool of large result blocks; see detail/rank_cache.hpp).
  /// Like the communicator, a mesh is used by one thread at a time.
  rank_cache& cache() const { return st().cache; }

  /// Host memory this rank's redistributes keep between calls: released results waiting
  /// in the result pool for a later result of the same size, and the staging arena.
  std::size_t cached_bytes() const { return st().cache.results.free_bytes() + st().cache.arena.capacity(); }
  /// Frees that memory (live tensors are untouched; later calls allocate again). Plans
  /// and their geometry stay cached. Not collective.
  void release_cached_memory() const {
    st().cache.results.release();
    st().cache.arena.release();
  }
  /// At most `bytes` of released results wait per rank for reuse (default
  /// SHARDCAST_RESULT_POOL_BYTES, 512 MiB); 0 frees every result when its last owner lets
  /// go. Frees the oldest waiting blocks beyond the new limit. Copies of this mesh share it.
  void set_result_pool_limit(std::size_t bytes) const { st().cache.results.set_limit(bytes); }
  std::size_t result_pool_limit() const { return st().cache.results.limit(); }

  /// Handles on the same mesh (made by one make_mesh) compare equal.
  friend bool operator==(const Self& a, const Self& b) { return a.state() == b.state(); }

 private:
  mesh_state<N, Comm>& st() const { return *static_cast<const Self&>(*this).state(); }
};
}  // namespace detail

template <int N, communicator Comm>
class mesh_ref;

/// A handle on an N-axis mesh of ranks (cheap to copy; copies share sub-communicators).
/// Every tensor on the mesh holds such a handle, so the mesh lives as long as any of them.
/// @tparam N number of mesh axes
/// @tparam Comm the communicator backend
template <int N, communicator Comm = host::communicator>
class mesh : public detail::mesh_interface<mesh<N, Comm>, N, Comm> {
  static_assert(N >= 1 && N <= SHARDCAST_MAX_AXES, "shardcast::mesh<N>: N must be between 1 and SHARDCAST_MAX_AXES.");

 public:
  mesh() = default;
  mesh(Comm comm, const std::array<int, N>& shape) : s_(new detail::mesh_state<N, Comm>(std::move(comm))) {
    long long prod = 1;  // saturates at INT_MAX + 1: no communicator has more ranks
    std::string text, err;
    for (int a = 0; a < N; ++a) {
      const int n = shape[static_cast<std::size_t>(a)];
      if (a) text += 'x';  // (not `"x" + std::string`: GCC 12's false -Wrestrict, PR 105329)
      text += std::to_string(n);
      if (n < 1 && err.empty())
        err = "shardcast::make_mesh: axis " + std::to_string(a) + " has size " + std::to_string(n) + "; every mesh axis needs size >= 1";
      prod = std::min(prod * std::max(n, 1), static_cast<long long>(std::numeric_limits<int>::max()) + 1);
    }
    if (err.empty() && prod != s_->comm.size())
      err = "shardcast::make_mesh: mesh shape " + text + " has " +
            (prod > std::numeric_limits<int>::max() ? std::string("more than 2^31 - 1") : std::to_string(prod)) +
            " ranks but the communicator has " + std::to_string(s_->comm.size()) + "; choose a shape whose product is the communicator size";
    // Collective: every rank learns whether any rank rejected its shape or passed another
    // shape (whose axis groups would not match, so later collectives would move wrong pieces).
    detail::agree_on_mesh_shape(s_->comm, shape, text, err);
    s_->shape = shape;
    rank_to_coord(s_->comm.rank(), shape.data(), N, s_->coords.data());
    for (int a = 0; a < N; ++a) s_->axis[static_cast<std::size_t>(a)] = std::make_unique<Comm>(s_->make_group(1u << a));
  }

  /// A handle that does not keep the mesh alive (see mesh_ref).
  mesh_ref<N, Comm> ref() const { return mesh_ref<N, Comm>(*this); }

  /// Internal: the shared state.
  detail::mesh_state<N, Comm>* state() const { return s_.get(); }

 private:
  detail::state_handle<detail::mesh_state<N, Comm>> s_;
};

/// A handle on a mesh that does not keep it alive: copying or dropping one touches no
/// reference count. Tensors made on a `mesh_ref` (by distribute, empty, make_view, and
/// every result computed from them) hold a mesh_ref, so they cost no atomic operations
/// for their mesh in a threaded program (a static redistribute's result saves an atomic
/// increment and decrement, see docs/01_layouts.md "Host overhead"). In exchange, the
/// `mesh` it was made from (or a copy of it) must outlive every such handle and tensor,
/// as a std::string must outlive a std::string_view of it.
///
/// @code
///   auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
///   auto r = m.ref();                                        // m outlives r and its tensors
///   auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(r, std::span<const float>(g), ext);
///   auto y = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(x);   // y holds r
/// @endcode
/// Tensors on `m` and on `m.ref()` have different types and do not mix.
template <int N, communicator Comm = host::communicator>
class mesh_ref : public detail::mesh_interface<mesh_ref<N, Comm>, N, Comm> {
 public:
  mesh_ref() = default;
  explicit mesh_ref(const mesh<N, Comm>& m) : s_(m.state()) {}

  /// Internal: the shared state.
  detail::mesh_state<N, Comm>* state() const { return s_; }

 private:
  detail::mesh_state<N, Comm>* s_ = nullptr;
};

/// Builds a mesh over `comm`. Throws layout_error if the product of `shape` differs from comm.size().
template <communicator Comm, std::size_t N>
mesh<static_cast<int>(N), Comm> make_mesh(Comm comm, const std::array<int, N>& shape) {
  return mesh<static_cast<int>(N), Comm>(std::move(comm), shape);
}
/// The same with the shape as a braced list: `make_mesh(comm, {2, 2})`.
template <communicator Comm, std::size_t N>
mesh<static_cast<int>(N), Comm> make_mesh(Comm comm, const int (&shape)[N]) {
  return make_mesh(std::move(comm), std::to_array(shape));
}

}  // namespace shardcast
