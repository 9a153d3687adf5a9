// ZeRO-sharded parameters: several optimizer steps (SGD with momentum, Adam) on gradients
// that are partial sums over the data-parallel axis (each DP rank holds a different
// summand), against a global optimizer on the summed gradient. Checks every step's
// gathered parameter and that each element is stored once per tensor-parallel copy.
#include <doctest/doctest.h>

#include <cmath>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/layers.hpp>
#include <string>
#include <vector>

#include "reference.hpp"

namespace sc = shardcast;
namespace nn = shardcast::nn;
using nn_ref::i64;

namespace {

// Global reference optimizers, written from the formulas in the zero.hpp documentation.
struct sgd_ref {
  double lr, momentum;
  std::vector<double> buf;
  void step(std::vector<double>& p, const std::vector<double>& g, long) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      buf[i] = momentum * buf[i] + g[i];
      p[i] -= lr * buf[i];
    }
  }
};
struct adam_ref {
  double lr, b1, b2, eps;
  std::vector<double> m, v;
  void step(std::vector<double>& p, const std::vector<double>& g, long t) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    const double bc1 = 1 - std::pow(b1, static_cast<double>(t)), bc2 = 1 - std::pow(b2, static_cast<double>(t));
    for (std::size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

// The gradient summand DP rank k contributes at step s.
std::vector<double> summand(i64 n, int s, int k) { return nn_ref::ints<double>(n, 10 * s + 3 * k + 1); }

// The parameter after each of `steps` global optimizer steps on the gradient summed over
// `dp` DP ranks' summands.
template <class Ref>
std::vector<std::vector<double>> reference_steps(std::vector<double> p, Ref ref, int dp, int steps) {
  std::vector<std::vector<double>> want;
  const auto n = static_cast<i64>(p.size());
  for (int s = 1; s <= steps; ++s) {
    std::vector<double> g(p.size(), 0.0);
    for (int k = 0; k < dp; ++k) {
      const auto gk = summand(n, s, k);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] += gk[i];
    }
    ref.step(p, g, s);
    want.push_back(p);
  }
  return want;
}

// Runs `steps` ZeRO steps on a parameter of global `extents` used in layout UseLayout on
// `shape` (DP axis Dp); compares each step with the reference; `tol` is the absolute
// tolerance per element relative to (1 + |reference|) (0: exact).
template <int Dp, class UseLayout, std::size_t R, class Opt, class Ref>
void check_zero(std::array<int, 2> shape, std::array<i64, R> extents, Opt opt, Ref ref, double tol, int steps = 3) {
  INFO("mesh " << shape[0] << "x" << shape[1] << " layout " << sc::to_string(UseLayout::desc) << " dp axis " << Dp << " extents "
               << extents[0] << (R > 1 ? "x" + std::to_string(extents[R - 1]) : std::string()));
  i64 n = 1;
  for (auto e : extents) n *= e;
  const int dp = shape[static_cast<std::size_t>(Dp)];
  std::vector<double> P = nn_ref::ints<double>(n, 7);
  const std::vector<std::vector<double>> want = reference_steps(P, ref, dp, steps);
  std::mutex mu;
  std::vector<std::string> bad;
  auto fail = [&](int rank, const std::string& what) {
    std::lock_guard lk(mu);
    bad.push_back("rank " + std::to_string(rank) + ": " + what);
  };
  sc::host::run(shape[0] * shape[1], [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    auto full = sc::distribute<UseLayout>(mesh, P, extents);
    using M = decltype(mesh);
    // On 2x2 meshes from the parameter viewed with const elements (only read), else as it is.
    auto z = shape[0] == 2 ? nn::make_zero_param<Dp>(sc::dtensor<const double, static_cast<int>(R), UseLayout, M>(full), opt)
                           : nn::make_zero_param<Dp>(full, opt);
    using Z = decltype(z);
    // Each element is stored once per copy over the non-DP axes that do not shard it (the
    // DP axis always shards the stored parameter).
    std::int64_t mine = static_cast<std::int64_t>(z.local_shard().local_size()), total = 0;
    comm.all_reduce(&mine, &total, 1, sc::reduce_op::sum);
    i64 copies = 1;
    for (int a = 0; a < 2; ++a)
      if (a != Dp && !UseLayout::desc[a].is_shard()) copies *= shape[static_cast<std::size_t>(a)];
    if (total != n * copies) fail(comm.rank(), "parameter stored " + std::to_string(total) + " times for " + std::to_string(n) + " elements");
    for (int s = 1; s <= steps; ++s) {
      // This rank's summand, in the gradient's layout: its piece of the global summand.
      auto piece = sc::distribute<UseLayout>(mesh, summand(n, s, mesh.coord(Dp)), extents);
      typename Z::grad_type g(mesh, extents, piece.owner(), piece.data());
      const std::vector<double> g_before(g.data(), g.data() + g.local_size());
      if (s % 2 == 0) z.step(sc::dtensor<const double, static_cast<int>(R), typename Z::grad_layout, M>(g));  // a const gradient
      else z.step(g);
      if (!std::equal(g_before.begin(), g_before.end(), g.data())) fail(comm.rank(), "step changed the gradient");
      const auto got = sc::to_global(z.gather());
      const auto& w = want[static_cast<std::size_t>(s - 1)];
      for (std::size_t i = 0; i < w.size(); ++i)
        if (!(std::abs(got[i] - w[i]) <= tol * (1 + std::abs(w[i])))) {
          fail(comm.rank(), "step " + std::to_string(s) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " +
                                std::to_string(w[i]));
          break;
        }
    }
    if (z.steps() != steps) fail(comm.rank(), "step count");
    if (sc::to_global(full) != P) fail(comm.rank(), "the initial parameter changed");
  });
  for (auto& s : bad) FAIL_CHECK(s);
  CHECK(bad.empty());
}

using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;

template <class Opt, class Ref>
void zero_suite(Opt opt, Ref ref, double tol) {
  for (auto shape : {std::array<int, 2>{2, 2}, std::array<int, 2>{3, 1}, std::array<int, 2>{1, 3}}) {
    // axis 0 data parallel: column weight, row weight, column bias (every dim sharded: nested), row bias
    check_zero<0, sc::layout<R, S1>>(shape, std::array<i64, 2>{5, 7}, opt, ref, tol);
    check_zero<0, sc::layout<R, S0>>(shape, std::array<i64, 2>{7, 5}, opt, ref, tol);
    check_zero<0, sc::layout<R, S0>>(shape, std::array<i64, 1>{5}, opt, ref, tol);
    check_zero<0, sc::layout<R, R>>(shape, std::array<i64, 1>{5}, opt, ref, tol);
    check_zero<0, sc::layout<R, R>>(shape, std::array<i64, 1>{2}, opt, ref, tol);  // fewer elements than DP ranks on 3x1
    // axis 1 data parallel
    check_zero<1, sc::layout<S1, R>>(shape, std::array<i64, 2>{5, 7}, opt, ref, tol);
    check_zero<1, sc::layout<S0, R>>(shape, std::array<i64, 1>{7}, opt, ref, tol);
  }
}

}  // namespace

