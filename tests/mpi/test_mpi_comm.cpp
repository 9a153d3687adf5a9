// MPI communicator collectives against references computed from every rank's inputs.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <shardcast/comm/mpi.hpp>

#include "common/reduce_ops.hpp"

namespace sc = shardcast;

namespace {

sc::mpi::communicator world() { return sc::mpi::communicator(MPI_COMM_WORLD); }

/// Deterministic small input of rank r at index i.
template <class T>
T input(int r, std::size_t i) {
  return static_cast<T>((r * 5 + static_cast<int>(i) * 3) % 7 + 1);
}

template <class T>
T apply(T a, T b, sc::reduce_op op) {
  switch (op) {
    case sc::reduce_op::sum: case sc::reduce_op::avg: return static_cast<T>(a + b);
    case sc::reduce_op::prod: return static_cast<T>(a * b);
    case sc::reduce_op::max: return a > b ? a : b;
    case sc::reduce_op::min: return a < b ? a : b;
  }
  return a;
}

template <class T>
T reference(int nranks, std::size_t i, sc::reduce_op op) {
  T acc = input<T>(0, i);
  for (int r = 1; r < nranks; ++r) acc = apply(acc, input<T>(r, i), op);
  if (op == sc::reduce_op::avg) acc = static_cast<T>(acc / static_cast<T>(nranks));
  return acc;
}

}  // namespace

TEST_CASE_TEMPLATE("mpi all_reduce and reduce_scatter, every op", T, float, double, std::int32_t, std::int64_t,
                   std::uint32_t, std::uint64_t) {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const std::size_t n = 5;
  for (sc::reduce_op op : shardcast::testing::all_reduce_ops) {
    if (op == sc::reduce_op::avg && !std::is_floating_point_v<T>) continue;  // integer mean truncates
    CAPTURE(static_cast<int>(op));
    std::vector<T> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = input<T>(me, i);
    c.all_reduce(in.data(), out.data(), n, op);
    for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == reference<T>(p, i, op));
    c.all_reduce(in.data(), in.data(), n, op);  // in place
    CHECK(in == out);

    std::vector<T> big(n * static_cast<std::size_t>(p)), part(n);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = input<T>(me, i);
    c.reduce_scatter(big.data(), part.data(), n, op);
    for (std::size_t i = 0; i < n; ++i) CHECK(part[i] == reference<T>(p, static_cast<std::size_t>(me) * n + i, op));
    c.reduce_scatter(big.data(), big.data() + static_cast<std::size_t>(me) * n, n, op);  // in place
    for (std::size_t i = 0; i < n; ++i) CHECK(big[static_cast<std::size_t>(me) * n + i] == part[i]);
  }
}

// max and min of floating-point terms: a NaN on any rank wins, as on the host and p2p
// backends, whatever its rank and the element count (OpenMPI's MPI_MIN over {0, NaN, 2}
// gave 2 with 64 elements). Elements i: rank i % p holds NaN at even i, the others hold
// finite terms; odd i are all finite, and reduce to the plain max or min.
TEST_CASE_TEMPLATE("mpi max and min of float and double let a NaN win", T, float, double) {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
    for (sc::reduce_op op : {sc::reduce_op::max, sc::reduce_op::min}) {
      CAPTURE(n);
      CAPTURE(static_cast<int>(op));
      auto term = [&](int r, std::size_t i) { return i % 2 == 0 && static_cast<int>(i / 2 % static_cast<std::size_t>(p)) == r ? nan : input<T>(r, i); };
      std::vector<T> in(n), out(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = term(me, i);
      c.all_reduce(in.data(), out.data(), n, op);
      for (std::size_t i = 0; i < n; ++i) {
        if (i % 2 == 0) CHECK(out[i] != out[i]);
        else CHECK(out[i] == reference<T>(p, i, op));
      }
      std::vector<T> big(n * static_cast<std::size_t>(p)), part(n);
      for (std::size_t i = 0; i < big.size(); ++i) big[i] = term(me, i);
      c.reduce_scatter(big.data(), part.data(), n, op);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t g = static_cast<std::size_t>(me) * n + i;
        if (g % 2 == 0) CHECK(part[i] != part[i]);
        else CHECK(part[i] == reference<T>(p, g, op));
      }
    }
  }
}

