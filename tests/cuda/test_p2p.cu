// Peer-memory backend: 2-4 ranks sharing GPU 0, compared with host references.
#include <doctest/doctest.h>

#include <shardcast/comm/nccl.hpp>
#include <shardcast/comm/p2p.hpp>
#include <shardcast/cuda/pack.cuh>  // memory_ops<device_memory>, which the executor uses on device meshes
#include <shardcast/distribute.hpp>
#include <shardcast/mesh.hpp>
#include <shardcast/redistribute.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "cuda_testing.hpp"

namespace sc = shardcast;

// A static pair on 4 mesh axes is planned by nvcc's front end too; its default constexpr
// budget stops at 3 axes, so this holds only with the budget the shardcast target gives
// CUDA sources (CMakeLists.txt).
static_assert(sc::static_plans<sc::layout<sc::shard<0>, sc::shard<1>, sc::partial<>, sc::replicate>,
                               sc::layout<sc::shard<1>, sc::replicate, sc::shard<0>, sc::partial<>>, 2>.size() >= 1);
using shardcast_test::no_device;
using shardcast_test::device_buffer;
using shardcast_test::stream_guard;

static_assert(sc::communicator<sc::p2p::communicator>);
static_assert(sc::communicator<sc::nccl::communicator>);
static_assert(sc::has_sendrecv<sc::p2p::communicator> && sc::has_sendrecv<sc::nccl::communicator>);

namespace {

float value(int r, std::size_t i) { return float(int((i * 5 + std::size_t(r) * 3) % 7) - 3); }

}  // namespace

// No device needed: every call checks for the null communicator before any CUDA call.
TEST_CASE("p2p: the null communicator has size 0 and every call on it throws comm_error" * doctest::test_suite("host_only")) {
  sc::p2p::communicator none;
  CHECK(!none);
  CHECK(none.size() == 0);
  float x = 0, y = 0;
  CHECK_THROWS_AS(none.all_reduce(&x, &y, 1, sc::reduce_op::sum), sc::comm_error);
  CHECK_THROWS_AS(none.all_gather(&x, &y, 1), sc::comm_error);
  CHECK_THROWS_AS(none.reduce_scatter(&x, &y, 1, sc::reduce_op::max), sc::comm_error);
  CHECK_THROWS_AS(none.all_to_all(&x, &y, 1), sc::comm_error);
  CHECK_THROWS_AS(none.broadcast(&x, 1, 0), sc::comm_error);
  CHECK_THROWS_AS(none.send(&x, 1, 0), sc::comm_error);
  CHECK_THROWS_AS(none.recv(&y, 1, 0), sc::comm_error);
  CHECK_THROWS_AS(none.sendrecv(&x, 1, 0, &y, 1, 0), sc::comm_error);
  CHECK_THROWS_AS(none.barrier(), sc::comm_error);
  CHECK_THROWS_AS((void)none.split(0, 0), sc::comm_error);
}

TEST_CASE("p2p split: a negative color gives the null communicator, the others still meet" * doctest::skip(no_device())) {
  sc::p2p::run(3, {0}, [](sc::p2p::communicator& c) {
    auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
    CHECK(static_cast<bool>(none) == (c.rank() != 0));
    CHECK(none.size() == (c.rank() == 0 ? 0 : 2));
    if (c.rank() != 0) none.barrier();
  });
}

