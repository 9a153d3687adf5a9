// Column- and row-parallel linear layers (plain and sequence parallel) and activations:
// forward and backward of the Megatron pair column -> relu -> row against a single-rank
// global computation, on 1xN, Nx1, 2x2 and 3-axis meshes, with token and feature extents
// that the axis sizes do not divide (including pieces of extent 0). Values are small
// integers, so every comparison is exact.
#include <doctest/doctest.h>

#include <cmath>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/layers.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"
#include "reference.hpp"

namespace sc = shardcast;
namespace nn = shardcast::nn;
using nn_ref::i64;

namespace {

template <class T>
std::vector<T> relu_ref(std::vector<T> x) {
  for (auto& v : x) v = v > T(0) ? v : T(0);
  return x;
}
template <class T>
std::vector<T> relu_grad_ref(const std::vector<T>& x, std::vector<T> dy) {
  for (std::size_t i = 0; i < x.size(); ++i) dy[i] = x[i] > T(0) ? dy[i] : T(0);
  return dy;
}

using failures = shardcast::testing::failures;

// The Megatron pair on `shape` with parallel axes `Axes`: X[t,in] -> fc1 -> relu -> fc2 -> Y[t,out],
// then backward from dY. Every output and gradient is gathered (to_global, collective) and
// compared with the global reference.
// With OnRef, every tensor lives on the mesh's mesh_ref (a handle that keeps nothing alive).
template <class Axes, std::size_t N, bool OnRef = false>
void check_pair(std::array<int, N> shape, i64 t, i64 in, i64 hid, i64 out) {
  using T = double;
  INFO("mesh " << shape[0] << "x" << (N > 1 ? shape[1] : 1) << (N > 2 ? "x" + std::to_string(shape[N - 1]) : std::string()) << " tp "
               << Axes::tp << " dp " << Axes::dp << " sp " << Axes::sequence_parallel << " t=" << t << " in=" << in << " hid=" << hid
               << " out=" << out);
  using namespace nn_ref;
  const auto X = ints<T>(t * in, 1), W1 = ints<T>(in * hid, 2), b1 = ints<T>(hid, 3), W2 = ints<T>(hid * out, 4), b2 = ints<T>(out, 5),
             dY = ints<T>(t * out, 6);
  // Reference.
  const auto H0 = add_rows(matmul(X, W1, t, in, hid), b1, t, hid);
  const auto H = relu_ref(H0);
  const auto Y = add_rows(matmul(H, W2, t, hid, out), b2, t, out);
  const auto dH = matmul(dY, transpose(W2, hid, out), t, out, hid);
  const auto dW2 = matmul(transpose(H, t, hid), dY, hid, t, out);
  const auto db2 = colsum(dY, t, out);
  const auto dH0 = relu_grad_ref(H0, dH);
  const auto dX = matmul(dH0, transpose(W1, in, hid), t, hid, in);
  const auto dW1 = matmul(transpose(X, t, in), dH0, in, t, hid);
  const auto db1 = colsum(dH0, t, hid);

  int nranks = 1;
  for (int s : shape) nranks *= s;
  failures bad;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto owner = sc::make_mesh(comm, shape);
    const auto mesh = shardcast::testing::mesh_handle<OnRef>(owner);
    using Mesh = std::remove_const_t<decltype(mesh)>;
    using col_t = nn::column_parallel_linear<T, Mesh, Axes>;
    using row_t = nn::row_parallel_linear<T, Mesh, Axes>;
    using L = nn::layouts<Axes, Mesh::naxes>;
    col_t fc1(sc::distribute<typename col_t::weight_layout>(mesh, W1, std::array<i64, 2>{in, hid}),
              sc::distribute<typename col_t::bias_layout>(mesh, b1, std::array<i64, 1>{hid}));
    row_t fc2(sc::distribute<typename row_t::weight_layout>(mesh, W2, std::array<i64, 2>{hid, out}),
              sc::distribute<typename row_t::bias_layout>(mesh, b2, std::array<i64, 1>{out}));
    auto x = sc::distribute<typename col_t::input_layout>(mesh, X, std::array<i64, 2>{t, in});
    auto dy = sc::distribute<typename row_t::output_layout>(mesh, dY, std::array<i64, 2>{t, out});

    auto h0 = fc1.forward(x);
    auto h = nn::relu.forward(h0);
    auto y = fc2.forward(h);
    auto yp = fc2.forward_partial(h);
    auto g2 = fc2.backward(h, dy);
    auto dh0 = nn::relu.backward(h0, g2.input);
    auto g1 = fc1.backward(x, dh0);

    // The layouts are the ones the axes imply.
    static_assert(std::is_same_v<typename decltype(h)::layout_type, typename L::features>);
    static_assert(std::is_same_v<typename decltype(y)::layout_type, typename L::outside>);
    static_assert(std::is_same_v<typename decltype(yp)::layout_type, typename L::partial_sum>);
    static_assert(std::is_same_v<typename decltype(g1.input)::layout_type, typename col_t::input_layout>);
    static_assert(std::is_same_v<typename decltype(g1.weight)::layout_type, typename L::template grad_of<typename L::column_weight>>);

    auto cmp = [&](const char* what, const auto& d, const std::vector<T>& ref) {
      const auto g = sc::to_global(d);  // collective
      if (g != ref) bad.add(comm.rank(), what);
    };
    cmp("hidden (column forward)", h0, H0);
    cmp("relu", h, H);
    cmp("output (row forward)", y, Y);
    cmp("output (row forward_partial)", yp, Y);
    cmp("row dX", g2.input, dH);
    cmp("row dW", g2.weight, dW2);
    cmp("row db", g2.bias, db2);
    cmp("relu backward", dh0, dH0);
    cmp("column dX", g1.input, dX);
    cmp("column dW", g1.weight, dW1);
    cmp("column db", g1.bias, db1);
    // The same with inputs of const elements (only read), mixed with mutable ones.
    {
      const sc::dtensor<const T, 2, typename decltype(x)::layout_type, Mesh> cx = x;
      const sc::dtensor<const T, 2, typename decltype(dy)::layout_type, Mesh> cdy = dy;
      const sc::dtensor<const T, 2, typename decltype(h0)::layout_type, Mesh> ch0 = h0;
      const sc::dtensor<const T, 2, typename decltype(h)::layout_type, Mesh> ch = h;
      cmp("column forward, const x", fc1.forward(cx), H0);
      cmp("relu forward, const input", nn::relu.forward(ch0), H);
      cmp("row forward, const input", fc2.forward(ch), Y);
      cmp("row forward_partial, const input", fc2.forward_partial(ch), Y);
      auto cg2 = fc2.backward(ch, dy);
      cmp("row dX, const input", cg2.input, dH);
      cmp("row dW, const input", cg2.weight, dW2);
      cmp("row db, const dy", fc2.backward(h, cdy).bias, db2);
      const sc::dtensor<const T, 2, typename decltype(cg2.input)::layout_type, Mesh> cdh = cg2.input;
      auto cdh0 = nn::relu.backward(ch0, cdh);
      static_assert(std::is_same_v<typename decltype(cdh0)::value_type, T>);
      cmp("relu backward, const x and dy", cdh0, dH0);
      cmp("relu backward, const dy", nn::relu.backward(h0, cdh), dH0);
      const sc::dtensor<const T, 2, typename decltype(cdh0)::layout_type, Mesh> cdh0c = cdh0;
      auto cg1 = fc1.backward(cx, cdh0c);
      cmp("column dX, const x and dy", cg1.input, dX);
      cmp("column dW, const x and dy", cg1.weight, dW1);
      cmp("column db, const x and dy", cg1.bias, db1);
      cmp("column dW, const x", fc1.backward(cx, dh0).weight, dW1);
    }
    // Inputs and parameters are unchanged.
    cmp("x unchanged", x, X);
    cmp("dy unchanged", dy, dY);
    cmp("W1 unchanged", fc1.weight, W1);
    cmp("W2 unchanged", fc2.weight, W2);
    cmp("b1 unchanged", fc1.bias, b1);
    cmp("b2 unchanged", fc2.bias, b2);
  });
  bad.report();
}

