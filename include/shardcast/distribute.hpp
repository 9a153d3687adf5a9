#pragma once
/// @file distribute.hpp
/// Making distributed tensors: `distribute` (every rank keeps its piece of a global
/// row-major tensor), `generate` and `full` (every rank computes its piece from the
/// global index, or fills it with one value: no rank holds the whole tensor),
/// `make_view` (no copy, over memory the caller has), `empty`, and `to_global`
/// (collective: the whole tensor on every rank, partials reduced).
///
/// Extents are a `std::array<std::int64_t, R>` or a braced list of R values (`{4, 6}`), the
/// same checks for both.
///
/// For a partial<sum|prod> axis, distribute, generate and full put the value on
/// coordinate 0 and the op's identity elsewhere; for avg, max and min every rank holds
/// the value.
///
/// `distribute`, `generate` and `full` are collective: before they write anything, the
/// ranks compare their arguments with one small all_reduce over the mesh's communicator
/// (`check_same_extents`), so extents or layouts that differ between ranks, or a bad
/// argument on one rank, throw layout_error on every rank instead of hanging or reading
/// out of bounds in a later collective. `make_view` and `empty` stay local (no
/// communication: operators call them for every output); call `check_same_extents`
/// yourself where their extents come from rank-local data.

#include <algorithm>
#include <array>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "detail/agreement.hpp"
#include "dtensor.hpp"
#include "redistribute.hpp"

