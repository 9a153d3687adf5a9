// Extents and mesh shapes written as braced lists: `distribute<L>(m, g, {4, 5})`,
// `make_mesh(comm, {2, 2})`. Every braced form must give the tensor its std::array form
// gives (the same type, global extents, piece and, through to_global, the same elements
// as the global vector) and reach the same checks (negative and overflowing extents,
// extents or shapes that differ between ranks).
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <shardcast/shardcast.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

using S0R = sc::layout<sc::shard<0>, sc::replicate>;
using S1S0 = sc::layout<sc::shard<1>, sc::shard<0>>;

/// x has the global extents `ext`, the piece `want_box`, and to_global(x) is `global`.
template <class T, int R, class L, class Mesh>
std::string same_tensor(const char* what, const sc::dtensor<T, R, L, Mesh>& x, const std::array<std::int64_t, static_cast<std::size_t>(R)>& ext,
                        const sc::box& want_box, const std::vector<std::remove_const_t<T>>& global) {
  const std::string where = std::string(what) + ": ";
  if (x.global_extents() != ext) return where + "other global extents";
  if (!(x.local_box() == want_box)) return where + "another local box";
  if (sc::to_global(x) != global) return where + "to_global differs from the global tensor";
  return {};
}

/// How often `make()` throws layout_error with `needle` in its message (0 or 1).
template <class F>
int refused_with(const char* needle, F&& make) {
  try {
    make();
  } catch (const sc::layout_error& e) {
    return std::string(e.what()).find(needle) != std::string::npos ? 1 : 0;
  }
  return 0;
}

}  // namespace

TEST_CASE("make_mesh takes its shape as a braced list") {
  st::failures fail;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, {2, 2});
    static_assert(std::is_same_v<decltype(m), sc::mesh<2>>);
    if (m.shape() != std::array<int, 2>{2, 2} || m.nranks() != 4) fail.add(c.rank(), "make_mesh(c, {2, 2}): another shape");
    if (m.coords() != sc::make_mesh(c, std::array<int, 2>{2, 2}).coords()) fail.add(c.rank(), "{2, 2}: other coordinates than std::array's");
    auto m3 = sc::make_mesh(c, {1, 2, 2});
    static_assert(std::is_same_v<decltype(m3), sc::mesh<3>>);
    if (m3.shape() != std::array<int, 3>{1, 2, 2} || m3.coord(2) != c.rank() % 2) fail.add(c.rank(), "make_mesh(c, {1, 2, 2}): another mesh");
    const int two = 2;
    auto m1 = sc::make_mesh(c, {two * two});  // a braced list of int variables
    if (m1.shape() != std::array<int, 1>{4}) fail.add(c.rank(), "make_mesh(c, {two * two}): another shape");
    // The std::array form's checks: a product that is not the communicator size, a shape
    // that differs between ranks.
    if (!refused_with("mesh shape 2x3 has 6 ranks but the communicator has 4", [&] { (void)sc::make_mesh(c, {2, 3}); }))
      fail.add(c.rank(), "make_mesh(c, {2, 3}) on 4 ranks was not refused");
    if (!refused_with("axis 0 has size 0", [&] { (void)sc::make_mesh(c, {0, 4}); })) fail.add(c.rank(), "a braced axis of size 0 was accepted");
    if (!refused_with("the ranks passed different mesh shapes", [&] { (void)sc::make_mesh(c, {c.rank() == 3 ? 1 : 2, c.rank() == 3 ? 4 : 2}); }))
      fail.add(c.rank(), "braced shapes that differ between ranks were accepted");
  });
  fail.report();
}