TEST_CASE("nn: ZeRO with SGD and momentum matches a global SGD step by step (exact: dyadic lr and momentum)") {
  zero_suite(nn::sgd<double>{0.5, 0.5}, sgd_ref{0.5, 0.5, {}}, 0.0);
}

TEST_CASE("nn: ZeRO with Adam matches a global Adam step by step (tolerance 1e-12 relative)") {
  zero_suite(nn::adam<double>{0.01, 0.9, 0.999, 1e-8}, adam_ref{0.01, 0.9, 0.999, 1e-8, {}, {}}, 1e-12);
}

TEST_CASE("nn: ZeRO layouts: the DP axis shards the first dim no other axis shards") {
  using Mesh = sc::mesh<2>;
  using zc = nn::zero_param<0, sc::dtensor<float, 2, sc::layout<R, S1>, Mesh>, nn::sgd<float>>;
  static_assert(std::is_same_v<zc::shard_layout, sc::layout<S0, S1>>);
  static_assert(std::is_same_v<zc::grad_layout, sc::layout<sc::partial<>, S1>>);
  using zr = nn::zero_param<0, sc::dtensor<float, 2, sc::layout<R, S0>, Mesh>, nn::adam<float>>;
  static_assert(std::is_same_v<zr::shard_layout, sc::layout<S1, S0>>);
  using zb = nn::zero_param<1, sc::dtensor<float, 1, sc::layout<S0, R>, Mesh>, nn::adam<float>>;
  static_assert(std::is_same_v<zb::shard_layout, sc::layout<S0, S0>>);
  CHECK(true);
}

