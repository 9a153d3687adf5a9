// Mesh handles. Tensors on a mesh_ref (a mesh handle that does not keep the mesh alive):
// distribute, static and run-time redistribute, redistribute_into, matmul and the
// overlapped matmul give what the single-rank reference gives, and every result lives on
// the mesh_ref. A mesh (the counted handle) lives while any handle or tensor holds it.
#include <doctest/doctest.h>

#include <array>
#include <shardcast/ops/overlap.hpp>
#include <shardcast/shardcast.hpp>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
/// Every layout pair (rank-2 tensors, every reduce op) on `shape`, through m.ref().
template <class T, int N>
void sweep_on_ref(const std::array<int, N>& shape, st::sweep_outcome& out) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    const auto r = m.ref();
    std::size_t mine = 0;
    st::for_each_layout_pair(N, 2, 1, [&](const sc::runtime_layout& a, const sc::runtime_layout& b) {
      for (const auto& e : {std::array<std::int64_t, 2>{5, 3}, std::array<std::int64_t, 2>{0, 4}, std::array<std::int64_t, 2>{8, 6}}) {
        out.add(c.rank(), st::differential_case<T>(r, a, b, e));
        ++mine;
      }
    });
    if (c.rank() == 0) out.count(mine);
  });
}

std::vector<float> iota_global(std::int64_t n) {
  std::vector<float> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<float>(i % 13 + 1);
  return g;
}

/// C = A B for row-major A [m,k] and B [k,n] (the single-rank reference).
std::vector<float> product(const std::vector<float>& a, const std::vector<float>& b, int m, int k, int n) {
  std::vector<float> c(static_cast<std::size_t>(m * n), 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l) c[static_cast<std::size_t>(i * n + j)] += a[static_cast<std::size_t>(i * k + l)] * b[static_cast<std::size_t>(l * n + j)];
  return c;
}
}  // namespace

TEST_CASE_TEMPLATE("every layout pair on a mesh_ref matches the reference", T, float, std::int64_t) {
  st::sweep_outcome out;
  sweep_on_ref<T, 1>({3}, out);
  sweep_on_ref<T, 2>({2, 2}, out);
  out.report();
}

TEST_CASE("static redistributes on a mesh_ref: results live on the mesh_ref and match the reference") {
  // A chain through every kind of collective, on a 2x2 mesh with uneven extents.
  const std::array<std::int64_t, 2> ext{7, 5};
  const std::vector<float> g = iota_global(35);
  st::failures bad;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const sc::mesh_ref<2> r = m.ref();
    auto note = [&](const std::string& what, bool ok) {
      if (!ok) bad.add(c.rank(), what);
    };
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(r, std::span<const float>(g), ext);
    static_assert(std::is_same_v<decltype(x)::mesh_type, sc::mesh_ref<2>>);
    auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<1>>>(x);         // slice + all_gather
    auto z = sc::redistribute<sc::layout<sc::shard<1>, sc::shard<0>>>(y);          // all_to_all
    auto p = sc::redistribute<sc::layout<sc::partial<>, sc::shard<0>>>(z);         // pad
    auto q = sc::redistribute<sc::layout<sc::shard<0>, sc::shard<0>>>(p);          // reduce_scatter
    auto w = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(q);        // all_gather
    static_assert(std::is_same_v<decltype(w)::mesh_type, sc::mesh_ref<2>>);
    note("y", st::check_against_reference(y, g).empty());
    note("z", st::check_against_reference(z, g).empty());
    note("p", st::check_against_reference(p, g).empty());
    note("q", st::check_against_reference(q, g).empty());
    note("w", sc::to_global(w) == g);
    note("w's mesh is r", w.mesh() == r);
    // The same chain on the owning mesh gives the same pieces.
    auto xm = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, std::span<const float>(g), ext);
    auto qm = sc::redistribute<sc::layout<sc::shard<0>, sc::shard<0>>>(
        sc::redistribute<sc::layout<sc::partial<>, sc::shard<0>>>(sc::redistribute<sc::layout<sc::shard<1>, sc::shard<0>>>(
            sc::redistribute<sc::layout<sc::replicate, sc::shard<1>>>(xm))));
    note("same piece as on the mesh",
         std::vector<float>(q.data(), q.data() + q.local_size()) == std::vector<float>(qm.data(), qm.data() + qm.local_size()));
    // The input is never modified, on a mesh_ref as on a mesh.
    note("x unchanged", st::check_against_reference(x, g).empty());
    // redistribute_into an output made on the mesh_ref.
    auto out = sc::empty<sc::layout<sc::replicate, sc::replicate>, float>(r, ext);
    sc::redistribute_into(q, out);
    note("redistribute_into", sc::to_global(out) == g);
  });
  bad.report();
}

