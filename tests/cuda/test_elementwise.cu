// elementwise_exec<device_memory> (cuda/elementwise.cuh) against host loops written here:
// map / zip / zip_rows over float, double, half and bfloat16, with pointers at different
// offsets from an aligned base (vector path, scalar path, head and tail), n = 0, n not a
// multiple of the vector width, in place, and a narrowing output type.
#include <doctest/doctest.h>

#include <shardcast/cuda/elementwise.cuh>
#include <shardcast/ops/functors.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda_testing.hpp"

namespace sc = shardcast;
namespace fn = shardcast::fn;
using shardcast_test::no_device;
using shardcast_test::stream_guard;
using shardcast_test::device_buffer;
using ew = sc::detail::elementwise_exec<sc::device_memory>;

namespace {

template <class T>
T from_d(double v) { return sc::device::convert<T>(static_cast<float>(v)); }
template <> double from_d<double>(double v) { return v; }
template <class T>
double to_d(T v) { return static_cast<double>(sc::device::convert<float>(v)); }
template <> double to_d<double>(double v) { return v; }

// Small multiples of 1/4 in [-4, 4): exact in every tested type, and sums/products of two stay exact.
double input(std::size_t i, int salt) { return double(int((i * 7 + std::size_t(salt) * 3) % 32) - 16) / 4.0; }

template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, __half>) return 2e-3;          // 4 half ulps (2^-11 relative)
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1e-2;  // 2.5 bfloat16 ulps (2^-8)
  else if constexpr (std::is_same_v<T, float>) return 1e-5;
  else return 1e-12;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

// Counts elements off by more than tol * (1 + |want|) (tol = 0: bit-exact after rounding to Out).
template <class Out>
std::size_t mismatches(const std::vector<Out>& got, const std::vector<double>& want, double tol) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = tol == 0 ? to_d(from_d<Out>(want[i])) : want[i];
    const double g = to_d(got[i]);
    if (tol == 0 ? g != w : std::abs(g - w) > tol * (1 + std::abs(w))) {
      if (bad < 3) MESSAGE("i=" << i << " want " << w << " got " << g);
      ++bad;
    }
  }
  return bad;
}

const std::size_t sizes[] = {0, 1, 3, 7, 8, 9, 17, 4099, 100003};
const std::size_t shifts[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {0, 1, 0}, {1, 2, 3}, {2, 0, 2}};

template <class T>
void map_suite() {
  stream_guard g;
  for (std::size_t n : sizes)
    for (const auto& sh : shifts) {
      CAPTURE(n); CAPTURE(sh[0]); CAPTURE(sh[1]);
      std::vector<T> h(n);
      std::vector<double> x(n), relu(n), scaled(n), gelu(n), silu(n);
      for (std::size_t i = 0; i < n; ++i) {
        x[i] = input(i, 1);
        h[i] = from_d<T>(x[i]);
        relu[i] = x[i] > 0 ? x[i] : 0;
        scaled[i] = 2 * x[i];
        gelu[i] = gelu_ref(x[i]);
        silu[i] = silu_ref(x[i]);
      }
      device_buffer<T> in(n, sh[0]), out(n, sh[1]), out2(n, sh[1]), inplace(n, sh[2]);
      in.put(h);
      inplace.put(h);
      ew::map(in.p, out.p, n, fn::relu, g.s);
      ew::map(in.p, out2.p, n, fn::gelu, g.s);
      ew::map(inplace.p, inplace.p, n, fn::scale(2.0f), g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), relu, 0) == 0);
      CHECK(mismatches(out2.get(), gelu, tolerance<T>()) == 0);
      CHECK(mismatches(inplace.get(), scaled, 0) == 0);
      CHECK(mismatches(in.get(), x, 0) == 0);  // the input is untouched
      ew::map(in.p, out.p, n, fn::silu, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), silu, tolerance<T>()) == 0);
      std::vector<double> ex(n);
      for (std::size_t i = 0; i < n; ++i) ex[i] = std::exp(x[i]);
      ew::map(in.p, out.p, n, fn::exp, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), ex, tolerance<T>()) == 0);
      // The functors of div(x, c) and sub(c, x): x / c and c - x, exact for these inputs.
      std::vector<double> quarter(n), from_one(n);
      for (std::size_t i = 0; i < n; ++i) {
        quarter[i] = x[i] / 4;
        from_one[i] = 1 - x[i];
      }
      ew::map(in.p, out.p, n, fn::div_by(4.0f), g.s);
      ew::map(in.p, out2.p, n, fn::rsub(1.0f), g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), quarter, 0) == 0);
      CHECK(mismatches(out2.get(), from_one, 0) == 0);
    }
}