TEST_CASE("distribute, generate and full take braced extents, static and run-time layouts, with and without a stream") {
  st::failures fail;
  const std::array<std::int64_t, 2> ext{5, 7};
  const std::vector<float> global = st::make_global<float>(35);
  const auto at = [&](const std::array<std::int64_t, 2>& i) { return global[static_cast<std::size_t>(i[0] * 7 + i[1])]; };
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, {2, 2});
    const auto l = sc::runtime_layout::parse("S(1),P(max)");
    const sc::box sb = sc::local_box<S1S0>(m, ext), db = sc::local_box(m, l, ext);
    const sc::host_stream s{};

    // distribute: a std::vector, a span of const, a span of mutable elements
    auto a = sc::distribute<S1S0>(m, global, {5, 7});
    static_assert(std::is_same_v<decltype(a), decltype(sc::distribute<S1S0>(m, global, ext))>);
    fail.add(c.rank(), same_tensor("distribute<L>(vector, {5, 7})", a, ext, sb, global));
    fail.add(c.rank(), same_tensor("distribute<L>(span, {5, 7}, s)", sc::distribute<S1S0>(m, std::span<const float>(global), {5, 7}, s), ext, sb, global));
    std::vector<float> copy = global;
    auto am = sc::distribute<S1S0>(m, std::span<float>(copy), {5, 7});
    static_assert(std::is_same_v<decltype(am), sc::dtensor<float, 2, S1S0, sc::mesh<2>>>);
    fail.add(c.rank(), same_tensor("distribute<L>(span<float>, {5, 7})", am, ext, sb, global));
    fail.add(c.rank(), same_tensor("distribute<L>(vector, {5, 7}, s)", sc::distribute<S1S0>(m, global, {5, 7}, s), ext, sb, global));
    auto d = sc::distribute(m, l, global, {5, 7});
    static_assert(std::is_same_v<decltype(d), decltype(sc::distribute(m, l, global, ext))>);
    fail.add(c.rank(), same_tensor("distribute(l, vector, {5, 7})", d, ext, db, global));
    if (!(d.layout() == l)) fail.add(c.rank(), "distribute(l, vector, {5, 7}): another layout");
    fail.add(c.rank(), same_tensor("distribute(l, span, {5, 7}, s)", sc::distribute(m, l, std::span<const float>(global), {5, 7}, s), ext, db, global));
    fail.add(c.rank(), same_tensor("distribute(l, vector, {5, 7}, s)", sc::distribute(m, l, global, {5, 7}, s), ext, db, global));

    // generate: f of the index; a temporary lambda and an lvalue one
    auto g = sc::generate<S1S0>(m, {5, 7}, at);
    static_assert(std::is_same_v<decltype(g), sc::dtensor<float, 2, S1S0, sc::mesh<2>>>);
    fail.add(c.rank(), same_tensor("generate<L>({5, 7}, f)", g, ext, sb, global));
    fail.add(c.rank(), same_tensor("generate<L>({5, 7}, f, s)",
                                   sc::generate<S1S0>(m, {5, 7}, [&](const std::array<std::int64_t, 2>& i) { return at(i); }, s), ext, sb, global));
    auto gd = sc::generate(m, l, {5, 7}, at);
    static_assert(std::is_same_v<decltype(gd), sc::dtensor<float, 2, sc::dynamic_layout, sc::mesh<2>>>);
    fail.add(c.rank(), same_tensor("generate(l, {5, 7}, f)", gd, ext, db, global));
    fail.add(c.rank(), same_tensor("generate(l, {5, 7}, f, s)", sc::generate(m, l, {5, 7}, at, s), ext, db, global));

    // full
    const std::vector<double> twos(35, 2.0);
    auto f = sc::full<S1S0>(m, {5, 7}, 2.0);
    static_assert(std::is_same_v<decltype(f), sc::dtensor<double, 2, S1S0, sc::mesh<2>>>);
    fail.add(c.rank(), same_tensor("full<L>({5, 7}, 2.0)", f, ext, sb, twos));
    fail.add(c.rank(), same_tensor("full<L>({5, 7}, 2.0, s)", sc::full<S1S0>(m, {5, 7}, 2.0, s), ext, sb, twos));
    auto fd = sc::full(m, l, {5, 7}, 2.0);
    static_assert(std::is_same_v<decltype(fd), sc::dtensor<double, 2, sc::dynamic_layout, sc::mesh<2>>>);
    fail.add(c.rank(), same_tensor("full(l, {5, 7}, 2.0)", fd, ext, db, twos));
    fail.add(c.rank(), same_tensor("full(l, {5, 7}, 2.0, s)", sc::full(m, l, {5, 7}, 2.0, s), ext, db, twos));

    // other ranks, a mesh_ref, and braced lists of variables
    const int rows = 5;
    const std::int64_t cols = 7;
    fail.add(c.rank(), same_tensor("distribute<L>(ref, vector, {rows, cols})", sc::distribute<S0R>(m.ref(), global, {rows, cols}), ext,
                                   sc::local_box<S0R>(m.ref(), ext), global));
    auto v1 = sc::distribute<sc::layout<sc::shard<0>, sc::shard<0>>>(m, global, {35});
    static_assert(decltype(v1)::rank == 1);
    fail.add(c.rank(), same_tensor("distribute<L>(vector, {35})", v1, {35}, sc::local_box<sc::layout<sc::shard<0>, sc::shard<0>>>(m, {35}), global));
    auto v3 = sc::generate(m, sc::runtime_layout::parse("R,S(2)"), {5, 1, 7},
                           [&](const std::array<std::int64_t, 3>& i) { return at({i[0], i[2]}); });
    static_assert(decltype(v3)::rank == 3);
    fail.add(c.rank(), same_tensor("generate(l, {5, 1, 7}, f)", v3, {5, 1, 7}, sc::local_box(m, sc::runtime_layout::parse("R,S(2)"), {5, 1, 7}), global));
  });
  fail.report();
}

