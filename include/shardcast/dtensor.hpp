#pragma once
/// @file dtensor.hpp
/// `dtensor<T, R, Layout, Mesh>`: a rank-R distributed tensor whose layout is part of
/// its type. Each rank holds its local piece (the box its layout gives it) contiguously,
/// row-major, in the memory space of the mesh's communicator. A dtensor either owns its
/// piece (shared between copies of the handle) or views memory the caller already has.
/// `Layout = dynamic_layout` gives a tensor whose layout is a runtime value.
///
/// Example, 2x2 mesh, global 4x6, layout<shard<0>, shard<1>>: rank (1,0) holds rows 2..3,
/// columns 0..2, i.e. local extents (2,3).

#include <array>
#include <cstdint>
#include <cuda/std/mdspan>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "detail/host_ops.hpp"
#include "error.hpp"
#include "layout.hpp"
#include "mesh.hpp"
#include "split.hpp"

namespace shardcast {

/// Tag: the layout is carried as a runtime_layout value instead of a type.
struct dynamic_layout {};

namespace detail {
template <class Layout>
struct layout_holder {
  static constexpr runtime_layout value() { return Layout::desc; }
  constexpr layout_holder() = default;
  constexpr explicit layout_holder(const runtime_layout&) {}
};
template <>
struct layout_holder<dynamic_layout> {
  runtime_layout l;
  layout_holder() = default;
  explicit layout_holder(const runtime_layout& x) : l(x) {}
  const runtime_layout& value() const { return l; }
};

/// Are A and B the same element type but for const? Operands of const elements are only
/// read, so every operator takes them beside mutable ones.
template <class A, class B>
inline constexpr bool same_elements_v = std::is_same_v<std::remove_const_t<A>, std::remove_const_t<B>>;

/// Does a dtensor<U, R, From, Mesh> become a dtensor<T, R, To, Mesh> implicitly? With the
/// same elements or const ones, and the same layout or, from a static layout, a dynamic one
/// (as std::span<T, N> becomes std::span<const T>); not to its own type.
template <class T, class U, class To, class From>
inline constexpr bool implicit_conversion_v =
    (std::is_same_v<T, U> || std::is_same_v<T, const U>) &&
    (std::is_same_v<To, From> || (std::is_same_v<To, dynamic_layout> && !std::is_same_v<From, dynamic_layout>)) &&
    !(std::is_same_v<T, U> && std::is_same_v<To, From>);
/// Does it become one explicitly, with its layout checked at run time: from a dynamic
/// layout to a static one?
template <class T, class U, class To, class From>
inline constexpr bool checked_conversion_v =
    (std::is_same_v<T, U> || std::is_same_v<T, const U>) && std::is_same_v<From, dynamic_layout> && !std::is_same_v<To, dynamic_layout>;

template <class T, std::size_t R>
box make_local_box(const runtime_layout& l, const int* shape, const int* coord, const std::array<std::int64_t, R>& ext) {
  return local_box(l, shape, coord, ext.data(), static_cast<int>(R));
}
}  // namespace detail

/// A distributed tensor. See the file comment.
/// @tparam T element type
/// @tparam R tensor rank
/// @tparam Layout a shardcast::layout<...> or dynamic_layout
/// @tparam Mesh a shardcast::mesh<N, Comm>
template <class T, int R, class Layout, class Mesh>
class dtensor {
  static_assert(R >= 0 && R <= SHARDCAST_MAX_RANK,
                "shardcast::dtensor: the tensor rank R must be between 0 and SHARDCAST_MAX_RANK (8 unless defined otherwise); "
                "define SHARDCAST_MAX_RANK to a larger value before including any shardcast header to use tensors of higher rank.");

 public:
  using value_type = T;
  using layout_type = Layout;
  using mesh_type = Mesh;
  using extents_type = cuda::std::dextents<std::int64_t, static_cast<std::size_t>(R)>;
  using mdspan_type = cuda::std::mdspan<T, extents_type>;
  static constexpr int rank = R;

