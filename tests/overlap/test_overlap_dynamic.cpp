// all_gather_matmul and matmul_reduce_scatter with dynamic_layout operands: the run-time
// rule against the test's own table (every pair of layouts from R, S(0), S(1), P(sum),
// P(max) on 1- to 3-axis meshes, every overlap axis), the compile-time layouts against the
// run-time rule, and every legal pair run on 1- and 2-axis meshes (uneven and empty
// pieces, several chunk counts, partial terms that differ by rank) against a single-rank
// global GEMM.
#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <shardcast/ops/overlap.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"
#include "common/reference.hpp"

namespace sc = shardcast;

namespace {
using pd = sc::placement_desc;
using failures = shardcast::testing::failures;
using shardcast::testing::ref_gemm;
template <class T>
std::vector<T> ints(std::int64_t n, int salt) {
  return shardcast::testing::small_ints<T>(n, salt);
}

const pd kR = pd::make_replicate(), kS0 = pd::make_shard(0), kS1 = pd::make_shard(1), kPsum = pd::make_partial(sc::reduce_op::sum),
         kPmax = pd::make_partial(sc::reduce_op::max);
const std::vector<pd> kPlacements{kR, kS0, kS1, kPsum, kPmax};

/// The test's own matmul table on one axis: (A, B) -> C, or nothing when illegal.
std::optional<pd> matmul_pair(const pd& a, const pd& b) {
  if (a == kS0 && b == kR) return kS0;
  if (a == kR && b == kS1) return kS1;
  if (a == kS1 && b == kS0) return kPsum;
  if (a == kR && b == kR) return kR;
  if (a == kPsum && b == kR) return kPsum;
  if (a == kR && b == kPsum) return kPsum;
  return std::nullopt;
}

/// The expected result layout of all_gather_matmul<axis> (gather) or
/// matmul_reduce_scatter<axis> (!gather), written from the operators' documentation.
std::optional<sc::runtime_layout> expected(bool gather, int axis, const sc::runtime_layout& x, const sc::runtime_layout& w) {
  if (!(gather ? x[axis] == kS0 && w[axis] == kS1 : x[axis] == kS1 && w[axis] == kS0)) return std::nullopt;
  for (int a = axis + 1; a < x.naxes; ++a)
    if (x[a] == kS0) return std::nullopt;  // X's rows over `axis` must be one block
  sc::runtime_layout out = x;
  for (int a = 0; a < x.naxes; ++a) {
    if (a == axis) {
      out[a] = gather ? kS1 : kS0;
      continue;
    }
    const auto c = matmul_pair(x[a], w[a]);
    if (!c) return std::nullopt;
    out[a] = *c;
  }
  return out;
}

template <class X>
std::vector<typename X::value_type> local_copy(const X& x) {
  return std::vector<typename X::value_type>(x.data(), x.data() + x.local_size());
}
}  // namespace

TEST_CASE("the run-time overlap rule matches the test's table for every layout pair and axis on 1- to 3-axis meshes") {
  std::size_t legal = 0, illegal = 0;
  for (int naxes = 1; naxes <= 3; ++naxes) {
    const auto all = shardcast::testing::every_layout(kPlacements, naxes);
    for (const auto& x : all)
      for (const auto& w : all)
        for (int axis = 0; axis < naxes; ++axis)
          for (bool gather : {true, false}) {
            const auto want = expected(gather, axis, x, w);
            std::optional<sc::runtime_layout> got;
            std::string error;
            try {
              got = sc::detail::overlap_result_layout(gather, axis, x, w);
            } catch (const sc::layout_error& e) {
              error = e.what();
            }
            if (want.has_value() == got.has_value() && (!want || *want == *got)) {
              ++(want ? legal : illegal);
              if (!want) {
                // The message names the operator, the axis and both layouts.
                const std::string who = std::string(gather ? "shardcast::all_gather_matmul<" : "shardcast::matmul_reduce_scatter<") +
                                        std::to_string(axis) + ">";
                if (error.find(who) == std::string::npos || error.find(sc::to_string(x)) == std::string::npos ||
                    error.find(sc::to_string(w)) == std::string::npos) {
                  FAIL_CHECK("message: " << error);
                }
              }
              continue;
            }
            FAIL_CHECK((gather ? "all_gather_matmul<" : "matmul_reduce_scatter<")
                       << axis << "> X " << sc::to_string(x) << " W " << sc::to_string(w) << ": expected "
                       << (want ? sc::to_string(*want) : std::string("layout_error")) << ", got "
                       << (got ? sc::to_string(*got) : "layout_error: " + error));
          }
  }
  MESSAGE(legal << " legal and " << illegal << " illegal (layout pair, axis, operator) combinations");
  CHECK(legal > 0);
  CHECK(illegal > 0);
}

