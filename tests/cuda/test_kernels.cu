// Kernel unit tests: every device result is compared with a host loop written here,
// independently of the kernels (index math and epilogue formulas are restated).
#include <doctest/doctest.h>

#include <shardcast/cuda/pack.cuh>
#include <shardcast/cuda/reduce_scatter.cuh>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu_skip.hpp"

namespace sc = shardcast;
using shardcast_test::no_device;

namespace {

struct stream_guard {
  cudaStream_t s{};
  stream_guard() { SHARDCAST_CUDA_TRY(cudaStreamCreate(&s)); }
  ~stream_guard() { (void)cudaStreamDestroy(s); }
};

// A device buffer of n elements starting `shift` elements past a 256-byte aligned base.
template <class T>
struct dbuf {
  std::shared_ptr<unsigned char> raw;
  T* p = nullptr;
  dbuf(std::size_t n, std::size_t shift, cudaStream_t s) {
    raw = sc::detail::memory_ops<sc::device_memory>::allocate<unsigned char>((n + shift) * sizeof(T) + 16, s);
    p = reinterpret_cast<T*>(raw.get()) + shift;
  }
};

template <class T>
T from_int(int v) { return sc::device::convert<T>(static_cast<float>(v)); }
template <class T>
double to_d(T v) { return static_cast<double>(sc::device::convert<float>(v)); }
template <> double to_d<double>(double v) { return v; }
template <> double to_d<std::int32_t>(std::int32_t v) { return double(v); }

sc::box make_box(std::initializer_list<std::int64_t> off, std::initializer_list<std::int64_t> ext) {
  sc::box b;
  b.rank = int(off.size());
  int d = 0;
  for (auto o : off) b.off[d++] = o;
  d = 0;
  for (auto e : ext) b.ext[d++] = e;
  return b;
}

// Row-major linear index of global coordinate c inside box b.
std::int64_t lin(const sc::box& b, const std::int64_t* c) {
  std::int64_t i = 0;
  for (int d = 0; d < b.rank; ++d) i = i * b.ext[d] + (c[d] - b.off[d]);
  return i;
}

template <class T>
void check_copy_region(const sc::box& sb, const sc::box& db, const sc::box& rg, std::size_t shift_s, std::size_t shift_d) {
  using ops = sc::detail::memory_ops<sc::device_memory>;
  stream_guard g;
  const auto ns = std::size_t(sb.volume()), nd = std::size_t(db.volume());
  std::vector<T> hs(ns), hd(nd), expect(nd);
  for (std::size_t i = 0; i < ns; ++i) hs[i] = from_int<T>(int(i % 97) + 1);
  for (std::size_t i = 0; i < nd; ++i) hd[i] = expect[i] = from_int<T>(-1);
  // Reference: walk every coordinate of the region.
  std::int64_t c[SHARDCAST_MAX_RANK];
  for (std::int64_t k = 0; k < rg.volume(); ++k) {
    std::int64_t r = k;
    for (int d = rg.rank - 1; d >= 0; --d) {
      c[d] = rg.off[d] + r % rg.ext[d];
      r /= rg.ext[d];
    }
    expect[lin(db, c)] = hs[lin(sb, c)];
  }
  dbuf<T> s(ns, shift_s, g.s), d(nd, shift_d, g.s);
  ops::from_host(s.p, hs.data(), ns, g.s);
  ops::from_host(d.p, hd.data(), nd, g.s);
  ops::copy_region(s.p, sb, d.p, db, rg, g.s);
  std::vector<T> got(nd);
  ops::to_host(got.data(), d.p, nd, g.s);
  CHECK(std::memcmp(got.data(), expect.data(), nd * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE_TEMPLATE("copy_region matches a host walk of the region" * doctest::skip(no_device()), T, float, double,
                   __half, std::int8_t, std::int64_t) {
  for (std::size_t shift : {0u, 1u}) {
    CAPTURE(shift);
    // 1-D slice of an uneven shard.
    check_copy_region<T>(make_box({3}, {17}), make_box({0}, {40}), make_box({5}, {11}), shift, 0);
    // 2-D: columns of an inner-dim shard (the pack of an all-gather along dim 1).
    check_copy_region<T>(make_box({0, 0}, {13, 37}), make_box({0, 8}, {13, 9}), make_box({0, 8}, {13, 9}), shift, shift);
    // 2-D, contiguous rows: merges into one memcpy.
    check_copy_region<T>(make_box({0, 0}, {13, 64}), make_box({4, 0}, {5, 64}), make_box({4, 0}, {5, 64}), 0, shift);
    // 3-D with every dim partial and wide aligned rows (vector path when shift == 0).
    check_copy_region<T>(make_box({0, 0, 0}, {5, 7, 256}), make_box({1, 2, 64}, {3, 4, 128}),
                         make_box({1, 3, 64}, {2, 3, 128}), shift, shift);
    // Empty region: nothing written.
    check_copy_region<T>(make_box({0, 0}, {4, 4}), make_box({0, 0}, {4, 4}), make_box({1, 1}, {0, 2}), shift, 0);
  }
}

TEST_CASE("copy_region rejects a region outside the boxes" * doctest::skip(no_device())) {
  stream_guard g;
  dbuf<float> a(16, 0, g.s);
  CHECK_THROWS_AS(sc::device::copy_region(a.p, make_box({0}, {16}), a.p, make_box({0}, {16}), make_box({10}, {8}), g.s),
                  sc::layout_error);
}

TEST_CASE_TEMPLATE("fill and scale" * doctest::skip(no_device()), T, float, __half, __nv_bfloat16, std::int32_t) {
  using ops = sc::detail::memory_ops<sc::device_memory>;
  stream_guard g;
  for (std::size_t n : {1u, 7u, 1000u, 100003u}) {
    dbuf<T> d(n, 1, g.s);
    ops::fill(d.p, n, from_int<T>(3), g.s);
    ops::scale(d.p, n, from_int<T>(-2), g.s);
    std::vector<T> got(n);
    ops::to_host(got.data(), d.p, n, g.s);
    std::size_t bad = 0;
    for (auto v : got) bad += to_d(v) != -6.0;
    CHECK(bad == 0);
  }
}

namespace {

enum class epi_kind { identity, scale, bias, relu, gelu, silu, scale_bias_gelu };

double ref_epi(epi_kind k, double v, std::size_t i, const std::vector<float>& bias) {
  const double b = bias[i % bias.size()];
  switch (k) {
    case epi_kind::identity: return v;
    case epi_kind::scale: return 0.25 * v;
    case epi_kind::bias: return v + b;
    case epi_kind::relu: return v < 0 ? 0 : v;
    case epi_kind::gelu: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case epi_kind::silu: return v / (1 + std::exp(-v));
    case epi_kind::scale_bias_gelu: {
      const double x = 0.25 * v + b;
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    }
  }
  return v;
}

double ref_reduce(sc::reduce_op op, const std::vector<double>& xs) {
  double a = xs[0];
  for (std::size_t k = 1; k < xs.size(); ++k) {
    switch (op) {
      case sc::reduce_op::sum: case sc::reduce_op::avg: a += xs[k]; break;
      case sc::reduce_op::prod: a *= xs[k]; break;
      case sc::reduce_op::max: a = std::max(a, xs[k]); break;
      case sc::reduce_op::min: a = std::min(a, xs[k]); break;
    }
  }
  return op == sc::reduce_op::avg ? a / double(xs.size()) : a;
}

template <class Out>
double tolerance() {
  if constexpr (std::is_same_v<Out, __half>) return 2e-3;
  else if constexpr (std::is_same_v<Out, __nv_bfloat16>) return 1e-2;
  else if constexpr (std::is_same_v<Out, float>) return 1e-5;
  else return 0;  // integers and doubles on small integer inputs: exact
}

template <class In, class Out, class Epi>
void launch(epi_kind, const In* const* srcs, std::size_t n, Out* dst, std::size_t count, sc::reduce_op op, cudaStream_t s,
            Epi epi) {
  sc::device::reduce_sources(srcs, n, dst, count, op, s, epi);
}

template <class In, class Out>
void check_reduce(int nsrc, std::size_t count, sc::reduce_op op, epi_kind ek, std::size_t shift) {
  using ops = sc::detail::memory_ops<sc::device_memory>;
  stream_guard g;
  std::vector<std::vector<In>> host(nsrc, std::vector<In>(count));
  std::vector<dbuf<In>> dev;
  std::vector<const In*> ptrs;
  for (int k = 0; k < nsrc; ++k) {
    // Small integers (values in [-3, 4]) keep prod and sums exact in every type.
    for (std::size_t i = 0; i < count; ++i) host[k][i] = from_int<In>(int((i * 7 + k * 5) % 8) - 3);
    dev.emplace_back(count, shift * std::size_t(k % 2 + 1) % 3, g.s);  // peers misaligned differently
    ops::from_host(dev.back().p, host[k].data(), count, g.s);
    ptrs.push_back(dev.back().p);
  }
  std::vector<float> bias(29);
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = float(int(i % 5) - 2) * 0.5f;
  dbuf<float> dbias(bias.size(), 0, g.s);
  ops::from_host(dbias.p, bias.data(), bias.size(), g.s);
  dbuf<Out> out(count, shift, g.s);
  namespace cu = sc::device;
  const cu::bias_add<float> b{dbias.p, bias.size()};
  switch (ek) {
    case epi_kind::identity: launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, cu::identity{}); break;
    case epi_kind::scale: launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, cu::scale{0.25f}); break;
    case epi_kind::bias: launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, b); break;
    case epi_kind::relu: launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, cu::relu{}); break;
    case epi_kind::gelu: launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, cu::gelu{}); break;
    case epi_kind::silu: launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, cu::silu{}); break;
    case epi_kind::scale_bias_gelu:
      launch(ek, ptrs.data(), nsrc, out.p, count, op, g.s, cu::compose(cu::scale{0.25f}, b, cu::gelu{}));
      break;
  }
  std::vector<Out> got(count);
  ops::to_host(got.data(), out.p, count, g.s);
  const double tol = tolerance<Out>();
  std::size_t bad = 0;
  std::vector<double> xs(nsrc);
  for (std::size_t i = 0; i < count; ++i) {
    for (int k = 0; k < nsrc; ++k) xs[k] = to_d(host[k][i]);
    double want = ref_epi(ek, ref_reduce(op, xs), i, bias);
    if constexpr (std::is_integral_v<Out>) want = double(static_cast<Out>(want));  // the store truncates
    const double have = to_d(got[i]);
    if (std::abs(have - want) > tol * (1 + std::abs(want)) + (std::is_integral_v<Out> ? 0 : 1e-6)) {
      if (bad < 3) MESSAGE("i=" << i << " want " << want << " got " << have);
      ++bad;
    }
  }
  CHECK(bad == 0);
}

