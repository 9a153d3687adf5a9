// shardcast tensor-parallel attention: the forward pass of multi-head self-attention on a
// DPxTP mesh (axis 0 data parallel over the batch, axis 1 tensor parallel over the heads),
// as Megatron-LM lays it out, checked against a single-rank reference.
//
// x [B, S, H] is split over the batch and replicated over TP. The projections Wq, Wk, Wv
// are stored [H, H] as PyTorch Linear weights ([out, in]) and split over their output rows,
// so q = x Wq^T (matmul<n, t>) holds whole heads on each TP rank; unflatten and transpose
// make them [B, heads, S, dh]; the scores Q K^T, the softmax along the keys and P V are
// per head (batched matmuls, no communication); the output projection Wo, split over its
// input columns, gives partial sums, and one all-reduce over TP makes y [B, S, H]. The
// same computation in double on one rank is the reference: every element of y must agree
// within 1e-5 * max(1, the largest |y|), or the program exits with status 1.
//
//   tensor_parallel_attention [--mesh DPxTP] [--batch B] [--seq S] [--heads N] [--dhead D]
// Defaults: mesh 2x2, B 3, S 5, 4 heads of 3. The heads must split evenly over TP (a head
// is never cut; the unflatten says so otherwise); B and S need not.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <shardcast/ops/reshape.hpp>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

namespace sc = shardcast;
using i64 = std::int64_t;

namespace {

constexpr double rtol = 1e-5;

struct config {
  int dp = 2, tp = 2;
  i64 batch = 3, seq = 5, heads = 4, dhead = 3;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "tensor_parallel_attention: %s\nusage: tensor_parallel_attention [--mesh DPxTP] [--batch B] [--seq S] "
                       "[--heads N] [--dhead D]\n", why);
  std::exit(2);
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--mesh") {
      if (std::sscanf(v, "%dx%d", &c.dp, &c.tp) != 2 || c.dp < 1 || c.tp < 1) usage("--mesh takes DPxTP, e.g. 2x2");
    } else if (a == "--batch" || a == "--seq" || a == "--heads" || a == "--dhead") {
      const long long n = std::atoll(v);
      if (n < 1) usage((a + " takes a positive count").c_str());
      (a == "--batch" ? c.batch : a == "--seq" ? c.seq : a == "--heads" ? c.heads : c.dhead) = n;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  return c;
}

/// Deterministic values in [-1, 1).
std::vector<float> values(i64 n, unsigned salt) {
  std::vector<float> v(static_cast<std::size_t>(n));
  unsigned s = 12345u + 7919u * salt;
  for (auto& e : v) {
    s = s * 1103515245u + 12345u;
    e = static_cast<float>((s >> 8) % 2000) / 1000.0f - 1.0f;
  }
  return v;
}

