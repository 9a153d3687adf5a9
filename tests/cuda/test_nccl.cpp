// NCCL backend on every visible GPU (one rank per GPU), compared with host references.
#include <doctest/doctest.h>

#include <shardcast/comm/nccl.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

#include "cuda_testing.hpp"

namespace sc = shardcast;
using shardcast_test::device_count;
using shardcast_test::no_device;
using shardcast_test::device_buffer;

namespace {

// Rank r's input element i: small integers, so every reduction is exact.
int value(int r, std::size_t i) { return int((i * 3 + std::size_t(r) * 7) % 9) - 4; }

}  // namespace

TEST_CASE("nccl collectives match host references on every visible GPU" * doctest::skip(no_device())) {
  const int p = device_count();
  const std::size_t n = 1003;  // not a multiple of anything
  sc::nccl::run_local(p, [&](sc::nccl::communicator& c) {
    const int r = c.rank();
    REQUIRE(c.size() == p);
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    // all_reduce for every op, int32.
    for (auto op : {sc::reduce_op::sum, sc::reduce_op::max, sc::reduce_op::min, sc::reduce_op::prod}) {
      std::vector<std::int32_t> h(n), want(n);
      for (std::size_t i = 0; i < n; ++i) {
        h[i] = value(r, i);
        std::int32_t a = value(0, i);
        for (int q = 1; q < p; ++q) {
          const std::int32_t v = value(q, i);
          a = op == sc::reduce_op::sum ? a + v : op == sc::reduce_op::max ? std::max(a, v)
            : op == sc::reduce_op::min ? std::min(a, v) : a * v;
        }
        want[i] = a;
      }
      device_buffer<std::int32_t> d(n);
      d.put(h);
      c.all_reduce(d.p, d.p, n, op, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(d.get() == want);
    }
    // avg natively on float.
    {
      std::vector<float> h(n), want(n);
      for (std::size_t i = 0; i < n; ++i) {
        h[i] = float(value(r, i) * p);
        double a = 0;
        for (int q = 0; q < p; ++q) a += value(q, i) * p;
        want[i] = float(a / p);
      }
      device_buffer<float> d(n);
      d.put(h);
      c.all_reduce(d.p, d.p, n, sc::reduce_op::avg, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(d.get() == want);
    }
    // reduce_scatter, all_gather, all_to_all, broadcast on float.
    {
      std::vector<float> h(n * p), rs_want(n), ag_want(n * p), a2a_want(n * p);
      for (std::size_t i = 0; i < n * p; ++i) h[i] = float(value(r, i));
      for (std::size_t i = 0; i < n; ++i) {
        float a = 0;
        for (int q = 0; q < p; ++q) a += float(value(q, std::size_t(r) * n + i));
        rs_want[i] = a;
      }
      for (int q = 0; q < p; ++q)
        for (std::size_t i = 0; i < n; ++i) {
          ag_want[std::size_t(q) * n + i] = float(value(q, i));                      // q's first n elements
          a2a_want[std::size_t(q) * n + i] = float(value(q, std::size_t(r) * n + i));  // q's chunk r
        }
      device_buffer<float> in(n * p), out(n), all(n * p);
      in.put(h);
      c.reduce_scatter(in.p, out.p, n, sc::reduce_op::sum, s);
      c.all_gather(in.p, all.p, n, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(out.get() == rs_want);
      CHECK(all.get() == ag_want);
      c.all_to_all(in.p, all.p, n, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(all.get() == a2a_want);
      c.broadcast(in.p, n, p - 1, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      auto b = in.get();
      b.resize(n);
      std::vector<float> b_want(n);
      for (std::size_t i = 0; i < n; ++i) b_want[i] = float(value(p - 1, i));
      CHECK(b == b_want);
    }
    // all_to_allv with uneven counts: rank r sends (q + r) % 3 + 1 elements to q.
    {
      auto cnt = [](int from, int to) { return std::size_t((from + to) % 3 + 1); };
      std::vector<std::size_t> sc_(p), sd(p), rc(p), rd(p);
      std::size_t st = 0, rt = 0;
      for (int q = 0; q < p; ++q) {
        sc_[q] = cnt(r, q); sd[q] = st; st += sc_[q];
        rc[q] = cnt(q, r); rd[q] = rt; rt += rc[q];
      }
      std::vector<float> h(st), want(rt);
      for (int q = 0; q < p; ++q)
        for (std::size_t i = 0; i < sc_[q]; ++i) h[sd[q] + i] = float(r * 100 + q * 10 + int(i));
      for (int q = 0; q < p; ++q)
        for (std::size_t i = 0; i < rc[q]; ++i) want[rd[q] + i] = float(q * 100 + r * 10 + int(i));
      device_buffer<float> in(st), out(rt);
      in.put(h);
      c.all_to_allv(in.p, sc_.data(), sd.data(), out.p, rc.data(), rd.data(), s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(out.get() == want);
    }
    // split into even/odd ranks; all_reduce inside each half.
    {
      auto sub = c.split(r % 2, r);
      CHECK(sub.size() == (p + 1 - r % 2) / 2);
      CHECK(sub.rank() == r / 2);
      std::vector<std::int32_t> h(1, r), want(1, 0);
      for (int q = r % 2; q < p; q += 2) want[0] += q;
      device_buffer<std::int32_t> d(1);
      d.put(h);
      sub.all_reduce(d.p, d.p, 1, sc::reduce_op::sum, s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
      CHECK(d.get() == want);
    }
    c.barrier();
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}

TEST_CASE("nccl: a rank that throws makes the others fail with comm_error, not hang" * doctest::skip(device_count() < 2)) {
  const int p = device_count();
  CHECK_THROWS_WITH(sc::nccl::run_local(
                        p,
                        [](sc::nccl::communicator& c) {
                          if (c.rank() == 0) throw std::runtime_error("rank 0 gave up");
                          c.barrier();
                        },
                        sc::nccl::options{std::chrono::milliseconds(5000)}),
                    "rank 0 gave up");
}

TEST_CASE("nccl: run_local rejects more ranks than GPUs" * doctest::skip(no_device())) {
  CHECK_THROWS_AS(sc::nccl::run_local(device_count() + 1, [](sc::nccl::communicator&) {}), sc::layout_error);
}
