// The layers' operands on two meshes of one type (the same ranks, another shape): every
// layer throws layout_error naming both meshes before it reads a piece (a piece of the
// other mesh has another size: reading it as this mesh's would overrun it, or mix the
// two tensors); and a GEMM functor whose call operator is not const, which matmul takes,
// serves a linear layer's backward as well (its bias gradient included), against a
// global computation.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/layers.hpp>
#include <string>
#include <vector>

#include "common/failures.hpp"

namespace sc = shardcast;
namespace nn = shardcast::nn;
using i64 = std::int64_t;

namespace {

// Runs f on 4 ranks with a 2x2 and a 1x4 mesh; every rank must throw layout_error whose
// message contains `who` and "different meshes".
template <class F>
void expect_other_mesh_refused(const std::string& who, F f) {
  sc::testing::failures fails;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m22 = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    auto m14 = sc::make_mesh(comm, std::array<int, 2>{1, 4});
    try {
      f(m22, m14);
      fails.add("rank " + std::to_string(comm.rank()) + ": no exception");
    } catch (const sc::layout_error& e) {
      const std::string w = e.what();
      if (w.find(who) == std::string::npos || w.find("different meshes") == std::string::npos)
        fails.add("rank " + std::to_string(comm.rank()) + ": unexpected message: " + w);
    }
  });
  for (const auto& s : fails.list) FAIL_CHECK(s);
  CHECK(fails.list.empty());
}

}  // namespace

TEST_CASE("nn::activation::backward refuses a gradient on another mesh") {
  using L = sc::layout<sc::shard<0>, sc::replicate>;  // dim 0 over axis 0: 2 pieces on 2x2, 1 piece on 1x4
  const std::vector<float> X(64, 1.0f), DY(64, 2.0f);
  expect_other_mesh_refused("shardcast::nn::activation::backward", [&](auto& m22, auto& m14) {
    auto x = sc::distribute<L>(m14, X, std::array<i64, 2>{8, 8});
    auto dy = sc::distribute<L>(m22, DY, std::array<i64, 2>{8, 8});
    (void)nn::relu.backward(x, dy);
  });
}

TEST_CASE("nn::vocab_parallel_embedding refuses ids and gradients on another mesh") {
  using axes = nn::tensor_parallel<1, 0>;
  using Mesh = sc::mesh<2, sc::host::communicator>;
  using E = nn::vocab_parallel_embedding<double, Mesh, axes>;
  std::vector<double> tab(4 * 3);
  for (std::size_t i = 0; i < tab.size(); ++i) tab[i] = static_cast<double>(i + 1);
  const std::vector<i64> ids{0, 1, 2, 3};
  const std::vector<double> DY(12, 1.0);
  for (const char* which : {"forward", "forward_partial", "backward ids", "backward dy"}) {
    CAPTURE(which);
    const std::string w = which;
    expect_other_mesh_refused(w.rfind("backward", 0) == 0 ? "vocab_parallel_embedding::backward" : "vocab_parallel_embedding::forward",
                              [&](auto& m22, auto& m14) {
                                E emb(sc::distribute<typename E::table_layout>(m22, tab, std::array<i64, 2>{4, 3}));
                                auto& other = m14;
                                auto id = sc::distribute<typename E::ids_layout>(w == "backward dy" ? m22 : other, ids, std::array<i64, 1>{4});
                                if (w == "forward") (void)emb.forward(id);
                                if (w == "forward_partial") (void)emb.forward_partial(id);
                                if (w.rfind("backward", 0) == 0) {
                                  auto dy = sc::distribute<typename E::output_layout>(w == "backward dy" ? other : m22, DY,
                                                                                    std::array<i64, 2>{4, 3});
                                  (void)emb.backward(id, dy);
                                }
                              });
  }
}