TEST_CASE("p2p collectives on ranks sharing GPU 0 match host references" * doctest::skip(no_device())) {
  for (int p : {2, 3, 4}) {
    CAPTURE(p);
    const std::size_t n = 1001;
    sc::p2p::run(p, {0}, [&](sc::p2p::communicator& c) {
      const int r = c.rank();
      cudaStream_t s;
      SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
      std::vector<float> h(n * p);
      for (std::size_t i = 0; i < n * p; ++i) h[i] = value(r, i);
      // all_reduce sum in place and avg out of place.
      {
        std::vector<float> sum(n * p, 0.f), avg(n * p);
        for (int q = 0; q < p; ++q)
          for (std::size_t i = 0; i < n * p; ++i) sum[i] += value(q, i);
        for (std::size_t i = 0; i < n * p; ++i) avg[i] = sum[i] / float(p);
        device_buffer<float> a(n * p), b(n * p);
        a.put(h);
        c.all_reduce(a.p, b.p, n * p, sc::reduce_op::avg, s);
        c.all_reduce(a.p, a.p, n * p, sc::reduce_op::sum, s);
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
        CHECK(a.get() == sum);
        CHECK(b.get() == avg);
      }
      // reduce_scatter (max), and sum with a fused scale epilogue.
      {
        std::vector<float> mx(n), scaled(n, 0.f);
        for (std::size_t i = 0; i < n; ++i) {
          float m = value(0, std::size_t(r) * n + i);
          for (int q = 0; q < p; ++q) {
            m = std::max(m, value(q, std::size_t(r) * n + i));
            scaled[i] += value(q, std::size_t(r) * n + i);
          }
          mx[i] = m;
          scaled[i] *= 0.5f;
        }
        device_buffer<float> a(n * p), o1(n), o2(n);
        a.put(h);
        c.reduce_scatter(a.p, o1.p, n, sc::reduce_op::max, s);
        c.reduce_scatter(a.p, o2.p, n, sc::reduce_op::sum, s, sc::device::scale{0.5f});
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
        CHECK(o1.get() == mx);
        CHECK(o2.get() == scaled);
      }
      // all_gather in place, all_to_all, broadcast.
      {
        std::vector<float> ag(n * p), a2a(n * p), bc(n);
        for (int q = 0; q < p; ++q)
          for (std::size_t i = 0; i < n; ++i) {
            ag[std::size_t(q) * n + i] = value(q, std::size_t(q) * n + i);
            a2a[std::size_t(q) * n + i] = value(q, std::size_t(r) * n + i);
          }
        for (std::size_t i = 0; i < n; ++i) bc[i] = value(1, i);
        device_buffer<float> a(n * p), b(n * p), c1(n);
        a.put(h);
        b.put(h);
        c.all_gather(a.p + std::size_t(r) * n, a.p, n, s);
        device_buffer<float> d(n * p);
        b.put(h);
        c.all_to_all(b.p, d.p, n, s);
        std::vector<float> hb(h.begin(), h.begin() + std::ptrdiff_t(n));
        c1.put(hb);
        c.broadcast(c1.p, n, 1, s);
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
        CHECK(a.get() == ag);
        CHECK(d.get() == a2a);
        CHECK(c1.get() == bc);
      }
      // split into even/odd; sum of ranks inside each.
      {
        auto sub = c.split(r % 2, -r);  // key -r: reverse order
        std::vector<float> one(1, float(r)), want(1, 0.f);
        for (int q = r % 2; q < p; q += 2) want[0] += float(q);
        device_buffer<float> d(1);
        d.put(one);
        sub.all_reduce(d.p, d.p, 1, sc::reduce_op::sum, s);
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
        CHECK(d.get() == want);
        CHECK(sub.size() == (p + 1 - r % 2) / 2);
        CHECK(sub.rank() == (p - 1 - r) / 2);  // members with a larger rank come first
      }
      c.barrier();
      SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
    });
  }
}

namespace {

// round k's input of rank r: small integers, so float sums are exact.
__host__ __device__ inline float round_value(int k, int r, std::size_t i) {
  return float(int((i * 7 + std::size_t(r) * 5 + std::size_t(k) * 3) % 11) - 5);
}
__global__ void fill_round(float* a, std::size_t n, int k, int r) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    a[i] = round_value(k, r, i);
}
// Holds a stream for about `cycles` GPU clock cycles.
__global__ void hold(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

}  // namespace

