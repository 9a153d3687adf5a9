// Host backend collectives against a single-rank reference computed from every rank's input.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>
#include <shardcast/comm/counting.hpp>
#include <shardcast/comm/host.hpp>
#include <vector>

#include "common/reduce_ops.hpp"

namespace sc = shardcast;

namespace {
// Rank r's input element i: small integers, so every reduction is exact.
template <class T>
T input(int r, std::size_t i) {
  return static_cast<T>(1 + (static_cast<int>(i) * 7 + r * 3) % 5);
}

template <class T>
T reference_reduce(int n, std::size_t i, sc::reduce_op op) {
  T acc = input<T>(0, i);
  for (int r = 1; r < n; ++r) {
    T x = input<T>(r, i);
    switch (op) {
      case sc::reduce_op::sum: case sc::reduce_op::avg: acc = static_cast<T>(acc + x); break;
      case sc::reduce_op::prod: acc = static_cast<T>(acc * x); break;
      case sc::reduce_op::max: acc = x > acc ? x : acc; break;
      case sc::reduce_op::min: acc = x < acc ? x : acc; break;
    }
  }
  if (op == sc::reduce_op::avg) acc = static_cast<T>(acc / static_cast<T>(n));
  return acc;
}

// A broadcast of `count` elements from `root`, whose buffer holds input<T>(root, i + at)
// (the others hold junk), checked on every rank against that reference; the buffer is
// overwritten as soon as the call returns, as a caller may.
template <class T>
void broadcast_checked(sc::host::communicator& c, std::size_t count, int root, std::size_t at) {
  std::vector<T> b(count);
  for (std::size_t i = 0; i < count; ++i) b[i] = c.rank() == root ? input<T>(root, i + at) : T{-7};
  c.broadcast(b.data(), count, root);
  const std::vector<T> got = b;
  std::fill(b.begin(), b.end(), T{99});
  for (std::size_t i = 0; i < count; ++i) REQUIRE(got[i] == input<T>(root, i + at));
}
}  // namespace

TEST_CASE_TEMPLATE("host all_reduce matches the reference for every op", T, float, double, std::int32_t, std::int64_t) {
  for (int n : {1, 2, 3, 4, 7})
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{1000}})
      for (auto op : shardcast::testing::all_reduce_ops) {
        std::vector<std::vector<T>> out(static_cast<std::size_t>(n));
        sc::host::run(n, [&](sc::host::communicator& c) {
          std::vector<T> x(count);
          for (std::size_t i = 0; i < count; ++i) x[i] = input<T>(c.rank(), i);
          std::vector<T> y(count);
          if (c.rank() % 2) {
            c.all_reduce(x.data(), x.data(), count, op);  // in place on odd ranks
            y = x;
          } else {
            c.all_reduce(x.data(), y.data(), count, op);
          }
          out[static_cast<std::size_t>(c.rank())] = y;
        });
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < count; ++i) CHECK(out[static_cast<std::size_t>(r)][i] == reference_reduce<T>(n, i, op));
      }
}

// avg divides the sum by the number of ranks, which an int8 cannot hold from 128 ranks on
// (200 is -56) and a uint8 from 256 (256 is 0: a division by zero).
TEST_CASE("host all_reduce avg of 8-bit integers on 200 and 256 ranks divides by the rank count") {
  std::atomic<int> wrong{0};
  sc::host::run(200, [&](sc::host::communicator& c) {
    std::int8_t x[2] = {static_cast<std::int8_t>(c.rank() == 0 ? 100 : 0), static_cast<std::int8_t>(c.rank() < 100 ? -1 : 1)}, y[2] = {};
    c.all_reduce(x, y, 2, sc::reduce_op::avg);
    if (y[0] != 100 / 200 || y[1] != 0) ++wrong;  // trunc(100 / 200) and trunc(0 / 200)
  });
  sc::host::run(256, [&](sc::host::communicator& c) {
    std::uint8_t x = c.rank() == 0 ? 255 : 0, y = 1;
    c.all_reduce(&x, &y, 1, sc::reduce_op::avg);
    if (y != 0) ++wrong;
  });
  CHECK(wrong == 0);
}

TEST_CASE_TEMPLATE("host all_gather, reduce_scatter, all_to_all, broadcast", T, float, std::int64_t) {
  for (int n : {1, 2, 3, 5})
    for (std::size_t count : {std::size_t{0}, std::size_t{3}, std::size_t{64}}) {
      sc::host::run(n, [&](sc::host::communicator& c) {
        const int r = c.rank();
        const auto N = static_cast<std::size_t>(n);
        std::vector<T> x(count * N);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = input<T>(r, i);
        // all_gather of the first `count` elements.
        std::vector<T> g(count * N);
        c.all_gather(x.data(), g.data(), count);
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < count; ++i) REQUIRE(g[static_cast<std::size_t>(q) * count + i] == input<T>(q, i));
        // reduce_scatter: chunk r of the elementwise sum.
        std::vector<T> rs(count);
        c.reduce_scatter(x.data(), rs.data(), count, sc::reduce_op::sum);
        for (std::size_t i = 0; i < count; ++i) REQUIRE(rs[i] == reference_reduce<T>(n, static_cast<std::size_t>(r) * count + i, sc::reduce_op::sum));
        // all_to_all: chunk q of rank p lands at chunk p of rank q.
        std::vector<T> a(count * N);
        c.all_to_all(x.data(), a.data(), count);
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < count; ++i)
            REQUIRE(a[static_cast<std::size_t>(q) * count + i] == input<T>(q, static_cast<std::size_t>(r) * count + i));
        // broadcast from the last rank.
        std::vector<T> b = x;
        c.broadcast(b.data(), b.size(), n - 1);
        for (std::size_t i = 0; i < b.size(); ++i) REQUIRE(b[i] == input<T>(n - 1, i));
      });
    }
}