namespace shardcast {

namespace detail {
template <std::size_t R>
std::int64_t checked_volume(const std::array<std::int64_t, R>& ext, const char* who) {
  std::int64_t v = 1;
  for (std::size_t d = 0; d < R; ++d)
    if (ext[d] < 0) throw layout_error(std::string(who) + ": extent " + std::to_string(ext[d]) + " of dim " + std::to_string(d) + " is negative");
  // The product of the non-zero extents must fit, whatever their order: strides and piece
  // sizes are products of them even when another extent is 0.
  bool empty = false;
  for (std::size_t d = 0; d < R; ++d) {
    if (ext[d] == 0) {
      empty = true;
      continue;
    }
    if (v > std::numeric_limits<std::int64_t>::max() / ext[d])
      throw layout_error(std::string(who) + ": the product of the non-zero extents overflows 64 bits");
    v *= ext[d];
  }
  return empty ? 0 : v;
}

/// Extents written as a braced list (`{4, 6}`): the std::array the other forms take. Every
/// public call that takes `const std::array<std::int64_t, R>&` extents also takes
/// `const std::int64_t (&)[R]`, whose R a braced list gives (a std::array's R cannot be
/// deduced from one), and forwards through this; the checks are the std::array form's.
template <std::size_t R>
constexpr std::array<std::int64_t, R> to_extents(const std::int64_t (&extents)[R]) {
  return std::to_array(extents);
}

/// Element types a dtensor can hold: the ones the communicators know (dtype_of), moved with memcpy.
template <class T>
constexpr bool check_element_type() {
  static_assert(element_type<T>,
                "shardcast: the element type has no shardcast::dtype_of specialisation; supported are float, double, std::int8_t, "
                "std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t (and __half, __nv_bfloat16, __nv_fp8_e4m3, "
                "__nv_fp8_e5m2 with <shardcast/cuda/dtypes.hpp>); to add a type, specialise shardcast::dtype_of<T> with the "
                "shardcast::dtype it travels as.");
  static_assert(std::is_trivially_copyable_v<T>,
                "shardcast: the element type is not trivially copyable, but pieces are moved with memcpy and collectives; "
                "use a plain numeric type.");
  return true;
}

/// The checks every rank runs on the arguments of a tensor it makes with `who`
/// (distribute, generate, full): `l` fits the mesh and the rank, uses one partial op, and
/// the extents have a volume. Returns the volume.
/// @throws layout_error naming `who`
template <int R>
std::int64_t check_new_tensor(int naxes, const runtime_layout& l, const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext,
                              const char* who) {
  l.validate(naxes, R, who);
  SHARDCAST_EXPECTS(same_op_partials(l),
                    std::string(who) + ": layout \"" + to_string(l) + "\" mixes partial reduce ops; use one op for every partial axis");
  return checked_volume(ext, who);
}

/// Makes this rank's piece under `l` of the tensor that `fill(host, b)` describes: fill
/// writes the box `b` of the global tensor into `host` (row-major, b's extents); it is
/// called on every rank that keeps values, and not on the ranks of a partial<sum|prod>
/// axis other than coordinate 0, which hold the op's identity. `local_error` is what this
/// rank's own argument checks threw (empty if none): the ranks share their verdicts first
/// (agree_on_arguments), so all of them throw or none does.
template <class T, int R, class L, class Mesh, class Fill>
dtensor<T, R, L, Mesh> make_pieces(const Mesh& m, const runtime_layout& l, const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext,
                                   const std::string& local_error, const char* who, Fill&& fill, typename Mesh::stream_type s) {
  static_assert(check_element_type<T>());
  using ops = memory_ops<typename Mesh::memory_space>;
  require_mesh(m, who);
  agree_on_arguments(m, ext, l, local_error, who, s);
  const box b = local_box(l, m.shape().data(), m.coords().data(), ext.data(), R);
  const auto n = static_cast<std::size_t>(b.volume());
  std::vector<T> host(n);
  bool keeper = true;
  reduce_op op = reduce_op::sum;
  for (int a = 0; a < Mesh::naxes; ++a)
    if (l[a].is_partial()) {
      op = l[a].op;
      keeper = keeper && m.coord(a) == 0;
    }
  if (!keeper && (op == reduce_op::sum || op == reduce_op::prod)) std::fill(host.begin(), host.end(), identity_of<T>(op));
  else if (n > 0) fill(host.data(), b);
  auto owner = ops::template allocate<T>(n, s);
  ops::from_host(owner.get(), host.data(), n, s);
  return dtensor<T, R, L, Mesh>(m, ext, owner, owner.get(), l);  // (a static layout's constructor ignores l)
}

template <class T, int R, class L, class Mesh>
dtensor<T, R, L, Mesh> distribute_impl(const Mesh& m, const runtime_layout& l, std::span<const T> global,
                                        const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext, typename Mesh::stream_type s) {
  static_assert(check_element_type<T>());
  const std::string err = local_verdict([&] {
    const std::int64_t vol = check_new_tensor<R>(Mesh::naxes, l, ext, "shardcast::distribute");
    SHARDCAST_EXPECTS(static_cast<std::int64_t>(global.size()) == vol,
                      "shardcast::distribute: the global span has " + std::to_string(global.size()) +
                          " elements but the extents describe " + std::to_string(vol) + "; pass the whole row-major tensor");
  });
  const box g = full_box(ext.data(), R);
  return make_pieces<T, R, L>(
      m, l, ext, err, "shardcast::distribute",
      [&](T* host, const box& b) { memory_ops<host_memory>::copy_region(global.data(), g, host, b, b); }, s);
}

/// Writes f(i) for every global index i of box `b` into `out`, row-major (the last dim fastest).
template <class T, std::size_t R, class F>
void generate_box(T* out, const box& b, F& f) {
  std::array<std::int64_t, R> i{};
  for (std::size_t d = 0; d < R; ++d) i[d] = b.off[d];
  const auto n = static_cast<std::size_t>(b.volume());
  for (std::size_t k = 0; k < n; ++k) {
    out[k] = static_cast<T>(f(std::as_const(i)));
    for (std::size_t d = R; d-- > 0;) {  // the next index: carry from the last dim
      if (++i[d] < b.off[d] + b.ext[d]) break;
      i[d] = b.off[d];
    }
  }
}

template <class T, int R, class L, class Mesh, class F>
dtensor<T, R, L, Mesh> generate_impl(const Mesh& m, const runtime_layout& l, const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext,
                                      F& f, const char* who, typename Mesh::stream_type s) {
  const std::string err = local_verdict([&] { check_new_tensor<R>(Mesh::naxes, l, ext, who); });
  return make_pieces<T, R, L>(m, l, ext, err, who, [&](T* host, const box& b) { generate_box<T, static_cast<std::size_t>(R)>(host, b, f); }, s);
}

/// An owning tensor under `l` (the layout type L, or dynamic_layout) with its piece
/// allocated and uninitialised; the arguments are checked by the caller.
template <class T, int R, class L, class Mesh>
dtensor<T, R, L, Mesh> empty_impl(const Mesh& m, const runtime_layout& l, const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext,
                                  typename Mesh::stream_type s) {
  static_assert(!std::is_const_v<T>, "shardcast::empty: the element type is const, so nothing could write the new tensor; make it with "
                                     "mutable elements (a dtensor<T, ...> converts to dtensor<const T, ...>).");
  static_assert(check_element_type<std::remove_const_t<T>>());
  require_mesh(m, "shardcast::empty");
  const box b = local_box(l, m.shape().data(), m.coords().data(), ext.data(), R);
  auto owner = memory_ops<typename Mesh::memory_space>::template allocate<T>(static_cast<std::size_t>(b.volume()), s);
  return dtensor<T, R, L, Mesh>(m, ext, owner, owner.get(), l);  // (a static layout's constructor ignores l)
}

/// The element type generate makes from F: what F returns for an index of R dims.
template <class F, std::size_t R>
using generated_t = std::remove_cvref_t<std::invoke_result_t<F&, const std::array<std::int64_t, R>&>>;

/// generate with braced extents: f must take the index of R dims, R the length of the list.
template <class F, std::size_t R>
constexpr bool check_index_arity() {
  static_assert(std::is_invocable_v<F&, const std::array<std::int64_t, R>&>,
                "shardcast::generate: f cannot be called with an index of as many dims as the braced extents have values (a "
                "const std::array<std::int64_t, R>&, R the length of the list); give one extent per dim of f's index.");
  return true;
}

template <int N>
constexpr runtime_layout all_replicate() {
  runtime_layout l;
  l.naxes = N;
  return l;
}
}  // namespace detail

/// Collective over the mesh's communicator: throws layout_error on every rank unless all
/// ranks passed the same `extents` (the message names the first dim that differs and its
/// smallest and largest value). `distribute` runs this check itself; use it before
/// `make_view` or `empty` when extents come from rank-local data.
/// @param m the mesh (every rank of m.comm() must call this)
/// @param extents this rank's global extents
/// @param s stream for device meshes (the check copies 2 * (R + SHARDCAST_MAX_AXES + 2) int64 to the device and back)
/// @throws layout_error if an extent is negative on some rank or the ranks disagree
/// @code
///   // rank 0 passes {6, 8}, rank 1 {6, 9}: both throw
///   // "...: dim 1 is 8 on some ranks and 9 on others (rank 1 passed 6x9); ..."
///   shardcast::check_same_extents(mesh, std::array<std::int64_t, 2>{6, 8});
/// @endcode
template <class Mesh, std::size_t R>
void check_same_extents(const Mesh& m, const std::array<std::int64_t, R>& extents, typename Mesh::stream_type s = {}) {
  detail::require_mesh(m, "shardcast::check_same_extents");
  const std::string err = detail::local_verdict([&] { detail::checked_volume(extents, "shardcast::check_same_extents"); });
  detail::agree_on_arguments(m, extents, detail::all_replicate<Mesh::naxes>(), err, "shardcast::check_same_extents", s);
}
/// The same with braced extents: `check_same_extents(mesh, {6, 8})`.
template <class Mesh, std::size_t R>
void check_same_extents(const Mesh& m, const std::int64_t (&extents)[R], typename Mesh::stream_type s = {}) {
  check_same_extents(m, detail::to_extents(extents), s);
}

/// Each rank keeps its piece (under `Layout`) of the global row-major tensor `global`.
/// Collective: every rank of the mesh calls it with the same extents (checked, see
/// `check_same_extents`). Example, 2x2 mesh, global 4x6 under layout<shard<0>, shard<1>>:
/// rank (1,0) keeps rows 2..3, columns 0..2.
/// @tparam Layout a shardcast::layout<...> with one placement per mesh axis
/// @param m the mesh
/// @param global the whole tensor, row-major (only this rank's piece is read)
/// @param extents the global extents, the same on every rank
/// @param s stream for device meshes
/// @throws layout_error on every rank if global.size() differs from the product of
///         `extents` on some rank, or the ranks passed different extents
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
/// The same with braced extents: `distribute<Layout>(m, global, {4, 6})` (a span or a std::vector).
template <class Layout, class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, std::span<T> global, const std::int64_t (&extents)[R], typename Mesh::stream_type s = {}) {
  return distribute<Layout>(m, global, detail::to_extents(extents), s);
}
template <class Layout, class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, const std::vector<T>& global, const std::int64_t (&extents)[R], typename Mesh::stream_type s = {}) {
  return distribute<Layout>(m, std::span<const T>(global), detail::to_extents(extents), s);
}

