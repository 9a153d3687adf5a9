// device::cublas_gemm (cuda/gemm.hpp) against shardcast::host_gemm on host copies of the
// same operands, both call forms, every transpose pair, padded strides, accumulate;
// and matmul(a, b, stream) on device dtensors of a p2p mesh (compile-time and dynamic
// layouts) against a host product of the global matrices. Inputs are small integers, so
// every product is exact in every type.
#include <doctest/doctest.h>

#include <shardcast/comm/p2p.hpp>
#include <shardcast/cuda/gemm.hpp>
#include <shardcast/cuda/pack.cuh>  // memory_ops<device_memory>
#include <shardcast/distribute.hpp>
#include <shardcast/mesh.hpp>
#include <shardcast/ops/matmul.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda_testing.hpp"

namespace sc = shardcast;
using shardcast_test::no_device;
using shardcast_test::device_buffer;

namespace {

template <class T>
T from_i(int v) { return sc::device::convert<T>(static_cast<float>(v)); }
template <class T>
double to_d(T v) { return static_cast<double>(sc::device::convert<float>(v)); }
template <> double to_d<double>(double v) { return v; }

// Copies `h` (small integers, exact in T) into `d`, converted to T.
template <class T>
void put_ints(device_buffer<T>& d, const std::vector<double>& h) {
  std::vector<T> t(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) t[i] = from_i<T>(int(h[i]));
  d.put(t);
}

template <class T>
void gemm_suite() {
  using sc::gemm_op;
  cudaStream_t s;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
  sc::device::cublas_gemm g(s);
  const std::array<std::int64_t, 3> shapes[] = {{3, 5, 4}, {1, 7, 2}, {6, 1, 3}, {33, 17, 64}, {2, 3, 0}, {0, 4, 3}, {64, 48, 40}};
  for (gemm_op ta : {gemm_op::n, gemm_op::t})
    for (gemm_op tb : {gemm_op::n, gemm_op::t})
      for (const auto& shp : shapes)
        for (std::int64_t pad : {0, 3})
          for (bool acc : {false, true}) {
            const std::int64_t m = shp[0], n = shp[1], k = shp[2];
            CAPTURE(int(ta)); CAPTURE(int(tb)); CAPTURE(m); CAPTURE(n); CAPTURE(k); CAPTURE(pad); CAPTURE(acc);
            const std::int64_t a_rows = ta == gemm_op::n ? m : k, a_cols = ta == gemm_op::n ? k : m;
            const std::int64_t b_rows = tb == gemm_op::n ? k : n, b_cols = tb == gemm_op::n ? n : k;
            const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
            const auto na = std::size_t(a_rows * lda), nb = std::size_t(b_rows * ldb), nc = std::size_t(m * ldc);
            // Values in [-2, 2]: |C| <= 4k + 2 stays an integer that bfloat16 (k <= 64) and half hold exactly.
            std::vector<double> ha(na), hb(nb), hc(nc);
            for (std::size_t i = 0; i < na; ++i) ha[i] = double(int(i % 5) - 2);
            for (std::size_t i = 0; i < nb; ++i) hb[i] = double(int((i * 3) % 5) - 2);
            for (std::size_t i = 0; i < nc; ++i) hc[i] = double(int(i % 3) - 1);
            std::vector<double> want = hc;
            sc::host_gemm{}(ta, tb, m, n, k, ha.data(), lda, hb.data(), ldb, want.data(), ldc, acc);
            device_buffer<T> da(na), db(nb), dc(nc);
            put_ints(da, ha);
            put_ints(db, hb);
            put_ints(dc, hc);
            g(ta, tb, m, n, k, da.p, lda, db.p, ldb, dc.p, ldc, acc);
            SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
            const auto got = dc.get();
            std::size_t bad = 0;
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < ldc; ++j) {
                const auto at = std::size_t(i * ldc + j);
                // Inside the product: the reference; in the padding: untouched.
                const double w = j < n ? want[at] : hc[at];
                bad += to_d(got[at]) != w;
              }
            CHECK(bad == 0);
          }
  // The short form is C = A * B with C overwritten.
  {
    const std::int64_t m = 5, n = 6, k = 7;
    std::vector<double> ha(std::size_t(m * k)), hb(std::size_t(k * n)), want(std::size_t(m * n), 0.0);
    for (std::size_t i = 0; i < ha.size(); ++i) ha[i] = double(int(i % 3) - 1);
    for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = double(int(i % 4) - 2);
    sc::host_gemm{}(m, n, k, ha.data(), k, hb.data(), n, want.data(), n);
    std::vector<T> ta_(ha.size()), tb_(hb.size()), tc_(want.size(), from_i<T>(9));
    for (std::size_t i = 0; i < ha.size(); ++i) ta_[i] = from_i<T>(int(ha[i]));
    for (std::size_t i = 0; i < hb.size(); ++i) tb_[i] = from_i<T>(int(hb[i]));
    device_buffer<T> da(ta_.size()), db(tb_.size()), dc(tc_.size());
    da.put(ta_);
    db.put(tb_);
    dc.put(tc_);
    g(m, n, k, da.p, k, db.p, n, dc.p, n);
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    const auto got = dc.get();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) bad += to_d(got[i]) != want[i];
    CHECK(bad == 0);
  }
  SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
}

}  // namespace