// 8-bit sums wrap modulo 2^8 on every backend. OpenMPI's op/avx component (AVX-512
// machines) adds MPI_INT8_T and MPI_UINT8_T with saturation from 16 elements on, so the
// communicator sums them with an op of its own; 64 elements here, whose sums overflow.
TEST_CASE_TEMPLATE("mpi sum and avg of 8-bit integers wrap as on the host backend", T, std::int8_t, std::uint8_t) {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const std::size_t n = 64;
  auto in_at = [](int r, std::size_t i) { return static_cast<T>(100 + 37 * r + static_cast<int>(i)); };
  auto wrapped_sum = [&](std::size_t i) {
    unsigned acc = 0;
    for (int r = 0; r < p; ++r) acc += static_cast<unsigned char>(in_at(r, i));
    return static_cast<T>(static_cast<unsigned char>(acc));
  };
  for (sc::reduce_op op : {sc::reduce_op::sum, sc::reduce_op::avg}) {
    CAPTURE(static_cast<int>(op));
    auto want = [&](std::size_t i) { return op == sc::reduce_op::sum ? wrapped_sum(i) : static_cast<T>(wrapped_sum(i) / p); };
    std::vector<T> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = in_at(me, i);
    c.all_reduce(in.data(), out.data(), n, op);
    int wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += out[i] != want(i);
    CHECK(wrong == 0);
    std::vector<T> big(n * static_cast<std::size_t>(p)), part(n);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = in_at(me, i);
    c.reduce_scatter(big.data(), part.data(), n, op);
    wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += part[i] != want(static_cast<std::size_t>(me) * n + i);
    CHECK(wrong == 0);
  }
}

TEST_CASE("mpi all_reduce with some ranks in place and others not, in one call") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const std::size_t n = 7;
  for (int parity = 0; parity < 2; ++parity) {  // in place on even ranks, then on odd ones
    CAPTURE(parity);
    const bool inplace = me % 2 == parity;
    std::vector<std::int64_t> in(n), out(n, -1);
    for (std::size_t i = 0; i < n; ++i) in[i] = input<std::int64_t>(me, i);
    const std::vector<std::int64_t> before = in;
    std::int64_t* const dst = inplace ? in.data() : out.data();
    c.all_reduce(in.data(), dst, n, sc::reduce_op::sum);
    for (std::size_t i = 0; i < n; ++i) CHECK(dst[i] == reference<std::int64_t>(p, i, sc::reduce_op::sum));
    if (!inplace) CHECK(in == before);
  }
}

TEST_CASE_TEMPLATE("mpi all_gather, all_to_all, broadcast", T, float, std::int8_t, std::uint8_t, std::int64_t) {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const std::size_t n = 3, P = static_cast<std::size_t>(p);
  std::vector<T> in(n), all(n * P);
  for (std::size_t i = 0; i < n; ++i) in[i] = input<T>(me, i);
  c.all_gather(in.data(), all.data(), n);
  for (int r = 0; r < p; ++r)
    for (std::size_t i = 0; i < n; ++i) CHECK(all[static_cast<std::size_t>(r) * n + i] == input<T>(r, i));

  std::vector<T> s(n * P), r(n * P);
  // rank me sends to peer q the values input(me, q*n + i)
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = input<T>(me, i);
  c.all_to_all(s.data(), r.data(), n);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < n; ++i)
      CHECK(r[static_cast<std::size_t>(q) * n + i] == input<T>(q, static_cast<std::size_t>(me) * n + i));

  for (int root = 0; root < p; ++root) {
    std::vector<T> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = me == root ? input<T>(root, i) : T(0);
    c.broadcast(b.data(), n, root);
    for (std::size_t i = 0; i < n; ++i) CHECK(b[i] == input<T>(root, i));
  }
  c.barrier();
}

TEST_CASE("mpi all_to_allv with uneven counts, including empty ones") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  // rank a sends (a + b) % 3 elements to rank b, valued 1000*a + 10*b + i.
  auto cnt = [](int a, int b) { return static_cast<std::size_t>((a + b) % 3); };
  std::vector<std::size_t> sc_(p), sd(p), rc(p), rd(p);
  std::size_t st = 0, rt = 0;
  for (int q = 0; q < p; ++q) {
    sc_[q] = cnt(me, q); sd[q] = st; st += sc_[q];
    rc[q] = cnt(q, me); rd[q] = rt; rt += rc[q];
  }
  std::vector<std::int32_t> s(st + 1), r(rt + 1, -1);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < sc_[q]; ++i) s[sd[q] + i] = 1000 * me + 10 * q + static_cast<int>(i);
  c.all_to_allv(s.data(), sc_.data(), sd.data(), r.data(), rc.data(), rd.data());
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < rc[q]; ++i) CHECK(r[rd[q] + i] == 1000 * q + 10 * me + static_cast<int>(i));
}

TEST_CASE("mpi send and recv around a ring") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  if (p < 2) return;
  std::vector<double> out(4), in(4);
  for (std::size_t i = 0; i < 4; ++i) out[i] = input<double>(me, i);
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  if (me % 2 == 0) {
    c.send(out.data(), 4, next);
    c.recv(in.data(), 4, prev);
  } else {
    c.recv(in.data(), 4, prev);
    c.send(out.data(), 4, next);
  }
  for (std::size_t i = 0; i < 4; ++i) CHECK(in[i] == input<double>(prev, i));
}