/// Dynamic-layout form: the layout is a runtime value (also checked to be the same on every rank).
/// @throws layout_error on every rank if the layout does not fit, differs between ranks,
///         or the extents or span sizes are wrong or differ (see the static form)
template <class Mesh, class T, std::size_t R>
dtensor<std::remove_const_t<T>, static_cast<int>(R), dynamic_layout, Mesh> distribute(const Mesh& m, const runtime_layout& l, std::span<T> global,
                                                                                      const std::array<std::int64_t, R>& extents,
                                                                                      typename Mesh::stream_type s = {}) {
  using U = std::remove_const_t<T>;
  return detail::distribute_impl<U, static_cast<int>(R), dynamic_layout, Mesh>(m, l, std::span<const U>(global.data(), global.size()),
                                                                                extents, s);
}
template <class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, const runtime_layout& l, const std::vector<T>& global, const std::array<std::int64_t, R>& extents,
                typename Mesh::stream_type s = {}) {
  return distribute(m, l, std::span<const T>(global), extents, s);
}
/// Dynamic-layout forms with braced extents: `distribute(m, l, global, {4, 6})`.
template <class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, const runtime_layout& l, std::span<T> global, const std::int64_t (&extents)[R],
                typename Mesh::stream_type s = {}) {
  return distribute(m, l, global, detail::to_extents(extents), s);
}
template <class Mesh, class T, std::size_t R>
auto distribute(const Mesh& m, const runtime_layout& l, const std::vector<T>& global, const std::int64_t (&extents)[R],
                typename Mesh::stream_type s = {}) {
  return distribute(m, l, std::span<const T>(global), detail::to_extents(extents), s);
}

