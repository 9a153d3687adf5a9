// The index math the device kernels use (cuda/index_math.hpp), checked on the host
// against brute-force references written here: element coverage and alignment of vector
// splits, region copies simulated byte by byte against a walk of every coordinate, and
// the row-major to column-major GEMM mapping run through a naive column-major GEMM.
#include <doctest/doctest.h>

#include <shardcast/cuda/index_math.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace sc = shardcast;
namespace dd = shardcast::device::detail;

TEST_CASE("vector_width: 16 bytes of the widest type, scalar for odd sizes") {
  const std::size_t f[] = {4}, fh[] = {4, 2}, h[] = {2}, d[] = {8}, b[] = {1}, odd[] = {12}, big[] = {32}, z[] = {4, 0};
  CHECK(dd::vector_width(f, 1) == 4);
  CHECK(dd::vector_width(fh, 2) == 4);
  CHECK(dd::vector_width(h, 1) == 8);
  CHECK(dd::vector_width(d, 1) == 2);
  CHECK(dd::vector_width(b, 1) == 16);
  CHECK(dd::vector_width(odd, 1) == 1);
  CHECK(dd::vector_width(big, 1) == 1);
  CHECK(dd::vector_width(z, 2) == 1);
  static constexpr std::size_t cf[] = {4, 2};
  static_assert(dd::vector_width(cf, 2) == 4);
}

TEST_CASE("split_for_vectors covers every element once and aligns every vector in every array") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4000; ++trial) {
    const int k = 1 + int(rng() % 3);
    std::size_t sizes[3];
    std::uintptr_t addrs[3];
    const std::size_t choices[] = {1, 2, 4, 8};
    for (int j = 0; j < k; ++j) sizes[j] = choices[rng() % 4];
    const int w = dd::vector_width(sizes, k);
    // Either one common element phase (offset in elements from a 256-byte boundary), or random phases.
    const bool common = rng() % 2 == 0;
    const std::size_t phase = rng() % 16;
    for (int j = 0; j < k; ++j) {
      const std::size_t ph = common ? phase : rng() % 16;
      addrs[j] = 0x10000 + 256 * (rng() % 8) + ph * sizes[j];
    }
    const std::size_t n = rng() % 3 == 0 ? rng() % 8 : rng() % 300;
    CAPTURE(trial);
    const dd::vector_split s = dd::split_for_vectors(n, w, addrs, sizes, k);
    const std::size_t ns = dd::scalar_count(n, s, w);
    REQUIRE(s.head + s.nvec * std::size_t(w) <= n);
    std::vector<int> hits(n, 0);
    for (std::size_t i = 0; i < ns; ++i) {
      const std::size_t e = dd::scalar_index(s, w, i);
      REQUIRE(e < n);
      ++hits[e];
    }
    for (std::size_t v = 0; v < s.nvec; ++v)
      for (int e = 0; e < w; ++e) ++hits[s.head + v * std::size_t(w) + std::size_t(e)];
    bool once = true;
    for (int h : hits) once = once && h == 1;
    CHECK(once);
    for (std::size_t v = 0; v < s.nvec; ++v)
      for (int j = 0; j < k; ++j)
        CHECK((addrs[j] + (s.head + v * std::size_t(w)) * sizes[j]) % (std::size_t(w) * sizes[j]) == 0);
    // With one common phase the split is maximal: fewer than a vector before and after.
    if (common && w > 1 && n >= 2 * std::size_t(w)) {
      CHECK(s.head < std::size_t(w));
      CHECK(n - s.head - s.nvec * std::size_t(w) < std::size_t(w));
    }
  }
  // Different phases cannot share vectors: all scalar.
  const std::size_t sz[] = {4, 4};
  const std::uintptr_t ad[] = {0x1000, 0x1004};
  const auto s = dd::split_for_vectors(100, 4, ad, sz, 2);
  CHECK(s.nvec == 0);
  CHECK(s.head == 100);
}

