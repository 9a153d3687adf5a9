// flatten<First, Last> and unflatten<D>: the layout rule (the test's own mapping), the
// verdict on sharded merged dims against the test's own criterion (every rank holds the
// same flat indices of the global row-major tensor before and after), and the result
// against the global tensor, which a reshape leaves unchanged in row-major order; on every
// layout from R, S(every dim) and P(sum) on 2x2, 1x3 and 3-rank meshes, with extents the
// mesh divides and extents it does not, empty dims, static and dynamic layouts.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/reshape.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;

namespace {
using optest::ints;
using pd = sc::placement_desc;
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using S2 = sc::shard<2>;
using S3 = sc::shard<3>;
using P = sc::partial<sc::sum>;

// ---------------------------------------------------------------------------------------
// Compile-time layouts.
// ---------------------------------------------------------------------------------------
static_assert(std::is_same_v<sc::flatten_layout_t<sc::layout<S0, S3>, 4, 1, 2>, sc::layout<S0, S2>>);
static_assert(std::is_same_v<sc::flatten_layout_t<sc::layout<S1, P, R>, 4, 1, 3>, sc::layout<S1, P, R>>);
static_assert(std::is_same_v<sc::flatten_layout_t<sc::layout<S2>, 3, 0, 1>, sc::layout<S1>>);
static_assert(std::is_same_v<sc::flatten_layout_t<sc::layout<S2>, 3, 2, 2>, sc::layout<S2>>);
static_assert(std::is_same_v<sc::unflatten_layout_t<sc::layout<S2, S1>, 2, 3>, sc::layout<S2, S1>>);
static_assert(std::is_same_v<sc::unflatten_layout_t<sc::layout<S2, S1>, 1, 3>, sc::layout<sc::shard<4>, S1>>);
static_assert(std::is_same_v<sc::unflatten_layout_t<sc::layout<S2, S1, P>, 0, 2>, sc::layout<S3, S2, P>>);

// ---------------------------------------------------------------------------------------
// The test's own rules.
// ---------------------------------------------------------------------------------------
/// flatten's placement on an axis, or false when a merged dim after `first` is sharded.
bool flatten_pair(const pd& p, int first, int last, pd& out) {
  out = p;
  if (!p.is_shard()) return true;
  if (p.dim > first && p.dim <= last) return false;
  if (p.dim > last) out = pd::make_shard(p.dim - (last - first));
  return true;
}
pd unflatten_pair(const pd& p, int d, int n) { return p.is_shard() && p.dim > d ? pd::make_shard(p.dim + n - 1) : p; }

/// The flat row-major indices of the global tensor that the rank at `coord` holds under `l`.
template <std::size_t NR>
std::set<std::int64_t> held(const sc::runtime_layout& l, const std::vector<int>& shape, const std::vector<int>& coord,
                            const std::array<std::int64_t, NR>& e) {
  const sc::box b = sc::local_box(l, shape.data(), coord.data(), e.data(), static_cast<int>(NR));
  std::set<std::int64_t> s;
  if (b.volume() == 0) return s;
  std::array<std::int64_t, NR> i{};
  for (std::size_t d = 0; d < NR; ++d) i[d] = b.off[d];
  while (true) {
    std::int64_t f = 0;
    for (std::size_t d = 0; d < NR; ++d) f = f * e[d] + i[d];
    s.insert(f);
    int d = static_cast<int>(NR) - 1;
    for (; d >= 0; --d) {
      auto k = static_cast<std::size_t>(d);
      if (++i[k] < b.off[d] + b.ext[d]) break;
      i[k] = b.off[d];
    }
    if (d < 0) break;
  }
  return s;
}

/// Whether every rank of `shape` holds the same flat indices under (lx, ex) and (ly, ey).
template <std::size_t RX, std::size_t RY>
bool same_pieces(const sc::runtime_layout& lx, const std::array<std::int64_t, RX>& ex, const sc::runtime_layout& ly,
                 const std::array<std::int64_t, RY>& ey, const std::vector<int>& shape) {
  int ranks = 1;
  for (int s : shape) ranks *= s;
  std::vector<int> c(shape.size());
  for (int r = 0; r < ranks; ++r) {
    int q = r;
    for (int a = static_cast<int>(shape.size()) - 1; a >= 0; --a) {
      c[static_cast<std::size_t>(a)] = q % shape[static_cast<std::size_t>(a)];
      q /= shape[static_cast<std::size_t>(a)];
    }
    if (held(lx, shape, c, ex) != held(ly, shape, c, ey)) return false;
  }
  return true;
}

template <class Mesh>
std::vector<int> shape_of(const Mesh& m) {
  return std::vector<int>(m.shape().begin(), m.shape().end());
}

/// flatten<F, L> of a dynamic-layout x (partial terms that differ by rank): "" when the
/// result (or the refusal) is right.
template <int F, int L, std::size_t RX, class Mesh>
std::string flatten_case(const Mesh& mesh, const sc::runtime_layout& lx, const std::array<std::int64_t, RX>& ex) {
  std::int64_t n = 1;
  for (auto v : ex) n *= v;
  const auto g = ints<std::int64_t>(n, 3);
  auto x = optest::make_terms(mesh, lx, g, ex);
  const std::string what = "flatten<" + std::to_string(F) + ", " + std::to_string(L) + "> of " + sc::to_string(lx) + " " +
                           sc::detail::describe_extents(ex) + ": ";
  sc::runtime_layout want = lx;
  bool legal = true;
  for (int a = 0; a < lx.naxes; ++a) legal = flatten_pair(lx[a], F, L, want[a]) && legal;
  constexpr std::size_t RY = RX - static_cast<std::size_t>(L - F);
  std::array<std::int64_t, RY> ey{};
  for (std::size_t d = 0, k = 0; d < RX; ++d) {
    if (d > static_cast<std::size_t>(F) && d <= static_cast<std::size_t>(L)) ey[static_cast<std::size_t>(F)] *= ex[d];
    else ey[k++] = ex[d];
  }
  legal = legal && same_pieces(lx, ex, want, ey, shape_of(mesh));
  if (!legal) {
    try {
      (void)sc::flatten<F, L>(x);
    } catch (const sc::layout_error&) {
      return "";
    }
    return what + "did not throw";
  }
  auto y = sc::flatten<F, L>(x);
  static_assert(decltype(y)::rank == static_cast<int>(RY));
  if (!(y.layout() == want)) return what + "layout " + sc::to_string(y.layout()) + ", expected " + sc::to_string(want);
  if (y.global_extents() != ey) return what + "extents " + sc::detail::describe_extents(y.global_extents());
  if (y.data() != x.data() || y.local_size() != x.local_size()) return what + "not a handle on x's storage";
  const std::string d = optest::compare_global(y, g);
  return d.empty() ? "" : what + d;
}

/// unflatten<D>(x, sizes) of a dynamic-layout x: "" when the result (or the refusal) is right.
template <int D, std::size_t RX, std::size_t N, class Mesh>
std::string unflatten_case(const Mesh& mesh, const sc::runtime_layout& lx, const std::array<std::int64_t, RX>& ex,
                           const std::array<std::int64_t, N>& sizes) {
  std::int64_t n = 1;
  for (auto v : ex) n *= v;
  const auto g = ints<std::int64_t>(n, 5);
  auto x = optest::make_terms(mesh, lx, g, ex);
  const std::string what = "unflatten<" + std::to_string(D) + "> of " + sc::to_string(lx) + " " + sc::detail::describe_extents(ex) + ": ";
  sc::runtime_layout want = lx;
  for (int a = 0; a < lx.naxes; ++a) want[a] = unflatten_pair(lx[a], D, static_cast<int>(N));
  constexpr std::size_t RY = RX + N - 1;
  std::array<std::int64_t, RY> ey{};
  for (std::size_t d = 0, k = 0; d < RX; ++d)
    if (d == static_cast<std::size_t>(D))
      for (auto s : sizes) ey[k++] = s;
    else
      ey[k++] = ex[d];
  if (!same_pieces(lx, ex, want, ey, shape_of(mesh))) {
    try {
      (void)sc::unflatten<D>(x, sizes);
    } catch (const sc::layout_error&) {
      return "";
    }
    return what + "did not throw";
  }
  auto y = sc::unflatten<D>(x, sizes);
  static_assert(decltype(y)::rank == static_cast<int>(RY));
  if (!(y.layout() == want)) return what + "layout " + sc::to_string(y.layout()) + ", expected " + sc::to_string(want);
  if (y.global_extents() != ey) return what + "extents " + sc::detail::describe_extents(y.global_extents());
  if (y.data() != x.data()) return what + "not a handle on x's storage";
  const std::string d = optest::compare_global(y, g);
  if (!d.empty()) return what + d;
  // Back again: flatten of the new dims gives x's layout and extents.
  auto z = sc::flatten<D, D + static_cast<int>(N) - 1>(y);
  if (!(z.layout() == lx) || z.global_extents() != ex) return what + "flatten of the result is not x";
  return "";
}

template <int NAX>
void sweep(std::array<int, NAX> shape) {
  INFO("mesh " << optest::shape_name<NAX>(shape));
  const auto l3 = optest::layouts(optest::placements(3, {sc::reduce_op::sum}), NAX);
  const auto l2 = optest::layouts(optest::placements(2, {sc::reduce_op::sum}), NAX);
  int nranks = 1;
  for (int x : shape) nranks *= x;
  optest::failures bad;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    using A3 = std::array<std::int64_t, 3>;
    for (const auto& l : l3)
      for (const A3& e : {A3{4, 6, 2}, A3{3, 5, 2}, A3{2, 3, 1}, A3{5, 1, 3}, A3{0, 4, 2}, A3{3, 0, 2}}) {
        bad.add(comm.rank(), flatten_case<0, 1>(mesh, l, e));
        bad.add(comm.rank(), flatten_case<1, 2>(mesh, l, e));
        bad.add(comm.rank(), flatten_case<0, 2>(mesh, l, e));
        bad.add(comm.rank(), flatten_case<1, 1>(mesh, l, e));
      }
    using A2 = std::array<std::int64_t, 2>;
    for (const auto& l : l2) {
      for (const auto& [e, s] : {std::pair{A2{12, 3}, A2{4, 3}}, std::pair{A2{12, 3}, A2{3, 4}}, std::pair{A2{6, 5}, A2{2, 3}},
                                 std::pair{A2{6, 5}, A2{3, 2}}, std::pair{A2{8, 2}, A2{8, 1}}, std::pair{A2{0, 2}, A2{0, 4}}}) {
        bad.add(comm.rank(), unflatten_case<0>(mesh, l, e, s));
        bad.add(comm.rank(), unflatten_case<0>(mesh, l, e, std::array<std::int64_t, 3>{1, s[0], s[1]}));
      }
      bad.add(comm.rank(), unflatten_case<1>(mesh, l, A2{3, 12}, A2{2, 6}));
      bad.add(comm.rank(), unflatten_case<1>(mesh, l, A2{3, 12}, std::array<std::int64_t, 3>{3, 2, 2}));
      bad.add(comm.rank(), unflatten_case<1>(mesh, l, A2{5, 6}, std::array<std::int64_t, 1>{6}));
    }
  });
  bad.report();
}
}  // namespace