/// A tensor made where it lives: each rank computes only its own piece, with
/// `f(i)` the element at global index `i` (a `const std::array<std::int64_t, R>&`), so no
/// rank ever holds the whole tensor. The same tensor as `distribute` of the global tensor
/// whose elements are f(i): for a partial<sum|prod> axis the values lie on coordinate 0
/// and the op's identity elsewhere; for avg, max and min every rank holds them.
/// `f` must give the same value for an index on every rank (a function of the index
/// alone, such as a counter-based random number of a seed and the row-major position);
/// it is called on the host, once for each element of this rank's piece, in row-major
/// order, and not at all on ranks that hold the identity. The element type is what f
/// returns. Device meshes: the piece is made on the host and copied on stream `s`.
/// Collective like `distribute` (one small all_reduce compares the arguments first).
/// @code
///   // a 1000x512 weight, S(1) over a 4-rank axis: each rank computes its 1000x128 piece
///   auto w = sc::generate<sc::layout<sc::shard<1>>>(mesh, std::array<std::int64_t, 2>{1000, 512},
///       [](const std::array<std::int64_t, 2>& i) { return 0.01f * static_cast<float>((i[0] * 7 + i[1]) % 13); });
/// @endcode
/// @throws layout_error on every rank if an extent is negative, the extents overflow, or
///         the ranks passed different extents; whatever `f` throws on the rank it throws on
template <class Layout, class Mesh, std::size_t R, class F>
dtensor<detail::generated_t<F, R>, static_cast<int>(R), Layout, Mesh> generate(const Mesh& m, const std::array<std::int64_t, R>& extents,
                                                                              F&& f, typename Mesh::stream_type s = {}) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  return detail::generate_impl<detail::generated_t<F, R>, static_cast<int>(R), Layout>(m, Layout::desc, extents, f, "shardcast::generate", s);
}
/// Dynamic-layout form of `generate`.
/// @throws layout_error on every rank also if `l` does not fit the mesh or the rank, mixes
///         partial ops, or differs between ranks
template <class Mesh, std::size_t R, class F>
dtensor<detail::generated_t<F, R>, static_cast<int>(R), dynamic_layout, Mesh> generate(const Mesh& m, const runtime_layout& l,
                                                                                      const std::array<std::int64_t, R>& extents, F&& f,
                                                                                      typename Mesh::stream_type s = {}) {
  return detail::generate_impl<detail::generated_t<F, R>, static_cast<int>(R), dynamic_layout>(m, l, extents, f, "shardcast::generate", s);
}
/// `generate` with braced extents, static or dynamic layout: `generate<Layout>(m, {1000, 512}, f)`,
/// `generate(m, l, {1000, 512}, f)`. f takes the index of as many dims as the list has values.
template <class Layout, class Mesh, std::size_t R, class F>
auto generate(const Mesh& m, const std::int64_t (&extents)[R], F&& f, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_index_arity<F, R>());
  return generate<Layout>(m, detail::to_extents(extents), std::forward<F>(f), s);
}
template <class Mesh, std::size_t R, class F>
auto generate(const Mesh& m, const runtime_layout& l, const std::int64_t (&extents)[R], F&& f, typename Mesh::stream_type s = {}) {
  static_assert(detail::check_index_arity<F, R>());
  return generate(m, l, detail::to_extents(extents), std::forward<F>(f), s);
}