template <template <int, int> class Kind>
void pair_on_2d_meshes() {
  for (auto s : {std::array<i64, 4>{7, 5, 5, 3}, std::array<i64, 4>{5, 3, 1, 2}, std::array<i64, 4>{2, 1, 2, 1}}) {
    const i64 t = s[0], in = s[1], hid = s[2], out = s[3];
    // axis 0 data parallel, axis 1 tensor parallel
    for (auto shape : {std::array<int, 2>{1, 3}, std::array<int, 2>{3, 1}, std::array<int, 2>{2, 2}, std::array<int, 2>{1, 2}})
      check_pair<Kind<1, 0>>(shape, t, in, hid, out);
    // axis 0 tensor parallel, axis 1 data parallel (tensor parallelism only: sequence
    // parallelism needs the DP axis first, tests/nn/compile_fail/sequence_parallel_tp_before_dp.cpp)
    if constexpr (!Kind<1, 0>::sequence_parallel)
      for (auto shape : {std::array<int, 2>{3, 1}, std::array<int, 2>{2, 2}})
        check_pair<Kind<0, 1>>(shape, t, in, hid, out);
  }
}

}  // namespace

TEST_CASE("nn: column -> relu -> row, tensor parallel, forward and backward match the global computation") {
  pair_on_2d_meshes<nn::tensor_parallel>();
}