template <class In, class Out>
void reduce_suite(bool float_epilogues) {
  using op = sc::reduce_op;
  for (std::size_t shift : {0u, 1u})
    for (std::size_t count : {1u, 7u, 1000u, 4099u})
      for (int n : {1, 2, 3, 4})
        for (op o : {op::sum, op::avg, op::max, op::min, op::prod}) {
          CAPTURE(shift); CAPTURE(count); CAPTURE(n); CAPTURE(int(o));
          check_reduce<In, Out>(n, count, o, epi_kind::identity, shift);
        }
  for (epi_kind e : {epi_kind::scale, epi_kind::bias, epi_kind::relu, epi_kind::gelu, epi_kind::silu,
                     epi_kind::scale_bias_gelu}) {
    if (!float_epilogues && e != epi_kind::relu) continue;
    for (std::size_t shift : {0u, 1u}) {
      CAPTURE(int(e)); CAPTURE(shift);
      check_reduce<In, Out>(3, 4099, op::sum, e, shift);
      check_reduce<In, Out>(2, 513, op::avg, e, shift);
    }
  }
}

}  // namespace

TEST_CASE("reduce_sources: float" * doctest::skip(no_device())) { reduce_suite<float, float>(true); }
TEST_CASE("reduce_sources: double" * doctest::skip(no_device())) { reduce_suite<double, double>(true); }
TEST_CASE("reduce_sources: half (float accumulation)" * doctest::skip(no_device())) { reduce_suite<__half, __half>(true); }
TEST_CASE("reduce_sources: bfloat16" * doctest::skip(no_device())) { reduce_suite<__nv_bfloat16, __nv_bfloat16>(true); }
TEST_CASE("reduce_sources: float reduced, cast to bfloat16" * doctest::skip(no_device())) {
  reduce_suite<float, __nv_bfloat16>(true);
}
TEST_CASE("reduce_sources: float reduced, cast to half" * doctest::skip(no_device())) { reduce_suite<float, __half>(true); }
TEST_CASE("reduce_sources: int32" * doctest::skip(no_device())) { reduce_suite<std::int32_t, std::int32_t>(false); }