TEST_CASE_TEMPLATE("cublas_gemm matches host_gemm in both call forms" * doctest::skip(no_device()), T, float, double, __half,
                   __nv_bfloat16) {
  gemm_suite<T>();
}

TEST_CASE("cublas_gemm on a borrowed handle leaves its stream and pointer mode as they were" * doctest::skip(no_device())) {
  cublasHandle_t h;
  SHARDCAST_CUBLAS_TRY(cublasCreate(&h));
  cudaStream_t mine, theirs;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&mine));
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&theirs));
  SHARDCAST_CUBLAS_TRY(cublasSetStream(h, theirs));
  SHARDCAST_CUBLAS_TRY(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
  {
    sc::device::cublas_gemm g(h, mine);
    device_buffer<float> a(4), b(4), c(4);
    a.put({1, 2, 3, 4});
    b.put({1, 0, 0, 1});
    g(2, 2, 2, a.p, 2, b.p, 2, c.p, 2);
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(mine));
    CHECK(c.get() == std::vector<float>{1, 2, 3, 4});
  }
  cudaStream_t now = nullptr;
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  SHARDCAST_CUBLAS_TRY(cublasGetStream(h, &now));
  SHARDCAST_CUBLAS_TRY(cublasGetPointerMode(h, &mode));
  CHECK(now == theirs);
  CHECK(mode == CUBLAS_POINTER_MODE_DEVICE);
  (void)cublasDestroy(h);
  (void)cudaStreamDestroy(mine);
  (void)cudaStreamDestroy(theirs);
}

// No device needed: the strides are checked before cuBLAS is called.
TEST_CASE("cublas_gemm rejects row strides shorter than a row" * doctest::test_suite("host_only")) {
  sc::device::cublas_gemm g(static_cast<cublasHandle_t>(nullptr), cudaStream_t{});
  float* p = nullptr;
  CHECK_THROWS_AS(g(4, 5, 3, p, 2, p, 5, p, 5), sc::layout_error);
  CHECK_THROWS_AS(g(sc::gemm_op::t, sc::gemm_op::n, 4, 5, 3, p, 3, p, 5, p, 5, false), sc::layout_error);
  CHECK_THROWS_AS(g(4, 5, 3, p, 3, p, 5, p, 4), sc::layout_error);
}