  dtensor() = default;
  dtensor(const dtensor&) = default;
  dtensor& operator=(const dtensor&) = default;
  /// Moving hands every handle over and leaves `o` empty, as a default-constructed tensor
  /// (as a tensor given up to an operator is left): no mesh, no data pointer, no extents, so
  /// a moved-from handle cannot be read as a view of storage it no longer keeps alive.
  dtensor(dtensor&& o) noexcept
      : mesh_(std::move(o.mesh_)), global_(o.global_), owner_(std::move(o.owner_)), data_(o.data_), off_(o.off_), ext_(o.ext_),
        layout_(o.layout_) {
    o.clear();
  }
  dtensor& operator=(dtensor&& o) noexcept {
    if (this != &o) {
      mesh_ = std::move(o.mesh_);
      global_ = o.global_;
      owner_ = std::move(o.owner_);
      data_ = o.data_;
      off_ = o.off_;
      ext_ = o.ext_;
      layout_ = o.layout_;
      o.clear();
    }
    return *this;
  }
  /// Wraps `data` (the local piece, owned by `owner` or by the caller when `owner` is empty).
  dtensor(Mesh m, const std::array<std::int64_t, static_cast<std::size_t>(R)>& global, std::shared_ptr<T> owner, T* data,
          const runtime_layout& l = detail::layout_holder<Layout>::value())
    requires(!std::same_as<Layout, dynamic_layout>)
      : mesh_(std::move(m)), global_(global), owner_(std::move(owner)), data_(data) {
    (void)l;
    detail::require_mesh(mesh_, "shardcast::dtensor");
    set_box(detail::make_local_box<T>(layout(), mesh_.shape().data(), mesh_.coords().data(), global_));
  }
  dtensor(Mesh m, const std::array<std::int64_t, static_cast<std::size_t>(R)>& global, std::shared_ptr<T> owner, T* data,
          const runtime_layout& l)
    requires std::same_as<Layout, dynamic_layout>
      : mesh_(std::move(m)), global_(global), owner_(std::move(owner)), data_(data), layout_(l) {
    detail::require_mesh(mesh_, "shardcast::dtensor");
    set_box(detail::make_local_box<T>(layout(), mesh_.shape().data(), mesh_.coords().data(), global_));
  }
  /// As above, for a caller that already knows this rank's local box (it must be the box
  /// the layout gives this rank; redistribute passes the one it computed once per shape).
  /// @param local this rank's box of global indices, e.g. on a 2x2 mesh, global 4x6,
  ///        layout<shard<0>, shard<1>>, rank (1,0): offsets (2,0), extents (2,3)
  dtensor(const Mesh& m, const std::array<std::int64_t, static_cast<std::size_t>(R)>& global, std::shared_ptr<T> owner, T* data, const box& local)
    requires(!std::same_as<Layout, dynamic_layout>)
      : mesh_(m), global_(global), owner_(std::move(owner)), data_(data) {
    set_box(local);
  }
  dtensor(Mesh&& m, const std::array<std::int64_t, static_cast<std::size_t>(R)>& global, std::shared_ptr<T> owner, T* data, const box& local)
    requires(!std::same_as<Layout, dynamic_layout>)
      : mesh_(std::move(m)), global_(global), owner_(std::move(owner)), data_(data) {
    set_box(local);
  }
  dtensor(Mesh m, const std::array<std::int64_t, static_cast<std::size_t>(R)>& global, std::shared_ptr<T> owner, T* data, const box& local,
          const runtime_layout& l)
    requires std::same_as<Layout, dynamic_layout>
      : mesh_(std::move(m)), global_(global), owner_(std::move(owner)), data_(data), layout_(l) {
    set_box(local);
  }

