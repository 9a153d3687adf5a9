// Operators on the MPI communicator, one process per rank: matmul, an elementwise op and a
// reduction on partial inputs whose terms differ by rank, and the pipelined overlap
// operators (all_gather_matmul, matmul_reduce_scatter), whose communication worker thread
// makes the MPI calls (tests/mpi/mpi_main.cpp asks MPI for MPI_THREAD_SERIALIZED), with
// static and dynamic layouts; every result against a single-rank computation
// (tests/common/reference.hpp and loops here).
#include <doctest/doctest.h>
#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <shardcast/comm/mpi.hpp>
#include <shardcast/ops/matmul.hpp>
#include <shardcast/ops/overlap.hpp>
#include <shardcast/ops/reduce.hpp>
#include <shardcast/shardcast.hpp>

#include "common/differential.hpp"
#include "common/reference.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

// The thread level MPI provides (tests/mpi/mpi_main.cpp asks for MPI_THREAD_SERIALIZED).
extern int shardcast_test_mpi_thread_level;

namespace {
using i64 = std::int64_t;
using st::ref_gemm;
template <class T>
std::vector<T> ints(i64 n, int salt) {
  return st::small_ints<T>(n, salt);
}


/// A 2-axis mesh shape for p ranks: (2, p/2) when p is even, else (1, p).
std::array<int, 2> shape2(int p) { return p % 2 == 0 ? std::array<int, 2>{2, p / 2} : std::array<int, 2>{1, p}; }
}  // namespace

TEST_CASE("mpi: matmul, scale and sum over a dim on partial inputs match the global computation") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  auto m = sc::make_mesh(c, shape2(c.size()));
  const i64 M = 7, K = 5, N = 6;
  using T = i64;
  const auto ag = ints<T>(M * K, 1), bg = ints<T>(K * N, 3);
  const auto ref = ref_gemm(ag, bg, M, K, N);
  // A: rows split over axis 0, P(sum) over axis 1; B replicated: C = S(0),P(sum).
  auto a = sc::distribute<sc::layout<sc::shard<0>, sc::partial<sc::sum>>>(m, ag, std::array<i64, 2>{M, K});
  st::spread_partial_terms(a, ag);
  auto b = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, bg, std::array<i64, 2>{K, N});
  const auto cm = sc::matmul(a, b);
  static_assert(std::is_same_v<decltype(cm)::layout_type, sc::layout<sc::shard<0>, sc::partial<sc::sum>>>);
  CHECK(sc::to_global(cm) == ref);
  // scale is linear, so it applies to each term.
  const auto s = sc::scale(cm, T{3});
  std::vector<T> ref3(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) ref3[i] = 3 * ref[i];
  CHECK(sc::to_global(s) == ref3);
  // The sum over dim 0 of a tensor sharded on dim 0: P(sum) on that axis too.
  const auto r = sc::reduce<0, sc::sum>(cm);
  std::vector<T> col(static_cast<std::size_t>(N), T{});
  for (i64 i = 0; i < M; ++i)
    for (i64 j = 0; j < N; ++j) col[static_cast<std::size_t>(j)] += ref[static_cast<std::size_t>(i * N + j)];
  CHECK(sc::to_global(r) == col);
  // Dynamic layouts take the same path, checked at run time.
  auto ad = sc::distribute(m, sc::runtime_layout::parse("S(0),P(sum)"), ag, std::array<i64, 2>{M, K});
  st::spread_partial_terms(ad, ag);
  const auto cd = sc::matmul(ad, b);
  CHECK(cd.layout() == sc::runtime_layout::parse("S(0),P(sum)"));
  CHECK(sc::to_global(cd) == ref);
}

TEST_CASE("mpi: all_gather_matmul and matmul_reduce_scatter, pipelined on the worker thread, match the global GEMM") {
  if (shardcast_test_mpi_thread_level < MPI_THREAD_SERIALIZED) {
    MESSAGE("skipped: this MPI provides thread level " << shardcast_test_mpi_thread_level << ", below MPI_THREAD_SERIALIZED, which the worker needs");
    return;
  }
  sc::mpi::communicator c(MPI_COMM_WORLD);
  using T = double;
  using S0 = sc::shard<0>;
  using S1 = sc::shard<1>;
  using R = sc::replicate;
  for (const auto& [t, h, f] : {std::array<i64, 3>{11, 5, 7}, std::array<i64, 3>{2, 3, 2}}) {  // uneven; empty pieces
    CAPTURE(t);
    const auto xg = ints<T>(t * h, 1), w1g = ints<T>(h * f, 4), w2g = ints<T>(f * h, 2);
    const auto y_ref = ref_gemm(xg, w1g, t, h, f);
    const auto z_ref = ref_gemm(y_ref, w2g, t, f, h);
    // 1-axis mesh of every rank: the sequence-parallel block.
    {
      auto m = sc::make_mesh(c, std::array<int, 1>{c.size()});
      sc::overlap_context ctx(m);
      auto x = sc::distribute<sc::layout<S0>>(m, xg, std::array<i64, 2>{t, h});
      auto w1 = sc::distribute<sc::layout<S1>>(m, w1g, std::array<i64, 2>{h, f});
      auto w2 = sc::distribute<sc::layout<S0>>(m, w2g, std::array<i64, 2>{f, h});
      for (int chunks : {1, 2, 3}) {
        CAPTURE(chunks);
        const auto y = sc::all_gather_matmul<0>(ctx, x, w1, chunks);
        CHECK(sc::to_global(y) == y_ref);
        const auto z = sc::matmul_reduce_scatter<0>(ctx, y, w2, chunks);
        static_assert(std::is_same_v<decltype(z)::layout_type, sc::layout<S0>>);
        CHECK(sc::to_global(z) == z_ref);
      }
    }
    // 2-axis mesh, data parallel on axis 0, overlap on axis 1, dynamic layouts.
    {
      auto m = sc::make_mesh(c, shape2(c.size()));
      sc::overlap_context ctx(m);
      auto x = sc::distribute(m, sc::runtime_layout::parse("S(0),S(0)"), xg, std::array<i64, 2>{t, h});
      auto w1 = sc::distribute<sc::layout<R, S1>>(m, w1g, std::array<i64, 2>{h, f});
      auto w2 = sc::distribute(m, sc::runtime_layout::parse("R,S(0)"), w2g, std::array<i64, 2>{f, h});
      for (int chunks : {1, 2}) {
        CAPTURE(chunks);
        const auto y = sc::all_gather_matmul<1>(ctx, x, w1, chunks);
        CHECK(y.layout() == sc::runtime_layout::parse("S(0),S(1)"));
        CHECK(sc::to_global(y) == y_ref);
        const auto z = sc::matmul_reduce_scatter<1>(ctx, y, w2, chunks);
        CHECK(z.layout() == sc::runtime_layout::parse("S(0),S(0)"));
        CHECK(sc::to_global(z) == z_ref);
      }
    }
  }
}
