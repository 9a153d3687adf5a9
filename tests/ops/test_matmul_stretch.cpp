// matmul stretches a batch dim that both operands have, with extent 1 in one of them, over
// the other's extent, as torch.matmul does ([1, h, m, k] @ [b, h, k, n] is [b, h, m, n]).
// Checked against a single-rank reference that walks C's batch indices and reads an
// operand at index 0 along a dim it stretches: every pair of layouts of A and B (R,
// S(every dim), P(sum), P(max)) on 2x2 and 3-rank meshes, with uneven and empty pieces,
// partial terms that differ from rank to rank, and each transposition. A stretched dim
// sharded over a mesh axis of more than one rank throws layout_error naming the dim and the
// axis; a pair of placements the matmul table refuses is refused as before. A GEMM functor
// with the strided-batch form is called once per run of evenly spaced matrices.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;

namespace {
using optest::ints;
using optest::ref_gemm;
constexpr auto N = sc::gemm_op::n;
constexpr auto T = sc::gemm_op::t;

/// One product: op(A) [.., m, k] of rank RA and op(B) [.., k, n] of rank RB as read, their
/// batch dims right-aligned; A and B as stored for the transpositions, and the reference C.
template <int RA, int RB>
struct product {
  static constexpr int RC = RA > RB ? RA : RB;
  std::array<std::int64_t, RA> ea;
  std::array<std::int64_t, RB> eb;
  std::array<std::int64_t, RC> ec{};
  std::vector<double> a, b, c;