// Back-to-back collectives on the same buffers, with the ranks out of step: each round refills
// the input on the device right after the previous collective, and one rank by turns is late,
// on the host (a sleep) and on its stream (a kernel that holds it ~0.2 ms before the
// collective). Streams are non-blocking and nothing synchronises until the end, so only the
// events order a rank's refill after its peers' reads. Every round's result is kept on the
// device and compared with the host reference at the end. (With every rank on one GPU the
// streams rarely overlap enough to expose a missing wait: a build whose finish() skipped the
// waits on peers' "done" events passed this case 3 times out of 3 on an H200.)
TEST_CASE("p2p: many rounds of collectives on reused buffers, ranks out of step, match host references" *
          doctest::skip(no_device())) {
  for (int p : {2, 3, 4}) {
    CAPTURE(p);
    const std::size_t n = std::size_t(1) << 14;  // elements per rank's part
    const std::size_t total = n * std::size_t(p);
    const int rounds = 60;
    std::vector<std::vector<float>> got(static_cast<std::size_t>(p));
    sc::p2p::run(p, {0}, [&](sc::p2p::communicator& c) {
      const int r = c.rank();
      cudaStream_t s;
      SHARDCAST_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      device_buffer<float> a(total), b(total), keep(total * std::size_t(rounds));
      for (int k = 0; k < rounds; ++k) {
        fill_round<<<64, 256, 0, s>>>(a.p, total, k, r);
        SHARDCAST_CUDA_TRY(cudaGetLastError());
        if (r == k % p) {  // late by turns
          hold<<<1, 1, 0, s>>>(400000);
          SHARDCAST_CUDA_TRY(cudaGetLastError());
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        switch (k % 5) {
          case 0: c.all_reduce(a.p, a.p, total, sc::reduce_op::sum, s); break;  // in place
          case 1: c.all_gather(a.p + std::size_t(r) * n, a.p, n, s); break;     // in place
          case 2: c.reduce_scatter(a.p, b.p, n, sc::reduce_op::max, s); break;
          case 3: c.all_to_all(a.p, b.p, n, s); break;
          case 4: c.broadcast(a.p, total, k % p, s); break;
        }
        const float* out = k % 5 == 2 || k % 5 == 3 ? b.p : a.p;
        const std::size_t len = k % 5 == 2 ? n : total;
        SHARDCAST_CUDA_TRY(cudaMemcpyAsync(keep.p + std::size_t(k) * total, out, len * sizeof(float), cudaMemcpyDeviceToDevice, s));
      }
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      got[std::size_t(r)] = keep.get();
      SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
    });
    int wrong_rounds = 0;
    for (int r = 0; r < p; ++r)
      for (int k = 0; k < rounds; ++k) {
        std::vector<float> want(k % 5 == 2 ? n : total);
        for (std::size_t i = 0; i < want.size(); ++i) {
          switch (k % 5) {
            case 0:
              want[i] = 0;
              for (int q = 0; q < p; ++q) want[i] += round_value(k, q, i);
              break;
            case 1: want[i] = round_value(k, int(i / n), i); break;
            case 2: {
              float m = round_value(k, 0, std::size_t(r) * n + i);
              for (int q = 1; q < p; ++q) m = std::max(m, round_value(k, q, std::size_t(r) * n + i));
              want[i] = m;
              break;
            }
            case 3: want[i] = round_value(k, int(i / n), std::size_t(r) * n + i % n); break;
            case 4: want[i] = round_value(k, k % p, i); break;
          }
        }
        const auto& g = got[std::size_t(r)];
        const auto first = g.begin() + std::ptrdiff_t(std::size_t(k) * total);
        if (!std::equal(want.begin(), want.end(), first)) {
          ++wrong_rounds;
          if (wrong_rounds <= 5) FAIL_CHECK("rank " << r << ", round " << k << " (collective " << k % 5 << ") differs from the reference");
        }
      }
    CHECK(wrong_rounds == 0);
  }
}

// A communicator dropped right after a collective: its peers may still be finishing that
// collective (making their streams wait for its events), so the events must outlive the
// handle. Many rounds of split, one all_reduce, drop; one rank by turns is late.
TEST_CASE("p2p: a communicator dropped right after a collective leaves its peers able to finish it" *
          doctest::skip(no_device())) {
  for (int p : {2, 4}) {
    CAPTURE(p);
    std::vector<int> wrong(static_cast<std::size_t>(p), 0);
    sc::p2p::run(p, {0}, [&](sc::p2p::communicator& c) {
      const int r = c.rank();
      stream_guard sg;
      device_buffer<float> d(1);
      for (int k = 0; k < 200; ++k) {
        {
          auto sub = c.split(0, r);
          d.put(std::vector<float>{float(r + k)});
          if (r == k % p) std::this_thread::sleep_for(std::chrono::microseconds(50));
          sub.all_reduce(d.p, d.p, 1, sc::reduce_op::sum, sg.s);
        }  // sub dropped here, perhaps before a peer has taken its waits
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(sg.s));
        if (d.get()[0] != float(p * (p - 1) / 2 + p * k)) ++wrong[std::size_t(r)];
      }
    });
    for (int r = 0; r < p; ++r) CHECK_MESSAGE(wrong[std::size_t(r)] == 0, "rank " << r);
  }
}