TEST_CASE("host all_to_allv with uneven counts, send/recv ring, split") {
  sc::host::run(4, [](sc::host::communicator& c) {
    const int n = c.size(), r = c.rank();
    // rank p sends p+q+1 elements valued 100p+q to rank q.
    std::vector<std::size_t> sc_(4), sd(4), rc(4), rd(4);
    std::size_t st = 0, rt = 0;
    for (int q = 0; q < n; ++q) {
      sc_[q] = static_cast<std::size_t>(r + q + 1); sd[q] = st; st += sc_[q];
      rc[q] = static_cast<std::size_t>(q + r + 1); rd[q] = rt; rt += rc[q];
    }
    std::vector<int> s(st), d(rt, -1);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < sc_[q]; ++i) s[sd[q] + i] = 100 * r + q;
    c.all_to_allv(s.data(), sc_.data(), sd.data(), d.data(), rc.data(), rd.data());
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < rc[q]; ++i) REQUIRE(d[rd[q] + i] == 100 * q + r);
    // ring: even ranks send first, odd ranks receive first.
    int token = r * 10, got = -1;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) { c.send(&token, 1, next); c.recv(&got, 1, prev); }
    else { c.recv(&got, 1, prev); c.send(&token, 1, next); }
    CHECK(got == prev * 10);
    // split into rows of a 2x2 grid, ordered by descending key.
    auto row = c.split(r / 2, -r);
    REQUIRE(row.size() == 2);
    CHECK(row.rank() == 1 - r % 2);
    int v = r, sum = 0;
    row.all_reduce(&v, &sum, 1, sc::reduce_op::sum);
    CHECK(sum == (r / 2) * 4 + 1);
    auto none = c.split(r == 0 ? -1 : 0, 0);
    CHECK(static_cast<bool>(none) == (r != 0));
    if (r == 0) {
      // The null communicator: size 0, and every call throws comm_error (as on MPI).
      CHECK(none.size() == 0);
      CHECK_THROWS_AS(none.barrier(), sc::comm_error);
      CHECK_THROWS_AS(none.all_reduce(&v, &sum, 1, sc::reduce_op::sum), sc::comm_error);
      CHECK_THROWS_AS(none.send(&v, 1, 0), sc::comm_error);
      CHECK_THROWS_AS(none.recv(&v, 1, 0), sc::comm_error);
      CHECK_THROWS_AS(none.sendrecv(&v, 1, 0, &sum, 1, 0), sc::comm_error);
      CHECK_THROWS_AS((void)none.split(0, 0), sc::comm_error);
      // Also where an argument check would fail first on a size of 0 (the root of a
      // broadcast, the aliasing of an all_to_all's buffers).
      int w[4] = {};
      std::size_t counts[1] = {1}, displs[1] = {0};
      CHECK_THROWS_AS(none.broadcast(&v, 1, 0), sc::comm_error);
      CHECK_THROWS_AS(none.all_to_all(w, w, 1), sc::comm_error);
      CHECK_THROWS_AS(none.all_to_all(w, w + 2, 1), sc::comm_error);
      CHECK_THROWS_AS(none.all_gather(&v, w, 1), sc::comm_error);
      CHECK_THROWS_AS(none.reduce_scatter(w, &v, 1, sc::reduce_op::sum), sc::comm_error);
      CHECK_THROWS_AS(none.all_to_allv(w, counts, displs, w + 2, counts, displs), sc::comm_error);
    } else {
      CHECK(none.size() == 3);
    }
    c.barrier();
  });
}

TEST_CASE("after a peer has failed, calls that would complete without meeting it throw comm_error too") {
  // The root of a small (queued) broadcast and the sender of a small (eager) message return
  // without waiting for anyone; entered after a failure, they throw like every collective.
  struct boom : std::runtime_error { using std::runtime_error::runtime_error; };
  std::atomic<int> released{0};
  std::mutex mu;
  std::vector<std::string> bad;
  CHECK_THROWS_AS(sc::host::run(3, [&](sc::host::communicator& c) {
    if (c.rank() == 2) throw boom("rank 2 exploded");
    try {
      c.barrier();  // released by the failure
    } catch (const sc::comm_error&) {
      ++released;
    }
    int v = 1;
    auto expect_comm_error = [&](const char* what, auto&& call) {
      std::string got;
      try {
        call();
        got = "returned normally";
      } catch (const sc::comm_error&) {
        return;
      } catch (const std::exception& e) {
        got = std::string("threw another exception: ") + e.what();
      }
      std::lock_guard lk(mu);
      bad.push_back(std::string(what) + " " + got + " on rank " + std::to_string(c.rank()));
    };
    expect_comm_error("small broadcast as root", [&] { c.broadcast(&v, 1, c.rank()); });
    expect_comm_error("small send", [&] { c.send(&v, 1, 1 - c.rank()); });
    expect_comm_error("recv", [&] { c.recv(&v, 1, 1 - c.rank()); });
  }), boom);
  CHECK(released == 2);
  for (auto& s : bad) FAIL_CHECK(s);
  CHECK(bad.empty());
}

TEST_CASE("a throwing rank releases its peers with comm_error and run rethrows the original") {
  std::atomic<int> comm_errors{0};
  struct boom : std::runtime_error { using std::runtime_error::runtime_error; };
  CHECK_THROWS_AS(sc::host::run(4, [&](sc::host::communicator& c) {
    if (c.rank() == 2) throw boom("rank 2 exploded");
    try {
      int x = 1, y = 0;
      c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
    } catch (const sc::comm_error&) {
      ++comm_errors;
      throw;
    }
  }), boom);
  CHECK(comm_errors == 3);
}

TEST_CASE("mismatched counts are reported on every rank") {
  std::atomic<int> seen{0};
  CHECK_THROWS_AS(sc::host::run(3, [&](sc::host::communicator& c) {
    std::vector<float> x(8), y(8);
    try {
      c.all_reduce(x.data(), y.data(), c.rank() == 1 ? 4 : 8, sc::reduce_op::sum);
    } catch (const sc::comm_error& e) {
      if (std::string(e.what()).find("count=4") != std::string::npos) ++seen;
      throw;
    }
  }), sc::comm_error);
  CHECK(seen == 3);
}