TEST_CASE("nn: ZeRO parameters are move-only; clone is an independent checkpoint; state(i) is range-checked") {
  using Mesh = sc::mesh<2>;
  using Z = nn::zero_param<0, sc::dtensor<double, 2, sc::layout<R, S1>, Mesh>, nn::adam<double>>;
  static_assert(!std::is_copy_constructible_v<Z> && !std::is_copy_assignable_v<Z>);
  static_assert(std::is_nothrow_move_constructible_v<Z> && std::is_nothrow_move_assignable_v<Z>);
  const std::array<i64, 2> extents{5, 7};
  const i64 n = 35;
  const nn::adam<double> opt{0.01, 0.9, 0.999, 1e-8};
  // Reference: two global Adam steps.
  const std::vector<double> P = nn_ref::ints<double>(n, 7);
  const std::vector<std::vector<double>> want = reference_steps(P, adam_ref{0.01, 0.9, 0.999, 1e-8, {}, {}}, 2, 2);
  std::mutex mu;
  std::vector<std::string> bad;
  auto fail = [&](int rank, const std::string& what) {
    std::lock_guard lk(mu);
    bad.push_back("rank " + std::to_string(rank) + ": " + what);
  };
  auto close = [](const std::vector<double>& got, const std::vector<double>& w) {
    for (std::size_t i = 0; i < w.size(); ++i)
      if (!(std::abs(got[i] - w[i]) <= 1e-12 * (1 + std::abs(w[i])))) return false;
    return got.size() == w.size();
  };
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    auto grad = [&](int s) {
      auto piece = sc::distribute<sc::layout<R, S1>>(mesh, summand(n, s, mesh.coord(0)), extents);
      return Z::grad_type(mesh, extents, piece.owner(), piece.data());
    };
    auto z = nn::make_zero_param<0>(sc::distribute<sc::layout<R, S1>>(mesh, P, extents), opt);
    z.step(grad(1));
    const Z c = z.clone();  // a checkpoint after step 1
    if (c.steps() != 1) fail(comm.rank(), "the clone's step count");
    if (c.local_shard().data() == z.local_shard().data() || c.state(0).data() == z.state(0).data() ||
        c.state(1).data() == z.state(1).data())
      fail(comm.rank(), "the clone shares buffers");
    const std::vector<double> m1(c.state(0).data(), c.state(0).data() + c.state(0).local_size());
    const auto p1 = sc::to_global(c.gather());
    if (!close(p1, want[0])) fail(comm.rank(), "the clone's parameter after step 1");
    z.step(grad(2));
    if (!close(sc::to_global(z.gather()), want[1])) fail(comm.rank(), "the original after step 2");
    if (!std::equal(m1.begin(), m1.end(), c.state(0).data()) || sc::to_global(c.gather()) != p1)
      fail(comm.rank(), "stepping the original changed the clone");
    Z d = c.clone();  // stepping the checkpoint's copy replays step 2
    d.step(grad(2));
    if (!close(sc::to_global(d.gather()), want[1]) || d.steps() != 2) fail(comm.rank(), "the clone's step 2");
    Z moved = std::move(d);
    if (moved.steps() != 2) fail(comm.rank(), "the moved parameter's step count");
    for (int i : {-1, 2}) {
      try {
        (void)c.state(i);
        fail(comm.rank(), "state(" + std::to_string(i) + ") did not throw");
      } catch (const sc::layout_error& e) {
        if (std::string(e.what()).find("state(i): i is out of range") == std::string::npos) fail(comm.rank(), e.what());
      }
    }
  });
  for (auto& s : bad) FAIL_CHECK(s);
  CHECK(bad.empty());
}