TEST_CASE("nn::zero_param::step refuses a gradient on another mesh") {
  using L = sc::layout<sc::replicate, sc::replicate>;
  const std::vector<float> W(8 * 4, 1.0f), G(8 * 4, 1.0f);
  expect_other_mesh_refused("shardcast::nn::zero_param::step", [&](auto& m22, auto& m14) {
    auto w = sc::distribute<L>(m14, W, std::array<i64, 2>{8, 4});
    auto z = nn::make_zero_param<0>(w, nn::sgd<float>{0.5f});
    auto g = sc::distribute<sc::layout<sc::partial<sc::sum>, sc::replicate>>(m22, G, std::array<i64, 2>{8, 4});
    z.step(g);
  });
}

namespace {
// A GEMM functor with both forms of ops/gemm.hpp whose call operators are not const (it
// counts its calls), as matmul accepts.
struct counting_gemm {
  int calls = 0;
  template <class T>
  void operator()(i64 m, i64 n, i64 k, const T* a, i64 lda, const T* b, i64 ldb, T* c, i64 ldc) {
    ++calls;
    sc::host_gemm{}(m, n, k, a, lda, b, ldb, c, ldc);
  }
  template <class T>
  void operator()(sc::gemm_op ta, sc::gemm_op tb, i64 m, i64 n, i64 k, const T* a, i64 lda, const T* b, i64 ldb, T* c, i64 ldc, bool acc) {
    ++calls;
    sc::host_gemm{}(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
  }
};
}  // namespace

TEST_CASE("a linear layer's backward takes a GEMM functor whose call operator is not const, as matmul does") {
  const i64 t = 3, in = 4, out = 5;  // out split 3 + 2 over the TP axis
  std::vector<float> X(static_cast<std::size_t>(t * in)), W(static_cast<std::size_t>(in * out)), B(static_cast<std::size_t>(out), 0.f),
      DY(static_cast<std::size_t>(t * out));
  for (std::size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  for (std::size_t i = 0; i < W.size(); ++i) W[i] = static_cast<float>(static_cast<int>(i % 3) - 1);
  for (std::size_t i = 0; i < DY.size(); ++i) DY[i] = static_cast<float>(static_cast<int>(i % 4) - 1);
  // The global gradients: dX = dY W^T, dW = X^T dY, db = column sums of dY.
  std::vector<float> dx(X.size(), 0.f), dw(W.size(), 0.f), db(B.size(), 0.f);
  for (i64 r = 0; r < t; ++r)
    for (i64 c = 0; c < out; ++c) {
      const float g = DY[static_cast<std::size_t>(r * out + c)];
      db[static_cast<std::size_t>(c)] += g;
      for (i64 p = 0; p < in; ++p) {
        dx[static_cast<std::size_t>(r * in + p)] += g * W[static_cast<std::size_t>(p * out + c)];
        dw[static_cast<std::size_t>(p * out + c)] += X[static_cast<std::size_t>(r * in + p)] * g;
      }
    }
  sc::testing::failures fails;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{1, 2});
    using Mesh = decltype(mesh);
    using col_t = nn::column_parallel_linear<float, Mesh, nn::tensor_parallel<1, 0>, counting_gemm>;
    col_t fc(sc::distribute<col_t::weight_layout>(mesh, W, std::array<i64, 2>{in, out}),
             sc::distribute<col_t::bias_layout>(mesh, B, std::array<i64, 1>{out}));
    auto x = sc::distribute<col_t::input_layout>(mesh, X, std::array<i64, 2>{t, in});
    auto dy = sc::distribute<col_t::output_layout>(mesh, DY, std::array<i64, 2>{t, out});
    auto g = fc.backward(x, dy);
    const auto gx = sc::to_global(g.input), gw = sc::to_global(g.weight), gb = sc::to_global(g.bias);
    if (gx != dx) fails.add("rank " + std::to_string(comm.rank()) + ": dX differs from the global product");
    if (gw != dw) fails.add("rank " + std::to_string(comm.rank()) + ": dW differs from the global product");
    if (gb != db) fails.add("rank " + std::to_string(comm.rank()) + ": db differs from the column sums");
  });
  for (const auto& s : fails.list) FAIL_CHECK(s);
  CHECK(fails.list.empty());
}
