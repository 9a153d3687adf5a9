// MPI counts are int; shardcast splits every collective into MPI calls of at most
// mpi::detail::max_count elements (INT_MAX in real use). Here the limit is lowered to a
// few elements, so the splitting runs with small buffers, and every result is compared
// with a reference computed from every rank's inputs.
#include <doctest/doctest.h>

#include <algorithm>
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

/// all_to_allv in which rank 0 sends `sent` elements to rank 1, which expects `expected`:
/// rank 1 throws comm_error containing `why`, the other ranks complete; then all meet.
void all_to_allv_count_mismatch(sc::mpi::communicator& c, std::size_t sent, std::size_t expected, const char* why) {
  const auto P = static_cast<std::size_t>(c.size());
  const int me = c.rank();
  std::vector<std::size_t> zero(P, 0), scount(P, 0), rcount(P, 0);
  if (me == 0) scount[1] = sent;
  if (me == 1) rcount[0] = expected;
  std::vector<int> s(std::max(sent, expected), 7), r(expected, 0);
  if (me == 1)
    CHECK_THROWS_WITH_AS(c.all_to_allv(s.data(), scount.data(), zero.data(), r.data(), rcount.data(), zero.data()),
                         doctest::Contains(why), sc::comm_error);
  else
    c.all_to_allv(s.data(), scount.data(), zero.data(), r.data(), rcount.data(), zero.data());
  c.barrier();
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

// sendrecv: ring shifts both ways and pairwise exchanges in which every rank sends and
// receives at once, with counts that differ by rank (so the two sides of one call split
// into different numbers of MPI messages), empty ones, and messages large enough for MPI's
// rendezvous protocol, where a send then a recv on every rank would wait for ever; then
// sendrecv against plain recv and send on the peers. Under the default limit and a lowered one.
TEST_CASE("sendrecv: ring shifts, pairwise exchanges and mixes with send/recv, chunked and not") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  static_assert(sc::has_sendrecv<sc::mpi::communicator>);
  for (std::size_t limit : {std::size_t{0}, std::size_t{3}}) {
    CAPTURE(limit);
    limit_guard g(limit ? limit : sc::mpi::detail::max_count);
    for (std::size_t base : {std::size_t{0}, std::size_t{5}, std::size_t{1} << 17}) {
      CAPTURE(base);
      if (limit && base > 1000) continue;  // (a few elements per message: keep the count of messages small)
      auto count_of = [&](int src) { return base ? base + static_cast<std::size_t>(src) % 3 : std::size_t{0}; };
      auto value = [](int src, std::size_t i) { return static_cast<std::int64_t>(src) * 1000003 + static_cast<std::int64_t>(i % 1009); };
      auto check_from = [&](const std::vector<std::int64_t>& got, int src) {
        bool ok = true;
        for (std::size_t i = 0; i < count_of(src); ++i) ok = ok && got[i] == value(src, i);
        CHECK(ok);
        CHECK(got[count_of(src)] == -2);  // nothing written past the message
      };
      std::vector<std::int64_t> s(count_of(me));
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = value(me, i);
      for (int shift : {1, -1}) {
        const int dest = (me + shift + p) % p, source = (me - shift + p) % p;
        std::vector<std::int64_t> d(count_of(source) + 1, -2);
        sc::sendrecv(c, s.data(), s.size(), dest, d.data(), count_of(source), source);
        check_from(d, source);
      }
      const int partner = (me ^ 1) < p ? (me ^ 1) : me;
      std::vector<std::int64_t> d(count_of(partner) + 1, -2);
      c.sendrecv(s.data(), s.size(), partner, d.data(), count_of(partner), partner);
      check_from(d, partner);
      if (p > 1) {  // shift by +1: even ranks (but the last of an odd ring) call sendrecv; the others recv, then send
        const int next = (me + 1) % p, prev = (me + p - 1) % p;
        std::vector<std::int64_t> e(count_of(prev) + 1, -2);
        if (me % 2 == 0 && me != p - 1) {
          c.sendrecv(s.data(), s.size(), next, e.data(), count_of(prev), prev);
        } else if (me % 2 == 0) {
          c.send(s.data(), s.size(), next);
          c.recv(e.data(), count_of(prev), prev);
        } else {
          c.recv(e.data(), count_of(prev), prev);
          c.send(s.data(), s.size(), next);
        }
        check_from(e, prev);
      }
    }
  }
  if (p < 2) return;
  // A receive half that expects more than its source sent.
  std::vector<int> a(5, 1), b(5, 0);
  if (me == 0) {
    c.sendrecv(a.data(), 3, 1, b.data(), 2, 1);
  } else if (me == 1) {
    CHECK_THROWS_WITH_AS(c.sendrecv(a.data(), 2, 0, b.data(), 5, 0),
                         doctest::Contains("rank 1 posted a receive of 5 elements from rank 0, which sent fewer"), sc::comm_error);
  }
  c.barrier();
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
  all_to_allv_count_mismatch(c, 2, 4, "rank 1 expected 4 elements from rank 0, which sent a different count");
}

