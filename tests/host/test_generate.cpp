// generate and full: every rank computes its own piece from the global index. Checked
// against a single-rank reference (the global tensor computed here, element by element),
// piece by piece against what distribute gives for the same global tensor, and by how
// often each rank calls the generator: once per element of its piece, never on the ranks
// that hold a partial<sum|prod>'s identity.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <shardcast/shardcast.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

/// The generator's value at the global row-major position `lin` (the same small integers
/// as st::make_global, so every sum, product and mean is exact).
template <class T>
T value_at(std::int64_t lin) {
  return static_cast<T>((lin * 7 + 3) % 11 + 1);
}

template <std::size_t R>
std::int64_t row_major(const std::array<std::int64_t, R>& i, const std::array<std::int64_t, R>& ext) {
  std::int64_t g = 0;
  for (std::size_t d = 0; d < R; ++d) g = g * ext[d] + i[d];
  return g;
}

/// Does this rank hold the op's identity under `l` (a partial<sum|prod> axis where its
/// coordinate is not 0)?
template <class Mesh>
bool holds_identity(const Mesh& m, const sc::runtime_layout& l) {
  bool keeper = true, sum_or_prod = false;
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial()) {
      keeper = keeper && m.coord(a) == 0;
      sum_or_prod = l[a].op == sc::reduce_op::sum || l[a].op == sc::reduce_op::prod;
    }
  return !keeper && sum_or_prod;
}

/// One layout: generate's tensor against the reference, its piece against distribute's
/// and against f (or the identity) element by element, and the number of calls of f.
template <class T, class Mesh, std::size_t R>
std::string generate_case(const Mesh& m, const sc::runtime_layout& l, const std::array<std::int64_t, R>& ext) {
  std::int64_t vol = 1;
  for (auto e : ext) vol *= e;
  const std::vector<T> global = st::make_global<T>(vol);
  std::int64_t calls = 0;
  auto f = [&](const std::array<std::int64_t, R>& i) {
    ++calls;
    for (std::size_t d = 0; d < R; ++d)
      if (i[d] < 0 || i[d] >= ext[d]) throw std::logic_error("index out of the tensor");
    return value_at<T>(row_major(i, ext));
  };
  const auto y = sc::generate(m, l, ext, f);
  const auto d = sc::distribute(m, l, global, ext);
  // The collective check first, on every rank, so that a rank with a local finding does
  // not leave the others waiting in it.
  const std::string reference = st::check_against_reference(y, global);
  const std::string where = "generate " + sc::to_string(l) + ": ";
  if (y.layout() != l) return where + "the result has layout " + sc::to_string(y.layout());
  if (y.global_extents() != ext) return where + "the result has other global extents";
  if (y.local_size() != d.local_size())
    return where + "the piece has " + std::to_string(y.local_size()) + " elements, distribute's " + std::to_string(d.local_size());
  const bool identity = holds_identity(m, l);
  sc::reduce_op op = sc::reduce_op::sum;
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial()) op = l[a].op;
  const sc::box b = y.local_box();
  for (std::size_t k = 0; k < y.local_size(); ++k) {
    const T want = identity ? static_cast<T>(op == sc::reduce_op::prod ? 1 : 0)
                            : global[static_cast<std::size_t>(st::global_index(b, ext.data(), static_cast<std::int64_t>(k)))];
    if (y.data()[k] != want || d.data()[k] != want)
      return where + "local element " + std::to_string(k) + " is " + std::to_string(static_cast<double>(y.data()[k])) + " (distribute: " +
             std::to_string(static_cast<double>(d.data()[k])) + "), expected " + std::to_string(static_cast<double>(want));
  }
  const std::int64_t want_calls = identity ? 0 : static_cast<std::int64_t>(y.local_size());
  if (calls != want_calls) return where + "f was called " + std::to_string(calls) + " times, expected " + std::to_string(want_calls);
  return reference;
}

template <class T, int N, std::size_t R>
void sweep(const std::array<int, N>& shape, const std::vector<std::array<std::int64_t, R>>& extents, st::sweep_outcome& out) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    std::size_t mine = 0;
    for (auto op : st::all_reduce_ops)
      for (const auto& l : st::all_layouts(N, static_cast<int>(R), op))
        for (const auto& e : extents) {
          out.add(c.rank(), generate_case<T>(m, l, e));
          ++mine;
        }
    if (c.rank() == 0) out.count(mine);
  });
}

}  // namespace