// Collectives up to SHARDCAST_HOST_EAGER_BYTES per rank are eager (each rank copies its
// input into a buffer of its own and the ranks meet once); larger ones read the peers'
// buffers and meet twice. This runs a random sequence of collectives whose counts lie on
// both sides of that limit, with a different rank late each round. As soon as a call
// returns, every rank overwrites its input, so a peer that still read it (an eager copy
// read too late, or a direct read after its owner returned) gives a wrong result.
TEST_CASE_TEMPLATE("host collectives on both sides of the eager limit, with late ranks and inputs reused at once", T, float, std::int64_t) {
  // The limit is the run's: SHARDCAST_HOST_EAGER_BYTES, or the larger
  // SHARDCAST_HOST_OVERSUBSCRIBED_EAGER_BYTES when the ranks outnumber the CPUs (on a
  // 2-CPU machine, the 3- and 4-rank runs). Where eager collectives are off, the same sizes
  // around 256 bytes.
  for (int n : {2, 3, 4, 6}) {
    const auto N = static_cast<std::size_t>(n);
    const std::size_t limit = sc::host::detail::eager_limit(n);
    CAPTURE(limit);
    const std::size_t E = (limit > 0 ? limit : 256) / sizeof(T), far = 1024 * 256 / sizeof(T);
    sc::host::run(n, [&](sc::host::communicator& c) {
      const int r = c.rank();
      std::mt19937 rng(1234);  // the same sequence on every rank
      for (int round = 0; round < 60; ++round) {
        const int kind = static_cast<int>(rng() % 6);
        const std::size_t per = kind == 2 || kind == 3 ? E / N : E;  // reduce_scatter, all_to_all: n chunks per rank
        // Just under, at, just over the limit; or 256 KiB per rank, far over it, so that a
        // direct read lasts long enough for a peer that returned too early to overwrite its input.
        const std::size_t count = (rng() % 4 == 0 ? (kind == 2 || kind == 3 ? far / N : far) : per - 1) + rng() % 3;
        const auto op = shardcast::testing::all_reduce_ops[rng() % 5];
        const int late = static_cast<int>(rng() % N);
        if (r == late) std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::vector<T> x(count * N);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = input<T>(r, i + static_cast<std::size_t>(round));
        auto in = [&](int q, std::size_t i) { return input<T>(q, i + static_cast<std::size_t>(round)); };
        auto reduced = [&](std::size_t i) {
          // reference_reduce over the inputs shifted by `round`
          return reference_reduce<T>(n, i + static_cast<std::size_t>(round), op);
        };
        // Expected outputs: f(i) for i < count, or f(q, i) for member q's chunk i.
        auto elems = [&](auto f) {
          std::vector<T> w(count);
          for (std::size_t i = 0; i < count; ++i) w[i] = f(i);
          return w;
        };
        auto chunks = [&](auto f) {
          std::vector<T> w(count * N);
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < count; ++i) w[static_cast<std::size_t>(q) * count + i] = f(q, i);
          return w;
        };
        CAPTURE(round);
        CAPTURE(kind);
        CAPTURE(count);
        if (kind == 0) {  // all_reduce, in place on odd ranks
          std::vector<T> y(count);
          T* out = r % 2 ? x.data() : y.data();
          c.all_reduce(x.data(), out, count, op);
          const std::vector<T> got(out, out + count);
          std::fill(x.begin(), x.end(), T{99});
          REQUIRE(got == elems(reduced));
        } else if (kind == 1) {  // all_gather
          std::vector<T> g(count * N);
          c.all_gather(x.data(), g.data(), count);
          std::fill(x.begin(), x.end(), T{99});
          REQUIRE(g == chunks(in));
        } else if (kind == 2) {  // reduce_scatter
          std::vector<T> y(count);
          c.reduce_scatter(x.data(), y.data(), count, op);
          std::fill(x.begin(), x.end(), T{99});
          REQUIRE(y == elems([&](std::size_t i) { return reduced(static_cast<std::size_t>(r) * count + i); }));
        } else if (kind == 3) {  // all_to_all
          std::vector<T> a(count * N);
          c.all_to_all(x.data(), a.data(), count);
          std::fill(x.begin(), x.end(), T{99});
          REQUIRE(a == chunks([&](int q, std::size_t i) { return in(q, static_cast<std::size_t>(r) * count + i); }));
        } else if (kind == 5) {  // all_to_allv: rank p sends base + (p + 2q) % 3 elements to rank q
          // Near the limit the ranks' totals differ, so some fit it and some do not.
          const std::size_t base = count / N;
          auto cnt = [&](int p, int q) { return base + static_cast<std::size_t>((p + 2 * q) % 3); };
          std::vector<std::size_t> scnt(N), sdis(N), rcnt(N), rdis(N);
          std::size_t st = 0, rt = 0;
          for (int q = 0; q < n; ++q) {
            const auto uq = static_cast<std::size_t>(q);
            scnt[uq] = cnt(r, q), sdis[uq] = st, st += scnt[uq];
            rcnt[uq] = cnt(q, r), rdis[uq] = rt, rt += rcnt[uq];
          }
          std::vector<T> sv(st), rv(rt);
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < scnt[static_cast<std::size_t>(q)]; ++i) sv[sdis[static_cast<std::size_t>(q)] + i] = in(r, 1000 * static_cast<std::size_t>(q) + i);
          c.all_to_allv(sv.data(), scnt.data(), sdis.data(), rv.data(), rcnt.data(), rdis.data());
          std::fill(sv.begin(), sv.end(), T{99});
          std::fill(scnt.begin(), scnt.end(), std::size_t{0});  // the counts are the caller's too
          std::vector<T> want(rt);
          for (int q = 0; q < n; ++q)
            for (std::size_t i = 0; i < rcnt[static_cast<std::size_t>(q)]; ++i) want[rdis[static_cast<std::size_t>(q)] + i] = in(q, 1000 * static_cast<std::size_t>(r) + i);
          REQUIRE(rv == want);
        } else {  // broadcast of `count` elements from rank round % n
          const int root = round % n;
          x.resize(count);
          c.broadcast(x.data(), count, root);
          const std::vector<T> got = x;
          std::fill(x.begin(), x.end(), T{99});
          REQUIRE(got == elems([&](std::size_t i) { return in(root, i); }));
        }
      }
      c.barrier();
    });
  }
}

