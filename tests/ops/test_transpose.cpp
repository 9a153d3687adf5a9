// transpose<Perm...>: the layout rule at compile time, the host and portable local
// permutations against an index-by-index reference, and differential tests of every
// permutation on every layout of rank-2 and rank-3 tensors on 1- to 3-axis meshes, and on
// random layouts on 4- to 6-axis meshes.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/transpose.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;
using optest::pd;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using S2 = sc::shard<2>;
using Ps = sc::partial<sc::sum>;
using Pm = sc::partial<sc::max>;

// shard<d> moves to where d lands; everything else stays.
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<S0>, 2>, sc::layout<S1>>);
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<S0, S1>, 2, 1, 0>, sc::layout<S1, S0>>);
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<R, Ps>, 2, 1, 0>, sc::layout<R, Ps>>);
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<S0, S1>, 2, 0, 1>, sc::layout<S0, S1>>);
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<S1, Pm, S2>, 3, 0, 2, 1>, sc::layout<S2, Pm, S1>>);
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<S0, S0, S2>, 3, 2, 0, 1>, sc::layout<S1, S1, S0>>);
static_assert(std::is_same_v<sc::transpose_layout_t<sc::layout<R, S2, S0>, 3, 1, 2, 0>, sc::layout<R, S1, S2>>);

// Validity of permutations.
static_assert(sc::detail::perm_ok<2>() && sc::detail::perm_ok<2, 1, 0>() && sc::detail::perm_ok<3, 2, 0, 1>() && sc::detail::perm_ok<1, 0>());
static_assert(!sc::detail::perm_ok<3>() && !sc::detail::perm_ok<2, 0, 0>() && !sc::detail::perm_ok<2, 0, 2>() && !sc::detail::perm_ok<3, 1, 0>() &&
              !sc::detail::perm_ok<2, 1, 0, 2>() && !sc::detail::perm_ok<2, -1, 0>());

// Every placement of a rank-3 tensor under every permutation of 3 dims, on one axis.
constexpr bool rule_table() {
  int p[3] = {0, 1, 2};
  for (int round = 0; round < 6; ++round) {
    sc::detail::dim_perm q;
    q.rank = 3;
    for (int k = 0; k < 3; ++k) q.p[k] = p[k];
    for (int d = 0; d < 3; ++d) {
      const auto out = sc::detail::transpose_placement(pd::make_shard(d), q);
      if (!out.is_shard() || p[out.dim] != d) return false;  // output dim out.dim is input dim d
    }
    for (pd x : {pd::make_replicate(), pd::make_partial(sc::reduce_op::sum), pd::make_partial(sc::reduce_op::avg),
                 pd::make_partial(sc::reduce_op::max), pd::make_partial(sc::reduce_op::min), pd::make_partial(sc::reduce_op::prod)})
      if (!(sc::detail::transpose_placement(x, q) == x)) return false;
    // next permutation (lexicographic)
    int i = 1;
    while (i >= 0 && p[i] > p[i + 1]) --i;
    if (i < 0) break;
    int j = 2;
    while (p[j] < p[i]) --j;
    std::swap(p[i], p[j]);
    std::reverse(p + i + 1, p + 3);
  }
  return true;
}
static_assert(rule_table());

/// out[k-th index] = in[perm applied], by brute force over the output's multi-index.
template <class T>
std::vector<T> ref_permute(const std::vector<T>& in, const std::vector<std::int64_t>& ext, const std::vector<int>& perm) {
  const int r = static_cast<int>(ext.size());
  std::vector<std::int64_t> oext(ext.size()), istride(ext.size());
  std::int64_t st = 1;
  for (int d = r - 1; d >= 0; --d) {
    istride[static_cast<std::size_t>(d)] = st;
    st *= ext[static_cast<std::size_t>(d)];
  }
  for (int k = 0; k < r; ++k) oext[static_cast<std::size_t>(k)] = ext[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])];
  std::vector<T> out(in.size());
  for (std::size_t o = 0; o < out.size(); ++o) {
    std::int64_t rem = static_cast<std::int64_t>(o), src = 0;
    for (int k = r - 1; k >= 0; --k) {
      const std::int64_t idx = rem % oext[static_cast<std::size_t>(k)];
      rem /= oext[static_cast<std::size_t>(k)];
      src += idx * istride[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])];
    }
    out[o] = in[static_cast<std::size_t>(src)];
  }
  return out;
}