TEST_CASE("nn: column -> relu -> row on a mesh_ref, forward and backward match the global computation") {
  check_pair<nn::tensor_parallel<1, 0>, 2, true>({2, 2}, 7, 5, 5, 3);
  check_pair<nn::sequence_parallel<1, 0>, 2, true>({2, 2}, 7, 5, 5, 3);
}

TEST_CASE("nn: column -> relu -> row, sequence parallel, forward and backward match the global computation") {
  pair_on_2d_meshes<nn::sequence_parallel>();
}

TEST_CASE("nn: a 3-axis mesh with an axis the layers do not use") {
  check_pair<nn::sequence_parallel<2, 0>>(std::array<int, 3>{2, 2, 2}, 9, 4, 5, 3);
  check_pair<nn::tensor_parallel<0, 2>>(std::array<int, 3>{3, 2, 1}, 7, 3, 4, 2);
}

TEST_CASE("nn: layer layouts follow the parallel axes") {
  using L = nn::layouts<nn::sequence_parallel<1, 0>, 2>;
  using R = sc::replicate;
  using S0 = sc::shard<0>;
  using S1 = sc::shard<1>;
  using P = sc::partial<sc::sum>;
  static_assert(std::is_same_v<L::sequence, sc::layout<S0, S0>>);
  static_assert(std::is_same_v<L::tokens, sc::layout<S0, R>>);
  static_assert(std::is_same_v<L::outside, sc::layout<S0, S0>>);
  static_assert(std::is_same_v<L::features, sc::layout<S0, S1>>);
  static_assert(std::is_same_v<L::partial_sum, sc::layout<S0, P>>);
  static_assert(std::is_same_v<L::column_weight, sc::layout<R, S1>>);
  static_assert(std::is_same_v<L::row_weight, sc::layout<R, S0>>);
  static_assert(std::is_same_v<L::grad_of<L::column_weight>, sc::layout<P, S1>>);
  using T3 = nn::layouts<nn::tensor_parallel<0, 2>, 3>;
  static_assert(std::is_same_v<T3::outside, sc::layout<R, R, S0>>);
  static_assert(std::is_same_v<T3::features, sc::layout<S1, R, S0>>);
  static_assert(std::is_same_v<T3::column_bias, sc::layout<S0, R, R>>);
  CHECK(true);
}

