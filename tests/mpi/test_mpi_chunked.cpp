// MPI counts are int; shardcast splits every collective into MPI calls of at most
// mpi::detail::max_count elements (INT_MAX in real use). Here the limit is lowered to a
// few elements, so the splitting runs with small buffers, and every result is compared
// with a reference computed from every rank's inputs.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include <shardcast/comm/mpi.hpp>
#include <shardcast/shardcast.hpp>

#include "common/differential.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
/// Lowers the per-call element limit for one test (the same on every rank).
struct limit_guard {
  std::size_t old;
  explicit limit_guard(std::size_t n) : old(sc::mpi::detail::max_count) { sc::mpi::detail::max_count = n; }
  ~limit_guard() { sc::mpi::detail::max_count = old; }
  limit_guard(const limit_guard&) = delete;
  limit_guard& operator=(const limit_guard&) = delete;
};

sc::mpi::communicator world() { return sc::mpi::communicator(MPI_COMM_WORLD); }

/// Small input of rank r at index i.
template <class T>
T input(int r, std::size_t i) {
  return static_cast<T>((r * 5 + static_cast<int>(i) * 3) % 7 + 1);
}

template <class T>
T reduced(int p, std::size_t i, sc::reduce_op op) {
  T acc = input<T>(0, i);
  for (int r = 1; r < p; ++r) acc = st::combine(acc, input<T>(r, i), op);
  if (op == sc::reduce_op::avg) acc = static_cast<T>(acc / static_cast<T>(p));
  return acc;
}
}  // namespace

TEST_CASE("chunked all_reduce, every op, in place and not") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  limit_guard g(5);
  const std::size_t n = 23;  // five calls: 5+5+5+5+3
  for (sc::reduce_op op : {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min, sc::reduce_op::prod}) {
    CAPTURE(static_cast<int>(op));
    std::vector<double> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = input<double>(me, i);
    c.all_reduce(in.data(), out.data(), n, op);
    for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == reduced<double>(p, i, op));
    c.all_reduce(in.data(), in.data(), n, op);
    CHECK(in == out);
  }
}

TEST_CASE("chunked all_gather and all_to_all, in place and not") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const auto P = static_cast<std::size_t>(p);
  limit_guard g(5);
  for (std::size_t n : {std::size_t{1}, std::size_t{4}, std::size_t{7}, std::size_t{12}}) {
    CAPTURE(n);
    std::vector<std::int32_t> in(n), all(n * P, -1);
    for (std::size_t i = 0; i < n; ++i) in[i] = input<std::int32_t>(me, i);
    c.all_gather(in.data(), all.data(), n);
    for (int r = 0; r < p; ++r)
      for (std::size_t i = 0; i < n; ++i) CHECK(all[static_cast<std::size_t>(r) * n + i] == input<std::int32_t>(r, i));
    std::vector<std::int32_t> inplace(n * P, -1);
    std::copy(in.begin(), in.end(), inplace.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * n));
    c.all_gather(inplace.data() + static_cast<std::size_t>(me) * n, inplace.data(), n);
    CHECK(inplace == all);

    std::vector<std::int64_t> s(n * P), r(n * P, -1);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = input<std::int64_t>(me, i);  // block q goes to rank q
    c.all_to_all(s.data(), r.data(), n);
    for (int q = 0; q < p; ++q)
      for (std::size_t i = 0; i < n; ++i)
        CHECK(r[static_cast<std::size_t>(q) * n + i] == input<std::int64_t>(q, static_cast<std::size_t>(me) * n + i));
  }
}

TEST_CASE("chunked reduce_scatter, in place and not") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const auto P = static_cast<std::size_t>(p);
  limit_guard g(5);
  for (std::size_t n : {std::size_t{2}, std::size_t{9}}) {
    for (sc::reduce_op op : {sc::reduce_op::sum, sc::reduce_op::max, sc::reduce_op::avg}) {
      CAPTURE(n);
      CAPTURE(static_cast<int>(op));
      std::vector<float> s(n * P), part(n, -1.0f);
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = input<float>(me, i);
      c.reduce_scatter(s.data(), part.data(), n, op);
      for (std::size_t i = 0; i < n; ++i) CHECK(part[i] == reduced<float>(p, static_cast<std::size_t>(me) * n + i, op));
      c.reduce_scatter(s.data(), s.data() + static_cast<std::size_t>(me) * n, n, op);
      for (std::size_t i = 0; i < n; ++i) CHECK(s[static_cast<std::size_t>(me) * n + i] == part[i]);
    }
  }
}