template <class T>
void zip_suite() {
  stream_guard g;
  for (std::size_t n : sizes)
    for (const auto& sh : shifts) {
      CAPTURE(n); CAPTURE(sh[0]); CAPTURE(sh[1]); CAPTURE(sh[2]);
      std::vector<T> ha(n), hb(n);
      std::vector<double> sum(n), diff(n), prod(n), grad(n);
      for (std::size_t i = 0; i < n; ++i) {
        const double a = input(i, 2), b = input(i, 5);
        ha[i] = from_d<T>(a);
        hb[i] = from_d<T>(b);
        sum[i] = a + b;
        diff[i] = a - b;
        prod[i] = a * b;
        grad[i] = a > 0 ? b : 0;  // relu_grad(x = a, dy = b)
      }
      device_buffer<T> a(n, sh[0]), b(n, sh[1]), out(n, sh[2]), out2(n, sh[2]);
      a.put(ha);
      b.put(hb);
      ew::zip(a.p, b.p, out.p, n, fn::add, g.s);
      ew::zip(a.p, b.p, out2.p, n, fn::relu_grad, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), sum, 0) == 0);
      CHECK(mismatches(out2.get(), grad, 0) == 0);
      ew::zip(a.p, b.p, out.p, n, fn::mul, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), prod, 0) == 0);
      // A marked functor (what zip with a partial and a replicated operand takes) runs in kernels too.
      ew::zip(a.p, b.p, out.p, n, fn::nondecreasing_in<1>(fn::linear_in<0>(fn::mul)), g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), prod, 0) == 0);
      // In place on the first operand: a = a - b.
      ew::zip(a.p, b.p, a.p, n, fn::sub, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(a.get(), diff, 0) == 0);
    }
}

template <class T>
void zip_rows_suite() {
  stream_guard g;
  const std::size_t shapes[][2] = {{0, 5}, {5, 0}, {1, 1}, {3, 7}, {5, 64}, {17, 33}, {4, 4}, {1000, 129}, {2, 1}};
  for (const auto& rc : shapes)
    for (const auto& sh : shifts) {
      const std::size_t rows = rc[0], cols = rc[1], n = rows * cols;
      CAPTURE(rows); CAPTURE(cols); CAPTURE(sh[0]); CAPTURE(sh[1]); CAPTURE(sh[2]);
      std::vector<T> ha(n), hr(cols);
      std::vector<double> want(n), want_inplace(n);
      for (std::size_t c = 0; c < cols; ++c) hr[c] = from_d<T>(input(c, 9));
      for (std::size_t i = 0; i < n; ++i) {
        ha[i] = from_d<T>(input(i, 4));
        want[i] = input(i, 4) + input(i % cols, 9);       // bias over the innermost dim
        want_inplace[i] = input(i, 4) * input(i % cols, 9);
      }
      device_buffer<T> a(n, sh[0]), row(cols, sh[1]), out(n, sh[2]);
      a.put(ha);
      row.put(hr);
      ew::zip_rows(a.p, row.p, out.p, rows, cols, fn::add, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), want, 0) == 0);
      ew::zip_rows(a.p, row.p, a.p, rows, cols, fn::mul, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(a.get(), want_inplace, 0) == 0);
    }
}