TEST_CASE_TEMPLATE("host send/recv on both sides of the eager limit: in order, whole, with buffers reused at once", T, float, std::int64_t) {
  // Messages up to the eager limit may be copied into the channel before their recv is
  // posted; larger ones wait for it. Every message of a random sequence, sent round a ring
  // of 2-4 ranks with a late rank each round, must arrive whole, in order, although its
  // sender overwrites the buffer as soon as send returns.
  constexpr std::size_t E = (SHARDCAST_HOST_EAGER_BYTES > 0 ? SHARDCAST_HOST_EAGER_BYTES : 256) / sizeof(T);
  for (int n : {2, 3, 4}) {
    sc::host::run(n, [&](sc::host::communicator& c) {
      const int r = c.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
      std::mt19937 rng(99);  // the same sequence on every rank
      for (int round = 0; round < 80; ++round) {
        // Empty, just under, at, just over the limit, or far over it.
        const std::size_t pick = rng() % 5;
        const std::size_t count = pick == 0 ? 0 : pick == 4 ? 64 * E + rng() % 7 : E - 1 + rng() % 3;
        const int late = static_cast<int>(rng() % static_cast<unsigned>(n));
        const int burst = 1 + static_cast<int>(rng() % 3);  // messages per rank this round
        if (r == late) std::this_thread::sleep_for(std::chrono::microseconds(300));
        auto value = [&](int src, int m, std::size_t i) { return static_cast<T>(src * 100000 + round * 100 + m * 10 + static_cast<int>(i % 7)); };
        // Even ranks send their burst first, odd ranks receive first (a ring of blocking
        // sends cannot close otherwise); a burst of eager messages also exercises a send
        // that waits for the previous one to be taken.
        auto send_all = [&] {
          for (int m = 0; m < burst; ++m) {
            std::vector<T> s(count);
            for (std::size_t i = 0; i < count; ++i) s[i] = value(r, m, i);
            c.send(s.data(), count, next);
            std::fill(s.begin(), s.end(), T{-1});
          }
        };
        auto recv_all = [&] {
          for (int m = 0; m < burst; ++m) {
            if (r == late && m == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
            std::vector<T> d(count, T{-2});
            c.recv(d.data(), count, prev);
            for (std::size_t i = 0; i < count; ++i) REQUIRE(d[i] == value(prev, m, i));
          }
        };
        if (r % 2 == 0) {
          send_all();
          recv_all();
        } else {
          recv_all();
          send_all();
        }
      }
      c.barrier();
    });
  }
}

// sendrecv posts its send before it receives, so a ring shift in which every rank sends
// and receives at once completes at any size; with send then recv on every rank it would
// wait for ever above the eager limit. Each round of a random sequence shifts one way or
// the other, exchanges pairwise, or mixes sendrecv on some ranks with send and recv on
// their peers, with sizes on both sides of the eager limit, a late rank and buffers
// overwritten as soon as the call returns; every message must arrive whole and in order.
TEST_CASE_TEMPLATE("host sendrecv: ring shifts, pairwise exchanges and mixes with send/recv, on both sides of the eager limit", T, float,
                   std::int64_t) {
  constexpr std::size_t E = (SHARDCAST_HOST_EAGER_BYTES > 0 ? SHARDCAST_HOST_EAGER_BYTES : 256) / sizeof(T);
  for (int n : {1, 2, 3, 4, 5}) {
    sc::host::run(n, [&](sc::host::communicator& c) {
      const int r = c.rank();
      std::mt19937 rng(7);  // the same sequence on every rank
      for (int round = 0; round < 60; ++round) {
        const int kind = static_cast<int>(rng() % 4);
        // The count rank `src` sends this round: empty, around the limit, or far over it
        // (differing by rank, so a message taken from the wrong peer shows).
        const std::size_t pick = rng() % 4, extra = rng() % 7;
        auto count_of = [&](int src) -> std::size_t {
          return pick == 0 ? 0 : pick == 3 ? 16 * E + extra + static_cast<std::size_t>(src) : E - 1 + (extra + static_cast<std::size_t>(src)) % 3;
        };
        const int late = static_cast<int>(rng() % static_cast<unsigned>(n));
        auto value = [&](int src, std::size_t i) { return static_cast<T>(src * 100000 + round * 100 + static_cast<int>(i % 97)); };
        auto payload = [&](int src) {
          std::vector<T> v(count_of(src));
          for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(src, i);
          return v;
        };
        auto check_from = [&](const std::vector<T>& got, int src) {
          REQUIRE(got.size() == count_of(src));
          for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == value(src, i));
        };
        if (r == late) std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::vector<T> s = payload(r);
        if (kind == 0 || kind == 1) {  // shift by +1 or -1 (on 1 rank: to itself)
          const int dest = kind == 0 ? (r + 1) % n : (r + n - 1) % n, source = kind == 0 ? (r + n - 1) % n : (r + 1) % n;
          std::vector<T> d(count_of(source), T{-2});
          sc::sendrecv(c, s.data(), s.size(), dest, d.data(), d.size(), source);
          std::fill(s.begin(), s.end(), T{-1});
          check_from(d, source);
        } else if (kind == 2) {  // pairwise exchange: r with r ^ 1 (the last rank of an odd group with itself)
          const int partner = (r ^ 1) < n ? (r ^ 1) : r;
          std::vector<T> d(count_of(partner), T{-2});
          c.sendrecv(s.data(), s.size(), partner, d.data(), d.size(), partner);
          std::fill(s.begin(), s.end(), T{-1});
          check_from(d, partner);
        } else if (n > 1) {  // shift by +1: even ranks call sendrecv; odd ranks recv, then send
          const int next = (r + 1) % n, prev = (r + n - 1) % n;
          std::vector<T> d(count_of(prev), T{-2});
          if (r % 2 == 0 && r != n - 1) {
            c.sendrecv(s.data(), s.size(), next, d.data(), d.size(), prev);
          } else if (r % 2 == 0) {  // the last rank of an odd ring sends to rank 0, which calls sendrecv
            c.send(s.data(), s.size(), next);
            c.recv(d.data(), d.size(), prev);
          } else {
            c.recv(d.data(), d.size(), prev);
            c.send(s.data(), s.size(), next);
          }
          std::fill(s.begin(), s.end(), T{-1});
          check_from(d, prev);
        }
      }
      c.barrier();
    });
  }
}

