#pragma once
/// @file mesh.hpp
/// `mesh<N, Comm>`: N axes of runtime sizes over a communicator, rank <-> coordinate
/// row-major (axis 0 outermost), one sub-communicator per axis made at construction,
/// and flattened sub-communicators over several axes made on first use and cached.
///
/// @code
///   auto m = shardcast::make_mesh(comm, std::array<int, 2>{2, 2});  // 4 ranks: (0,0) (0,1) (1,0) (1,1)
/// @endcode

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "comm/communicator.hpp"
#include "comm/host.hpp"
#include "detail/rank_cache.hpp"
#include "error.hpp"
#include "split.hpp"

namespace shardcast {

/// A handle on an N-axis mesh of ranks (cheap to copy; copies share sub-communicators).
/// @tparam N number of mesh axes
/// @tparam Comm the communicator backend
template <int N, communicator Comm = host::communicator>
class mesh {
  static_assert(N >= 1 && N <= SHARDCAST_MAX_AXES, "shardcast::mesh<N>: N must be between 1 and SHARDCAST_MAX_AXES.");

 public:
  using comm_type = Comm;
  using memory_space = typename Comm::memory_space;
  using stream_type = typename Comm::stream_type;
  static constexpr int naxes = N;

  mesh() = default;
  mesh(Comm comm, const std::array<int, N>& shape) : s_(std::make_shared<state>(std::move(comm))) {
    long long prod = 1;
    std::string text;
    for (int a = 0; a < N; ++a) {
      if (shape[static_cast<std::size_t>(a)] < 1)
        throw layout_error("shardcast::make_mesh: axis " + std::to_string(a) + " has size " +
                           std::to_string(shape[static_cast<std::size_t>(a)]) + "; every mesh axis needs size >= 1");
      prod *= shape[static_cast<std::size_t>(a)];
      if (a) text += 'x';  // (not `"x" + std::string`: GCC 12's false -Wrestrict, PR 105329)
      text += std::to_string(shape[static_cast<std::size_t>(a)]);
    }
    if (prod != s_->comm.size())
      throw layout_error("shardcast::make_mesh: mesh shape " + text + " has " + std::to_string(prod) + " ranks but the communicator has " +
                         std::to_string(s_->comm.size()) + "; choose a shape whose product is the communicator size");
    s_->shape = shape;
    rank_to_coord(s_->comm.rank(), shape.data(), N, s_->coords.data());
    for (int a = 0; a < N; ++a) s_->axis[static_cast<std::size_t>(a)] = std::make_unique<Comm>(make_group(1u << a));
  }

  int size(int axis) const { return s_->shape[static_cast<std::size_t>(axis)]; }
  const std::array<int, N>& shape() const { return s_->shape; }
  int coord(int axis) const { return s_->coords[static_cast<std::size_t>(axis)]; }
  const std::array<int, N>& coords() const { return s_->coords; }
  int rank() const { return s_->comm.rank(); }
  int nranks() const { return s_->comm.size(); }

  /// The communicator of the whole mesh.
  Comm& comm() const { return s_->comm; }
  /// The sub-communicator of one axis (ranks that differ only in that coordinate).
  Comm& axis_comm(int axis) const { return *s_->axis[static_cast<std::size_t>(axis)]; }
  /// The flattened sub-communicator over the axes in `mask` (bit a = axis a), ranks
  /// ordered row-major over those axes. Collective the first time a mask is used.
  Comm& group_comm(unsigned mask) const {
    const unsigned all = (1u << N) - 1u;
    if (mask == all) return s_->comm;
    if ((mask & (mask - 1u)) == 0u) return axis_comm(__builtin_ctz(mask));
    auto it = s_->groups.find(mask);
    if (it == s_->groups.end()) it = s_->groups.emplace(mask, std::make_unique<Comm>(make_group(mask))).first;
    return *it->second;
  }

  /// Internal to shardcast: what redistribute keeps on this rank between calls (plan
  /// geometry, staging arena, pool of large result blocks; see detail/rank_cache.hpp).
  /// Like the communicator, a mesh is used by one thread at a time.
  detail::rank_cache& cache() const { return s_->cache; }

  /// Host memory this rank's redistributes keep between calls: released results waiting
  /// in the result pool for a later result of the same size, and the staging arena.
  std::size_t cached_bytes() const { return s_->cache.results.free_bytes() + s_->cache.arena.capacity(); }
  /// Frees that memory (live tensors are untouched; later calls allocate again). Plans
  /// and their geometry stay cached. Not collective.
  void release_cached_memory() const {
    s_->cache.results.release();
    s_->cache.arena.release();
  }
  /// At most `bytes` of released results wait per rank for reuse (default
  /// SHARDCAST_RESULT_POOL_BYTES, 512 MiB); 0 frees every result when its last owner lets
  /// go. Frees the oldest waiting blocks beyond the new limit. Copies of this mesh share it.
  void set_result_pool_limit(std::size_t bytes) const { s_->cache.results.set_limit(bytes); }
  std::size_t result_pool_limit() const { return s_->cache.results.limit(); }

  friend bool operator==(const mesh& a, const mesh& b) { return a.s_ == b.s_; }

 private:
  struct state {
    explicit state(Comm c) : comm(std::move(c)) {}
    Comm comm;
    std::array<int, N> shape{};
    std::array<int, N> coords{};
    std::array<std::unique_ptr<Comm>, N> axis{};
    std::map<unsigned, std::unique_ptr<Comm>> groups;
    detail::rank_cache cache;
  };

  Comm make_group(unsigned mask) const {
    int color_coord[N], key = 0;
    for (int a = 0; a < N; ++a) {
      const bool in = mask >> a & 1u;
      color_coord[a] = in ? 0 : s_->coords[static_cast<std::size_t>(a)];
      if (in) key = key * s_->shape[static_cast<std::size_t>(a)] + s_->coords[static_cast<std::size_t>(a)];
    }
    return s_->comm.split(coord_to_rank(color_coord, s_->shape.data(), N), key);
  }

  std::shared_ptr<state> s_;
};

/// Builds a mesh over `comm`. Throws layout_error if the product of `shape` differs from comm.size().
template <communicator Comm, std::size_t N>
mesh<static_cast<int>(N), Comm> make_mesh(Comm comm, const std::array<int, N>& shape) {
  return mesh<static_cast<int>(N), Comm>(std::move(comm), shape);
}

}  // namespace shardcast