/// A tensor whose every element is `value` (pass the same value on every rank), made like
/// `generate`: for a partial<sum|prod> axis the value lies on coordinate 0 and the op's
/// identity elsewhere, so the tensor's value is `value` under every layout. Collective.
/// @code
///   auto ones = sc::full<sc::layout<sc::shard<0>, sc::replicate>>(mesh, std::array<std::int64_t, 2>{6, 8}, 1.0f);
/// @endcode
template <class Layout, class Mesh, class T, std::size_t R>
dtensor<T, static_cast<int>(R), Layout, Mesh> full(const Mesh& m, const std::array<std::int64_t, R>& extents, const T& value,
                                                   typename Mesh::stream_type s = {}) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  auto f = [&value](const std::array<std::int64_t, R>&) { return value; };
  return detail::generate_impl<T, static_cast<int>(R), Layout>(m, Layout::desc, extents, f, "shardcast::full", s);
}
/// Dynamic-layout form of `full`.
template <class Mesh, class T, std::size_t R>
dtensor<T, static_cast<int>(R), dynamic_layout, Mesh> full(const Mesh& m, const runtime_layout& l, const std::array<std::int64_t, R>& extents,
                                                           const T& value, typename Mesh::stream_type s = {}) {
  auto f = [&value](const std::array<std::int64_t, R>&) { return value; };
  return detail::generate_impl<T, static_cast<int>(R), dynamic_layout>(m, l, extents, f, "shardcast::full", s);
}
/// `full` with braced extents: `full<Layout>(m, {6, 8}, 1.0f)`, `full(m, l, {6, 8}, 1.0f)`.
template <class Layout, class Mesh, class T, std::size_t R>
auto full(const Mesh& m, const std::int64_t (&extents)[R], const T& value, typename Mesh::stream_type s = {}) {
  return full<Layout>(m, detail::to_extents(extents), value, s);
}
template <class Mesh, class T, std::size_t R>
auto full(const Mesh& m, const runtime_layout& l, const std::int64_t (&extents)[R], const T& value, typename Mesh::stream_type s = {}) {
  return full(m, l, detail::to_extents(extents), value, s);
}