TEST_CASE("local_box, empty and make_view take braced extents") {
  st::failures fail;
  const std::array<std::int64_t, 2> ext{7, 3};
  const std::vector<std::int32_t> global = st::make_global<std::int32_t>(21);
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, {2, 2});
    const auto l = sc::runtime_layout::parse("S(0),S(0)");
    using L = sc::layout<sc::shard<0>, sc::shard<0>>;
    const sc::host_stream s{};

    // local_box: the std::array form's box (and one computed from the split rules directly)
    const sc::box sb = sc::local_box<L>(m, {7, 3});
    const sc::box db = sc::local_box(m, l, {7, 3});
    if (!(sb == sc::local_box<L>(m, ext)) || !(db == sc::local_box(m, l, ext))) fail.add(c.rank(), "local_box({7, 3}) differs from std::array's");
    if (!(sb == sc::local_box(L::desc, m.shape().data(), m.coords().data(), ext.data(), 2)) || !(db == sb))
      fail.add(c.rank(), "local_box({7, 3}) is not the split rules' box");
    // 7 rows split (4, 3) over axis 0, then (2, 2) and (2, 1) over axis 1
    const std::int64_t rows[4] = {2, 2, 2, 1}, first[4] = {0, 2, 4, 6};
    if (sb.off[0] != first[c.rank()] || sb.ext[0] != rows[c.rank()] || sb.off[1] != 0 || sb.ext[1] != 3)
      fail.add(c.rank(), "local_box({7, 3}) is not rows " + std::to_string(first[c.rank()]) + ".. of 3 columns");

    // this rank's piece of the global tensor, row-major
    std::vector<std::int32_t> piece(static_cast<std::size_t>(sb.volume()));
    for (std::size_t k = 0; k < piece.size(); ++k)
      piece[k] = global[static_cast<std::size_t>(st::global_index(sb, ext.data(), static_cast<std::int64_t>(k)))];

    // make_view over a pointer, a pointer to const and a span
    auto v = sc::make_view<L>(m, piece.data(), {7, 3});
    static_assert(std::is_same_v<decltype(v), sc::dtensor<std::int32_t, 2, L, sc::mesh<2>>>);
    if (v.owns() || v.data() != piece.data()) fail.add(c.rank(), "make_view<L>(ptr, {7, 3}): not a view over the piece");
    fail.add(c.rank(), same_tensor("make_view<L>(ptr, {7, 3})", v, ext, sb, global));
    const std::int32_t* cp = piece.data();
    auto cv = sc::make_view<L>(m, cp, {7, 3});
    static_assert(std::is_same_v<decltype(cv), sc::dtensor<const std::int32_t, 2, L, sc::mesh<2>>>);
    fail.add(c.rank(), same_tensor("make_view<L>(const ptr, {7, 3})", cv, ext, sb, global));
    fail.add(c.rank(), same_tensor("make_view<L>(span, {7, 3})", sc::make_view<L>(m, std::span<std::int32_t>(piece), {7, 3}), ext, sb, global));
    auto dv = sc::make_view(m, l, piece.data(), {7, 3});
    static_assert(std::is_same_v<decltype(dv), sc::dtensor<std::int32_t, 2, sc::dynamic_layout, sc::mesh<2>>>);
    if (dv.data() != piece.data() || !(dv.layout() == l)) fail.add(c.rank(), "make_view(l, ptr, {7, 3}): not a view under l");
    fail.add(c.rank(), same_tensor("make_view(l, ptr, {7, 3})", dv, ext, db, global));
    fail.add(c.rank(), same_tensor("make_view(l, span, {7, 3})", sc::make_view(m, l, std::span<const std::int32_t>(piece), {7, 3}), ext, db, global));
    // a span too small for the piece is refused as with std::array extents
    if (!refused_with("the span has 1 elements", [&] { (void)sc::make_view<L>(m, std::span<std::int32_t>(piece.data(), 1), {7, 3}); }) ||
        !refused_with("the span has 1 elements", [&] { (void)sc::make_view(m, l, std::span<std::int32_t>(piece.data(), 1), {7, 3}); }))
      fail.add(c.rank(), "make_view over a span smaller than the piece was accepted");

    // empty: owning, this rank's box; filled with the piece it holds the global tensor
    auto e = sc::empty<L, std::int32_t>(m, {7, 3});
    static_assert(std::is_same_v<decltype(e), decltype(sc::empty<L, std::int32_t>(m, ext))>);
    auto es = sc::empty<L, std::int32_t>(m, {7, 3}, s);
    auto ed = sc::empty<std::int32_t>(m, l, {7, 3});
    static_assert(std::is_same_v<decltype(ed), sc::dtensor<std::int32_t, 2, sc::dynamic_layout, sc::mesh<2>>>);
    auto eds = sc::empty<std::int32_t>(m, l, {7, 3}, s);
    if (!e.owns() || !es.owns() || !ed.owns() || !eds.owns() || !(ed.layout() == l)) fail.add(c.rank(), "empty({7, 3}): not owning tensors");
    for (auto* t : {e.data(), es.data(), ed.data(), eds.data()}) std::copy(piece.begin(), piece.end(), t);
    fail.add(c.rank(), same_tensor("empty<L, T>({7, 3})", e, ext, sb, global));
    fail.add(c.rank(), same_tensor("empty<L, T>({7, 3}, s)", es, ext, sb, global));
    fail.add(c.rank(), same_tensor("empty<T>(l, {7, 3})", ed, ext, db, global));
    fail.add(c.rank(), same_tensor("empty<T>(l, {7, 3}, s)", eds, ext, db, global));
  });
  fail.report();
}