  product(std::array<std::int64_t, RA> ea_, std::array<std::int64_t, RB> eb_, sc::gemm_op oa, sc::gemm_op ob) : ea(ea_), eb(eb_) {
    const std::int64_t m = ea[RA - 2], k = ea[RA - 1], n = eb[RB - 1];
    for (int c = 0; c < RC - 2; ++c) {  // C's batch extent: an operand's unless it lacks the dim or has 1
      const int da = c - (RC - RA), db = c - (RC - RB);
      const std::int64_t xa = da >= 0 ? ea[static_cast<std::size_t>(da)] : 1, xb = db >= 0 ? eb[static_cast<std::size_t>(db)] : 1;
      ec[static_cast<std::size_t>(c)] = da >= 0 && xa != 1 ? xa : db >= 0 ? xb : 1;
    }
    ec[RC - 2] = m;
    ec[RC - 1] = n;
    std::int64_t na = 1, nb = 1, nc = 1;
    for (int d = 0; d < RA - 2; ++d) na *= ea[static_cast<std::size_t>(d)];
    for (int d = 0; d < RB - 2; ++d) nb *= eb[static_cast<std::size_t>(d)];
    for (int d = 0; d < RC - 2; ++d) nc *= ec[static_cast<std::size_t>(d)];
    const auto opa = ints<double>(na * m * k, 1), opb = ints<double>(nb * k * n, 4);
    a = oa == T ? optest::transposed(opa, m, k, na) : opa;
    b = ob == T ? optest::transposed(opb, k, n, nb) : opb;
    for (std::int64_t i = 0; i < nc; ++i) {
      std::array<std::int64_t, RC> idx{};  // C's batch index i as a multi-index
      for (std::int64_t d = RC - 3, rest = i; d >= 0; --d) {
        idx[static_cast<std::size_t>(d)] = rest % ec[static_cast<std::size_t>(d)];
        rest /= ec[static_cast<std::size_t>(d)];
      }
      std::int64_t ia = 0, ib = 0;  // the operands' matrices: index 0 along a dim of extent 1
      for (int d = 0; d < RA - 2; ++d) {
        const std::int64_t x = ea[static_cast<std::size_t>(d)];
        ia = ia * x + (x == 1 ? 0 : idx[static_cast<std::size_t>(d + RC - RA)]);
      }
      for (int d = 0; d < RB - 2; ++d) {
        const std::int64_t x = eb[static_cast<std::size_t>(d)];
        ib = ib * x + (x == 1 ? 0 : idx[static_cast<std::size_t>(d + RC - RB)]);
      }
      const auto pa = opa.begin() + ia * m * k, pb = opb.begin() + ib * k * n;
      const auto ci = ref_gemm(std::vector<double>(pa, pa + m * k), std::vector<double>(pb, pb + k * n), m, k, n);
      c.insert(c.end(), ci.begin(), ci.end());
    }
  }
  template <std::size_t R>
  static std::array<std::int64_t, R> stored(std::array<std::int64_t, R> e, sc::gemm_op o) {
    if (o == T) std::swap(e[R - 2], e[R - 1]);
    return e;
  }
  std::string name() const { return "A " + describe(ea) + ", B " + describe(eb); }
  template <std::size_t R>
  static std::string describe(const std::array<std::int64_t, R>& e) {
    std::string s = "[";
    for (std::size_t d = 0; d < R; ++d) s += (d ? ", " : "") + std::to_string(e[d]);
    return s + "]";
  }
  /// Is C's batch dim c stretched (extent 1 in one operand, another extent in the other)?
  bool stretched(int c) const {
    const int da = c - (RC - RA), db = c - (RC - RB);
    return c < RC - 2 && da >= 0 && db >= 0 && ea[static_cast<std::size_t>(da)] != eb[static_cast<std::size_t>(db)];
  }
};

/// The mesh axis of more than one rank that shards a stretched dim in A or B (as stored:
/// batch dims are not transposed), or -1.
template <int RA, int RB, int NAX>
int sharded_stretch(const product<RA, RB>& p, const sc::runtime_layout& la, const sc::runtime_layout& lb, const std::array<int, NAX>& shape) {
  constexpr int RC = product<RA, RB>::RC;
  for (int x = 0; x < NAX; ++x) {
    if (shape[static_cast<std::size_t>(x)] == 1) continue;
    for (int c = 0; c < RC - 2; ++c)
      if (p.stretched(c) && ((la[x].is_shard() && la[x].dim == c - (RC - RA)) || (lb[x].is_shard() && lb[x].dim == c - (RC - RB)))) return x;
  }
  return -1;
}

/// Every pair of layouts (each operand's from R, S(every dim), P(sum), P(max)) of each
/// product on a mesh of `shape`: C against the reference, or the refusal the pair needs.
template <sc::gemm_op OA, sc::gemm_op OB, int RA, int RB, int NAX>
void sweep(std::array<int, NAX> shape, const std::vector<std::pair<std::array<std::int64_t, RA>, std::array<std::int64_t, RB>>>& cases) {
  INFO("mesh " << optest::shape_name<NAX>(shape) << ", matmul<" << (OA == T ? "t" : "n") << ", " << (OB == T ? "t" : "n") << ">");
  const auto la = optest::layouts(optest::placements(RA, {sc::reduce_op::sum, sc::reduce_op::max}), NAX);
  const auto lb = optest::layouts(optest::placements(RB, {sc::reduce_op::sum, sc::reduce_op::max}), NAX);
  std::vector<product<RA, RB>> ps;
  for (const auto& [ea, eb] : cases) ps.emplace_back(ea, eb, OA, OB);
  int nranks = 1;
  for (int x : shape) nranks *= x;
  optest::failures bad;
  std::array<int, 3> seen{};  // multiplied, refused for a sharded stretched dim, refused by the table
  std::mutex mu;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    std::array<int, 3> mine{};
    for (const auto& p : ps)
      for (const auto& a_l : la)
        for (const auto& b_l : lb) {
          const std::string what = p.name() + ", A " + sc::to_string(a_l) + ", B " + sc::to_string(b_l) + ": ";
          auto a = optest::make_terms(mesh, a_l, p.a, product<RA, RB>::stored(p.ea, OA));
          auto b = optest::make_terms(mesh, b_l, p.b, product<RA, RB>::stored(p.eb, OB));
          const auto a_before = optest::local_copy(a), b_before = optest::local_copy(b);
          // The table's verdict on the placements (checked against the test's own table in
          // test_matmul_broadcast.cpp), then the stretched dims' shards.
          const sc::detail::layout_rule rule = sc::detail::matmul_rules(a_l, b_l, RA, RB, OA, OB);
          const int axis = sharded_stretch<RA, RB, NAX>(p, a_l, b_l, shape);
          std::string msg;
          try {
            auto c = sc::matmul<OA, OB>(a, b);
            if (rule.err != sc::detail::op_rule::ok || axis >= 0) {
              bad.add(comm.rank(), what + "multiplied where it must throw");
              continue;
            }
            ++mine[0];
            if (!(c.layout() == rule.out)) bad.add(comm.rank(), what + "C's layout is " + sc::to_string(c.layout()));
            if (c.global_extents() != p.ec) bad.add(comm.rank(), what + "C's extents are wrong");
            const std::string diff = optest::compare_global(c, p.c);
            if (!diff.empty()) bad.add(comm.rank(), what + diff);
          } catch (const sc::layout_error& e) {
            msg = e.what();
          }
          if (!msg.empty()) {
            if (rule.err != sc::detail::op_rule::ok) {
              ++mine[2];
              if (msg.find("on mesh axis") == std::string::npos) bad.add(comm.rank(), what + "refused without naming the axis: " + msg);
            } else if (axis >= 0) {
              ++mine[1];
              if (msg.find("a stretched dim cannot be sharded") == std::string::npos || msg.find("mesh axis") == std::string::npos)
                bad.add(comm.rank(), what + "the message does not say why: " + msg);
            } else {
              bad.add(comm.rank(), what + "threw: " + msg);
            }
          }
          if (optest::local_copy(a) != a_before || optest::local_copy(b) != b_before) bad.add(comm.rank(), what + "an input changed");
        }
    if (comm.rank() == 0) {
      std::lock_guard lk(mu);
      seen = mine;
    }
  });
  bad.report();
  MESSAGE(seen[0] << " products, " << seen[1] << " refused for a sharded stretched dim, " << seen[2] << " by the table");
  CHECK(seen[0] > 0);
  CHECK(seen[1] > 0);
}