/// This rank's piece of a tensor of global `extents` under layout `Layout` on mesh `m`: its
/// global offsets and extents (`volume()` elements), e.g. to size the memory a make_view
/// wraps. Local.
/// @code
///   const sc::box b = sc::local_box<sc::layout<sc::shard<0>, sc::replicate>>(mesh, std::array<std::int64_t, 2>{5, 3});
///   std::vector<float> piece(static_cast<std::size_t>(b.volume()));
/// @endcode
template <class Layout, class Mesh, std::size_t R>
box local_box(const Mesh& m, const std::array<std::int64_t, R>& extents) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  detail::require_mesh(m, "shardcast::local_box");
  detail::checked_volume(extents, "shardcast::local_box");
  return local_box(Layout::desc, m.shape().data(), m.coords().data(), extents.data(), static_cast<int>(R));
}
/// The same for a run-time layout.
/// @throws layout_error if `l` does not fit the mesh or the rank
template <class Mesh, std::size_t R>
box local_box(const Mesh& m, const runtime_layout& l, const std::array<std::int64_t, R>& extents) {
  detail::require_mesh(m, "shardcast::local_box");
  l.validate(Mesh::naxes, static_cast<int>(R), "shardcast::local_box");
  detail::checked_volume(extents, "shardcast::local_box");
  return local_box(l, m.shape().data(), m.coords().data(), extents.data(), static_cast<int>(R));
}
/// `local_box` with braced extents: `local_box<Layout>(m, {5, 3})`, `local_box(m, l, {5, 3})`.
template <class Layout, class Mesh, std::size_t R>
box local_box(const Mesh& m, const std::int64_t (&extents)[R]) {
  return local_box<Layout>(m, detail::to_extents(extents));
}
template <class Mesh, std::size_t R>
box local_box(const Mesh& m, const runtime_layout& l, const std::int64_t (&extents)[R]) {
  return local_box(m, l, detail::to_extents(extents));
}

namespace detail {
/// make_view over a span: the span holds at least the piece `b`.
inline void expect_piece_fits(const box& b, std::size_t n) {
  if (static_cast<std::uint64_t>(b.volume()) > n)
    throw layout_error("shardcast::make_view: the span has " + std::to_string(n) + " elements but this rank's piece has " +
                       std::to_string(b.volume()) + "; size it with local_box(mesh, ...).volume()");
}
/// make_view over a pointer: null only where this rank's piece is empty.
template <class V>
V expect_view_memory(V v, const void* local) {
  if (local == nullptr && v.local_size() != 0)
    throw layout_error("shardcast::make_view: a null pointer for this rank's piece of " + std::to_string(v.local_size()) +
                       " elements; pass memory for local_box(mesh, ...).volume() elements (null only where the piece is empty)");
  return v;
}
}  // namespace detail

/// A non-owning dtensor over `local` (this rank's piece, row-major, in the mesh's memory space).
/// Local: it does not compare extents between ranks (see check_same_extents).
template <class Layout, class Mesh, class T, std::size_t R>
dtensor<T, static_cast<int>(R), Layout, Mesh> make_view(const Mesh& m, T* local, const std::array<std::int64_t, R>& extents) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  static_assert(detail::check_element_type<std::remove_const_t<T>>());
  detail::checked_volume(extents, "shardcast::make_view");
  return detail::expect_view_memory(dtensor<T, static_cast<int>(R), Layout, Mesh>(m, extents, nullptr, local), local);
}