TEST_CASE("nn: gelu and silu layers apply the functors elementwise and keep the layout") {
  // The references are written here, independently of sc::fn: the tanh form of GELU and
  // x * sigmoid(x), and each gradient as a central difference of that forward formula
  // (step 1e-5: its error, about 1e-10 for these inputs, is far below the tolerance).
  using T = double;
  const i64 t = 5, f = 7;
  const auto X = nn_ref::ints<T>(t * f, 3), D = nn_ref::ints<T>(t * f, 4);
  auto gelu = [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (x + 0.044715 * x * x * x))); };
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  auto slope = [](auto g, double x) { return (g(x + 1e-5) - g(x - 1e-5)) / 2e-5; };
  std::vector<T> G(X.size()), dG(X.size()), S(X.size()), dS(X.size());
  for (std::size_t i = 0; i < X.size(); ++i) {
    G[i] = gelu(X[i]);
    dG[i] = slope(gelu, X[i]) * D[i];
    S[i] = silu(X[i]);
    dS[i] = slope(silu, X[i]) * D[i];
  }
  auto close = [](const std::vector<T>& got, const std::vector<T>& want, double tol) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])))) return false;
    return true;
  };
  failures bad;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    using Lh = sc::layout<sc::shard<0>, sc::shard<1>>;
    auto x = sc::distribute<Lh>(mesh, X, std::array<i64, 2>{t, f});
    auto d = sc::distribute<Lh>(mesh, D, std::array<i64, 2>{t, f});
    auto y = nn::gelu.forward(x);
    static_assert(std::is_same_v<typename decltype(y)::layout_type, Lh>);
    if (!close(sc::to_global(y), G, 1e-12)) bad.add(comm.rank(), "gelu forward");
    if (!close(sc::to_global(nn::gelu.backward(x, d)), dG, 1e-8)) bad.add(comm.rank(), "gelu backward");
    if (!close(sc::to_global(nn::silu.forward(x)), S, 1e-12)) bad.add(comm.rank(), "silu forward");
    if (!close(sc::to_global(nn::silu.backward(x, d)), dS, 1e-8)) bad.add(comm.rank(), "silu backward");
  });
  bad.report();
}

TEST_CASE("nn: activations take dynamic layouts: the same values, the same run-time layout, partials refused at run time") {
  // relu forward and backward against relu_ref / relu_grad_ref of the global tensors, for
  // every layout without a partial placement on a 2x2 and a 3-rank mesh (extents 5x3: uneven
  // pieces, and empty ones on the 3-rank mesh's shard<1> of a dim of 3... and of 2 rows),
  // x dynamic with dy dynamic or static, and dy dynamic with x static.
  using T = double;
  failures bad;
  for (const int n : {4, 3}) {
    CAPTURE(n);
    const std::vector<std::string> texts = n == 4 ? std::vector<std::string>{"R,R", "S(0),R", "R,S(1)", "S(0),S(1)", "S(1),S(0)", "S(0),S(0)", "S(1),S(1)"}
                                                  : std::vector<std::string>{"R", "S(0)", "S(1)"};
    for (const auto& [t, f] : {std::pair<i64, i64>{5, 3}, std::pair<i64, i64>{2, 1}}) {
      const auto X = nn_ref::ints<T>(t * f, 3), D = nn_ref::ints<T>(t * f, 4);
      const auto Y = relu_ref(X), dX = relu_grad_ref(X, D);
      sc::host::run(n, [&](sc::host::communicator& comm) {
        auto run = [&](auto mesh) {
          for (const auto& text : texts) {
            const auto l = sc::runtime_layout::parse(text);
            const std::string where = text + " " + std::to_string(t) + "x" + std::to_string(f) + ": ";
            const auto x = sc::distribute(mesh, l, X, {t, f});
            const auto d = sc::distribute(mesh, l, D, {t, f});
            const auto y = nn::relu.forward(x);
            static_assert(std::is_same_v<typename decltype(y)::layout_type, sc::dynamic_layout>);
            if (y.layout() != l) bad.add(comm.rank(), where + "forward changed the layout to " + sc::to_string(y.layout()));
            if (sc::to_global(y) != Y) bad.add(comm.rank(), where + "forward differs from the reference");
            if (sc::to_global(nn::relu.backward(x, d)) != dX) bad.add(comm.rank(), where + "backward differs from the reference");
            const sc::dtensor<const T, 2, sc::dynamic_layout, decltype(mesh)> cx = x;
            if (sc::to_global(nn::relu.forward(cx)) != Y) bad.add(comm.rank(), where + "forward of const elements differs");
          }
        };
        if (n == 4) run(sc::make_mesh(comm, std::array<int, 2>{2, 2}));
        else run(sc::make_mesh(comm, std::array<int, 1>{3}));
      });
    }
  }
  bad.report();

  // Static and dynamic layouts meet in backward; partial inputs and mismatched gradients throw.
  const i64 t = 4, f = 6;
  const auto X = nn_ref::ints<T>(t * f, 1), D = nn_ref::ints<T>(t * f, 2);
  const auto dX = relu_grad_ref(X, D);
  failures bad2;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    using L = sc::layout<sc::shard<1>>;
    const auto xs = sc::distribute<L>(mesh, X, std::array<i64, 2>{t, f});
    const auto ds = sc::distribute<L>(mesh, D, std::array<i64, 2>{t, f});
    const auto xd = sc::distribute(mesh, sc::runtime_layout::parse("S(1)"), X, {t, f});
    const auto dd = sc::distribute(mesh, sc::runtime_layout::parse("S(1)"), D, {t, f});
    const auto a = nn::relu.backward(xs, dd);  // x static: a static result
    static_assert(std::is_same_v<typename decltype(a)::layout_type, L>);
    if (sc::to_global(a) != dX) bad2.add(comm.rank(), "static x, dynamic dy: backward differs from the reference");
    if (sc::to_global(nn::relu.backward(xd, ds)) != dX) bad2.add(comm.rank(), "dynamic x, static dy: backward differs from the reference");
    const auto dr = sc::distribute(mesh, sc::runtime_layout::parse("R"), D, {t, f});
    try {
      (void)nn::relu.backward(xd, dr);
      bad2.add(comm.rank(), "a gradient of another layout was accepted");
    } catch (const sc::layout_error& e) {
      if (std::string(e.what()).find("shardcast::nn::activation::backward: the output gradient has layout \"R\" but the input \"S(1)\"") ==
          std::string::npos)
        bad2.add(comm.rank(), std::string("unexpected message: ") + e.what());
    }
    const auto p = sc::distribute(mesh, sc::runtime_layout::parse("P(sum)"), X, {t, f});
    for (const bool fwd : {true, false}) {
      try {
        if (fwd) (void)nn::gelu.forward(p);
        else (void)nn::gelu.backward(p, p);
        bad2.add(comm.rank(), "a partial input was accepted");
      } catch (const sc::layout_error& e) {
        const std::string want = std::string("shardcast::nn::activation::") + (fwd ? "forward" : "backward") +
                                 ": the input has layout \"P(sum)\", partial on mesh axis 0, and f of partial values is not f of their sum";
        if (std::string(e.what()).find(want) == std::string::npos) bad2.add(comm.rank(), std::string("unexpected message: ") + e.what());
      }
    }
  });
  bad2.report();
}