/// The reference: multi-head self-attention in double on one rank.
std::vector<double> reference(const config& c, const std::vector<float>& x, const std::vector<float>& wq, const std::vector<float>& wk,
                              const std::vector<float>& wv, const std::vector<float>& wo) {
  const i64 B = c.batch, S = c.seq, N = c.heads, D = c.dhead, H = N * D;
  auto project = [&](const std::vector<float>& w) {  // x W^T, W stored [out, in]
    std::vector<double> y(static_cast<std::size_t>(B * S * H));
    for (i64 r = 0; r < B * S; ++r)
      for (i64 o = 0; o < H; ++o) {
        double s = 0;
        for (i64 i = 0; i < H; ++i) s += double(x[static_cast<std::size_t>(r * H + i)]) * w[static_cast<std::size_t>(o * H + i)];
        y[static_cast<std::size_t>(r * H + o)] = s;
      }
    return y;
  };
  const auto q = project(wq), k = project(wk), v = project(wv);
  std::vector<double> ctx(static_cast<std::size_t>(B * S * H)), p(static_cast<std::size_t>(S));
  for (i64 b = 0; b < B; ++b)
    for (i64 h = 0; h < N; ++h)
      for (i64 i = 0; i < S; ++i) {
        auto at = [&](const std::vector<double>& t, i64 s, i64 d) { return t[static_cast<std::size_t>((b * S + s) * H + h * D + d)]; };
        double mx = -INFINITY, sum = 0;
        for (i64 j = 0; j < S; ++j) {
          double s = 0;
          for (i64 d = 0; d < D; ++d) s += at(q, i, d) * at(k, j, d);
          p[static_cast<std::size_t>(j)] = s / std::sqrt(double(D));
          mx = std::max(mx, p[static_cast<std::size_t>(j)]);
        }
        for (auto& e : p) sum += (e = std::exp(e - mx));
        for (i64 d = 0; d < D; ++d) {
          double s = 0;
          for (i64 j = 0; j < S; ++j) s += p[static_cast<std::size_t>(j)] / sum * at(v, j, d);
          ctx[static_cast<std::size_t>((b * S + i) * H + h * D + d)] = s;
        }
      }
  std::vector<double> y(static_cast<std::size_t>(B * S * H));
  for (i64 r = 0; r < B * S; ++r)
    for (i64 o = 0; o < H; ++o) {
      double s = 0;
      for (i64 i = 0; i < H; ++i) s += ctx[static_cast<std::size_t>(r * H + i)] * wo[static_cast<std::size_t>(o * H + i)];
      y[static_cast<std::size_t>(r * H + o)] = s;
    }
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  const config c = parse(argc, argv);
  const i64 B = c.batch, S = c.seq, N = c.heads, D = c.dhead, H = N * D;
  const auto gx = values(B * S * H, 1), gq = values(H * H, 2), gk = values(H * H, 3), gv = values(H * H, 4), go = values(H * H, 5);
  const auto want = reference(c, gx, gq, gk, gv, go);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));

  using R = sc::replicate;
  using S0 = sc::shard<0>;
  using S1 = sc::shard<1>;
  int bad = 0;
  try {
    sc::host::run(c.dp * c.tp, [&](sc::host::communicator& comm) {
      auto mesh = sc::make_mesh(comm, {c.dp, c.tp});
      auto x = sc::distribute<sc::layout<S0, R>>(mesh, gx, {B, S, H});   // the batch over DP
      using rows = sc::layout<R, S0>;                                    // [out, in], outputs over TP
      auto wq = sc::distribute<rows>(mesh, gq, {H, H});
      auto wk = sc::distribute<rows>(mesh, gk, {H, H});
      auto wv = sc::distribute<rows>(mesh, gv, {H, H});
      auto wo = sc::distribute<sc::layout<R, S1>>(mesh, go, {H, H});     // [out, in], inputs over TP

      // [B, S, H] -> [B, heads, S, dh], the heads over TP: layout<shard<0>, shard<1>>.
      auto heads = [&](const auto& w) {
        auto y = sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(x, w);       // x W^T: layout<shard<0>, shard<2>>
        return sc::transpose<0, 2, 1, 3>(sc::unflatten<2>(y, {N, D}));
      };
      const auto q = heads(wq), k = heads(wk), v = heads(wv);
      auto scores = sc::mul(sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(q, k), 1.0f / std::sqrt(float(D)));  // [B, heads, S, S]
      auto mx = sc::reduce<3, sc::max, sc::keep_dim>(scores);           // the keys are not split: local
      auto e = sc::map(sc::broadcast_zip<3>(std::move(scores), mx, sc::fn::sub), sc::fn::exp);
      auto sum = sc::reduce<3, sc::sum, sc::keep_dim>(e);
      auto p = sc::broadcast_zip<3>(std::move(e), sum, sc::fn::div);    // softmax over the keys
      auto ctx = sc::flatten<2, 3>(sc::transpose<0, 2, 1, 3>(sc::matmul(p, v)));  // [B, S, H]: layout<shard<0>, shard<2>>
      auto partial = sc::matmul<sc::gemm_op::n, sc::gemm_op::t>(ctx, wo);           // layout<shard<0>, partial<sum>>
      static_assert(std::is_same_v<decltype(partial)::layout_type, sc::layout<S0, sc::partial<sc::sum>>>);
      auto y = sc::to_global(sc::redistribute<sc::layout<S0, R>>(std::move(partial)));  // all-reduce over TP
      if (comm.rank() != 0) return;
      for (std::size_t i = 0; i < y.size(); ++i)
        if (std::abs(double(y[i]) - want[i]) > rtol * std::max(1.0, scale)) ++bad;
      std::printf("tensor_parallel_attention: mesh %dx%d, batch %lld, seq %lld, %lld heads of %lld: %s (%d of %zu elements differ)\n", c.dp,
                  c.tp, static_cast<long long>(B), static_cast<long long>(S), static_cast<long long>(N), static_cast<long long>(D),
                  bad ? "DIFFERS from the single-rank reference" : "matches the single-rank reference", bad, y.size());
    });
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "tensor_parallel_attention: %s\n", ex.what());
    return 1;
  }
  return bad ? 1 : 0;
}