TEST_CASE_TEMPLATE("generate: every layout of 1- to 3-axis meshes, even, uneven and empty pieces", T, std::int32_t, double) {
  st::sweep_outcome out;
  for (int n : {1, 3, 4}) {
    sweep<T, 1, 1>({n}, {{{7}}, {{2}}, {{0}}}, out);
    sweep<T, 1, 2>({n}, {{{5, 3}}, {{1, 7}}}, out);
  }
  sweep<T, 2, 2>({2, 2}, {{{5, 6}}, {{3, 1}}, {{0, 3}}}, out);
  sweep<T, 2, 2>({2, 3}, {{{7, 4}}}, out);
  sweep<T, 2, 3>({3, 1}, {{{4, 2, 5}}}, out);
  sweep<T, 3, 2>({2, 2, 2}, {{{5, 3}}, {{1, 9}}}, out);
  out.report();
  CHECK(out.cases > 0);
  MESSAGE(out.cases << " cases");
}

TEST_CASE("generate and full with compile-time layouts, on a mesh and on a mesh_ref") {
  using sc::partial;
  using sc::replicate;
  using sc::shard;
  st::failures fail;
  const std::array<std::int64_t, 2> ext{5, 7};
  const std::vector<float> global = st::make_global<float>(35);
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    auto f = [&](const std::array<std::int64_t, 2>& i) { return value_at<float>(row_major(i, ext)); };
    auto a = sc::generate<sc::layout<shard<1>, partial<sc::sum>>>(m, ext, f);
    static_assert(std::is_same_v<decltype(a), sc::dtensor<float, 2, sc::layout<shard<1>, partial<sc::sum>>, sc::mesh<2>>>);
    fail.add(c.rank(), st::check_against_reference(a, global));
    auto b = sc::generate<sc::layout<shard<0>, shard<0>>>(m.ref(), ext, f);
    fail.add(c.rank(), st::check_against_reference(b, global));
    if (sc::to_global(b) != global) fail.add(c.rank(), "generate on a mesh_ref: to_global differs from the reference");

    // full: the tensor's value is the value under every layout, partial ones included.
    auto p = sc::full<sc::layout<partial<sc::prod>, shard<1>>>(m, ext, 3.0f);
    if (sc::to_global(p) != std::vector<float>(35, 3.0f)) fail.add(c.rank(), "full under P(prod),S(1) is not 3 everywhere");
    const float want_here = m.coord(0) == 0 ? 3.0f : 1.0f;  // the value on coordinate 0 of the partial axis, 1 elsewhere
    for (std::size_t k = 0; k < p.local_size(); ++k)
      if (p.data()[k] != want_here) fail.add(c.rank(), "full under P(prod),S(1): local element " + std::to_string(k) + " is wrong");
    auto q = sc::full(m, sc::runtime_layout::parse("P(max),R"), std::array<std::int64_t, 1>{6}, std::int64_t{-4});
    if (sc::to_global(q) != std::vector<std::int64_t>(6, -4)) fail.add(c.rank(), "full under P(max),R is not -4 everywhere");
    // a rank-0 tensor: one element, f called with an empty index
    auto s0 = sc::generate(m, sc::runtime_layout::parse("R,P(sum)"), std::array<std::int64_t, 0>{},
                           [](const std::array<std::int64_t, 0>&) { return std::int32_t{5}; });
    if (sc::to_global(s0) != std::vector<std::int32_t>{5}) fail.add(c.rank(), "a rank-0 generate under R,P(sum) is not 5");
    auto z = sc::full<sc::layout<partial<sc::sum>, replicate>>(m, std::array<std::int64_t, 2>{0, 3}, 1.0);
    if (z.local_size() != 0 || !sc::to_global(z).empty()) fail.add(c.rank(), "full of an empty tensor is not empty");
  });
  fail.report();
}

TEST_CASE("generate and full refuse bad arguments on every rank") {
  std::atomic<int> refused{0};
  std::atomic<int> named{0};
  // `needle`: what the message must say.
  auto expect_refusal = [&](const char* needle, auto&& make) {
    try {
      make();
    } catch (const sc::layout_error& e) {
      ++refused;
      if (std::string(e.what()).find(needle) != std::string::npos) ++named;
    }
  };
  sc::host::run(3, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{3});
    auto f = [](const std::array<std::int64_t, 2>& i) { return static_cast<int>(i[0] + i[1]); };
    // Extents that differ between ranks: every rank throws, none waits.
    expect_refusal("shardcast::generate: the ranks passed different global extents",
                   [&] { return sc::generate<sc::layout<sc::shard<0>>>(m, std::array<std::int64_t, 2>{4, c.rank() == 1 ? 6 : 5}, f); });
    // A negative extent on one rank only.
    expect_refusal(c.rank() == 2 ? "shardcast::full: extent -1 of dim 1 is negative" : "shardcast::full: rank 2 rejected its arguments",
                   [&] { return sc::full(m, sc::runtime_layout::parse("R"), std::array<std::int64_t, 2>{4, c.rank() == 2 ? -1 : 5}, 1.0f); });
    // A layout that does not fit the tensor's rank.
    expect_refusal("places S(2) on mesh axis 0, but the tensor has rank 2",
                   [&] { return sc::generate(m, sc::runtime_layout::parse("S(2)"), std::array<std::int64_t, 2>{4, 5}, f); });
  });
  CHECK(refused == 9);
  CHECK(named == 9);
}