std::vector<std::vector<int>> all_perms(int r) {
  std::vector<int> p(static_cast<std::size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::vector<std::vector<int>> out;
  do out.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return out;
}

template <int... P>
std::vector<int> vec() {
  return {P...};
}

template <class T, int N, std::size_t Rk, int... P>
void one(optest::failures& f, const sc::dtensor<T, static_cast<int>(Rk), sc::dynamic_layout, sc::mesh<N>>& x, const std::vector<T>& g,
         const std::array<std::int64_t, Rk>& e) {
  const std::vector<int> perm = sizeof...(P) ? vec<P...>() : std::vector<int>{1, 0};
  const std::string what = "transpose " + std::to_string(perm[0]) + std::to_string(perm[1]) + (Rk > 2 ? std::to_string(perm[2]) : "") + " on " +
                           sc::to_string(x.layout());
  const auto y = sc::transpose<P...>(x);
  sc::runtime_layout want = x.layout();
  for (int a = 0; a < N; ++a)
    if (want[a].is_shard()) want[a].dim = static_cast<std::int8_t>(std::find(perm.begin(), perm.end(), want[a].dim) - perm.begin());
  if (!(y.layout() == want)) f.add(what + ": layout " + sc::to_string(y.layout()));
  if (y.owns() == false || y.data() == x.data()) f.add(what + ": the result must be a new owning tensor");
  const std::string err = optest::compare_global(y, ref_permute(g, std::vector<std::int64_t>(e.begin(), e.end()), perm));
  if (!err.empty()) f.add(what + ": " + err);
}

// Every layout built from R, S(d), P(sum) and P(max) (or, when `sample` > 0, that many
// random ones drawn from `seed`), every permutation.
template <class T, int N, std::size_t Rk>
void all_layouts(std::array<int, N> shape, std::array<std::int64_t, Rk> e, int sample = 0, std::uint64_t seed = 0) {
  constexpr int Rank = static_cast<int>(Rk);
  INFO("mesh " << optest::shape_name<N>(shape) << " rank " << Rank);
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const auto g = optest::ints<T>(optest::volume(e), 2);
  optest::failures f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    const auto ps = optest::placements(Rank, {sc::reduce_op::sum, sc::reduce_op::max});
    for (const auto& l : sample > 0 ? optest::random_layouts(ps, N, sample, seed) : optest::layouts(ps, N)) {
      const auto x = optest::make_terms(m, l, g, e);
      const auto before = optest::local_copy(x);
      if constexpr (Rank == 2) {
        one<T, N, Rk>(f, x, g, e);
        one<T, N, Rk, 1, 0>(f, x, g, e);
        one<T, N, Rk, 0, 1>(f, x, g, e);
      } else {
        one<T, N, Rk, 0, 1, 2>(f, x, g, e);
        one<T, N, Rk, 0, 2, 1>(f, x, g, e);
        one<T, N, Rk, 1, 0, 2>(f, x, g, e);
        one<T, N, Rk, 1, 2, 0>(f, x, g, e);
        one<T, N, Rk, 2, 0, 1>(f, x, g, e);
        one<T, N, Rk, 2, 1, 0>(f, x, g, e);
      }
      if (optest::local_copy(x) != before) f.add("transpose modified its input on " + sc::to_string(l));
    }
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
}  // namespace

TEST_CASE("transpose rule table holds at run time too") { CHECK(rule_table()); }

TEST_CASE("local permutation kernels (host loops and portable region copies) match the reference for every permutation") {
  const std::vector<std::vector<std::int64_t>> shapes{{5}, {0}, {3, 4}, {1, 6}, {4, 0}, {2, 3, 4}, {3, 1, 2}, {2, 0, 3}, {2, 3, 1, 2}, {3, 2, 2, 3}};
  for (const auto& ext : shapes) {
    const int r = static_cast<int>(ext.size());
    std::int64_t n = 1;
    for (auto v : ext) n *= v;
    const auto in = optest::ints<std::int64_t>(n, 0);
    std::vector<std::int64_t> seq(static_cast<std::size_t>(n));
    std::iota(seq.begin(), seq.end(), 0);  // distinct values, so a misplaced element shows
    for (const auto& perm : all_perms(r)) {
      sc::detail::dim_perm q;
      q.rank = r;
      for (int k = 0; k < r; ++k) q.p[k] = perm[static_cast<std::size_t>(k)];
      const auto want = ref_permute(seq, ext, perm);
      std::vector<std::int64_t> host(seq.size()), port(seq.size());
      sc::detail::transpose_exec<sc::host_memory>::run(seq.data(), ext.data(), q, host.data());
      sc::detail::portable_transpose<sc::host_memory>::run(seq.data(), ext.data(), q, port.data(), sc::host_stream{});
      INFO("rank " << r << " first extent " << ext[0] << " perm " << perm[0] << (r > 1 ? perm[1] : -1));
      CHECK(host == want);
      CHECK(port == want);
    }
    (void)in;
  }
}

TEST_CASE_TEMPLATE("transpose on every layout, every permutation, 1- to 3-axis meshes", T, int, double) {
  for (int r : {1, 3, 4, 8}) all_layouts<T, 1>({r}, std::array<std::int64_t, 2>{5, 3});
  all_layouts<T, 2>({2, 2}, std::array<std::int64_t, 2>{3, 5});
  all_layouts<T, 2>({3, 2}, std::array<std::int64_t, 3>{2, 5, 3});
  all_layouts<T, 3>({2, 2, 2}, std::array<std::int64_t, 2>{3, 5});
}

TEST_CASE("transpose on random layouts of random 4- to 6-axis meshes, every permutation") {
  for (std::uint64_t s = 1; s <= static_cast<std::uint64_t>(optest::random_rounds); ++s) {
    all_layouts<std::int64_t, 4>(optest::random_shape<4>(s, 16), optest::random_extents<3>(s), 5, s);
    all_layouts<std::int64_t, 5>(optest::random_shape<5>(s + 10, 16), optest::random_extents<3>(s + 10), 5, s + 10);
    all_layouts<std::int64_t, 6>(optest::random_shape<6>(s + 20, 16), optest::random_extents<2>(s + 20), 5, s + 20);
  }
}

TEST_CASE("transpose through the compile-time API") {
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{4, 6};
    const auto g = optest::ints<float>(24, 1);
    const auto x = sc::distribute<sc::layout<S0, S1>>(m, g, e);
    const auto t = sc::transpose(x);
    static_assert(std::is_same_v<decltype(t)::layout_type, sc::layout<S1, S0>>);
    CHECK(t.global_extents() == std::array<std::int64_t, 2>{6, 4});
    // the documented example: rank (1,0) holds rows 2..3, columns 0..2 of x, so rows 0..2, columns 2..3 of t
    if (m.coord(0) == 1 && m.coord(1) == 0) {
      CHECK(t.local_box().off[0] == 0);
      CHECK(t.local_box().ext[0] == 3);
      CHECK(t.local_box().off[1] == 2);
      CHECK(t.local_box().ext[1] == 2);
    }
    auto err = optest::compare_global(t, ref_permute(g, {4, 6}, {1, 0}));
    if (!err.empty()) f.add("transpose: " + err);
    const std::array<std::int64_t, 3> e3{2, 5, 3};
    const auto g3 = optest::ints<float>(30, 4);
    const auto y = sc::distribute<sc::layout<S1, Ps>>(m, g3, e3);
    const auto z = sc::transpose<0, 2, 1>(y);
    static_assert(std::is_same_v<decltype(z)::layout_type, sc::layout<S2, Ps>>);
    err = optest::compare_global(z, ref_permute(g3, {2, 5, 3}, {0, 2, 1}));
    if (!err.empty()) f.add("transpose<0, 2, 1>: " + err);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
