// Region copy, fill and scale kernels (cuda/pack.cuh): every device result is compared with
// a host loop written here, independently of the kernels (the index math is restated).
// The fused reduction is tested in test_reduce.cu.
#include <doctest/doctest.h>

#include <shardcast/cuda/pack.cuh>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda_testing.hpp"

namespace sc = shardcast;
using shardcast_test::no_device;
using shardcast_test::stream_guard;

namespace {

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

// Which implementation runs: the public entry (it picks), or one of the two row paths forced.
enum class region_way { pick, kernel, memcpy2d };

template <class T>
void check_copy_region(const sc::box& sb, const sc::box& db, const sc::box& rg, std::size_t shift_s, std::size_t shift_d,
                       region_way way = region_way::pick) {
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
  if (way == region_way::pick) {
    ops::copy_region(s.p, sb, d.p, db, rg, g.s);
  } else {
    namespace dd = sc::device::detail;
    const dd::region_plan p = dd::plan_region(sizeof(T), sb, db, rg, reinterpret_cast<std::uintptr_t>(s.p),
                                              reinterpret_cast<std::uintptr_t>(d.p));
    REQUIRE(p.total > 0);
    const auto* from = reinterpret_cast<const unsigned char*>(s.p) + p.src_byte_offset;
    auto* to = reinterpret_cast<unsigned char*>(d.p) + p.dst_byte_offset;
    if (way == region_way::kernel) {
      dd::copy_rows_kernel(from, to, p, g.s);
    } else {
      REQUIRE(dd::fits_memcpy2d(p));
      dd::copy_rows_2d(from, to, p, g.s);
    }
  }
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

TEST_CASE_TEMPLATE("copy_region: the cudaMemcpy2DAsync and the kernel row paths each match the host walk" * doctest::skip(no_device()),
                   T, float, __half, double, std::int8_t) {
  // Same shapes through both paths, whatever copy_region would pick: short and long rows,
  // source and destination at equal and at different misalignments; 3-D (two outer dims)
  // on the kernel, the one path that takes it.
  for (region_way way : {region_way::kernel, region_way::memcpy2d})
    for (std::size_t ss : {0u, 1u, 3u})
      for (std::size_t ds : {0u, 2u}) {
        CAPTURE(int(way)); CAPTURE(ss); CAPTURE(ds);
        check_copy_region<T>(make_box({0, 0}, {13, 37}), make_box({0, 8}, {13, 9}), make_box({0, 8}, {13, 9}), ss, ds, way);
        check_copy_region<T>(make_box({0, 0}, {64, 300}), make_box({3, 20}, {50, 200}), make_box({3, 20}, {50, 200}), ss, ds, way);
        if (way == region_way::kernel)
          check_copy_region<T>(make_box({0, 0, 0}, {5, 7, 256}), make_box({1, 2, 64}, {3, 4, 128}), make_box({1, 3, 64}, {2, 3, 128}),
                               ss, ds, way);
        check_copy_region<T>(make_box({0, 0}, {3, 5000}), make_box({0, 1}, {3, 4998}), make_box({0, 1}, {3, 4998}), ss, ds, way);
      }
}

// The choice looks at the plan only, so it is checked on made-up addresses, with no device.
TEST_CASE("choose_region_path: memcpy for one run, the kernel for 8- and 16-byte units, cudaMemcpy2DAsync for rows of smaller "
          "units with one outer dim, else the kernel" * doctest::test_suite("host_only")) {
  namespace dd = sc::device::detail;
  const std::uintptr_t a = 0x10000, b = 0x20000;  // 16-byte aligned
  const auto path = [](std::size_t elem, const sc::box& sb, const sc::box& db, std::uintptr_t sa, std::uintptr_t da) {
    return dd::choose_region_path(dd::plan_region(elem, sb, db, db, sa, da));
  };
  // Whole rows: one contiguous run.
  CHECK(path(4, make_box({0, 0}, {64, 256}), make_box({8, 0}, {16, 256}), a, b) == dd::region_path::memcpy);
  // Columns 256..768 of 1024 floats, both buffers aligned: 2 KiB rows of 16-byte units.
  CHECK(path(4, make_box({0, 0}, {64, 1024}), make_box({0, 256}, {64, 512}), a, b) == dd::region_path::kernel);
  // From column 2: 8-byte units, still the kernel.
  CHECK(path(4, make_box({0, 0}, {64, 1024}), make_box({0, 2}, {64, 512}), a, b) == dd::region_path::kernel);
  // From column 1: 4-byte units, one outer dim, rows over the threshold.
  CHECK(path(4, make_box({0, 0}, {64, 1024}), make_box({0, 1}, {64, 512}), a, b) == dd::region_path::memcpy2d);
  CHECK(path(4, make_box({0, 0}, {64, 64}), make_box({0, 1}, {64, 31}), a, b) == dd::region_path::memcpy2d);  // 124-byte rows
  CHECK(path(2, make_box({0, 0}, {64, 4096}), make_box({0, 1}, {64, 2047}), a, b) == dd::region_path::memcpy2d);
  // Short misaligned rows: the kernel.
  CHECK(path(4, make_box({0, 0}, {64, 64}), make_box({0, 1}, {64, 15}), a, b) == dd::region_path::kernel);  // 60-byte rows
  // Long misaligned rows under two outer dims: cudaMemcpy2DAsync cannot take them; the kernel.
  CHECK(path(4, make_box({0, 0, 0}, {4, 8, 1024}), make_box({1, 2, 1}, {2, 4, 512}), a, b) == dd::region_path::kernel);
  // Nothing to copy.
  CHECK(path(4, make_box({0, 0}, {4, 4}), make_box({1, 1}, {0, 2}), a, b) == dd::region_path::none);
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