TEST_CASE("p2p: a rank that throws makes the others fail with comm_error" * doctest::skip(no_device())) {
  CHECK_THROWS_WITH(sc::p2p::run(3, {0},
                                 [](sc::p2p::communicator& c) {
                                   if (c.rank() == 1) throw std::runtime_error("rank 1 gave up");
                                   c.barrier();
                                 }),
                    "rank 1 gave up");
}

TEST_CASE("p2p send/recv are pairwise: only the two ranks meet" * doctest::skip(no_device())) {
  // Ranks 0 and 1 exchange three messages while 2 -> 3 exchange one; no rank waits for a rank
  // it does not talk to (a group-wide rendezvous would time out here). Then a ring, with even
  // ranks sending first because a send waits for its receive.
  sc::p2p::run(4, {0}, [](sc::p2p::communicator& c) {
    const int r = c.rank(), p = c.size();
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    auto msg = [](int from, int tag, std::size_t n) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = float(from * 1000 + tag * 100 + int(i % 97));
      return v;
    };
    const std::size_t sizes[] = {1000, 0, 33};
    if (r == 0 || r == 1) {
      for (int t = 0; t < 3; ++t) {
        const std::size_t n = sizes[t];
        device_buffer<float> out(n), in(n);
        out.put(msg(r, t, n));
        if (r == 0) {
          c.send(out.p, n, 1, s);
          c.recv(in.p, n, 1, s);
        } else {
          c.recv(in.p, n, 0, s);
          c.send(out.p, n, 0, s);
        }
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
        CHECK(in.get() == msg(1 - r, t, n));
      }
    } else {
      device_buffer<float> buf(500);
      if (r == 2) {
        buf.put(msg(2, 7, 500));
        c.send(buf.p, 500, 3, s);
      } else {
        c.recv(buf.p, 500, 2, s);
      }
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      if (r == 3) CHECK(buf.get() == msg(2, 7, 500));
    }
    // Ring: r sends to r+1 and receives from r-1.
    {
      const std::size_t n = 257;
      device_buffer<float> out(n), in(n);
      out.put(msg(r, 9, n));
      const int next = (r + 1) % p, prev = (r + p - 1) % p;
      if (r % 2 == 0) {
        c.send(out.p, n, next, s);
        c.recv(in.p, n, prev, s);
      } else {
        c.recv(in.p, n, prev, s);
        c.send(out.p, n, next, s);
      }
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(in.get() == msg(prev, 9, n));
    }
    c.barrier();
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}

TEST_CASE("p2p sendrecv: ring shifts both ways, a pairwise exchange, sendrecv against recv and send, and to itself" *
          doctest::skip(no_device())) {
  // Every rank calls sendrecv at once, which send then recv on every rank cannot do (a send
  // waits for its receive); sizes differ by rank, so a message from the wrong peer shows.
  sc::p2p::run(4, {0}, [](sc::p2p::communicator& c) {
    const int r = c.rank(), p = c.size();
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    auto count_of = [](int from) { return std::size_t(300 + 17 * from); };
    auto msg = [&](int from, int tag) {
      std::vector<float> v(count_of(from));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(from * 1000 + tag * 100 + int(i % 97));
      return v;
    };
    int tag = 0;
    auto exchange = [&](int dest, int source, bool plain) {
      ++tag;
      device_buffer<float> out(count_of(r)), in(count_of(source));
      out.put(msg(r, tag));
      if (!plain) {
        sc::sendrecv(c, out.p, count_of(r), dest, in.p, count_of(source), source, s);
      } else {  // odd ranks of a +1 shift: recv, then send, against the even ranks' sendrecv
        c.recv(in.p, count_of(source), source, s);
        c.send(out.p, count_of(r), dest, s);
      }
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(in.get() == msg(source, tag));
    };
    exchange((r + 1) % p, (r + p - 1) % p, false);
    exchange((r + p - 1) % p, (r + 1) % p, false);
    exchange(r ^ 1, r ^ 1, false);
    exchange((r + 1) % p, (r + p - 1) % p, r % 2 == 1);
    {  // to itself: a copy on the stream
      device_buffer<float> out(count_of(r)), in(count_of(r));
      out.put(msg(r, 50));
      c.sendrecv(out.p, count_of(r), r, in.p, count_of(r), r, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(in.get() == msg(r, 50));
      CHECK_THROWS_WITH_AS(c.sendrecv(out.p, count_of(r), r, in.p, count_of(r), (r + 1) % p, s),
                           doctest::Contains("needs its receive from itself"), sc::layout_error);
    }
    c.barrier();
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}

TEST_CASE("p2p send/recv: a size mismatch is a comm_error, a missing sender times out, a failed sender aborts" *
          doctest::skip(no_device())) {
  auto with_stream = [](auto&& f) {
    return [f](sc::p2p::communicator& c) {
      cudaStream_t s;
      SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
      device_buffer<float> b(8);
      try {
        f(c, b.p, s);
      } catch (...) {
        (void)cudaStreamDestroy(s);
        throw;
      }
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
    };
  };
  CHECK_THROWS_AS(sc::p2p::run(2, {0}, with_stream([](sc::p2p::communicator& c, float* b, cudaStream_t s) {
                    if (c.rank() == 0) c.send(b, 5, 1, s);
                    else c.recv(b, 6, 0, s);
                  })),
                  sc::comm_error);
  const sc::p2p::options quick{std::chrono::milliseconds(300)};
  CHECK_THROWS_AS(sc::p2p::run(3, {0}, with_stream([](sc::p2p::communicator& c, float* b, cudaStream_t s) {
                    if (c.rank() == 1) c.recv(b, 4, 0, s);  // rank 0 never sends
                  }), quick),
                  sc::comm_error);
  CHECK_THROWS_WITH(sc::p2p::run(2, {0}, with_stream([](sc::p2p::communicator& c, float* b, cudaStream_t s) {
                      if (c.rank() == 0) throw std::runtime_error("sender gave up");
                      c.recv(b, 4, 0, s);
                    })),
                    "sender gave up");
}

namespace {
// Device dtensors through the core executor: S(0),S(1) on a 2x2 mesh to every other layout
// the test names, compared with the global tensor itself (to_global of the result).
template <class Comm>
void redistribute_round_trip(Comm& c, const std::array<int, 2>& shape, cudaStream_t s) {
  auto m = sc::make_mesh(c, shape);
  const std::array<std::int64_t, 2> ext{7, 5};  // uneven on both axes
  std::vector<float> g(35);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = float(i % 13);
  auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, ext, s);
  auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<0>>>(x, s);
  CHECK(sc::to_global(y, s) == g);
  auto z = sc::redistribute<sc::layout<sc::shard<1>, sc::replicate>>(y, s);
  CHECK(sc::to_global(z, s) == g);
  auto r = sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(z, s);
  CHECK(sc::to_global(r, s) == g);
  // redistribute_into: the same kind of plans into device outputs made beforehand.
  auto yi = sc::empty<sc::layout<sc::replicate, sc::shard<0>>, float>(m, ext, s);
  const float* yi_data = yi.data();
  sc::redistribute_into(x, yi, s);
  CHECK(sc::to_global(yi, s) == g);
  CHECK(yi.data() == yi_data);
  auto p = sc::redistribute<sc::layout<sc::partial<>, sc::shard<1>>>(x, s);  // zero-pad along axis 0
  auto pi = sc::empty<sc::layout<sc::shard<0>, sc::shard<1>>, float>(m, ext, s);
  sc::redistribute_into(p, pi, s);  // uneven reduce_scatter last: its padded chunk is trimmed into pi
  CHECK(sc::to_global(pi, s) == g);
  // generate and full: each rank makes its device piece from the global index.
  auto gen = sc::generate<sc::layout<sc::partial<>, sc::shard<1>>>(
      m, ext, [](const std::array<std::int64_t, 2>& i) { return float((i[0] * 5 + i[1]) % 13); }, s);
  CHECK(sc::to_global(gen, s) == g);
  auto ones = sc::full<sc::layout<sc::shard<1>, sc::partial<sc::prod>>>(m, ext, 2.0f, s);
  CHECK(sc::to_global(ones, s) == std::vector<float>(35, 2.0f));
}
}  // namespace

TEST_CASE("device dtensors redistribute on a p2p mesh (4 ranks on GPU 0)" * doctest::skip(no_device())) {
  sc::p2p::run(4, {0}, [](sc::p2p::communicator& c) {
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    redistribute_round_trip(c, {2, 2}, s);
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}

TEST_CASE("device dtensors redistribute on an nccl mesh (every visible GPU)" * doctest::skip(no_device())) {
  const int p = shardcast_test::device_count();
  sc::nccl::run_local(p, [p](sc::nccl::communicator& c) {
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    redistribute_round_trip(c, {p % 2 == 0 ? 2 : 1, p % 2 == 0 ? p / 2 : p}, s);
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}

// The snippet of docs/03_gpu.md, compiled here so it cannot rot (not run: it needs a real
// multi-process NCCL setup).
[[maybe_unused]] static void gather_rows(ncclComm_t comm, float* d_rows, std::int64_t rows, std::int64_t cols,
                                          cudaStream_t stream) {
  sc::nccl::communicator c(comm);                            // wraps; never destroys `comm`
  auto mesh = sc::make_mesh(c, std::array<int, 1>{c.size()});
  auto x = sc::make_view<sc::layout<sc::shard<0>>>(mesh, d_rows, std::array<std::int64_t, 2>{rows, cols});
  auto full = sc::redistribute<sc::layout<sc::replicate>>(x, stream);   // ncclAllGather on `stream`
  // full.data(): rows*cols floats on this device, valid while `full` lives
  (void)full;
}

// The second snippet of docs/03_gpu.md: the same gather into a buffer the caller has.
[[maybe_unused]] static void gather_rows_into(ncclComm_t comm, float* d_rows, float* d_full, std::int64_t rows, std::int64_t cols,
                                               cudaStream_t stream) {
  sc::nccl::communicator c(comm);
  auto mesh = sc::make_mesh(c, std::array<int, 1>{c.size()});
  const std::array<std::int64_t, 2> ext{rows, cols};
  auto x = sc::make_view<sc::layout<sc::shard<0>>>(mesh, d_rows, ext);
  sc::redistribute_into(x, sc::make_view<sc::layout<sc::replicate>>(mesh, d_full, ext), stream);  // writes d_full on `stream`
}