using A4 = std::array<std::int64_t, 4>;
using A3 = std::array<std::int64_t, 3>;
}  // namespace

TEST_CASE("matmul stretches a shared batch dim of extent 1: every pair of layouts on a 2x2 mesh") {
  // A stretched on C's first dim, on its second (between two dims both have), B stretched,
  // both stretched on different dims; m = 5 and n = 3 split unevenly.
  sweep<N, N, 4, 4, 2>({2, 2}, {{A4{1, 3, 5, 2}, A4{2, 3, 2, 3}},
                                {A4{2, 1, 5, 2}, A4{2, 3, 2, 3}},
                                {A4{2, 3, 5, 2}, A4{2, 1, 2, 3}},
                                {A4{1, 3, 2, 2}, A4{3, 1, 2, 3}}});
}

TEST_CASE("matmul stretches a shared batch dim of extent 1: operands of different ranks, transpositions, empty C") {
  // A [1, m, k] against B [b, h, k, n]: A broadcast by rank over b and stretched over h.
  sweep<N, N, 3, 4, 1>({3}, {{A3{1, 4, 2}, A4{2, 3, 2, 5}}});
  sweep<N, N, 4, 3, 1>({3}, {{A4{2, 3, 4, 2}, A3{1, 2, 5}}});
  sweep<T, N, 3, 3, 1>({3}, {{A3{1, 4, 2}, A3{4, 2, 3}}});
  sweep<N, T, 3, 3, 2>({2, 2}, {{A3{5, 3, 2}, A3{1, 2, 4}}});
  // Extent 1 against 0: C has no batch elements.
  sweep<N, N, 3, 3, 1>({2}, {{A3{1, 2, 3}, A3{0, 3, 4}}, {A3{3, 2, 2}, A3{1, 2, 2}}});
}

TEST_CASE("matmul: shared batch extents that differ, neither 1, still throw and name the dim") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    using L = sc::layout<sc::replicate>;
    auto a = sc::distribute<L>(mesh, ints<double>(120, 1), std::array<std::int64_t, 4>{2, 3, 4, 5});
    auto b = sc::distribute<L>(mesh, ints<double>(120, 2), std::array<std::int64_t, 3>{4, 5, 6});
    CHECK_THROWS_WITH_AS(sc::matmul(a, b),
                         doctest::Contains("[2, 3, 4, 5] but B is [4, 5, 6]: the batch dim they share as C's dim 1 (A's dim 1, B's dim 0, "
                                           "aligned from the right) is 3 in A and 4 in B (shared batch dims need equal extents, or 1 in "
                                           "one operand)"),
                         sc::layout_error);
    // With a stretched dim and a mismatched k: only the mismatch is named.
    auto b1 = sc::distribute<L>(mesh, ints<double>(24, 2), std::array<std::int64_t, 3>{1, 4, 6});
    try {
      (void)sc::matmul(a, b1);
      FAIL("k 5 against 4 multiplied");
    } catch (const sc::layout_error& e) {
      const std::string msg = e.what();
      CHECK(msg.find("op(A)'s last extent (5) differs from op(B)'s rows (4)") != std::string::npos);
      CHECK(msg.find("batch dim") == std::string::npos);
    }
  });
}