TEST_CASE("braced extents reach the checks of the std::array forms") {
  std::atomic<int> refused{0};
  constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  std::atomic<int> tried{0};
  auto expect = [&](const char* needle, auto&& make) {
    ++tried;
    refused += refused_with(needle, make);
  };
  sc::host::run(2, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, {2});
    using L = sc::layout<sc::shard<0>>;
    const auto l = sc::runtime_layout::parse("S(0)");
    const std::vector<float> g(6, 1.0f);
    auto f = [](const std::array<std::int64_t, 2>&) { return 1.0f; };
    // negative extents, on every rank
    expect("shardcast::distribute: extent -2 of dim 0 is negative", [&] { return sc::distribute<L>(m, g, {-2, 3}); });
    expect("shardcast::distribute: extent -2 of dim 0 is negative", [&] { return sc::distribute(m, l, g, {-2, 3}); });
    expect("shardcast::generate: extent -1 of dim 1 is negative", [&] { return sc::generate<L>(m, {2, -1}, f); });
    expect("shardcast::generate: extent -1 of dim 1 is negative", [&] { return sc::generate(m, l, {2, -1}, f); });
    expect("shardcast::full: extent -1 of dim 1 is negative", [&] { return sc::full<L>(m, {2, -1}, 1.0f); });
    expect("shardcast::full: extent -1 of dim 1 is negative", [&] { return sc::full(m, l, {2, -1}, 1.0f); });
    expect("shardcast::empty: extent -1 of dim 0 is negative", [&] { return sc::empty<L, float>(m, {-1, 2}); });
    expect("shardcast::empty: extent -1 of dim 0 is negative", [&] { return sc::empty<float>(m, l, {-1, 2}); });
    expect("shardcast::make_view: extent -1 of dim 0 is negative", [&] { return sc::make_view<L>(m, static_cast<float*>(nullptr), {-1, 2}); });
    expect("shardcast::make_view: extent -1 of dim 0 is negative", [&] { return sc::make_view(m, l, static_cast<float*>(nullptr), {-1, 2}); });
    expect("shardcast::local_box: extent -1 of dim 0 is negative", [&] { return sc::local_box<L>(m, {-1, 2}); });
    expect("shardcast::local_box: extent -1 of dim 0 is negative", [&] { return sc::local_box(m, l, {-1, 2}); });
    expect("shardcast::check_same_extents: extent -3 of dim 1 is negative", [&] { sc::check_same_extents(m, {1, -3}); });
    // extents whose product overflows 64 bits
    expect("overflows 64 bits", [&] { return sc::full<L>(m, {huge, 2}, 1.0f); });
    expect("overflows 64 bits", [&] { return sc::empty<float>(m, l, {2, huge}); });
    expect("overflows 64 bits", [&] { return sc::local_box<L>(m, {huge, 0, 3}); });
    // a wrong element count, extents that differ between ranks, a layout of another rank
    expect("the global span has 6 elements but the extents describe 8", [&] { return sc::distribute<L>(m, g, {2, 4}); });
    expect("the ranks passed different global extents", [&] { return sc::full<L>(m, {4, c.rank() == 1 ? 6 : 5}, 0.0f); });
    expect("the ranks passed different global extents", [&] { sc::check_same_extents(m, {4, c.rank() == 1 ? 6 : 5}); });
    expect("but the tensor has rank 2", [&] { return sc::full(m, sc::runtime_layout::parse("S(2)"), {2, 3}, 1.0f); });
  });
  CHECK(tried == 2 * 20);
  CHECK(refused == tried);
}