namespace {
// The strided-batch form against host_gemm's, matrix by matrix: each operand stepping one
// matrix per product or repeating one (stride 0), padded rows and padded batch strides,
// accumulate, an empty contraction, a batch of one and of none.
template <class T>
void batched_suite() {
  using sc::gemm_op;
  cudaStream_t s;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
  sc::device::cublas_gemm g(s);
  struct shape {
    std::int64_t m, n, k, batch;
  };
  for (gemm_op ta : {gemm_op::n, gemm_op::t})
    for (gemm_op tb : {gemm_op::n, gemm_op::t})
      for (const shape& sh : {shape{3, 5, 4, 6}, shape{17, 9, 33, 3}, shape{2, 3, 0, 4}, shape{4, 2, 3, 1}, shape{4, 2, 3, 0}})
        for (bool a_repeats : {false, true})
          for (bool b_repeats : {false, true})
            for (bool acc : {false, true}) {
              const std::int64_t m = sh.m, n = sh.n, k = sh.k, batch = sh.batch, pad = 2, gap = 5;
              CAPTURE(int(ta)); CAPTURE(int(tb)); CAPTURE(m); CAPTURE(n); CAPTURE(k); CAPTURE(batch); CAPTURE(a_repeats);
              CAPTURE(b_repeats); CAPTURE(acc);
              const std::int64_t a_rows = ta == gemm_op::n ? m : k, a_cols = ta == gemm_op::n ? k : m;
              const std::int64_t b_rows = tb == gemm_op::n ? k : n, b_cols = tb == gemm_op::n ? n : k;
              const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
              const std::int64_t sa = a_repeats ? 0 : a_rows * lda + gap, sb = b_repeats ? 0 : b_rows * ldb + gap, scc = m * ldc + gap;
              const auto na = std::size_t(std::max<std::int64_t>(1, sa * batch + a_rows * lda)),
                         nb = std::size_t(std::max<std::int64_t>(1, sb * batch + b_rows * ldb)),
                         nc = std::size_t(std::max<std::int64_t>(1, scc * batch));
              std::vector<double> ha(na), hb(nb), hc(nc);
              for (std::size_t i = 0; i < na; ++i) ha[i] = double(int(i % 5) - 2);
              for (std::size_t i = 0; i < nb; ++i) hb[i] = double(int((i * 3) % 5) - 2);
              for (std::size_t i = 0; i < nc; ++i) hc[i] = double(int(i % 3) - 1);
              std::vector<double> want = hc;
              for (std::int64_t i = 0; i < batch; ++i)
                sc::host_gemm{}(ta, tb, m, n, k, ha.data() + i * sa, lda, hb.data() + i * sb, ldb, want.data() + i * scc, ldc, acc);
              device_buffer<T> da(na), db(nb), dc(nc);
              put_ints(da, ha);
              put_ints(db, hb);
              put_ints(dc, hc);
              g(ta, tb, m, n, k, da.p, lda, sa, db.p, ldb, sb, dc.p, ldc, scc, batch, acc);
              SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
              const auto got = dc.get();
              std::size_t bad = 0;  // the products, and the padding and gaps untouched
              for (std::size_t i = 0; i < nc; ++i) bad += to_d(got[i]) != want[i];
              CHECK(bad == 0);
            }
  SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
}

// LA and LB are layout types, or sc::dynamic_layout with the layouts given as text (then
// C has a dynamic_layout too, checked against `lc`).
template <class LA, class LB, class Comm>
void check_matmul(Comm& c, cudaStream_t s, const char* la = "", const char* lb = "", const char* lc = "") {
  auto mesh = sc::make_mesh(c, std::array<int, 2>{2, 2});
  const std::int64_t m = 7, k = 6, n = 5;  // uneven over both mesh axes
  std::vector<float> ga(std::size_t(m * k)), gb(std::size_t(k * n)), want(std::size_t(m * n), 0.f);
  for (std::size_t i = 0; i < ga.size(); ++i) ga[i] = float(int(i % 5) - 2);
  for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = float(int(i % 3) - 1);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t p = 0; p < k; ++p) want[std::size_t(i * n + j)] += ga[std::size_t(i * k + p)] * gb[std::size_t(p * n + j)];
  auto dist = [&]<class L>(const std::vector<float>& g, const char* text, std::array<std::int64_t, 2> e) {
    if constexpr (std::is_same_v<L, sc::dynamic_layout>)
      return sc::distribute(mesh, sc::runtime_layout::parse(text), g, e, s);
    else
      return sc::distribute<L>(mesh, g, e, s);
  };
  auto a = dist.template operator()<LA>(ga, la, {m, k});
  auto b = dist.template operator()<LB>(gb, lb, {k, n});
  auto prod = sc::matmul(a, b, s);
  if constexpr (std::is_same_v<LA, sc::dynamic_layout> || std::is_same_v<LB, sc::dynamic_layout>) {
    static_assert(std::is_same_v<typename decltype(prod)::layout_type, sc::dynamic_layout>);
    CHECK(prod.layout() == sc::runtime_layout::parse(lc));
  }
  CHECK(sc::to_global(prod, s) == want);
}
}  // namespace

TEST_CASE_TEMPLATE("cublas_gemm's strided-batch form matches host_gemm matrix by matrix" * doctest::skip(no_device()), T, float, double,
                   __half, __nv_bfloat16) {
  batched_suite<T>();
}

// No device needed: the batch is checked before cuBLAS is called.
TEST_CASE("cublas_gemm's strided-batch form rejects negative strides and overlapping C matrices" * doctest::test_suite("host_only")) {
  sc::device::cublas_gemm g(static_cast<cublasHandle_t>(nullptr), cudaStream_t{});
  float* p = nullptr;
  const auto n = sc::gemm_op::n;
  CHECK_THROWS_AS(g(n, n, 4, 5, 3, p, 3, -12, p, 5, 15, p, 5, 20, 2, false), sc::layout_error);
  CHECK_THROWS_AS(g(n, n, 4, 5, 3, p, 3, 12, p, 5, -1, p, 5, 20, 2, false), sc::layout_error);
  CHECK_THROWS_AS(g(n, n, 4, 5, 3, p, 3, 12, p, 5, 15, p, 5, 19, 2, false), sc::layout_error);  // C spans 20
  CHECK_THROWS_AS(g(n, n, 4, 5, 3, p, 3, 12, p, 5, 15, p, 5, 0, 2, false), sc::layout_error);
  CHECK_THROWS_AS(g(n, n, 4, 5, 3, p, 2, 12, p, 5, 15, p, 5, 20, 2, false), sc::layout_error);  // A's row is 3 long
  CHECK_THROWS_AS(g(n, n, 4, 5, 3, p, 3, 12, p, 5, 15, p, 5, 20, -1, false), sc::layout_error);
  CHECK_NOTHROW(g(n, n, 4, 5, 3, p, 3, 0, p, 5, 0, p, 5, 20, 0, false));  // an empty batch: nothing to do
}