/// make_view over a span: as above, and the span must hold this rank's piece.
/// @throws layout_error if `local` has fewer elements than this rank's piece (local_box)
template <class Layout, class Mesh, class T, std::size_t E, std::size_t R>
dtensor<T, static_cast<int>(R), Layout, Mesh> make_view(const Mesh& m, std::span<T, E> local, const std::array<std::int64_t, R>& extents) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  detail::checked_volume(extents, "shardcast::make_view");
  detail::expect_piece_fits(local_box<Layout>(m, extents), local.size());
  return make_view<Layout>(m, local.data(), extents);
}
/// make_view with braced extents, over a pointer or a span: `make_view<Layout>(m, ptr, {4, 6})`.
template <class Layout, class Mesh, class T, std::size_t R>
auto make_view(const Mesh& m, T* local, const std::int64_t (&extents)[R]) {
  return make_view<Layout>(m, local, detail::to_extents(extents));
}
template <class Layout, class Mesh, class T, std::size_t E, std::size_t R>
auto make_view(const Mesh& m, std::span<T, E> local, const std::int64_t (&extents)[R]) {
  return make_view<Layout>(m, local, detail::to_extents(extents));
}

/// An owning dtensor with uninitialised local memory.
/// Local: it does not compare extents between ranks (see check_same_extents).
template <class Layout, class T, class Mesh, std::size_t R>
dtensor<T, static_cast<int>(R), Layout, Mesh> empty(const Mesh& m, const std::array<std::int64_t, R>& extents, typename Mesh::stream_type s = {}) {
  static_assert(check_layout<Layout, Mesh::naxes, static_cast<int>(R)>());
  detail::checked_volume(extents, "shardcast::empty");
  return detail::empty_impl<T, static_cast<int>(R), Layout>(m, Layout::desc, extents, s);
}
/// `empty` with braced extents: `empty<Layout, T>(m, {4, 6})`.
template <class Layout, class T, class Mesh, std::size_t R>
auto empty(const Mesh& m, const std::int64_t (&extents)[R], typename Mesh::stream_type s = {}) {
  return empty<Layout, T>(m, detail::to_extents(extents), s);
}

/// Dynamic-layout form of `make_view`: `local` is this rank's piece under `l`.
/// @throws layout_error if `l` does not fit the mesh or the rank, or mixes partial ops
template <class Mesh, class T, std::size_t R>
dtensor<T, static_cast<int>(R), dynamic_layout, Mesh> make_view(const Mesh& m, const runtime_layout& l, T* local,
                                                                const std::array<std::int64_t, R>& extents) {
  static_assert(detail::check_element_type<std::remove_const_t<T>>());
  detail::check_new_tensor<static_cast<int>(R)>(Mesh::naxes, l, extents, "shardcast::make_view");
  return detail::expect_view_memory(dtensor<T, static_cast<int>(R), dynamic_layout, Mesh>(m, extents, nullptr, local, l), local);
}

/// Dynamic-layout make_view over a span (see above).
/// @throws layout_error if `l` does not fit the mesh or the rank, or `local` has fewer
///         elements than this rank's piece
template <class Mesh, class T, std::size_t E, std::size_t R>
dtensor<T, static_cast<int>(R), dynamic_layout, Mesh> make_view(const Mesh& m, const runtime_layout& l, std::span<T, E> local,
                                                                const std::array<std::int64_t, R>& extents) {
  detail::check_new_tensor<static_cast<int>(R)>(Mesh::naxes, l, extents, "shardcast::make_view");
  detail::expect_piece_fits(local_box(m, l, extents), local.size());
  return make_view(m, l, local.data(), extents);
}
/// Dynamic-layout make_view with braced extents, over a pointer or a span: `make_view(m, l, ptr, {4, 6})`.
template <class Mesh, class T, std::size_t R>
auto make_view(const Mesh& m, const runtime_layout& l, T* local, const std::int64_t (&extents)[R]) {
  return make_view(m, l, local, detail::to_extents(extents));
}
template <class Mesh, class T, std::size_t E, std::size_t R>
auto make_view(const Mesh& m, const runtime_layout& l, std::span<T, E> local, const std::int64_t (&extents)[R]) {
  return make_view(m, l, local, detail::to_extents(extents));
}