namespace {

sc::box make_box(std::initializer_list<std::int64_t> off, std::initializer_list<std::int64_t> ext) {
  sc::box b;
  b.rank = int(off.size());
  int d = 0;
  for (auto o : off) b.off[d++] = o;
  d = 0;
  for (auto e : ext) b.ext[d++] = e;
  return b;
}

std::int64_t lin(const sc::box& b, const std::int64_t* c) {
  std::int64_t i = 0;
  for (int d = 0; d < b.rank; ++d) i = i * b.ext[d] + (c[d] - b.off[d]);
  return i;
}

// Copies with the plan exactly as the device code does (unit by unit, and row by row as
// the batched path does) and compares with a walk over every coordinate of the region.
void check_plan(std::size_t elem, const sc::box& sb, const sc::box& db, const sc::box& rg, std::size_t sshift, std::size_t dshift) {
  const auto ns = std::size_t(sb.volume()) * elem, nd = std::size_t(db.volume()) * elem;
  // 256-byte aligned storage; the buffers start `shift` elements in.
  std::vector<unsigned char> sraw(ns + sshift * elem + 512), draw(nd + dshift * elem + 512);
  const auto align = [](std::vector<unsigned char>& v) {
    const auto a = reinterpret_cast<std::uintptr_t>(v.data());
    return v.data() + ((256 - a % 256) % 256);
  };
  unsigned char* s = align(sraw) + sshift * elem;
  unsigned char* d0 = align(draw) + dshift * elem;
  for (std::size_t i = 0; i < ns; ++i) s[i] = static_cast<unsigned char>(i * 31 + 7);
  std::vector<unsigned char> want(nd, 0xee), got(nd, 0xee), rows(nd, 0xee);
  std::int64_t c[SHARDCAST_MAX_RANK];
  for (std::int64_t k = 0; k < rg.volume(); ++k) {
    std::int64_t r = k;
    for (int d = rg.rank - 1; d >= 0; --d) {
      c[d] = rg.off[d] + r % rg.ext[d];
      r /= rg.ext[d];
    }
    std::memcpy(&want[std::size_t(lin(db, c)) * elem], s + std::size_t(lin(sb, c)) * elem, elem);
  }
  const dd::region_plan p = dd::plan_region(elem, sb, db, rg, reinterpret_cast<std::uintptr_t>(s), reinterpret_cast<std::uintptr_t>(d0));
  if (rg.volume() == 0) {
    CHECK(p.total == 0);
    return;
  }
  REQUIRE(p.rank >= 1);
  CHECK(p.rows() * p.row_units() == p.total);
  CHECK(p.total * p.unit == rg.volume() * std::int64_t(elem));
  const std::int64_t u = p.unit;
  // Every unit is aligned in both buffers.
  CHECK((reinterpret_cast<std::uintptr_t>(s) + std::uintptr_t(p.src_byte_offset)) % std::uintptr_t(u) == 0);
  CHECK((reinterpret_cast<std::uintptr_t>(d0) + std::uintptr_t(p.dst_byte_offset)) % std::uintptr_t(u) == 0);
  bool in_bounds = true;
  for (std::int64_t idx = 0; idx < p.total; ++idx) {
    std::int64_t so = 0, dof = 0;
    dd::unit_offsets(p, idx, so, dof);
    const std::int64_t sb_ = p.src_byte_offset + so * u, db_ = p.dst_byte_offset + dof * u;
    in_bounds = in_bounds && sb_ >= 0 && sb_ + u <= std::int64_t(ns) && db_ >= 0 && db_ + u <= std::int64_t(nd);
    if (!in_bounds) break;
    std::memcpy(&got[std::size_t(db_)], s + sb_, std::size_t(u));
  }
  REQUIRE(in_bounds);
  CHECK(got == want);
  // Row by row (what the batched-memcpy path hands to CUB).
  for (std::int64_t r = 0; r < p.rows(); ++r) {
    const std::int64_t so = p.src_byte_offset + dd::row_offset(p, r, false) * u;
    const std::int64_t dof = p.dst_byte_offset + dd::row_offset(p, r, true) * u;
    std::memcpy(&rows[std::size_t(dof)], s + so, std::size_t(p.row_units() * u));
  }
  CHECK(rows == want);
}

}  // namespace

TEST_CASE("plan_region: fixed cases, including the widest unit for aligned rows") {
  // Columns 8..135 of a 13 x 256 float matrix into a 13 x 128 buffer: 512-byte rows, 1024-byte
  // source stride, 256-aligned bases: 16-byte units.
  {
    const auto sb = make_box({0, 0}, {13, 256}), db = make_box({0, 8}, {13, 128});
    const auto p = dd::plan_region(4, sb, db, db, 0x10000, 0x20000);
    CHECK(p.rank == 2);
    CHECK(p.unit == 16);
    CHECK(p.ext[1] == 128 * 4 / 16);
    CHECK(p.sstride[0] == 256 * 4 / 16);
    CHECK(p.dstride[0] == 128 * 4 / 16);
    CHECK(p.src_byte_offset == 8 * 4);
    CHECK(p.dst_byte_offset == 0);
    check_plan(4, sb, db, db, 0, 0);
  }
  // Whole rows merge into one contiguous run.
  {
    const auto sb = make_box({0, 0}, {13, 64}), db = make_box({4, 0}, {5, 64});
    const auto p = dd::plan_region(4, sb, db, db, 0x10000, 0x20000);
    CHECK(p.contiguous());
    CHECK(p.total * p.unit == 5 * 64 * 4);
    check_plan(4, sb, db, db, 0, 1);
  }
  // One element off alignment: the unit drops to what the addresses allow.
  {
    const auto sb = make_box({0, 0}, {13, 256}), db = make_box({0, 8}, {13, 128});
    CHECK(dd::plan_region(4, sb, db, db, 0x10004, 0x20000).unit == 4);
    CHECK(dd::plan_region(2, sb, db, db, 0x10002, 0x20000).unit == 2);
    CHECK(dd::plan_region(8, sb, db, db, 0x10008, 0x20000).unit == 8);
  }
  // Empty region.
  CHECK(dd::plan_region(4, make_box({0, 0}, {4, 4}), make_box({0, 0}, {4, 4}), make_box({1, 1}, {0, 2}), 0, 0).total == 0);
  check_plan(4, make_box({0, 0, 0}, {5, 7, 256}), make_box({1, 2, 64}, {3, 4, 128}), make_box({1, 3, 64}, {2, 3, 128}), 1, 1);
  check_plan(2, make_box({3}, {17}), make_box({0}, {40}), make_box({5}, {11}), 1, 0);
}