namespace {
// A GEMM functor with the strided-batch form: records each call's batch, strides and
// offsets, and computes it with host_gemm matrix by matrix.
struct batch_call {
  std::int64_t batch, stride_a, stride_b, stride_c;
  std::ptrdiff_t off_a, off_b, off_c;
  bool operator==(const batch_call& o) const {
    return std::tie(batch, stride_a, stride_b, stride_c, off_a, off_b, off_c) ==
           std::tie(o.batch, o.stride_a, o.stride_b, o.stride_c, o.off_a, o.off_b, o.off_c);
  }
};
std::ostream& operator<<(std::ostream& os, const batch_call& x) {
  return os << "batch " << x.batch << ", strides " << x.stride_a << "," << x.stride_b << "," << x.stride_c << ", offsets " << x.off_a << ","
            << x.off_b << "," << x.off_c;
}
struct recorder {
  std::vector<batch_call>* calls;
  const double **a0, **b0;
  double** c0;
  void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
                  const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool acc) const {
    sc::host_gemm{}(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
  }
  void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
                  std::int64_t sa, const double* b, std::int64_t ldb, std::int64_t sb, double* c, std::int64_t ldc, std::int64_t scc,
                  std::int64_t batch, bool acc) const {
    if (!*c0) *c0 = c;
    calls->push_back({batch, sa, sb, scc, a - *a0, b - *b0, c - *c0});
    for (std::int64_t i = 0; i < batch; ++i) sc::host_gemm{}(ta, tb, m, n, k, a + i * sa, lda, b + i * sb, ldb, c + i * scc, ldc, acc);
  }
};

/// matmul of `p` on one rank with a recorder: C against the reference, and the calls.
std::vector<batch_call> calls_of(const product<4, 4>& p) {
  std::vector<batch_call> calls;
  sc::host::run(1, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{1});
    using L = sc::layout<sc::replicate>;
    auto a = sc::distribute<L>(mesh, p.a, p.ea);
    auto b = sc::distribute<L>(mesh, p.b, p.eb);
    // C's storage is made inside matmul: the recorder takes its start from the first call,
    // which starts C's piece.
    const double *a0 = a.data(), *b0 = b.data();
    double* c0 = nullptr;
    std::vector<batch_call> raw;
    auto c = sc::matmul(a, b, recorder{&raw, &a0, &b0, &c0});
    calls = raw;
    CHECK(sc::to_global(c) == p.c);
  });
  return calls;
}
}  // namespace

TEST_CASE("matmul with a stretched dim calls the strided-batch form once per run of evenly spaced matrices") {
  // A [2, 1, m=2, k=3] @ B [2, 3, k=3, n=4]: A's matrix repeats over C's second dim (stride 0)
  // and steps by one matrix (6 elements) along the first; B steps by one (12); C [2, 3]: two
  // runs of 3.
  auto got = calls_of(product<4, 4>(A4{2, 1, 2, 3}, A4{2, 3, 3, 4}, N, N));
  std::vector<batch_call> want{{3, 0, 12, 8, 0, 0, 0}, {3, 0, 12, 8, 6, 36, 24}};
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i]);
  // A [1, 3, 2, 3] @ B [2, 3, 3, 4]: A's 3 matrices start again for C's second index.
  got = calls_of(product<4, 4>(A4{1, 3, 2, 3}, A4{2, 3, 3, 4}, N, N));
  want = {{3, 6, 12, 8, 0, 0, 0}, {3, 6, 12, 8, 0, 36, 24}};
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i]);
  // A [1, 1, 2, 3] @ B [2, 3, 3, 4]: A's one matrix for all 6 (stride 0), one call.
  got = calls_of(product<4, 4>(A4{1, 1, 2, 3}, A4{2, 3, 3, 4}, N, N));
  want = {{6, 0, 12, 8, 0, 0, 0}};
  REQUIRE(got.size() == want.size());
  CHECK(got[0] == want[0]);
}