// Above the limit a message travels in pieces, and a piece shorter than the limit ends it,
// so the receiver sees any count mismatch: a sender of fewer elements than a receive of
// several pieces expects (which left the receive waiting for pieces that never came), and
// one of more (whose surplus went to the next receive). Messages of exactly a multiple of
// the limit end with an empty piece.
TEST_CASE("chunked point-to-point messages: exact multiples of the limit arrive whole, every count mismatch throws") {
  auto c = world();
  const int p = c.size(), me = c.rank();
  if (p < 2) return;
  for (const std::size_t lim : {std::size_t{2}, std::size_t{3}}) {
    CAPTURE(lim);
    limit_guard g(lim);
    // Whole messages of 0, lim - 1, lim, 2 lim and 2 lim + 1 elements, by send/recv and by sendrecv.
    for (const std::size_t n : {std::size_t{0}, lim - 1, lim, 2 * lim, 2 * lim + 1}) {
      CAPTURE(n);
      std::vector<int> a(n), b(n, -1);
      for (std::size_t i = 0; i < n; ++i) a[i] = me * 100 + static_cast<int>(i);
      if (me == 0) c.send(a.data(), n, 1);
      if (me == 1) {
        c.recv(b.data(), n, 0);
        for (std::size_t i = 0; i < n; ++i) CHECK(b[i] == static_cast<int>(i));
      }
      if (me < 2) {
        std::fill(b.begin(), b.end(), -1);
        c.sendrecv(a.data(), n, 1 - me, b.data(), n, 1 - me);
        for (std::size_t i = 0; i < n; ++i) CHECK(b[i] == (1 - me) * 100 + static_cast<int>(i));
      }
      c.barrier();
    }
    // Fewer: rank 0 sends lim (two pieces: lim, then an empty one) or 1 element; rank 1 expects 2 lim + 1.
    for (const std::size_t sent : {lim, std::size_t{1}}) {
      std::vector<int> a(sent, 1), b(2 * lim + 1, 0);
      if (me == 0) c.send(a.data(), sent, 1);
      if (me == 1) CHECK_THROWS_WITH_AS(c.recv(b.data(), 2 * lim + 1, 0), doctest::Contains("which sent fewer"), sc::comm_error);
      if (me == 0) c.sendrecv(a.data(), sent, 1, b.data(), 0, 1);
      if (me == 1) {
        std::vector<int> none;
        CHECK_THROWS_WITH_AS(c.sendrecv(none.data(), 0, 0, b.data(), 2 * lim + 1, 0), doctest::Contains("which sent fewer"), sc::comm_error);
      }
      c.barrier();
    }
    // More: rank 0 sends 2 lim (lim, lim, empty); rank 1 expects lim, and the second piece does
    // not fit where the empty one belongs. Rank 1 then takes the empty piece left over.
    {
      std::vector<int> a(2 * lim, 1), b(2 * lim, 0);
      if (me == 0) c.send(a.data(), 2 * lim, 1);
      if (me == 1) {
        CHECK_THROWS_AS(c.recv(b.data(), lim, 0), sc::comm_error);
        c.recv(b.data(), 0, 0);  // the empty last piece: the channel is clean again
      }
      c.barrier();
    }
    // all_to_allv: rank 1 expects 2 lim + 1 elements from rank 0, which sends lim.
    all_to_allv_count_mismatch(c, lim, 2 * lim + 1, "which sent fewer");
  }
}