TEST_CASE("mpi split: groups by color, ordered by key, null for negative color") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  // color = rank % 2, key reverses the order.
  auto g = c.split(me % 2, p - me);
  int members = 0;
  for (int r = 0; r < p; ++r) members += (r % 2 == me % 2);
  REQUIRE(g.size() == members);
  int higher = 0;  // same color and a larger world rank come first (smaller key)
  for (int r = me + 1; r < p; ++r) higher += (r % 2 == me % 2);
  CHECK(g.rank() == higher);
  std::int32_t v = me, s = 0;
  g.all_reduce(&v, &s, 1, sc::reduce_op::sum);
  std::int32_t ref = 0;
  for (int r = 0; r < p; ++r) if (r % 2 == me % 2) ref += r;
  CHECK(s == ref);
  auto sub = g.split(0, 0);  // split of a split
  CHECK(sub.size() == g.size());
  auto none = c.split(me == 0 ? -1 : 0, 0);
  CHECK(static_cast<bool>(none) == (me != 0));
  if (me == 0) CHECK_THROWS_WITH_AS(none.barrier(), doctest::Contains("shardcast::mpi: operation on a null communicator"), sc::comm_error);
  else CHECK(none.size() == p - 1);
}

// The overlap worker makes MPI calls from a second thread: overlap_context asks the
// communicator first, which refuses a thread level below MPI_THREAD_SERIALIZED.
TEST_CASE("mpi require_threads refuses thread levels below MPI_THREAD_SERIALIZED") {
  CHECK_THROWS_WITH_AS(sc::mpi::communicator::require_threads("who", MPI_THREAD_SINGLE),
                       doctest::Contains("who: MPI runs at thread level"), sc::comm_error);
  CHECK_THROWS_AS(sc::mpi::communicator::require_threads("who", MPI_THREAD_FUNNELED), sc::comm_error);
  CHECK_NOTHROW(sc::mpi::communicator::require_threads("who", MPI_THREAD_SERIALIZED));
  CHECK_NOTHROW(sc::mpi::communicator::require_threads("who", MPI_THREAD_MULTIPLE));
  int level = -1;
  MPI_Query_thread(&level);
  CHECK(sc::mpi::communicator::query_thread_level() == level);
}

TEST_CASE("mpi errors become comm_error with MPI's message") {
  auto c = world();
  auto g = c.split(0, c.rank());
  float x = 1;
  try {
    g.send(&x, 1, g.size() + 3);  // invalid peer
    FAIL("expected comm_error");
  } catch (const sc::comm_error& e) {
    // The call's name and MPI's own text for an invalid rank (MPI_ERR_RANK, which a
    // communicator with MPI_ERRORS_RETURN reports for a peer outside it).
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    REQUIRE(MPI_Error_string(MPI_ERR_RANK, text, &len) == MPI_SUCCESS);
    const std::string what = e.what(), mpi_text(text, static_cast<std::size_t>(len));
    CAPTURE(what);
    CAPTURE(mpi_text);
    CHECK(what.find("MPI_Send") != std::string::npos);
    CHECK(what.find(mpi_text) != std::string::npos);
  }
}

TEST_CASE("mpi check_calls: matching calls run as without it; a differing count throws on every rank before any data moves") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  const bool was = sc::mpi::check_calls;
  sc::mpi::check_calls = true;
  const std::size_t n = 6;
  std::vector<double> in(n), out(n), all(n * static_cast<std::size_t>(p));
  for (std::size_t i = 0; i < n; ++i) in[i] = input<double>(me, i);
  c.all_reduce(in.data(), out.data(), n, sc::reduce_op::max);
  for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == reference<double>(p, i, sc::reduce_op::max));
  c.all_gather(in.data(), all.data(), n);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == input<double>(static_cast<int>(i / n), i % n));
  std::vector<double> b(n, me == 0 ? 7.0 : 0.0);
  c.broadcast(b.data(), n, 0);
  CHECK(b == std::vector<double>(n, 7.0));
  if (p > 1) {
    // Rank 0 asks for one element more, and the last rank for another root: every rank throws.
    std::vector<double> x(n + 1, me == 0 ? 7.0 : 1.0);
    std::string what;
    try {
      c.broadcast(x.data(), me == 0 ? n + 1 : n, me == p - 1 ? 1 % p : 0);
    } catch (const sc::comm_error& e) {
      what = e.what();
    }
    CAPTURE(what);
    CHECK(what.find("the ranks' calls differ") != std::string::npos);
    CHECK(what.find("rank 0: broadcast(count=" + std::to_string(n + 1) + ", double, root=0)") != std::string::npos);
    CHECK(what.find("rank " + std::to_string(p - 1) + ": broadcast(count=" + std::to_string(n) + ", double, root=" + std::to_string(1 % p) + ")") !=
          std::string::npos);
    if (me != 0) CHECK(x == std::vector<double>(n + 1, 1.0));  // nothing was received from the root's 7s
  }
  // A barrier against an all_reduce is named too (before, it waited forever).
  if (p > 1) {
    std::string what;
    try {
      if (me == p - 1) c.barrier();
      else c.all_reduce(in.data(), out.data(), n, sc::reduce_op::sum);
    } catch (const sc::comm_error& e) {
      what = e.what();
    }
    CAPTURE(what);
    CHECK(what.find("rank " + std::to_string(p - 1) + ": barrier()") != std::string::npos);
  }
  c.barrier();
  sc::mpi::check_calls = was;
}