template <class T>
void zip_broadcast_suite() {
  stream_guard g;
  // [outer, mid, inner]: b [outer, inner] broadcast along the middle dim.
  const std::size_t shapes[][3] = {{0, 3, 2}, {2, 0, 3}, {3, 2, 0}, {1, 1, 1}, {3, 5, 7}, {1, 64, 5}, {17, 9, 1}, {4, 129, 33}, {2, 1, 3}};
  for (const auto& sh3 : shapes)
    for (const auto& sh : shifts) {
      const std::size_t outer = sh3[0], mid = sh3[1], inner = sh3[2], n = outer * mid * inner, nb = outer * inner;
      CAPTURE(outer); CAPTURE(mid); CAPTURE(inner); CAPTURE(sh[0]); CAPTURE(sh[1]); CAPTURE(sh[2]);
      std::vector<T> ha(n), hb(nb);
      std::vector<double> want(n), want_inplace(n);
      for (std::size_t j = 0; j < nb; ++j) hb[j] = from_d<T>(input(j, 6));
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t m = 0; m < mid; ++m)
          for (std::size_t k = 0; k < inner; ++k) {
            const std::size_t i = (o * mid + m) * inner + k;
            ha[i] = from_d<T>(input(i, 3));
            want[i] = input(i, 3) - input(o * inner + k, 6);
            want_inplace[i] = input(i, 3) * input(o * inner + k, 6);
          }
      device_buffer<T> a(n, sh[0]), b(nb, sh[1]), out(n, sh[2]);
      a.put(ha);
      b.put(hb);
      ew::zip_broadcast(a.p, b.p, out.p, outer, mid, inner, fn::sub, g.s);
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(out.get(), want, 0) == 0);
      ew::zip_broadcast(a.p, b.p, a.p, outer, mid, inner, fn::mul, g.s);  // in place on a
      SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
      CHECK(mismatches(a.get(), want_inplace, 0) == 0);
    }
}

}  // namespace

TEST_CASE_TEMPLATE("elementwise_exec<device_memory>::map matches a host loop" * doctest::skip(no_device()), T, float, double, __half,
                   __nv_bfloat16) {
  map_suite<T>();
}

TEST_CASE_TEMPLATE("elementwise_exec<device_memory>::zip matches a host loop" * doctest::skip(no_device()), T, float, double, __half,
                   __nv_bfloat16) {
  zip_suite<T>();
}

TEST_CASE_TEMPLATE("elementwise_exec<device_memory>::zip_rows broadcasts the row over every row" * doctest::skip(no_device()), T,
                   float, double, __half, __nv_bfloat16) {
  zip_rows_suite<T>();
}

TEST_CASE_TEMPLATE("elementwise_exec<device_memory>::zip_broadcast broadcasts b along the middle dim" * doctest::skip(no_device()), T,
                   float, double, __half) {
  zip_broadcast_suite<T>();
}

TEST_CASE("elementwise_exec<device_memory>::map narrows float to bfloat16 and half, rounding to nearest even" *
          doctest::skip(no_device())) {
  stream_guard g;
  const std::size_t n = 4099;
  std::vector<float> h(n);
  // Values that are not representable in 8 or 11 mantissa bits, so the rounding shows.
  for (std::size_t i = 0; i < n; ++i) h[i] = 1.0f + float(i) * (1.0f / 4096.0f) + float(int(i % 3)) * (1.0f / 8192.0f);
  for (std::size_t shift : {0u, 1u, 2u}) {
    CAPTURE(shift);
    device_buffer<float> in(n, shift);
    device_buffer<__nv_bfloat16> outb(n, shift);
    device_buffer<__half> outh(n, 0);
    in.put(h);
    ew::map(in.p, outb.p, n, fn::identity, g.s);
    ew::map(in.p, outh.p, n, fn::identity, g.s);
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(g.s));
    const auto gb = outb.get();
    const auto gh = outh.get();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const __nv_bfloat16 wb = __float2bfloat16_rn(h[i]);  // host-side conversion from cuda_bf16.h
      const __half wh = __float2half_rn(h[i]);
      bad += std::memcmp(&gb[i], &wb, sizeof wb) != 0;
      bad += std::memcmp(&gh[i], &wh, sizeof wh) != 0;
    }
    CHECK(bad == 0);
  }
}