TEST_CASE("plan_region: random boxes, ranks 1-4, element sizes 1-16, misaligned bases") {
  std::mt19937 rng(11);
  const std::size_t elems[] = {1, 2, 4, 8, 16};
  for (int trial = 0; trial < 600; ++trial) {
    const int r = 1 + int(rng() % 4);
    sc::box rg, sb, db;
    rg.rank = sb.rank = db.rank = r;
    for (int d = 0; d < r; ++d) {
      rg.off[d] = std::int64_t(rng() % 4);
      rg.ext[d] = std::int64_t(rng() % 6);  // may be 0
      if (trial % 5 != 0 && rg.ext[d] == 0) rg.ext[d] = 1;
      // Boxes around the region: sometimes exactly it (full dims merge), sometimes wider.
      const std::int64_t sl = rng() % 3 == 0 ? 0 : std::int64_t(rng() % (rg.off[d] + 1));
      const std::int64_t sh = rng() % 3 == 0 ? 0 : std::int64_t(rng() % 4);
      sb.off[d] = rg.off[d] - sl;
      sb.ext[d] = rg.ext[d] + sl + sh;
      const std::int64_t dl = rng() % 3 == 0 ? 0 : std::int64_t(rng() % (rg.off[d] + 1));
      const std::int64_t dh = rng() % 3 == 0 ? 0 : std::int64_t(rng() % 4);
      db.off[d] = rg.off[d] - dl;
      db.ext[d] = rg.ext[d] + dl + dh;
    }
    const std::size_t elem = elems[rng() % 5];
    CAPTURE(trial);
    check_plan(elem, sb, db, rg, rng() % 4, rng() % 4);
  }
}

namespace {
// Column-major reference: C[i + j*ldc] (+)= sum_p opX(i,p) * opY(p,j), opX m x k, opY k x n.
void colmajor_gemm(bool tx, bool ty, std::int64_t m, std::int64_t n, std::int64_t k, const double* x, std::int64_t ldx, const double* y,
                   std::int64_t ldy, double* c, std::int64_t ldc, bool acc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = acc ? c[i + j * ldc] : 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double xv = tx ? x[p + i * ldx] : x[i + p * ldx];
        const double yv = ty ? y[j + p * ldy] : y[p + j * ldy];
        s += xv * yv;
      }
      c[i + j * ldc] = s;
    }
}
}  // namespace