/// Dynamic-layout form of `empty` (`empty<T>(m, l, extents)`).
/// @throws layout_error if `l` does not fit the mesh or the rank, or mixes partial ops
template <class T, class Mesh, std::size_t R>
dtensor<T, static_cast<int>(R), dynamic_layout, Mesh> empty(const Mesh& m, const runtime_layout& l, const std::array<std::int64_t, R>& extents,
                                                            typename Mesh::stream_type s = {}) {
  detail::check_new_tensor<static_cast<int>(R)>(Mesh::naxes, l, extents, "shardcast::empty");
  return detail::empty_impl<T, static_cast<int>(R), dynamic_layout>(m, l, extents, s);
}
/// Dynamic-layout `empty` with braced extents: `empty<T>(m, l, {4, 6})`.
template <class T, class Mesh, std::size_t R>
auto empty(const Mesh& m, const runtime_layout& l, const std::int64_t (&extents)[R], typename Mesh::stream_type s = {}) {
  return empty<T>(m, l, detail::to_extents(extents), s);
}

/// Collective: the whole global tensor on every rank (partial axes reduced). x's elements
/// may be const (only read).
template <class T, int R, class L, class Mesh>
std::vector<std::remove_const_t<T>> to_global(const dtensor<T, R, L, Mesh>& x, typename Mesh::stream_type s = {}) {
  using U = std::remove_const_t<T>;
  using D = dtensor<U, R, dynamic_layout, Mesh>;
  detail::require_mesh(x.mesh(), "shardcast::to_global");
  // (x's piece is only read: a replicated x's piece is copied out as it is)
  D d(x.mesh(), x.global_extents(), std::const_pointer_cast<U>(x.owner()), const_cast<U*>(x.data()), x.layout());
  D r = redistribute(d, detail::all_replicate<Mesh::naxes>(), s);
  std::vector<U> out(r.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(out.data(), r.data(), out.size(), s);
  return out;
}

/// to_global of a tensor the caller gives up (`to_global(std::move(x))`, or a temporary
/// such as `to_global(matmul(a, b))`): the same values, and x is left empty. Its redistribute
/// to replicate gives x up (see redistribute of a given-up tensor): when that plan is one
/// all_reduce (x partial on some axes, replicate on the others) and x owns its storage
/// alone, it runs in place there; x's storage is released once the replicated piece no
/// longer needs it (before the host copy when the plan has collectives), unless a copy of
/// x holds it. Storage a copy holds, and memory under a view, is never written.
/// (A tensor of const elements is never given up: it goes to the form above, and stays.)
template <class T, int R, class L, class Mesh>
  requires(!std::is_const_v<T>)
std::vector<T> to_global(dtensor<T, R, L, Mesh>&& x, typename Mesh::stream_type s = {}) {
  detail::require_mesh(x.mesh(), "shardcast::to_global");
  // Given up as redistribute(std::move(x), to) gives it up, static layout or dynamic, which
  // also leaves x as it was when it throws.
  const auto r = redistribute(std::move(x), detail::all_replicate<Mesh::naxes>(), s);
  std::vector<T> out(r.local_size());
  detail::memory_ops<typename Mesh::memory_space>::to_host(out.data(), r.data(), out.size(), s);
  return out;
}

}  // namespace shardcast