TEST_CASE("chunked broadcast, send and recv") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  limit_guard g(4);
  const std::size_t n = 13;
  for (int root = 0; root < p; ++root) {
    std::vector<std::uint8_t> b(n, 0);
    if (me == root)
      for (std::size_t i = 0; i < n; ++i) b[i] = input<std::uint8_t>(root, i);
    c.broadcast(b.data(), n, root);
    for (std::size_t i = 0; i < n; ++i) CHECK(b[i] == input<std::uint8_t>(root, i));
  }
  if (p < 2) return;
  std::vector<double> out(n), in(n, -1);
  for (std::size_t i = 0; i < n; ++i) out[i] = input<double>(me, i);
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  if (me % 2 == 0) {
    c.send(out.data(), n, next);
    c.recv(in.data(), n, prev);
  } else {
    c.recv(in.data(), n, prev);
    c.send(out.data(), n, next);
  }
  for (std::size_t i = 0; i < n; ++i) CHECK(in[i] == input<double>(prev, i));
}

TEST_CASE("all_to_allv with counts above the limit and empty ones") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  limit_guard g(2);
  // rank a sends (a + 2b) % 6 elements to rank b, valued 1000a + 10b + i.
  auto cnt = [](int a, int b) { return static_cast<std::size_t>((a + 2 * b) % 6); };
  std::vector<std::size_t> sc_(static_cast<std::size_t>(p)), sd(sc_.size()), rc(sc_.size()), rd(sc_.size());
  std::size_t stot = 0, rtot = 0;
  for (int q = 0; q < p; ++q) {
    const auto uq = static_cast<std::size_t>(q);
    sc_[uq] = cnt(me, q);
    sd[uq] = stot;
    stot += sc_[uq];
    rc[uq] = cnt(q, me);
    rd[uq] = rtot;
    rtot += rc[uq];
  }
  std::vector<std::int32_t> s(stot + 1), r(rtot + 1, -1);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < sc_[static_cast<std::size_t>(q)]; ++i) s[sd[static_cast<std::size_t>(q)] + i] = 1000 * me + 10 * q + static_cast<int>(i);
  c.all_to_allv(s.data(), sc_.data(), sd.data(), r.data(), rc.data(), rd.data());
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < rc[static_cast<std::size_t>(q)]; ++i) CHECK(r[rd[static_cast<std::size_t>(q)] + i] == 1000 * q + 10 * me + static_cast<int>(i));
  CHECK(r[rtot] == -1);  // nothing written past the last block
}

TEST_CASE("redistribute over chunked collectives matches the reference") {
  auto c = world();
  const int p = c.size();
  limit_guard g(3);
  auto m = sc::make_mesh(c, std::array<int, 2>{p % 2 == 0 ? 2 : 1, p % 2 == 0 ? p / 2 : p});
  const std::array<std::int64_t, 2> ext{7, 5};
  std::size_t cases = 0;
  for (sc::reduce_op op : {sc::reduce_op::sum, sc::reduce_op::max}) {
    const auto layouts = st::all_layouts(2, 2, op);
    for (std::size_t i = 0; i < layouts.size(); ++i)
      for (std::size_t j = 0; j < layouts.size(); ++j) {
        if ((i * layouts.size() + j) % 3 != 0) continue;  // a deterministic third of the pairs
        const std::string err = st::differential_case<std::int32_t>(m, layouts[i], layouts[j], ext);
        ++cases;
        if (!err.empty()) FAIL_CHECK("rank " << c.rank() << ": " << err);
      }
  }
  CHECK(cases > 0);
}

TEST_CASE("a receive that gets fewer elements than it expects throws comm_error on the receiver") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  if (p < 2) return;
  std::vector<int> buf(5, 0);
  if (me == 0) {
    c.send(buf.data(), 3, 1);  // small: completes without the receiver
  } else if (me == 1) {
    CHECK_THROWS_WITH_AS(c.recv(buf.data(), 5, 0), doctest::Contains("rank 1 posted a receive of 5 elements from rank 0, which sent fewer"),
                         sc::comm_error);
  }
  c.barrier();
  // all_to_allv: rank 1 expects 4 elements from rank 0, which sends 2.
  const auto P = static_cast<std::size_t>(p);
  std::vector<std::size_t> zero(P, 0), sc_(P, 0), rc(P, 0);
  if (me == 0) sc_[1] = 2;
  if (me == 1) rc[0] = 4;
  std::vector<int> s(4, 7), r(4, 0);
  if (me == 1)
    CHECK_THROWS_WITH_AS(c.all_to_allv(s.data(), sc_.data(), zero.data(), r.data(), rc.data(), zero.data()),
                         doctest::Contains("rank 1 expected 4 elements from rank 0, which sent a different count"), sc::comm_error);
  else
    c.all_to_allv(s.data(), sc_.data(), zero.data(), r.data(), rc.data(), zero.data());
  c.barrier();
}