TEST_CASE("to_column_major: a column-major GEMM with the mapped arguments computes the row-major product") {
  using sc::gemm_op;
  for (gemm_op ta : {gemm_op::n, gemm_op::t})
    for (gemm_op tb : {gemm_op::n, gemm_op::t})
      for (const auto& mnk : {std::array<std::int64_t, 3>{3, 5, 4}, {1, 7, 2}, {6, 1, 3}, {4, 4, 1}, {2, 3, 0}})
        for (std::int64_t pad : {0, 3})
          for (bool acc : {false, true}) {
            const std::int64_t m = mnk[0], n = mnk[1], k = mnk[2];  // not a structured binding: CAPTURE's lambda refers to them
            CAPTURE(int(ta)); CAPTURE(int(tb)); CAPTURE(m); CAPTURE(n); CAPTURE(k); CAPTURE(pad); CAPTURE(acc);
            const std::int64_t a_rows = ta == gemm_op::n ? m : k, a_cols = ta == gemm_op::n ? k : m;
            const std::int64_t b_rows = tb == gemm_op::n ? k : n, b_cols = tb == gemm_op::n ? n : k;
            const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
            std::vector<double> a(std::size_t(std::max<std::int64_t>(1, a_rows * lda))), b(std::size_t(std::max<std::int64_t>(1, b_rows * ldb)));
            std::vector<double> c0(std::size_t(m * ldc));
            for (std::size_t i = 0; i < a.size(); ++i) a[i] = double(int(i % 7) - 3);
            for (std::size_t i = 0; i < b.size(); ++i) b[i] = double(int(i % 5) - 2);
            for (std::size_t i = 0; i < c0.size(); ++i) c0[i] = double(int(i % 3));
            std::vector<double> want = c0, got = c0;
            // The row-major reference, written here: C(i,j) = sum_p op(A)(i,p) op(B)(p,j) (+ C0).
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (std::int64_t p = 0; p < k; ++p) {
                  const double av = ta == gemm_op::n ? a[std::size_t(i * lda + p)] : a[std::size_t(p * lda + i)];
                  const double bv = tb == gemm_op::n ? b[std::size_t(p * ldb + j)] : b[std::size_t(j * ldb + p)];
                  s += av * bv;
                }
                want[std::size_t(i * ldc + j)] = acc ? want[std::size_t(i * ldc + j)] + s : s;
              }
            REQUIRE(dd::gemm_strides_valid(ta, tb, m, n, k, lda, ldb, ldc));
            const auto g = dd::to_column_major(ta, tb, m, n, k, lda, ldb, ldc);
            colmajor_gemm(g.trans_x, g.trans_y, g.m, g.n, g.k, b.data(), g.ldx, a.data(), g.ldy, got.data(), g.ldc, acc);
            CHECK(got == want);
          }
}

TEST_CASE("gemm_strides_valid rejects row strides shorter than a row") {
  using sc::gemm_op;
  CHECK(dd::gemm_strides_valid(gemm_op::n, gemm_op::n, 4, 5, 3, 3, 5, 5));
  CHECK_FALSE(dd::gemm_strides_valid(gemm_op::n, gemm_op::n, 4, 5, 3, 2, 5, 5));  // A row is 3 long
  CHECK_FALSE(dd::gemm_strides_valid(gemm_op::n, gemm_op::n, 4, 5, 3, 3, 4, 5));  // B row is 5 long
  CHECK_FALSE(dd::gemm_strides_valid(gemm_op::n, gemm_op::n, 4, 5, 3, 3, 5, 4));  // C row is 5 long
  CHECK(dd::gemm_strides_valid(gemm_op::t, gemm_op::n, 4, 5, 3, 4, 5, 5));        // A stored 3 x 4
  CHECK_FALSE(dd::gemm_strides_valid(gemm_op::t, gemm_op::n, 4, 5, 3, 3, 5, 5));
  CHECK(dd::gemm_strides_valid(gemm_op::n, gemm_op::t, 4, 5, 3, 3, 3, 5));        // B stored 5 x 3
  CHECK(dd::gemm_strides_valid(gemm_op::n, gemm_op::n, 0, 5, 3, 0, 5, 0));        // empty A and C
  CHECK_FALSE(dd::gemm_strides_valid(gemm_op::n, gemm_op::n, -1, 5, 3, 3, 5, 5));
}

TEST_CASE("gemm_batch_valid: strides not negative, C's matrices apart; A and B may repeat") {
  // C is 4 x 5 with row stride 6: one C spans (4-1)*6 + 5 = 23 elements.
  CHECK(dd::gemm_batch_valid(4, 5, 6, 12, 15, 23, 3));
  CHECK(dd::gemm_batch_valid(4, 5, 6, 0, 0, 24, 3));         // A and B repeated
  CHECK_FALSE(dd::gemm_batch_valid(4, 5, 6, 12, 15, 22, 3));  // C_0's last row meets C_1's first
  CHECK_FALSE(dd::gemm_batch_valid(4, 5, 6, 12, 15, 0, 2));   // every product writes one C
  CHECK(dd::gemm_batch_valid(4, 5, 6, 12, 15, 0, 1));         // one product: no stride is used
  CHECK(dd::gemm_batch_valid(0, 5, 6, 12, 15, 0, 3));         // empty Cs
  CHECK(dd::gemm_batch_valid(4, 5, 6, 12, 15, 23, 0));
  CHECK_FALSE(dd::gemm_batch_valid(4, 5, 6, -1, 15, 23, 3));
  CHECK_FALSE(dd::gemm_batch_valid(4, 5, 6, 12, -15, 23, 3));
  CHECK_FALSE(dd::gemm_batch_valid(4, 5, 6, 12, 15, -23, 1));
  CHECK_FALSE(dd::gemm_batch_valid(4, 5, 6, 12, 15, 23, -1));
}