  /// Implicit conversions (as `std::span<T, N>` becomes `std::span<const T>`): to const
  /// elements (read-only through this handle), and from a static layout to dynamic_layout
  /// (the layout becomes a value). The same mesh, piece and storage; an rvalue `o` hands its
  /// handles over and is left empty.
  template <class U, class L>
    requires detail::implicit_conversion_v<T, U, Layout, L>
  dtensor(const dtensor<U, R, L, Mesh>& o)  // NOLINT(google-explicit-constructor): as span's
      : mesh_(o.mesh()), global_(o.global_extents()), owner_(o.owner()), data_(o.data()), layout_(o.layout()) {
    set_box(o.local_box());
  }
  template <class U, class L>
    requires detail::implicit_conversion_v<T, U, Layout, L>
  dtensor(dtensor<U, R, L, Mesh>&& o) noexcept  // NOLINT(google-explicit-constructor)
      : global_(o.global_extents()), data_(o.data()), layout_(o.layout()) {
    set_box(o.local_box());
    auto taken = o.take();
    mesh_ = std::move(taken.first);
    owner_ = std::move(taken.second);
  }
  /// Explicit conversion from dynamic_layout to this static layout, which must be o's
  /// layout (the same mesh, piece and storage; an rvalue `o` hands its handles over). An
  /// empty o (default-constructed, or given up) gives an empty tensor.
  /// @throws layout_error if o's layout is another one (o is then left as it was)
  template <class U>
    requires detail::checked_conversion_v<T, U, Layout, dynamic_layout>
  explicit dtensor(const dtensor<U, R, dynamic_layout, Mesh>& o)
      : mesh_(o.mesh()), global_(o.global_extents()), owner_(o.owner()), data_(o.data()) {
    expect_static_layout(o);
    set_box(o.local_box());
  }
  template <class U>
    requires detail::checked_conversion_v<T, U, Layout, dynamic_layout>
  explicit dtensor(dtensor<U, R, dynamic_layout, Mesh>&& o) {
    expect_static_layout(o);
    global_ = o.global_extents();
    data_ = o.data();
    set_box(o.local_box());
    auto taken = o.take();
    mesh_ = std::move(taken.first);
    owner_ = std::move(taken.second);
  }

  /// The layout as a value.
  runtime_layout layout() const { return layout_.value(); }
  const Mesh& mesh() const { return mesh_; }
  const std::array<std::int64_t, static_cast<std::size_t>(R)>& global_extents() const { return global_; }
  /// Global indices of this rank's piece.
  box local_box() const {
    box b;
    b.rank = R;
    for (std::size_t d = 0; d < static_cast<std::size_t>(R); ++d) b.off[d] = off_[d], b.ext[d] = ext_[d];
    return b;
  }
  /// Extents of the local piece.
  const std::array<std::int64_t, static_cast<std::size_t>(R)>& local_extents() const { return ext_; }
  std::size_t local_size() const {
    std::int64_t v = 1;
    for (auto e : ext_) v *= e;
    return static_cast<std::size_t>(v);
  }
  T* data() const { return data_; }
  /// True when this handle (or a copy) owns the local memory.
  bool owns() const { return static_cast<bool>(owner_); }
  const std::shared_ptr<T>& owner() const { return owner_; }

  /// Internal: leaves this handle empty (as a default-constructed tensor) and returns the
  /// mesh handle and the storage owner it held. redistribute of a tensor the caller gives
  /// up (an rvalue) hands them to its result.
  std::pair<Mesh, std::shared_ptr<T>> take() noexcept {
    std::pair<Mesh, std::shared_ptr<T>> r(std::move(mesh_), std::move(owner_));
    clear();
    return r;
  }