TEST_CASE("host sendrecv: mismatched sizes, a message to itself without its receive, and a failed peer throw instead of hanging") {
  constexpr std::size_t big = 4096;  // over the eager limit
  for (std::size_t count : {std::size_t{3}, big}) {
    CAPTURE(count);
    // The receive of rank 1 asks for one element too many: it throws naming sendrecv; for a
    // larger message its sender learns it too.
    std::atomic<int> named{0};
    CHECK_THROWS_AS(sc::host::run(2, [&](sc::host::communicator& c) {
      std::vector<float> s(count, 1.f), d(count + 1);
      const std::size_t want = c.rank() == 1 ? count + 1 : count;
      try {
        c.sendrecv(s.data(), count, 1 - c.rank(), d.data(), want, 1 - c.rank());
      } catch (const sc::comm_error& e) {
        if (std::string(e.what()).find("sendrecv") != std::string::npos) ++named;
        throw;
      }
    }), sc::comm_error);
    CHECK(named >= 1);
    // Rank 2 fails before its send: its receiver and everyone else get comm_error, and the
    // buffers of the others' larger messages are never read after their calls have thrown
    // (they are freed at once; AddressSanitizer builds would see a late read).
    struct boom : std::runtime_error { using std::runtime_error::runtime_error; };
    std::atomic<int> released{0};
    CHECK_THROWS_AS(sc::host::run(3, [&](sc::host::communicator& c) {
      if (c.rank() == 2) throw boom("rank 2 exploded");
      try {
        auto s = std::make_unique<float[]>(count);
        std::vector<float> d(count);
        std::fill(s.get(), s.get() + count, 1.f);
        for (int i = 0; i < 3; ++i) c.sendrecv(s.get(), count, (c.rank() + 1) % 3, d.data(), count, (c.rank() + 2) % 3);
      } catch (const sc::comm_error&) {
        ++released;
        throw;
      }
    }), boom);
    CHECK(released == 2);
  }
  // To itself: the counts must agree, and a message to itself needs its receive from itself.
  sc::host::run(2, [](sc::host::communicator& c) {
    float a[3] = {1, 2, 3}, b[3] = {};
    c.sendrecv(a, 3, c.rank(), b, 3, c.rank());
    CHECK(b[2] == 3.f);
    CHECK_THROWS_WITH_AS(c.sendrecv(a, 3, c.rank(), b, 2, c.rank()), doctest::Contains("sendrecv"), sc::comm_error);
    CHECK_THROWS_WITH_AS(c.sendrecv(a, 3, c.rank(), b, 3, 1 - c.rank()), doctest::Contains("needs its receive from itself"), sc::layout_error);
    CHECK_THROWS_WITH_AS(c.sendrecv(a, 3, 2, b, 3, 1 - c.rank()), doctest::Contains("is not a rank of this communicator"), sc::layout_error);
    c.barrier();
  });
}

// A larger message withdrawn by a sendrecv whose receive half failed is dropped from its
// channel: the peer's receive of it throws, naming the sender, and once both ranks have
// caught their exceptions the next messages on the same channel go through.
TEST_CASE("host sendrecv: a withdrawn message is dropped, and the channel carries the next one") {
  constexpr std::size_t big = 4096;  // over the eager limit
  std::atomic<bool> withdrawn{false};
  std::atomic<int> wrong{0}, caught{0};
  sc::host::run(2, [&](sc::host::communicator& c) {
    std::vector<float> s(big, 2.f), d(big + 5, 0.f);
    if (c.rank() == 0) {
      try {  // sends `big` to rank 1, whose 3-element message does not fit the receive of 5
        c.sendrecv(s.data(), big, 1, d.data(), 5, 1);
        ++wrong;
      } catch (const sc::comm_error&) {
        ++caught;
      }
      withdrawn = true;
      std::vector<float> next(7);
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = static_cast<float>(i + 1);
      c.send(next.data(), next.size(), 1);
      c.recv(d.data(), 2, 1);
      if (d[0] != 8.f || d[1] != 9.f) ++wrong;
    } else {
      try {
        c.send(s.data(), 3, 0);
      } catch (const sc::comm_error&) {  // without eager messages the send learns of the mismatch too
        if (SHARDCAST_HOST_EAGER_BYTES >= 3 * sizeof(float)) ++wrong;
      }
      while (!withdrawn) std::this_thread::yield();
      try {
        c.recv(d.data(), big, 0);
        ++wrong;
      } catch (const sc::comm_error& e) {
        if (std::string(e.what()).find("rank 0 withdrew its message") != std::string::npos) ++caught;
      }
      std::vector<float> next(7, 0.f);
      c.recv(next.data(), next.size(), 0);  // the message after the withdrawn one
      for (std::size_t i = 0; i < next.size(); ++i)
        if (next[i] != static_cast<float>(i + 1)) ++wrong;
      const float back[2] = {8.f, 9.f};
      c.send(back, 2, 0);
    }
  });
  CHECK(caught == 2);
  CHECK(wrong == 0);
}