TEST_CASE("the compile-time overlap layouts agree with the run-time rule") {
  using R = sc::replicate;
  using S0 = sc::shard<0>;
  using S1 = sc::shard<1>;
  using P = sc::partial<sc::sum>;
  auto ag = [](int axis, auto lx, auto lw, auto ly) {
    using LX = decltype(lx);
    using LW = decltype(lw);
    CHECK(sc::detail::overlap_result_layout(true, axis, LX::desc, LW::desc) == sc::runtime_layout(decltype(ly)::desc));
  };
  auto rs = [](int axis, auto lx, auto lw, auto lz) {
    using LX = decltype(lx);
    using LW = decltype(lw);
    CHECK(sc::detail::overlap_result_layout(false, axis, LX::desc, LW::desc) == sc::runtime_layout(decltype(lz)::desc));
  };
  ag(0, sc::layout<S0>{}, sc::layout<S1>{}, sc::all_gather_matmul_layout_t<0, sc::layout<S0>, sc::layout<S1>>{});
  ag(1, sc::layout<S0, S0>{}, sc::layout<R, S1>{}, sc::all_gather_matmul_layout_t<1, sc::layout<S0, S0>, sc::layout<R, S1>>{});
  ag(0, sc::layout<S0, S1>{}, sc::layout<S1, S0>{}, sc::all_gather_matmul_layout_t<0, sc::layout<S0, S1>, sc::layout<S1, S0>>{});
  ag(1, sc::layout<P, S0>{}, sc::layout<R, S1>{}, sc::all_gather_matmul_layout_t<1, sc::layout<P, S0>, sc::layout<R, S1>>{});
  rs(0, sc::layout<S1>{}, sc::layout<S0>{}, sc::matmul_reduce_scatter_layout_t<0, sc::layout<S1>, sc::layout<S0>>{});
  rs(1, sc::layout<S0, S1>{}, sc::layout<R, S0>{}, sc::matmul_reduce_scatter_layout_t<1, sc::layout<S0, S1>, sc::layout<R, S0>>{});
  rs(0, sc::layout<S1, P>{}, sc::layout<S0, R>{}, sc::matmul_reduce_scatter_layout_t<0, sc::layout<S1, P>, sc::layout<S0, R>>{});
  rs(1, sc::layout<R, S1>{}, sc::layout<S1, S0>{}, sc::matmul_reduce_scatter_layout_t<1, sc::layout<R, S1>, sc::layout<S1, S0>>{});
  // A dynamic operand makes the result dynamic.
  static_assert(std::is_same_v<sc::all_gather_matmul_result_layout_t<0, sc::dynamic_layout, sc::layout<S1>>, sc::dynamic_layout>);
  static_assert(std::is_same_v<sc::matmul_reduce_scatter_result_layout_t<0, sc::layout<S1>, sc::dynamic_layout>, sc::dynamic_layout>);
  static_assert(std::is_same_v<sc::matmul_reduce_scatter_result_layout_t<0, sc::layout<S1>, sc::layout<S0>>, sc::layout<S0>>);
}

namespace {
/// Every legal (X, W) pair of layouts from R, S(0), S(1), P(sum) on `shape`, for both
/// operators and every overlap axis, with dynamic operands (and, for each pair, X static
/// when `static_x` gives a layout type for it): result against the global GEMM, its layout
/// against the table, every chunk count against chunks = 1, inputs unchanged.
template <std::size_t N>
std::size_t run_legal_pairs(const std::array<int, N>& shape, std::int64_t t, std::int64_t h, std::int64_t o) {
  const int n = [&] {
    int p = 1;
    for (int s : shape) p *= s;
    return p;
  }();
  const std::vector<pd> from{kR, kS0, kS1, kPsum};
  const auto all = shardcast::testing::every_layout(from, static_cast<int>(N));
  using T = std::int64_t;
  const auto xg = ints<T>(t * h, 1), wg = ints<T>(h * o, 4);
  const auto ref = ref_gemm(xg, wg, t, h, o);
  failures f;
  std::size_t cases = 0;
  sc::host::run(n, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    sc::overlap_context ctx(mesh);
    std::size_t mine = 0;
    auto run_one = [&](auto axis_c, bool gather, const sc::runtime_layout& lx, const sc::runtime_layout& lw,
                       const sc::runtime_layout& want) {
      constexpr int Axis = decltype(axis_c)::value;
      auto x = sc::distribute(mesh, lx, xg, std::array<std::int64_t, 2>{t, h});
      auto w = sc::distribute(mesh, lw, wg, std::array<std::int64_t, 2>{h, o});
      sc::testing::spread_partial_terms(x, xg);
      sc::testing::spread_partial_terms(w, wg);
      const auto x0 = local_copy(x), w0 = local_copy(w);
      const std::string what = std::string(gather ? "all_gather_matmul<" : "matmul_reduce_scatter<") + std::to_string(Axis) + "> X " +
                               sc::to_string(lx) + " W " + sc::to_string(lw) + ", rank " + std::to_string(comm.rank()) + ": ";
      auto call = [&](int chunks) {
        if (gather) return sc::all_gather_matmul<Axis>(ctx, x, w, chunks);
        return sc::matmul_reduce_scatter<Axis>(ctx, x, w, chunks);
      };
      const auto unsplit = call(1);
      static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(unsplit)>::layout_type, sc::dynamic_layout>);
      if (unsplit.layout() != want) f.add(what + "layout " + sc::to_string(unsplit.layout()) + ", expected " + sc::to_string(want));
      if (sc::to_global(unsplit) != ref) f.add(what + "chunks 1 differs from the global GEMM");
      for (int chunks : {2, 3}) {
        const auto y = call(chunks);
        if (local_copy(y) != local_copy(unsplit) || !(y.local_box() == unsplit.local_box()))
          f.add(what + "chunks " + std::to_string(chunks) + " differs from chunks 1");
      }
      if (local_copy(x) != x0 || local_copy(w) != w0) f.add(what + "an input was modified");
      ++mine;
    };
    for (int axis = 0; axis < static_cast<int>(N); ++axis)
      for (bool gather : {true, false})
        for (const auto& lx : all)
          for (const auto& lw : all) {
            const auto want = expected(gather, axis, lx, lw);
            if (!want) continue;
            if (axis == 0) run_one(std::integral_constant<int, 0>{}, gather, lx, lw, *want);
            else if constexpr (N > 1) run_one(std::integral_constant<int, static_cast<int>(N) - 1>{}, gather, lx, lw, *want);
          }
    if (comm.rank() == 0) cases = mine;
  });
  f.report();
  return cases;
}
}  // namespace