  /// The local piece as a row-major mdspan with the local extents.
  mdspan_type local() const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return mdspan_type(data_, ext_[I]...);
    }(std::make_index_sequence<static_cast<std::size_t>(R)>{});
  }

 private:
  Mesh mesh_;
  std::array<std::int64_t, static_cast<std::size_t>(R)> global_{};
  std::shared_ptr<T> owner_;
  T* data_ = nullptr;
  std::array<std::int64_t, static_cast<std::size_t>(R)> off_{}, ext_{};  ///< this rank's box (only R dims are kept)
  [[no_unique_address]] detail::layout_holder<Layout> layout_{};

  template <class D>
  static void expect_static_layout(const D& o) {
    if (o.mesh().state() == nullptr) return;  // an empty tensor: an empty one of this layout
    const runtime_layout l = o.layout();
    if (!(l == Layout::desc))
      throw layout_error("shardcast::dtensor: the tensor has layout \"" + to_string(l) + "\" but the static layout is \"" +
                         to_string(Layout::desc) + "\"; redistribute it to that layout first (redistribute<L>(x), with L the layout type " +
                         "of \"" + to_string(Layout::desc) + "\", plans at run time and returns a tensor of layout L)");
  }
  /// Back to the state of a default-constructed tensor.
  void clear() noexcept {
    mesh_ = Mesh();
    global_ = {};
    owner_.reset();
    data_ = nullptr;
    off_ = {};
    ext_ = {};
    layout_ = detail::layout_holder<Layout>{};
  }
  void set_box(const box& b) {
    for (std::size_t d = 0; d < static_cast<std::size_t>(R); ++d) off_[d] = b.off[d], ext_[d] = b.ext[d];
  }
};

namespace detail {
/// Internal: the tensor of type Y over `data` (owned by `owner`, or by the caller when it is
/// empty) with global extents `ext` and this rank's box `b` (the box its layout gives), on
/// mesh handle `m`; `l` is the layout value a dynamic-layout Y holds (a compile-time Y's
/// layout is its type, and `l` is not read).
template <class Y, class M>
Y handle_of(M&& m, const std::array<std::int64_t, static_cast<std::size_t>(Y::rank)>& ext, std::shared_ptr<typename Y::value_type> owner,
            typename Y::value_type* data, const box& b, const runtime_layout& l) {
  if constexpr (std::is_same_v<typename Y::layout_type, dynamic_layout>)
    return Y(std::forward<M>(m), ext, std::move(owner), data, b, l);
  else
    return (void)l, Y(std::forward<M>(m), ext, std::move(owner), data, b);
}

/// Internal: x with its elements seen as mutable (the same piece and storage), for code
/// that only reads them, so that a tensor of const elements runs the code of one of
/// mutable elements. Nothing may write through the result.
template <class T, int R, class L, class Mesh>
dtensor<T, R, L, Mesh> unconst(const dtensor<const T, R, L, Mesh>& x) {
  return handle_of<dtensor<T, R, L, Mesh>>(x.mesh(), x.global_extents(), std::const_pointer_cast<T>(x.owner()), const_cast<T*>(x.data()),
                                           x.local_box(), x.layout());
}

/// Internal: x itself when its elements are mutable; for const elements, unconst(x). For
/// functions that only read x and are written for mutable elements.
template <class T, int R, class L, class Mesh>
const dtensor<T, R, L, Mesh>& readable(const dtensor<T, R, L, Mesh>& x) noexcept {
  return x;
}
template <class T, int R, class L, class Mesh>
dtensor<T, R, L, Mesh> readable(const dtensor<const T, R, L, Mesh>& x) {
  return unconst(x);
}

/// Internal: the tensor of type Y (x's element type, rank and mesh type; layout l, which
/// gives x's local box) that takes over x's mesh handle, storage and piece as they are,
/// leaving x empty: a redistribute with no steps, or an operator that wrote over x's
/// piece, of a tensor the caller gave up.
template <class Y, class X>
Y take_as(X& x, const runtime_layout& l) {
  static_assert(std::is_same_v<typename Y::value_type, typename X::value_type> && Y::rank == X::rank &&
                std::is_same_v<typename Y::mesh_type, typename X::mesh_type>);
  const auto ext = x.global_extents();
  const box b = x.local_box();
  auto* const data = x.data();
  auto taken = x.take();
  return handle_of<Y>(std::move(taken.first), ext, std::move(taken.second), data, b, l);
}
}  // namespace detail

}  // namespace shardcast