// sendrecv completes on full channels: each rank first fills its channel to the other with
// SHARDCAST_HOST_SEND_DEPTH eager sends (which return at once), then both call sendrecv
// with each other, with an eager message. Its receive takes the peer's first message, and
// only then has the channel room for the send (MPI_Sendrecv completes here too). (With a
// message over the eager limit each send would wait for a receive that the peer posts only
// after its sendrecv, as a standard-mode MPI send may.) And the other way round: rank 0
// calls sendrecv on a full channel while rank 1 receives all of rank 0's messages, the
// sendrecv's one included, before it sends, so there the send must go first.
TEST_CASE("host sendrecv completes on full channels, whichever of its halves can go first") {
  std::atomic<int> wrong{0}, done{0};
  // (Without eager messages, SHARDCAST_HOST_EAGER_BYTES=0, every send waits for its receive
  // and the channels never fill: the first half does not apply.)
  if (SHARDCAST_HOST_EAGER_BYTES < sizeof(int)) MESSAGE("no eager messages in this build: the full-channel exchange is skipped");
  else CHECK_NOTHROW(sc::host::run(2, [&](sc::host::communicator& c) {
    const int peer = 1 - c.rank();
    for (int m = 0; m < SHARDCAST_HOST_SEND_DEPTH; ++m) c.send(&m, 1, peer);
    int s = 100 + c.rank(), d = -1;
    c.sendrecv(&s, 1, peer, &d, 1, peer);  // receives the peer's first message, 0
    if (d != 0) ++wrong;
    for (int m = 1; m <= SHARDCAST_HOST_SEND_DEPTH; ++m) {
      int v = -1;
      c.recv(&v, 1, peer);
      if (v != (m < SHARDCAST_HOST_SEND_DEPTH ? m : 100 + peer)) ++wrong;
    }
    ++done;
  }, sc::host::options{std::chrono::milliseconds(5000)}));
  CHECK(wrong == 0);
  CHECK(done == (SHARDCAST_HOST_EAGER_BYTES < sizeof(int) ? 0 : 2));

  for (const std::size_t count : {std::size_t{1}, std::size_t{4096}}) {  // the sendrecv's message: eager, or over the limit
    CAPTURE(count);
    wrong = 0;
    done = 0;
    CHECK_NOTHROW(sc::host::run(2, [&](sc::host::communicator& c) {
      std::vector<int> s(count, 7), d(count, -1);
      if (c.rank() == 0) {
        for (int m = 0; m < SHARDCAST_HOST_SEND_DEPTH; ++m) c.send(&m, 1, 1);
        c.sendrecv(s.data(), count, 1, d.data(), count, 1);
        if (d != std::vector<int>(count, 9)) ++wrong;
      } else {
        for (int m = 0; m < SHARDCAST_HOST_SEND_DEPTH; ++m) {
          int v = -1;
          c.recv(&v, 1, 0);
          if (v != m) ++wrong;
        }
        c.recv(d.data(), count, 0);
        if (d != std::vector<int>(count, 7)) ++wrong;
        std::vector<int> nine(count, 9);
        c.send(nine.data(), count, 0);
      }
      ++done;
    }, sc::host::options{std::chrono::milliseconds(5000)}));
    CHECK(wrong == 0);
    CHECK(done == 2);
  }
}

TEST_CASE("counting_communicator has sendrecv when its backend does, and counts what it sends to others") {
  static_assert(sc::has_sendrecv<sc::host::communicator>);
  static_assert(sc::has_sendrecv<sc::counting_communicator<sc::host::communicator>>);
  sc::host::run(3, [](sc::host::communicator& h) {
    sc::counting_communicator<sc::host::communicator> c(h);
    const int r = c.rank();
    std::vector<std::int32_t> s(static_cast<std::size_t>(5 + r), r), d(static_cast<std::size_t>(5 + (r + 2) % 3));
    c.sendrecv(s.data(), s.size(), (r + 1) % 3, d.data(), d.size(), (r + 2) % 3);
    for (auto v : d) REQUIRE(v == (r + 2) % 3);
    CHECK(c.bytes() == static_cast<double>((5 + r) * 4));
    CHECK(c.collectives() == 1);
    std::vector<std::int32_t> e(s.size());
    c.sendrecv(s.data(), s.size(), r, e.data(), e.size(), r);  // to itself: nothing sent to others
    CHECK(e == s);
    CHECK(c.bytes() == static_cast<double>((5 + r) * 4));
  });
}