TEST_CASE("nn: mismatched extents throw layout_error") {
  using T = double;
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{1, 2});
    using Mesh = decltype(mesh);
    using col_t = nn::column_parallel_linear<T, Mesh, nn::tensor_parallel<1, 0>>;
    using row_t = nn::row_parallel_linear<T, Mesh, nn::tensor_parallel<1, 0>>;
    auto w = sc::distribute<col_t::weight_layout>(mesh, nn_ref::ints<T>(12, 0), std::array<i64, 2>{3, 4});
    auto b4 = sc::distribute<col_t::bias_layout>(mesh, nn_ref::ints<T>(4, 0), std::array<i64, 1>{4});
    auto b5 = sc::distribute<col_t::bias_layout>(mesh, nn_ref::ints<T>(5, 0), std::array<i64, 1>{5});
    CHECK_THROWS_WITH_AS(col_t(w, b5), doctest::Contains("the bias has 5 elements but the weight is 3x4"), sc::layout_error);
    col_t fc(w, b4);
    auto x_bad = sc::distribute<col_t::input_layout>(mesh, nn_ref::ints<T>(10, 0), std::array<i64, 2>{5, 2});
    CHECK_THROWS_WITH_AS((void)fc.forward(x_bad),
                         doctest::Contains("column_parallel_linear::forward: the input has 2 features but the layer needs 3"), sc::layout_error);
    auto x = sc::distribute<col_t::input_layout>(mesh, nn_ref::ints<T>(15, 0), std::array<i64, 2>{5, 3});
    auto dy_bad = sc::distribute<col_t::output_layout>(mesh, nn_ref::ints<T>(16, 0), std::array<i64, 2>{4, 4});
    CHECK_THROWS_WITH_AS((void)fc.backward(x, dy_bad),
                         doctest::Contains("column_parallel_linear::backward: the input has 5 tokens but the output gradient has 4"),
                         sc::layout_error);
    auto w2 = sc::distribute<row_t::weight_layout>(mesh, nn_ref::ints<T>(12, 0), std::array<i64, 2>{4, 3});
    auto b2 = sc::distribute<row_t::bias_layout>(mesh, nn_ref::ints<T>(3, 0), std::array<i64, 1>{3});
    row_t fc2(w2, b2);
    auto h_bad = sc::distribute<row_t::input_layout>(mesh, nn_ref::ints<T>(15, 0), std::array<i64, 2>{5, 3});
    CHECK_THROWS_WITH_AS((void)fc2.forward(h_bad),
                         doctest::Contains("row_parallel_linear::forward: the input has 3 features but the layer needs 4"), sc::layout_error);
    CHECK_THROWS_WITH_AS((void)fc2.forward_partial(h_bad),
                         doctest::Contains("row_parallel_linear::forward_partial: the input has 3 features but the layer needs 4"),
                         sc::layout_error);
    // weight and bias are public members: a replacement of the wrong size is refused by
    // forward on every rank alike (checked on the global extents, not on the pieces, which
    // may line up on some ranks only: a 3-element bias has the piece [0, 2) on rank 0, as
    // the output's columns, and [2, 3) against [2, 4) on rank 1; a row-parallel layer adds
    // its bias on TP coordinate 0 only in forward_partial)
    fc.bias = sc::distribute<col_t::bias_layout>(mesh, nn_ref::ints<T>(3, 0), std::array<i64, 1>{3});
    CHECK_THROWS_WITH_AS((void)fc.forward(x), doctest::Contains("column_parallel_linear::forward: the bias has 3 elements but the weight is 3x4"),
                         sc::layout_error);
    fc.bias = b4;
    CHECK(sc::to_global(fc.forward(x)).size() == 20);
    auto h = sc::distribute<row_t::input_layout>(mesh, nn_ref::ints<T>(20, 0), std::array<i64, 2>{5, 4});
    fc2.bias = sc::distribute<row_t::bias_layout>(mesh, nn_ref::ints<T>(4, 0), std::array<i64, 1>{4});
    CHECK_THROWS_WITH_AS((void)fc2.forward(h), doctest::Contains("row_parallel_linear::forward: the bias has 4 elements but the weight is 4x3"),
                         sc::layout_error);
    CHECK_THROWS_WITH_AS((void)fc2.forward_partial(h),
                         doctest::Contains("row_parallel_linear::forward_partial: the bias has 4 elements but the weight is 4x3"), sc::layout_error);
  });
}

