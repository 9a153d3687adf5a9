// End-to-end differential suite on the MPI communicator: distribute, redistribute and
// compare with the global tensor, on 1-, 2- and 3-axis meshes over every rank count.
#include <doctest/doctest.h>
#include <mpi.h>

#include <array>
#include <string>
#include <vector>

#include <shardcast/comm/mpi.hpp>
#include <shardcast/shardcast.hpp>

#include "common/differential.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
enum class mode { plain, into, given_up, mixed };

/// Runs layout pairs (every `stride`-th one, each op on its own slice) on `shape`; `into`:
/// through redistribute_into, into a view over guarded memory; `given_up`: with the input
/// given up (std::move), its storage owned alone, held by a copy, or viewed; `mixed`: given
/// up on even ranks and kept on odd ones.
template <class T, int N, std::size_t R, mode Mode = mode::plain>
std::size_t sweep(sc::mpi::communicator& c, const std::array<int, N>& shape, const std::vector<std::array<std::int64_t, R>>& extents,
                  std::size_t stride) {
  auto m = sc::make_mesh(c, shape);
  std::size_t cases = 0;
  st::for_each_layout_pair(N, static_cast<int>(R), stride, [&](const sc::runtime_layout& src, const sc::runtime_layout& dst) {
    for (const auto& e : extents) {
      std::string err;
      if constexpr (Mode == mode::into) err = st::differential_into_case<T>(m, src, dst, e);
      else if constexpr (Mode == mode::plain) err = st::differential_case<T>(m, src, dst, e);
      else if constexpr (Mode == mode::mixed) err = st::differential_mixed_give_up_case<T>(m, src, dst, e);
      else
        for (int keep = 0; keep < 3; ++keep) {  // (every rank runs all three: each is collective)
          std::string k = st::differential_given_up_case<T>(m, src, dst, e, keep);
          if (err.empty()) err = std::move(k);
        }
      ++cases;
      if (!err.empty()) FAIL_CHECK("rank " << c.rank() << ": " << err);
    }
  });
  return cases;
}

/// Factorisations of p into 2 or 3 axes (each axis >= 1), a few of each.
std::vector<std::array<int, 2>> shapes2(int p) {
  std::vector<std::array<int, 2>> v;
  for (int a = 1; a <= p; ++a)
    if (p % a == 0) v.push_back({a, p / a});
  return v;
}
std::vector<std::array<int, 3>> shapes3(int p) {
  std::vector<std::array<int, 3>> v;
  for (int a = 1; a <= p; ++a)
    for (int b = 1; b <= p / a; ++b)
      if (p % (a * b) == 0 && (a > 1) + (b > 1) + (p / (a * b) > 1) >= (p >= 4 ? 2 : p > 1 ? 1 : 0)) v.push_back({a, b, p / (a * b)});
  if (v.size() > 2) v.resize(2);
  return v;
}
}  // namespace

TEST_CASE_TEMPLATE("mpi: every layout pair on a 1-axis mesh matches the reference", T, float, std::int32_t, std::int64_t, double) {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = sweep<T, 1, 1>(c, {c.size()}, {{{7}}, {{2}}, {{0}}}, 1);
  n += sweep<T, 1, 2>(c, {c.size()}, {{{5, 3}}, {{2, 7}}}, 1);
  CHECK(n > 0);
}

TEST_CASE("mpi: layout pairs on 2-axis meshes match the reference") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = 0;
  for (auto s : shapes2(c.size())) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    n += sweep<float, 2, 2>(c, s, {{{5, 6}}, {{3, 1}}}, 1);
    n += sweep<std::int64_t, 2, 3>(c, s, {{{3, 4, 5}}}, 3);
  }
  CHECK(n > 0);
}

TEST_CASE("mpi: redistribute_into on 1- and 2-axis meshes matches the reference") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = sweep<std::int32_t, 1, 2, mode::into>(c, {c.size()}, {{{5, 3}}, {{2, 7}}}, 1);
  for (auto s : shapes2(c.size())) n += sweep<float, 2, 2, mode::into>(c, s, {{{5, 6}}, {{3, 1}}}, 2);
  CHECK(n > 0);
}

TEST_CASE("mpi: redistribute of a given-up tensor on 1- and 2-axis meshes matches the reference, in place for one all_reduce") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = sweep<std::int32_t, 1, 2, mode::given_up>(c, {c.size()}, {{{5, 3}}, {{2, 7}}}, 1);
  for (auto s : shapes2(c.size())) n += sweep<double, 2, 2, mode::given_up>(c, s, {{{5, 6}}, {{3, 1}}}, 2);
  CHECK(n > 0);
}

TEST_CASE("mpi: an input given up on some ranks and kept on others (in place and out of place in one all_reduce)") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = sweep<float, 1, 2, mode::mixed>(c, {c.size()}, {{{5, 3}}, {{2, 7}}}, 1);
  for (auto s : shapes2(c.size())) n += sweep<std::int64_t, 2, 2, mode::mixed>(c, s, {{{5, 6}}}, 2);
  CHECK(n > 0);
}

TEST_CASE("mpi: layout pairs on 3-axis meshes match the reference (deterministic sample)") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = 0;
  for (auto s : shapes3(c.size())) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CAPTURE(s[2]);
    n += sweep<std::int32_t, 3, 2>(c, s, {{{6, 5}}, {{1, 3}}}, 7);
    n += sweep<double, 3, 3>(c, s, {{{4, 3, 5}}}, 13);
  }
  CHECK(n > 0);
}

// Integer means over two or three partial<avg> axes truncate once (st::integer_mean_case),
// with MPI's collectives under the plan's steps.
TEST_CASE_TEMPLATE("mpi: integer means over several partial<avg> axes truncate once", T, std::int32_t, std::int64_t) {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  std::size_t n = 0;
  auto run = [&](const auto& shape, const std::array<std::int64_t, 2>& e) {
    n += st::integer_mean_sweep<T>(sc::make_mesh(c, shape), e, [&](const std::string& err) { FAIL_CHECK("rank " << c.rank() << ": " << err); });
  };
  for (auto s : shapes2(c.size())) run(s, {5, 7});
  for (auto s : shapes3(c.size())) run(s, {4, 3});
  CHECK(n > 0);
}

TEST_CASE("mpi: static layouts and to_global match the global tensor") {
  using namespace sc;
  mpi::communicator c(MPI_COMM_WORLD);
  const int p = c.size();
  auto m = make_mesh(c, std::array<int, 2>{p % 2 == 0 ? 2 : 1, p % 2 == 0 ? p / 2 : p});
  const std::array<std::int64_t, 2> ext{7, 5};
  const auto g = st::make_global<float>(35);
  auto x = distribute<layout<shard<0>, shard<1>>>(m, g, ext);
  auto y = redistribute<layout<partial<sum>, shard<0>>>(x);
  CHECK(st::check_against_reference(y, g) == "");
  // Terms that only a sum reduces to g (the redistribute's own terms are g and zeros,
  // which max would reduce to g as well), so to_global and the next redistribute must sum.
  st::spread_partial_terms(y, g);
  CHECK(to_global(y) == g);
  auto z = redistribute<layout<replicate, replicate>>(y);
  CHECK(to_global(z) == g);
  std::vector<float> local(z.local_size());
  std::copy(z.data(), z.data() + z.local_size(), local.begin());
  CHECK(local == g);
}