TEST_CASE("matmul and the overlapped all_gather_matmul on a mesh_ref match the reference") {
  constexpr int M = 7, K = 4, N = 6;
  const std::vector<float> a = iota_global(M * K), b = iota_global(K * N);
  const std::vector<float> want = product(a, b, M, K, N);
  st::failures bad;
  sc::host::run(2, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    const auto r = m.ref();
    auto note = [&](const std::string& what, bool ok) {
      if (!ok) bad.add(c.rank(), what);
    };
    const std::array<std::int64_t, 2> ea{M, K}, eb{K, N};
    // Row-parallel A times a replicated B: rows of C.
    auto da = sc::distribute<sc::layout<sc::shard<0>>>(r, std::span<const float>(a), ea);
    auto db = sc::distribute<sc::layout<sc::replicate>>(r, std::span<const float>(b), eb);
    auto dc = sc::matmul(da, db);
    static_assert(std::is_same_v<decltype(dc)::mesh_type, sc::mesh_ref<1>>);
    note("matmul", sc::to_global(dc) == want);
    // all_gather(X) * W with W column-parallel, pipelined over 2 chunks on the context's worker.
    sc::overlap_context ctx(r);
    auto dw = sc::distribute<sc::layout<sc::shard<1>>>(r, std::span<const float>(b), eb);
    auto dy = sc::all_gather_matmul<0>(ctx, da, dw, 2);
    note("all_gather_matmul", sc::to_global(dy) == want);
  });
  bad.report();
}

TEST_CASE("mesh_ref: handles of one mesh compare equal, of another mesh not") {
  bool same = false, other = true, owning_same = false;
  sc::host::run(2, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{1, 2});
    auto m2 = sc::make_mesh(c, std::array<int, 2>{2, 1});
    const auto copy = m;
    if (c.rank() == 0) {
      same = m.ref() == copy.ref();
      other = m.ref() == m2.ref();
      owning_same = m == copy;
    }
    // A mesh_ref reads the mesh's shape and communicators.
    const auto r = m2.ref();
    CHECK(r.size(0) == 2);
    CHECK(r.coord(0) == c.rank());
    CHECK(&r.comm() == &m2.comm());
    CHECK(&r.axis_comm(0) == &m2.axis_comm(0));
  });
  CHECK(same);
  CHECK_FALSE(other);
  CHECK(owning_same);
}

TEST_CASE("mesh: group_comm refuses a mask of no axis or of axes outside the mesh (layout_error, not a read out of bounds)") {
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const auto r = m.ref();
    CHECK_THROWS_AS((void)r.group_comm(0u), sc::layout_error);
    for (unsigned mask : {0u, 4u, 5u, 0x80000000u}) {
      const std::string want = "group_comm: mask " + std::to_string(mask) + " on a 2-axis mesh";
      CHECK_THROWS_WITH_AS((void)m.group_comm(mask), doctest::Contains(want.c_str()), sc::layout_error);
    }
    // The masks that name axes: one axis is its communicator, both the mesh's, in order.
    CHECK(&m.group_comm(1u) == &m.axis_comm(0));
    CHECK(&m.group_comm(2u) == &m.axis_comm(1));
    CHECK(&m.group_comm(3u) == &m.comm());
    CHECK(m.group_comm(2u).size() == 2);
  });
}

TEST_CASE("a mesh lives while any of its handles or tensors does; handles are copied and dropped on several threads at once") {
  using S0R = sc::layout<sc::shard<0>, sc::replicate>;
  using RR = sc::layout<sc::replicate, sc::replicate>;
  st::failures bad;
  sc::host::run(4, [&](sc::host::communicator& c) {
    const std::array<std::int64_t, 2> e{6, 5};
    const auto g = st::make_global<float>(e[0] * e[1]);
    const std::string who = "rank " + std::to_string(c.rank()) + ": ";
    // The mesh handle that made x is gone: x keeps the mesh alive.
    auto x = [&] {
      auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
      auto copy = m;
      auto moved = std::move(copy);
      copy = moved;  // assigned back after the move
      sc::mesh<2> none;
      moved = none;  // drops a handle, takes none
      if (!(copy == m) || moved.state() != nullptr) bad.add(who + "a copied, moved or assigned handle is wrong");
      return sc::distribute<S0R>(copy, std::span<const float>(g), e);
    }();
    auto y = sc::redistribute<RR>(x);
    bad.add(c.rank(), st::check_against_reference(y, g));
    {
      const auto m = x.mesh();
      std::vector<std::thread> threads;
      for (int t = 0; t < 3; ++t)
        threads.emplace_back([m] {
          for (int i = 0; i < 20000; ++i) {
            auto copy = m;
            auto moved = std::move(copy);
            copy = moved;
          }
        });
      for (auto& t : threads) t.join();
      if (!(m == y.mesh())) bad.add(who + "the result is on another mesh");
    }
    x = decltype(x)();
    // y alone keeps the mesh alive now.
    bad.add(c.rank(), st::check_against_reference(sc::redistribute<S0R>(y), g));
  });
  bad.report();
}