TEST_CASE("apply_epilogue: one pass after a reduce-scatter, in place and with a cast" * doctest::skip(no_device())) {
  using ops = sc::detail::memory_ops<sc::device_memory>;
  stream_guard g;
  const std::size_t n = 10007;
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = float(int(i % 11) - 5);
  dbuf<float> x(n, 1, g.s);
  dbuf<__nv_bfloat16> y(n, 0, g.s);
  ops::from_host(x.p, h.data(), n, g.s);
  sc::device::apply_epilogue(x.p, y.p, n, sc::device::compose(sc::device::scale{0.5f}, sc::device::relu{}), g.s);
  sc::device::apply_epilogue(x.p, x.p, n, sc::device::scale{2.0f}, g.s);
  std::vector<float> hx(n);
  std::vector<__nv_bfloat16> hy(n);
  ops::to_host(hx.data(), x.p, n, g.s);
  ops::to_host(hy.data(), y.p, n, g.s);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bad += hx[i] != 2 * h[i];
    bad += to_d(hy[i]) != std::max(0.0, 0.5 * h[i]);
  }
  CHECK(bad == 0);
}

TEST_CASE("reduce_sources rejects too many or no sources" * doctest::skip(no_device())) {
  stream_guard g;
  std::vector<const float*> none;
  dbuf<float> o(4, 0, g.s);
  CHECK_THROWS_AS(sc::device::reduce_sources(none.data(), 0, o.p, 4, sc::reduce_op::sum, g.s), sc::layout_error);
  std::vector<const float*> many(SHARDCAST_MAX_SOURCES + 1, o.p);
  CHECK_THROWS_AS(sc::device::reduce_sources(many.data(), many.size(), o.p, 4, sc::reduce_op::sum, g.s), sc::layout_error);
}

TEST_CASE("SHARDCAST_CUDA_TRY throws cuda_error with the location and clears the error" * doctest::skip(no_device())) {
  bool threw = false;
  try {
    SHARDCAST_CUDA_TRY(cudaSetDevice(1 << 20));
  } catch (const sc::cuda_error& e) {
    threw = std::string(e.what()).find("test_kernels.cu") != std::string::npos;
  }
  CHECK(threw);
  CHECK(cudaGetLastError() == cudaSuccess);
}