namespace {
// A [x, h, m, k] @ B [h, k, n] and Q K^T [b, h, s, d] on a 2x2 mesh: C's batched pieces go
// through the strided-batch form (stride 0 where a rank's piece holds one matrix of B).
template <class Comm>
void check_batched_matmul(Comm& c, cudaStream_t s) {
  using R = sc::replicate;
  auto mesh = sc::make_mesh(c, std::array<int, 2>{2, 2});
  const std::int64_t x = 3, h = 3, m = 5, k = 4, n = 3;  // uneven over both axes
  std::vector<float> ga(std::size_t(x * h * m * k)), gb(std::size_t(h * k * n)), want(std::size_t(x * h * m * n), 0.f);
  for (std::size_t i = 0; i < ga.size(); ++i) ga[i] = float(int(i % 5) - 2);
  for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = float(int(i % 3) - 1);
  for (std::int64_t xi = 0; xi < x; ++xi)
    for (std::int64_t hi = 0; hi < h; ++hi)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t p = 0; p < k; ++p)
            want[std::size_t(((xi * h + hi) * m + i) * n + j)] +=
                ga[std::size_t(((xi * h + hi) * m + i) * k + p)] * gb[std::size_t((hi * k + p) * n + j)];
  auto a = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(mesh, ga, std::array<std::int64_t, 4>{x, h, m, k}, s);
  auto b = sc::distribute<sc::layout<R, sc::shard<0>>>(mesh, gb, std::array<std::int64_t, 3>{h, k, n}, s);
  auto prod = sc::matmul(a, b, s);
  static_assert(std::is_same_v<typename decltype(prod)::layout_type, sc::layout<sc::shard<0>, sc::shard<1>>>);
  CHECK(sc::to_global(prod, s) == want);
  // Q K^T per (batch, head), Q and K [2, 3, 4, 6] with the heads split over axis 1.
  const std::int64_t bq = 2, hq = 3, sq = 4, d = 6;
  std::vector<float> gq(std::size_t(bq * hq * sq * d)), gk(gq.size()), ws(std::size_t(bq * hq * sq * sq), 0.f);
  for (std::size_t i = 0; i < gq.size(); ++i) gq[i] = float(int(i % 7) - 3);
  for (std::size_t i = 0; i < gk.size(); ++i) gk[i] = float(int(i % 4) - 2);
  for (std::int64_t e = 0; e < bq * hq; ++e)
    for (std::int64_t i = 0; i < sq; ++i)
      for (std::int64_t j = 0; j < sq; ++j)
        for (std::int64_t p = 0; p < d; ++p) ws[std::size_t((e * sq + i) * sq + j)] += gq[std::size_t((e * sq + i) * d + p)] * gk[std::size_t((e * sq + j) * d + p)];
  auto q = sc::distribute<sc::layout<R, sc::shard<1>>>(mesh, gq, std::array<std::int64_t, 4>{bq, hq, sq, d}, s);
  auto kk = sc::distribute<sc::layout<R, sc::shard<1>>>(mesh, gk, std::array<std::int64_t, 4>{bq, hq, sq, d}, s);
  CHECK(sc::to_global(sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(q, kk, s), s) == ws);
}
}  // namespace

TEST_CASE("batched matmul(a, b, stream) on device dtensors of a 2x2 p2p mesh matches the global products" * doctest::skip(no_device())) {
  sc::p2p::run(4, {0}, [](sc::p2p::communicator& c) {
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    check_batched_matmul(c, s);
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}

TEST_CASE("matmul(a, b, stream) on device dtensors of a 2x2 p2p mesh matches the global product" * doctest::skip(no_device())) {
  sc::p2p::run(4, {0}, [](sc::p2p::communicator& c) {
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    using R = sc::replicate;
    check_matmul<sc::layout<sc::shard<0>, R>, sc::layout<R, sc::shard<1>>>(c, s);               // -> shard<0>, shard<1>
    check_matmul<sc::layout<sc::shard<1>, R>, sc::layout<sc::shard<0>, sc::shard<1>>>(c, s);    // -> partial<sum>, shard<1>
    check_matmul<sc::layout<R, R>, sc::layout<R, R>>(c, s);                                     // -> replicate, replicate
    check_matmul<sc::dynamic_layout, sc::dynamic_layout>(c, s, "S(1),S(0)", "S(0),R", "P(sum),S(0)");  // checked at run time
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  });
}