TEST_CASE("dynamic-layout overlap operators: every legal pair on 1- and 2-axis meshes against the global GEMM") {
  std::size_t cases = 0;
  for (int p : {1, 2, 3}) {
    cases += run_legal_pairs(std::array<int, 1>{p}, 7, 5, 6);
    cases += run_legal_pairs(std::array<int, 1>{p}, 2, 3, 2);  // empty pieces at 3 ranks
  }
  for (auto shape : {std::array<int, 2>{2, 2}, std::array<int, 2>{2, 3}, std::array<int, 2>{3, 1}, std::array<int, 2>{1, 3}}) {
    cases += run_legal_pairs(shape, 7, 5, 6);
    cases += run_legal_pairs(shape, 2, 3, 2);
  }
  MESSAGE(cases << " legal (layout pair, axis, operator, mesh, extents) cases");
  CHECK(cases > 0);
}

TEST_CASE("overlap operators mix a static and a dynamic operand, and reject illegal dynamic layouts on every rank") {
  using S0 = sc::shard<0>;
  failures f;
  const auto xg = ints<int>(5 * 4, 2), wg = ints<int>(4 * 3, 5);
  const auto ref = ref_gemm(xg, wg, 5, 4, 3);
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    sc::overlap_context ctx(mesh);
    const std::array<std::int64_t, 2> ex{5, 4}, ew{4, 3};
    auto xs = sc::distribute<sc::layout<S0>>(mesh, xg, ex);
    auto wd = sc::distribute(mesh, sc::runtime_layout::parse("S(1)"), wg, ew);
    auto y = sc::all_gather_matmul<0>(ctx, xs, wd, 2);
    static_assert(std::is_same_v<decltype(y)::layout_type, sc::dynamic_layout>);
    if (y.layout() != sc::runtime_layout::parse("S(1)") || sc::to_global(y) != ref) f.add("static X, dynamic W: wrong result");
    auto xd = sc::distribute(mesh, sc::runtime_layout::parse("S(1)"), xg, ex);
    auto ws = sc::distribute<sc::layout<S0>>(mesh, wg, ew);
    auto z = sc::matmul_reduce_scatter<0>(ctx, xd, ws, 3);
    if (z.layout() != sc::runtime_layout::parse("S(0)") || sc::to_global(z) != ref) f.add("dynamic X, static W: wrong result");
    // Illegal: X not S(0) for the gather, W not S(0) for the scatter. Every rank throws
    // before communicating, and the context stays usable.
    auto xr = sc::distribute(mesh, sc::runtime_layout::parse("R"), xg, ex);
    try {
      (void)sc::all_gather_matmul<0>(ctx, xr, wd, 2);
      f.add("X R: no exception");
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("X is R on mesh axis 0 but must be S(0)") == std::string::npos) f.add(std::string("message: ") + e.what());
    }
    try {
      (void)sc::matmul_reduce_scatter<0>(ctx, xd, wd, 2);
      f.add("W S(1): no exception");
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("W is S(1) on mesh axis 0 but must be S(0)") == std::string::npos)
        f.add(std::string("message: ") + e.what());
    }
    auto again = sc::all_gather_matmul<0>(ctx, xs, wd, 3);
    if (sc::to_global(again) != ref) f.add("wrong result after the rejected calls");
  });
  f.report();
}