TEST_CASE("a small message sent before its recv is posted is taken from the channel; one that nobody receives is reported") {
  // Rank 0 sends three small messages and only then does rank 1 receive them: with eager
  // sends, the first is waiting in the channel and the next two follow as it is taken.
  sc::host::run(2, [](sc::host::communicator& c) {
    if (c.rank() == 0) {
      for (int m = 0; m < 3; ++m) {
        int v = 7 + m;
        c.send(&v, 1, 1);
        v = -1;
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int m = 0; m < 3; ++m) {
        int v = 0;
        c.recv(&v, 1, 0);
        CHECK(v == 7 + m);
      }
    }
    c.barrier();
  });
  if (SHARDCAST_HOST_EAGER_BYTES >= sizeof(double) * 3) {
    // An eager send returns without its recv; run() then names the message nobody took,
    // in the world's group and in one made by split.
    for (bool split : {false, true}) {
      std::string what;
      try {
        sc::host::run(3, [&](sc::host::communicator& c) {
          auto g = split ? c.split(c.rank() == 2 ? -1 : 0, 0) : c;
          if (g && g.rank() == 1) {
            const double d[3] = {1, 2, 3};
            g.send(d, 3, 0);
          }
        });
      } catch (const sc::comm_error& e) {
        what = e.what();
      }
      CHECK(what.find("rank 1 sent 3 double to rank 0") != std::string::npos);
      CHECK(what.find("never received") != std::string::npos);
    }
  } else {
    // Without eager messages (SHARDCAST_HOST_EAGER_BYTES=0) the send waits for its recv
    // instead: a send nobody receives ends in the timeout, naming send, while its receiver
    // is busy elsewhere, and at once, naming the receiver, once that has returned.
    std::string what;
    std::atomic<bool> timed_out{false};
    try {
      sc::host::run(2, [&](sc::host::communicator& c) {
        if (c.rank() == 1) {
          const double d[3] = {1, 2, 3};
          try {
            c.send(d, 3, 0);
          } catch (...) {
            timed_out = true;
            throw;
          }
        } else {
          while (!timed_out) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }, sc::host::options{std::chrono::milliseconds(300)});
    } catch (const sc::comm_error& e) {
      what = e.what();
    }
    CHECK_MESSAGE(what.find("send timed out") != std::string::npos, what);
    what.clear();
    try {
      sc::host::run(2, [&](sc::host::communicator& c) {
        if (c.rank() == 1) {
          const double d[3] = {1, 2, 3};
          c.send(d, 3, 0);
        }
      }, sc::host::options{std::chrono::milliseconds(20000)});
    } catch (const sc::comm_error& e) {
      what = e.what();
    }
    CHECK_MESSAGE(what.find("send abandoned: rank 0 returned from its function after receiving 0 of the 1 messages") != std::string::npos, what);
  }
}

TEST_CASE("small sends run ahead of their receives up to the channel's depth, and wait beyond it") {
  constexpr int depth = SHARDCAST_HOST_SEND_DEPTH;
  // Without eager messages (SHARDCAST_HOST_EAGER_BYTES=0) no send runs ahead: the first
  // one already waits for its receive.
  constexpr int ahead = SHARDCAST_HOST_EAGER_BYTES >= sizeof(int) ? depth : 0;
  std::atomic<int> returned{0};  // sends rank 0 has returned from
  sc::host::run(2, [&](sc::host::communicator& c) {
    if (c.rank() == 0) {
      for (int m = 0; m <= depth; ++m) {  // one more than the channel holds
        int v = 1000 + m;
        c.send(&v, 1, 1);
        v = -1;
        returned.store(m + 1);
      }
    } else {
      // Wait until the channel is full, then give the sender time to (wrongly) go on.
      const auto t0 = std::chrono::steady_clock::now();
      while (returned.load() < ahead && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) std::this_thread::yield();
      CHECK(returned.load() == ahead);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      CHECK(returned.load() == ahead);  // the send beyond the depth waits for a receive
      for (int m = 0; m <= depth; ++m) {
        int v = 0;
        c.recv(&v, 1, 0);
        CHECK(v == 1000 + m);
      }
    }
    c.barrier();
  });
  CHECK(returned.load() == depth + 1);
}

TEST_CASE_TEMPLATE("host broadcasts in a row from changing roots, with buffers reused at once", T, float, std::int64_t) {
  // A random sequence of broadcasts (random roots and sizes on both sides of the eager
  // limit) with a barrier or an all_reduce now and then, a late rank each round, and every
  // buffer overwritten (the root's too) as soon as a call returns.
  constexpr std::size_t E = (SHARDCAST_HOST_EAGER_BYTES > 0 ? SHARDCAST_HOST_EAGER_BYTES : 256) / sizeof(T);
  for (int n : {2, 3, 5}) {
    sc::host::run(n, [&](sc::host::communicator& c) {
      const int r = c.rank();
      std::mt19937 rng(4321);  // the same sequence on every rank
      for (int round = 0; round < 300; ++round) {
        const unsigned what = rng() % 10;
        const int late = static_cast<int>(rng() % static_cast<unsigned>(n));
        const std::size_t pick = rng() % 4;
        const std::size_t count = pick == 0 ? 1 : pick == 3 ? 64 * E : E - 1 + rng() % 3;
        const int root = static_cast<int>(rng() % static_cast<unsigned>(n));
        if (r == late && round % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (what == 0) {
          c.barrier();
        } else if (what == 1) {
          T x = static_cast<T>(r + round), y{};
          c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
          REQUIRE(y == static_cast<T>(n * (n - 1) / 2 + n * round));
        } else {
          broadcast_checked<T>(c, count, root, static_cast<std::size_t>(round));
        }
      }
      c.barrier();
    });
  }
}

TEST_CASE_TEMPLATE("host small broadcasts run ahead of slow ranks, beyond the depth of the group's queue", T, float, std::int64_t) {
  // Broadcasts of at most the eager limit go through a queue of SHARDCAST_HOST_BCAST_DEPTH
  // entries: a root returns at once unless the entry it needs still holds a broadcast some
  // rank has not taken. Runs of 4x the depth, roots changing every 7 broadcasts, a slow rank
  // now and then (so that roots fill the queue and wait), an all_reduce every 23, and a
  // split group running its own broadcasts in between.
  constexpr std::size_t E = (SHARDCAST_HOST_EAGER_BYTES > 0 ? SHARDCAST_HOST_EAGER_BYTES : 256) / sizeof(T);
  constexpr int runs = 4 * (SHARDCAST_HOST_BCAST_DEPTH > 0 ? SHARDCAST_HOST_BCAST_DEPTH : 4) + 5;
  for (int n : {2, 3, 4}) {
    sc::host::run(n, [&](sc::host::communicator& c) {
      const int r = c.rank();
      auto half = c.split(r % 2, r);
      std::mt19937 rng(777);  // the same sequence on every rank
      for (int k = 0; k < runs; ++k) {
        const std::size_t count = 1 + rng() % E;
        const int root = (k / 7) % n;
        const int slow = static_cast<int>(rng() % static_cast<unsigned>(n));
        if (r == slow && k % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        broadcast_checked<T>(c, count, root, static_cast<std::size_t>(k));
        if (k % 11 == 3) {  // the sub-group's own broadcast, from its last rank
          T v = half.rank() == half.size() - 1 ? static_cast<T>(1000 + k + r % 2) : T{-1};
          half.broadcast(&v, 1, half.size() - 1);
          REQUIRE(v == static_cast<T>(1000 + k + r % 2));
        }
        if (k % 23 == 22) {
          T x = static_cast<T>(r + k), y{};
          c.all_reduce(&x, &y, 1, sc::reduce_op::sum);
          REQUIRE(y == static_cast<T>(n * (n - 1) / 2 + n * k));
        }
      }
      c.barrier();
    });
  }
}

TEST_CASE("broadcasts on different sides of the eager limit (another count or type) name both calls on every waiting rank, at once") {
  // The root of a broadcast within the eager limit queues its data and returns; a rank whose
  // call (another count, or another type of the same count) is over the limit meets its
  // peers at the slots. Each side finds the other's record: every rank that waits throws
  // comm_error naming the root's call and its own, long before the timeout. A queued root
  // has returned already, and a rank whose call matches it takes its data and returns.
  struct call {
    std::size_t count;
    bool dbl;  // double, else float
  };
  const auto text = [](call k) { return "count=" + std::to_string(k.count) + ", " + (k.dbl ? "double" : "float"); };
  for (int n : {2, 3}) {
    const std::size_t limit = sc::host::detail::eager_limit(n);
    const bool queues = SHARDCAST_HOST_BCAST_DEPTH > 0 && limit > 0;
    const auto queued = [&](call k) { return queues && k.count * (k.dbl ? sizeof(double) : sizeof(float)) <= limit; };
    const std::size_t small = 1, large = limit / sizeof(float) + 1, same = std::max<std::size_t>(1, limit / sizeof(float));
    // Each case: the root's (rank 0's) call, rank 1's, and rank 2's.
    const std::vector<std::vector<call>> cases = {
        {{small, false}, {large, false}, {large, false}},  // a root that queues, others over the limit
        {{large, false}, {small, false}, {small, false}},  // a direct root, others within the limit
        {{same, false}, {same, true}, {same, true}},       // float within the limit, double over it
        {{same, true}, {same, false}, {same, false}},      // and the other way round
        {{small, false}, {small, false}, {large, false}},  // (3 ranks) one that takes the root's data, one over the limit
        {{large, false}, {large, false}, {small, false}},  // (3 ranks) one that meets the root, one within the limit
    };
    for (const auto& calls : cases) {
      bool differ = false;  // (not so for the 3-rank cases on 2 ranks, nor where the limit is 0)
      for (int r = 1; r < n; ++r) differ = differ || calls[static_cast<std::size_t>(r)].count != calls[0].count || calls[static_cast<std::size_t>(r)].dbl != calls[0].dbl;
      if (!differ) continue;
      CAPTURE(n);
      CAPTURE(text(calls[0]));
      CAPTURE(text(calls[1]));
      std::vector<std::string> what(static_cast<std::size_t>(n));
      const auto t0 = std::chrono::steady_clock::now();
      try {
        sc::host::run(n, [&](sc::host::communicator& c) {
          const call k = calls[static_cast<std::size_t>(c.rank())];
          std::vector<float> f(k.count, 1.f);
          std::vector<double> d(k.count, 1.0);
          try {
            if (k.dbl) c.broadcast(d.data(), k.count, 0);
            else c.broadcast(f.data(), k.count, 0);
          } catch (const sc::comm_error& e) {
            what[static_cast<std::size_t>(c.rank())] = e.what();
            throw;
          }
        }, sc::host::options{std::chrono::milliseconds(10000)});
      } catch (const sc::comm_error&) {
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (int r = 0; r < n; ++r) {
        const call k = calls[static_cast<std::size_t>(r)];
        const std::string& w = what[static_cast<std::size_t>(r)];
        CAPTURE(r);
        CAPTURE(w);
        const bool returns = queued(calls[0]) && (r == 0 || (k.count == calls[0].count && k.dbl == calls[0].dbl));
        if (returns && w.empty()) continue;  // a queued root, or a rank that took its data
        CHECK(w.find("mismatched collectives") != std::string::npos);
        CHECK(w.find(text(calls[0])) != std::string::npos);  // the root's call
        CHECK(w.find(text(k)) != std::string::npos);         // its own
      }
      CHECK(s < 5.0);
    }
  }
}

TEST_CASE("a small message that nobody receives is reported behind a withdrawn larger one") {
  // Rank 0's sendrecv posts a larger message to rank 1, then its receive half throws (rank 1
  // sent 8 floats, it expects 4) and withdraws it; rank 0 goes on and sends 3 floats, which
  // rank 1 never receives. run() names that message (the withdrawn one comes first in the
  // channel). With one message per channel the send would wait for the withdrawn one instead.
  if constexpr (SHARDCAST_HOST_EAGER_BYTES >= 8 * sizeof(float) && SHARDCAST_HOST_SEND_DEPTH >= 2) {
    constexpr std::size_t large = SHARDCAST_HOST_EAGER_BYTES / sizeof(float) + 1;
    std::string caught, what;
    try {
      sc::host::run(2, [&](sc::host::communicator& c) {
        if (c.rank() == 0) {
          std::vector<float> big(large, 1.f), in(4);
          try {
            c.sendrecv(big.data(), large, 1, in.data(), 4, 1);
          } catch (const sc::comm_error& e) {
            caught = e.what();
          }
          const float x[3] = {1, 2, 3};
          c.send(x, 3, 1);
        } else {
          const float y[8] = {};
          c.send(y, 8, 0);
        }
      }, sc::host::options{std::chrono::milliseconds(10000)});
    } catch (const sc::comm_error& e) {
      what = e.what();
    }
    CHECK_MESSAGE(caught.find("which sent 8 float") != std::string::npos, caught);
    CHECK_MESSAGE(what.find("rank 0 sent 3 float to rank 1") != std::string::npos, what);
    CHECK_MESSAGE(what.find("never received") != std::string::npos, what);
  }
}