TEST_CASE("flatten and unflatten on every layout from R, S(each dim), P(sum) on 2x2, 1x3, 3x1 and 3-rank meshes") {
  sweep<2>({2, 2});
  sweep<2>({1, 3});
  sweep<2>({3, 1});
  sweep<1>({3});
}

TEST_CASE("unflatten and flatten with compile-time layouts: heads of a tensor-parallel projection") {
  optest::failures bad;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, {2, 2});
    // q [b=3, s=5, heads*dh = 4*3]: the batch over axis 0, the heads over axis 1 (4 heads on 2 ranks).
    const auto g = ints<float>(3 * 5 * 12, 1);
    auto q = sc::distribute<sc::layout<S0, S2>>(mesh, g, {3, 5, 12});
    auto q4 = sc::unflatten<2>(q, {4, 3});
    static_assert(std::is_same_v<decltype(q4), sc::dtensor<float, 4, sc::layout<S0, S2>, sc::mesh<2>>>);
    if (q4.global_extents() != std::array<std::int64_t, 4>{3, 5, 4, 3}) bad.add(comm.rank(), "unflatten extents");
    if (q4.data() != q.data()) bad.add(comm.rank(), "unflatten copied");
    bad.add(comm.rank(), optest::compare_global(q4, g));
    auto inferred = sc::unflatten<2>(q, {-1, 3});
    if (inferred.global_extents() != q4.global_extents()) bad.add(comm.rank(), "-1 not inferred");
    // Heads to the front of the per-head matrices, and back.
    auto q3 = sc::flatten<2, 3>(q4);
    static_assert(std::is_same_v<decltype(q3), decltype(q)>);
    bad.add(comm.rank(), optest::compare_global(q3, g));
    // The batch (3 = 2 + 1 over axis 0) times the sequence: rows 0..10 and 10..15 of 15, not
    // the balanced 0..8 and 8..15, so the pieces would have to move.
    try {
      (void)sc::flatten<0, 1>(q);
      bad.add(comm.rank(), "flatten<0, 1> of an uneven batch shard did not throw");
    } catch (const sc::layout_error& e) {
      // x's layout, what the first rank holds (rows 0..2 of 5 columns) and what the result would give it
      if (std::string(e.what()).find("layout \"S(0),S(2)\" on a mesh 2x2: dim 0 is sharded and its pieces do not stay balanced pieces: "
                                     "the rank at mesh coordinates (0, 0) holds elements 0..10 of the merged extent 15, but the "
                                     "result's layout gives it 0..8") == std::string::npos ||
          std::string(e.what()).find("an extent of dim 0 (3) that the mesh axes sharding it divide evenly") == std::string::npos)
        bad.add(comm.rank(), e.what());
    }
    // 3 heads over 2 ranks: the heads' pieces (2 + 1 heads of 4 = 8 + 4 columns) are not the
    // balanced pieces of 12 columns (6 + 6).
    auto k = sc::distribute<sc::layout<S0, S2>>(mesh, ints<float>(3 * 5 * 12, 2), {3, 5, 12});
    try {
      (void)sc::unflatten<2>(k, {3, 4});
      bad.add(comm.rank(), "unflatten into 3 heads over 2 ranks did not throw");
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("holds elements 0..6 of the merged extent 12, but the result's layout gives it 0..8") ==
              std::string::npos ||
          std::string(e.what()).find("a first size 3 that the mesh axes sharding dim 2 divide evenly") == std::string::npos)
        bad.add(comm.rank(), e.what());
    }
    // A size that overflows, and an inferred size of an empty dim (0, as torch.unflatten).
    auto e0 = sc::distribute<sc::layout<S0, R>>(mesh, std::vector<float>{}, {2, 0});
    try {
      (void)sc::unflatten<1>(e0, {0, std::int64_t{1} << 40, std::int64_t{1} << 40});
      bad.add(comm.rank(), "extents whose product overflows were accepted");
    } catch (const sc::layout_error&) {
    }
    if (sc::unflatten<1>(e0, {-1, 4}).global_extents() != std::array<std::int64_t, 3>{2, 0, 4}) bad.add(comm.rank(), "-1 of an empty dim");
    // A tensor the caller gives up is left empty, the result holding its storage alone.
    auto own = sc::distribute<sc::layout<S0, S2>>(mesh, g, {3, 5, 12});
    const float* const p = own.data();
    auto moved = sc::unflatten<2>(std::move(own), {4, 3});
    if (own.data() != nullptr || own.owns() || moved.data() != p || !moved.owns()) bad.add(comm.rank(), "unflatten of a given-up tensor");
    auto back = sc::flatten<2, 3>(std::move(moved));
    if (moved.data() != nullptr || back.data() != p || back.owner().use_count() != 1) bad.add(comm.rank(), "flatten of a given-up tensor");
    bad.add(comm.rank(), optest::compare_global(back, g));
    // Sizes that do not split the dim, each with its reason.
    for (const auto& [sizes, why] :
         {std::pair{std::array<std::int64_t, 2>{5, 3}, "their product must equal the extent"},
          std::pair{std::array<std::int64_t, 2>{-1, 5}, "the given sizes do not divide the extent, so the -1 has no whole value"},
          std::pair{std::array<std::int64_t, 2>{-1, -1}, "only one size may be -1"},
          std::pair{std::array<std::int64_t, 2>{-2, -6}, "a size is negative"},
          std::pair{std::array<std::int64_t, 2>{0, -1}, "the -1 cannot be inferred when another size is 0"}})
      try {
        (void)sc::unflatten<2>(q, sizes);
        bad.add(comm.rank(), "bad sizes did not throw");
      } catch (const sc::layout_error& e) {
        const std::string w = e.what();
        if (w.find("do not split dim 2 of extent 12: ") == std::string::npos || w.find(why) == std::string::npos) bad.add(comm.rank(), w);
      }
    // Const elements stay const; a dynamic layout stays dynamic.
    const sc::dtensor<const float, 3, sc::layout<S0, S2>, sc::mesh<2>> cq = q;
    auto cq4 = sc::unflatten<2>(cq, {2, 6});
    static_assert(std::is_same_v<decltype(cq4)::value_type, const float>);
    if (sc::to_global(cq4) != g) bad.add(comm.rank(), "const unflatten: values differ");
    auto dq = sc::flatten<2, 3>(sc::dtensor<float, 4, sc::dynamic_layout, sc::mesh<2>>(q4));
    static_assert(std::is_same_v<decltype(dq)::layout_type, sc::dynamic_layout>);
    if (!(dq.layout() == sc::runtime_layout::parse("S(0),S(2)"))) bad.add(comm.rank(), "dynamic flatten layout " + sc::to_string(dq.layout()));
    bad.add(comm.rank(), optest::compare_global(dq, g));
    // A merged dim after the first sharded: refused at run time for a dynamic layout.
    auto dk = sc::dtensor<float, 3, sc::dynamic_layout, sc::mesh<2>>(k);
    try {
      (void)sc::flatten<1, 2>(dk);
      bad.add(comm.rank(), "flatten of a sharded inner dim did not throw");
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("mesh axis 1 shards dim 2, a merged dim after the first") == std::string::npos) bad.add(comm.rank(), e.what());
    }
  });
  bad.report();
}
