// The code shown in docs/02_operators.md (elementwise, reduce, broadcast, transpose and dynamic-layout sections), compiled
// and checked against single-rank references. The lines between "// [snippet NAME]" and
// "// [/snippet]" are quoted verbatim in the docs.
#include <doctest/doctest.h>

#include <cmath>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/broadcast.hpp>
#include <shardcast/ops/elementwise.hpp>
#include <shardcast/ops/matmul.hpp>
#include <shardcast/ops/reduce.hpp>
#include <shardcast/ops/transpose.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;

namespace {
float gelu_ref(float v) {
  const double x = v;
  return static_cast<float>(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (x + 0.044715 * x * x * x))));
}
}  // namespace

TEST_CASE("docs: elementwise snippet") {
  const std::int64_t t = 5, h = 6;
  const auto X = optest::ints<float>(t * h, 1), B = optest::ints<float>(h, 2);
  std::vector<float> want(static_cast<std::size_t>(t * h));
  for (std::int64_t i = 0; i < t * h; ++i) {
    const auto k = static_cast<std::size_t>(i);
    want[k] = gelu_ref(X[k] + B[static_cast<std::size_t>(i % h)]) + 0.5f * X[k];
  }
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    // [snippet elementwise]
    using rows_cols = sc::layout<sc::shard<0>, sc::shard<1>>;  // x [t, h] on a 2x2 mesh
    auto x = sc::distribute<rows_cols>(mesh, X, std::array<std::int64_t, 2>{t, h});
    using bias_layout = sc::bias_layout_t<rows_cols, 2>;  // layout<replicate, shard<0>>
    auto bias = sc::distribute<bias_layout>(mesh, B, std::array<std::int64_t, 1>{h});
    auto y = sc::map(sc::bias_add(x, bias), sc::fn::gelu);  // layout<shard<0>, shard<1>>
    auto z = sc::add(y, sc::scale(x, 0.5f));                // the same layout; nothing communicated
    // [/snippet]
    static_assert(std::is_same_v<bias_layout, sc::layout<sc::replicate, sc::shard<0>>>);
    static_assert(std::is_same_v<decltype(z)::layout_type, rows_cols>);
    const std::string err = optest::compare_global(z, want, 1e-5);  // float gelu: a few ulp
    if (!err.empty()) f.add(err);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

TEST_CASE("docs: partial snippet") {
  const std::int64_t m = 3, k = 4, n = 5;
  const auto A = optest::ints<float>(m * k, 1), W = optest::ints<float>(k * n, 3);
  std::vector<float> want(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p) s += A[static_cast<std::size_t>(i * k + p)] * W[static_cast<std::size_t>(p * n + j)];
      want[static_cast<std::size_t>(i * n + j)] = gelu_ref(static_cast<float>(s));  // 0.5 s + 0.5 s
    }
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    auto a = sc::distribute<sc::layout<sc::replicate, sc::shard<1>>>(mesh, A, std::array<std::int64_t, 2>{m, k});
    auto w = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(mesh, W, std::array<std::int64_t, 2>{k, n});
    // [snippet partial]
    auto p = sc::matmul(a, w);  // a: layout<replicate, shard<1>>, w: layout<replicate, shard<0>> -> layout<replicate, partial<sum>>
    auto q = sc::scale(p, 0.5f);  // scaling is linear: still partial<sum>
    auto r = sc::add(q, q);       // partial<sum> + partial<sum>: still partial<sum>
    // sc::map(r, sc::fn::gelu) does not compile (map_on_partial_mesh_axis_needs_linear_functor<1, ...>); finish the sum first:
    auto g = sc::map(sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(r), sc::fn::gelu);
    // [/snippet]
    static_assert(std::is_same_v<decltype(r)::layout_type, sc::layout<sc::replicate, sc::partial<sc::sum>>>);
    const std::string err = optest::compare_global(g, want, 1e-5);
    if (!err.empty()) f.add(err);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

TEST_CASE("docs: partial times replicated snippet") {
  const std::int64_t m = 3, k = 4, n = 5;
  const auto A = optest::ints<float>(m * k, 1), W = optest::ints<float>(k * n, 3), G = optest::units<float>(m * n, 2);
  std::vector<float> want(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p) s += A[static_cast<std::size_t>(i * k + p)] * W[static_cast<std::size_t>(p * n + j)];
      want[static_cast<std::size_t>(i * n + j)] = static_cast<float>(s) * G[static_cast<std::size_t>(i * n + j)];
    }
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    auto a = sc::distribute<sc::layout<sc::replicate, sc::shard<1>>>(mesh, A, std::array<std::int64_t, 2>{m, k});
    auto w = sc::distribute<sc::layout<sc::replicate, sc::shard<0>>>(mesh, W, std::array<std::int64_t, 2>{k, n});
    auto gate = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(mesh, G, std::array<std::int64_t, 2>{m, n});
    // [snippet partial_replicated]
    auto p = sc::matmul(a, w);        // layout<replicate, partial<sum>>
    auto gated = sc::mul(p, gate);    // gate: layout<replicate, replicate>; still partial<sum>, nothing communicated
    auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<0>>>(gated);  // one reduce_scatter, as for p itself
    // sc::add(p, gate) does not compile (zip_partial_with_replicated_operand_on_mesh_axis<1, ...>):
    // gate would be added once per partial term
    // [/snippet]
    static_assert(std::is_same_v<decltype(gated)::layout_type, sc::layout<sc::replicate, sc::partial<sc::sum>>>);
    const std::string err = optest::compare_global(y, want);
    if (!err.empty()) f.add(err);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

TEST_CASE("docs: reduce and transpose snippets") {
  const auto X = optest::ints<double>(35, 2);
  std::vector<double> row_sum_ref(5, 0), col_max_ref(7, -100), tr_ref(35);
  double total = 0;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) {
      const double v = X[static_cast<std::size_t>(i * 7 + j)];
      row_sum_ref[static_cast<std::size_t>(i)] += v;
      col_max_ref[static_cast<std::size_t>(j)] = std::max(col_max_ref[static_cast<std::size_t>(j)], v);
      tr_ref[static_cast<std::size_t>(j * 5 + i)] = v;
      total += v;
    }
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    // [snippet reduce]
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(mesh, X, std::array<std::int64_t, 2>{5, 7});
    auto row_sums = sc::reduce<1, sc::sum>(x);               // [5]:    layout<shard<0>, partial<sum>>
    auto col_max = sc::reduce<0, sc::max, sc::keep_dim>(x);  // [1, 7]: layout<partial<max>, shard<1>>
    auto mean = sc::reduce<0, sc::avg>(row_sums);            // rank 0: layout<partial<sum>, partial<sum>>
    auto sums = sc::redistribute<sc::layout<sc::shard<0>, sc::replicate>>(row_sums);  // all_reduce on axis 1
    // [/snippet]
    // [snippet transpose]
    auto t = sc::transpose(x);          // [7, 5]: layout<shard<1>, shard<0>>
    auto u = sc::transpose<1, 0>(x);    // the same permutation, spelled out
    // [/snippet]
    static_assert(std::is_same_v<decltype(row_sums)::layout_type, sc::layout<sc::shard<0>, sc::partial<sc::sum>>>);
    static_assert(std::is_same_v<decltype(col_max)::layout_type, sc::layout<sc::partial<sc::max>, sc::shard<1>>>);
    static_assert(std::is_same_v<decltype(mean)::layout_type, sc::layout<sc::partial<sc::sum>, sc::partial<sc::sum>>> && decltype(mean)::rank == 0);
    static_assert(std::is_same_v<decltype(t)::layout_type, sc::layout<sc::shard<1>, sc::shard<0>>>);
    static_assert(std::is_same_v<decltype(u), decltype(t)>);
    for (auto e : {optest::compare_global(sums, row_sum_ref), optest::compare_global(col_max, col_max_ref),
                   optest::compare_global(mean, std::vector<double>{total / 5}, 1e-12), optest::compare_global(t, tr_ref),
                   optest::compare_global(u, tr_ref)})
      if (!e.empty()) f.add(e);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

TEST_CASE("docs: broadcast snippet (softmax along a sharded dim)") {
  const std::int64_t t = 6, v = 11;
  std::vector<double> X(static_cast<std::size_t>(t * v)), want(X.size());
  for (std::size_t i = 0; i < X.size(); ++i) X[i] = std::sin(0.7 * static_cast<double>(i)) * 3;
  for (std::size_t r = 0; r < static_cast<std::size_t>(t); ++r) {
    const double* row = X.data() + r * static_cast<std::size_t>(v);
    double mx = row[0], sum = 0;
    for (std::int64_t k = 0; k < v; ++k) mx = std::max(mx, row[k]);
    for (std::int64_t k = 0; k < v; ++k) sum += std::exp(row[k] - mx);
    for (std::int64_t k = 0; k < v; ++k) want[r * static_cast<std::size_t>(v) + static_cast<std::size_t>(k)] = std::exp(row[k] - mx) / sum;
  }
  optest::failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    // [snippet broadcast]
    using L = sc::layout<sc::shard<0>, sc::shard<1>>;  // logits x [t, v]: rows over axis 0, v over axis 1
    using LB = sc::broadcast_layout_t<L, 1>;           // layout<shard<0>, replicate>
    auto x = sc::distribute<L>(mesh, X, std::array<std::int64_t, 2>{t, v});
    auto mx = sc::redistribute<LB>(sc::reduce<1, sc::max, sc::keep_dim>(x));  // [t, 1]: all_reduce(max) on axis 1
    auto e = sc::map(sc::broadcast_zip<1>(x, mx, sc::fn::sub), sc::fn::exp);
    auto s = sc::redistribute<LB>(sc::reduce<1, sc::sum, sc::keep_dim>(e));    // all_reduce(sum) on axis 1
    auto p = sc::broadcast_zip<1>(std::move(e), s, sc::fn::div);  // softmax, in e's storage
    // [/snippet]
    static_assert(std::is_same_v<LB, sc::layout<sc::shard<0>, sc::replicate>>);
    static_assert(std::is_same_v<decltype(p)::layout_type, L>);
    if (!sc::testing::check_emptied(e).empty()) f.add("e was not left empty");
    const std::string err = optest::compare_global(p, want, 1e-12);
    if (!err.empty()) f.add(err);
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}

TEST_CASE("docs: dynamic-layout snippet") {
  sc::host::run(4, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const auto X = optest::ints<float>(12, 0), W = optest::ints<float>(20, 3);
    const std::array<std::int64_t, 2> ext{3, 4};
    // [snippet dynamic]
    auto d = sc::distribute(mesh, sc::runtime_layout::parse("S(0),P(sum)"), X, ext);
    auto e = sc::scale(d, 2.0f);  // dtensor<float, 2, dynamic_layout, ...> with layout "S(0),P(sum)"
    try {
      (void)sc::map(d, sc::fn::relu);
    } catch (const sc::layout_error& err) {
      // shardcast::map: layout "S(0),P(sum)": the tensor is P(sum) on mesh axis 1 but the functor is not linear ...
    }
    auto w = sc::distribute(mesh, sc::runtime_layout::parse("R,R"), W, std::array<std::int64_t, 2>{4, 5});
    auto y = sc::matmul(e, w);  // [3, 5], layout "S(0),P(sum)"
    // [/snippet]
    CHECK(e.layout() == sc::runtime_layout::parse("S(0),P(sum)"));
    CHECK(y.layout() == sc::runtime_layout::parse("S(0),P(sum)"));
    std::vector<float> want(15, 0.0f);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j)
        for (int k = 0; k < 4; ++k) want[static_cast<std::size_t>(i * 5 + j)] += 2.0f * X[static_cast<std::size_t>(i * 4 + k)] * W[static_cast<std::size_t>(k * 5 + j)];
    CHECK(sc::to_global(y) == want);
    auto w_cols = sc::distribute(mesh, sc::runtime_layout::parse("R,S(1)"), W, std::array<std::int64_t, 2>{4, 5});
    CHECK_THROWS_WITH_AS((void)sc::matmul(e, w_cols), doctest::Contains("on mesh axis 1 A is P(sum) and B is S(1)"), sc::layout_error);
    CHECK_THROWS_WITH_AS((void)sc::map(d, sc::fn::relu),
                         doctest::Contains("shardcast::map: layout \"S(0),P(sum)\": the tensor is P(sum) on mesh axis 1 but the functor is not linear"),
                         sc::layout_error);
  });
}