namespace {
/// A move-only GEMM functor that counts its calls in a counter its creator keeps (as a
/// wrapper holding a workspace or statistics would).
struct move_only_counting_gemm {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  move_only_counting_gemm() = default;
  move_only_counting_gemm(move_only_counting_gemm&&) = default;
  move_only_counting_gemm(const move_only_counting_gemm&) = delete;
  template <class T>
  void operator()(sc::gemm_op ta, sc::gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
                  std::int64_t ldb, T* c, std::int64_t ldc, bool acc) const {
    ++*calls;
    sc::host_gemm{}(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
  }
};
}  // namespace

TEST_CASE("column_parallel_linear with a move-only GEMM functor: forward and backward call it, never copy it") {
  std::mutex mu;
  std::vector<int> counts;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, {1, 2});
    using axes = nn::tensor_parallel<1, 0>;
    using col_t = nn::column_parallel_linear<float, decltype(mesh), axes, move_only_counting_gemm>;
    move_only_counting_gemm g;
    const auto calls = g.calls;
    col_t fc(sc::full<typename col_t::weight_layout>(mesh, {4, 6}, 1.0f), sc::full<typename col_t::bias_layout>(mesh, {6}, 0.5f),
             std::move(g));
    auto x = sc::full<typename col_t::input_layout>(mesh, {3, 4}, 2.0f);
    auto y = sc::to_global(fc.forward(x));
    CHECK(y == std::vector<float>(18, 8.5f));  // 4 inputs of 2 times weights 1, plus 0.5
    std::lock_guard lk(mu);
    counts.push_back(*calls);
  });
  REQUIRE(counts.size() == 2);
  CHECK(counts[0] >= 1);
  CHECK(counts[1] >= 1);
}