TEST_CASE("an exception from the generator on one rank ends the run without a hang") {
  std::atomic<int> comm_errors{0};
  try {
    sc::host::run(4, [&](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
      auto f = [&](const std::array<std::int64_t, 1>& i) {
        if (c.rank() == 3 && i[0] == 7) throw std::runtime_error("generator failed");
        return static_cast<double>(i[0]);
      };
      auto x = sc::generate<sc::layout<sc::shard<0>, sc::shard<0>>>(m, std::array<std::int64_t, 1>{8}, f);  // rank 3: 6..7
      try {
        (void)sc::to_global(x);  // the other ranks wait here for rank 3, which never comes
      } catch (const sc::comm_error&) {
        ++comm_errors;
        throw;
      }
    });
    FAIL("host::run returned");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "generator failed");
  }
  CHECK(comm_errors.load() == 3);
}

TEST_CASE("the counter-based generator of docs/01_layouts.md gives one global tensor on every layout and mesh") {
  // As in the docs ("Making tensors").
  auto uniform = [](const std::array<std::int64_t, 2>& i) {
    std::uint64_t z = 0x5eedull + static_cast<std::uint64_t>(i[0] * 512 + i[1]) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / float(1 << 24) * 0.1f - 0.05f;
  };
  const std::array<std::int64_t, 2> ext{1000, 512};
  std::vector<float> want(1000 * 512);
  for (std::int64_t r = 0; r < 1000; ++r)
    for (std::int64_t c = 0; c < 512; ++c) want[static_cast<std::size_t>(r * 512 + c)] = uniform({r, c});
  CHECK(*std::min_element(want.begin(), want.end()) >= -0.05f);
  CHECK(*std::max_element(want.begin(), want.end()) < 0.05f);
  CHECK(std::adjacent_find(want.begin(), want.end()) == want.end());  // no two neighbours alike
  st::failures fail;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m2 = sc::make_mesh(c, std::array<int, 2>{2, 2});
    auto w = sc::generate<sc::layout<sc::replicate, sc::shard<1>>>(m2, ext, uniform);
    if (sc::to_global(w) != want) fail.add(c.rank(), "R,S(1) on 2x2 differs");
    auto v = sc::generate(m2, sc::runtime_layout::parse("S(1),S(0)"), ext, uniform);
    if (sc::to_global(v) != want) fail.add(c.rank(), "S(1),S(0) on 2x2 differs");
    auto m1 = sc::make_mesh(c, std::array<int, 1>{4});
    auto u = sc::generate<sc::layout<sc::partial<sc::max>>>(m1, ext, uniform);
    if (sc::to_global(u) != want) fail.add(c.rank(), "P(max) on 4 differs");
  });
  fail.report();
}

TEST_CASE("empty and make_view take run-time layouts too, and refuse ones that do not fit") {
  st::failures fail;
  const std::array<std::int64_t, 2> ext{5, 4};
  const std::vector<double> global = st::make_global<double>(20);
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const auto l = sc::runtime_layout::parse("S(0),P(max)");
    auto e = sc::empty<double>(m, l, ext);
    if (!(e.layout() == l) || !e.owns()) fail.add(c.rank(), "empty: not an owning tensor under S(0),P(max)");
    // fill this rank's piece as distribute would (max: every rank holds the value)
    const sc::box b = e.local_box();
    for (std::size_t k = 0; k < e.local_size(); ++k)
      e.data()[k] = global[static_cast<std::size_t>(st::global_index(b, ext.data(), static_cast<std::int64_t>(k)))];
    fail.add(c.rank(), st::check_against_reference(e, global));
    std::vector<double> mine(e.data(), e.data() + e.local_size());
    auto v = sc::make_view(m, l, mine.data(), ext);
    if (v.owns() || v.data() != mine.data() || !(v.local_box() == b)) fail.add(c.rank(), "make_view: not a view over the caller's piece");
    if (sc::to_global(v) != global) fail.add(c.rank(), "make_view: to_global differs from the reference");
    int refused = 0;
    try {
      (void)sc::empty<double>(m, sc::runtime_layout::parse("S(2),R"), ext);
    } catch (const sc::layout_error&) {
      ++refused;
    }
    try {
      (void)sc::make_view(m, sc::runtime_layout::parse("P(sum),P(max)"), mine.data(), ext);
    } catch (const sc::layout_error& ex) {
      if (std::string(ex.what()).find("shardcast::make_view") != std::string::npos) ++refused;
    }
    if (refused != 2) fail.add(c.rank(), "a layout that does not fit was accepted");
  });
  fail.report();
}
