// shardcast tensor-parallel MLP: a 2-layer MLP (column-parallel linear -> GELU ->
// row-parallel linear) trained for a few steps on a DPxTP mesh (axis 0 data parallel,
// axis 1 tensor parallel) with sequence parallelism and ZeRO-sharded parameters, checked
// against a single-rank reference.
//
// Every step: forward (all-gather of the token-split input on entry to the column layer,
// reduce-scatter of the row layer's partial sums on exit), mean-squared-error loss against
// a target, backward (mirrored collectives), then for each parameter a reduce-scatter of
// its gradient over the DP axis, an optimizer step on this rank's shard and an all-gather
// of the parameter. The same MLP and optimizer computed globally in double on one rank is
// the reference: each step's loss and input gradient and the final weights must agree within the stated
// tolerance, or the program exits with status 1.
//
//   tensor_parallel_mlp [--backend host|mpi] [--mesh DPxTP] [--ranks N] [--steps K]
//                       [--optimizer adam|sgd] [--tokens T] [--dmodel D] [--dff F]
// Defaults: host backend, mesh 2x2, 5 steps, Adam, 16 tokens, d_model 8, d_ff 32. --ranks N
// without --mesh uses the mesh (N/2)x2 for even N and 1xN otherwise.
//   mpirun -np 4 tensor_parallel_mlp --backend mpi      (when built with MPI)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <shardcast/nn/layers.hpp>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#if SHARDCAST_EXAMPLE_MPI
#include <mpi.h>

#include <shardcast/comm/mpi.hpp>
#endif

namespace sc = shardcast;
namespace nn = shardcast::nn;
using i64 = std::int64_t;

namespace {

// Agreement between the float distributed run and the double reference (observed: about
// 1e-7 for the default sizes; float sums over d_model, d_ff and the tokens in another order).
// The loss is mean(e^2), e = y - target: float rounds y, not e, so e's error scales with
// |y|, and where the model nearly fits (|e| << |y|) a relative check of the loss fails on
// rounding alone. Hence each step's RMS error sqrt(loss) within 1e-5 of (sqrt(reference) +
// rms(y)), and its input gradient dL/dx, which is linear in e, within 1e-5 of its largest
// element times (1 + rms(y) / sqrt(reference)); each final weight within 1e-5 * (1 + |reference|).
constexpr double loss_rtol = 1e-5;
constexpr double weight_tol = 1e-5;
constexpr double input_grad_rtol = 1e-5;

struct config {
  std::string backend = "host";
  int dp = 2, tp = 2, ranks = 0, steps = 5;
  std::string optimizer = "adam";
  i64 tokens = 16, dmodel = 8, dff = 32;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "tensor_parallel_mlp: %s\nusage: tensor_parallel_mlp [--backend host|mpi] [--mesh DPxTP] [--ranks N] [--steps K]\n"
               "                           [--optimizer adam|sgd] [--tokens T] [--dmodel D] [--dff F]\n",
               why);
  std::exit(2);
}

config parse(int argc, char** argv) {
  config c;
  bool mesh_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    auto number = [&](long lo) {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < lo) usage((a + " needs an integer >= " + std::to_string(lo) + ", got '" + v + "'").c_str());
      return n;
    };
    if (a == "--backend") c.backend = value();
    else if (a == "--mesh") {
      mesh_given = true;
      const std::string v = value();
      if (std::sscanf(v.c_str(), "%dx%d", &c.dp, &c.tp) != 2 || c.dp < 1 || c.tp < 1) usage(("--mesh needs DPxTP, e.g. 2x2, got '" + v + "'").c_str());
    } else if (a == "--ranks") c.ranks = static_cast<int>(number(1));
    else if (a == "--steps") c.steps = static_cast<int>(number(1));
    else if (a == "--optimizer") c.optimizer = value();
    else if (a == "--tokens") c.tokens = number(1);
    else if (a == "--dmodel") c.dmodel = number(1);
    else if (a == "--dff") c.dff = number(1);
    else usage(("unknown argument " + a).c_str());
  }
  if (c.backend != "host" && c.backend != "mpi") usage("--backend is host or mpi");
  if (c.optimizer != "adam" && c.optimizer != "sgd") usage("--optimizer is adam or sgd");
  if (c.ranks == 0) c.ranks = c.dp * c.tp;
  if (c.ranks != c.dp * c.tp) {
    if (mesh_given) usage("--ranks must equal DP*TP of --mesh");
    c.tp = c.ranks % 2 == 0 ? 2 : c.ranks;  // --ranks alone: TP 2 when it divides, else all ranks tensor parallel
    c.dp = c.ranks / c.tp;
  }
  return c;
}

// Deterministic values in [-scale, scale].
std::vector<double> values(i64 n, unsigned seed, double scale) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<double>(s >> 8) / static_cast<double>(1u << 24) * 2.0 - 1.0);
  }
  return v;
}
std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

struct problem {
  std::vector<double> x, target, w1, b1, w2, b2;
};
problem make_problem(const config& c) {
  return {values(c.tokens * c.dmodel, 1, 1.0), values(c.tokens * c.dmodel, 2, 0.5), values(c.dmodel * c.dff, 3, 1.0 / std::sqrt(double(c.dmodel))),
          values(c.dff, 4, 0.1), values(c.dff * c.dmodel, 5, 1.0 / std::sqrt(double(c.dff))), values(c.dmodel, 6, 0.1)};
}

// ---------------------------------------------------------------------------------------
// The single-rank reference: the same MLP, loss and optimizer on whole tensors, in double.
double gelu_ref(double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }
double gelu_grad_ref(double v) {
  const double k = 0.7978845608028654, t = std::tanh(k * (v + 0.044715 * v * v * v));
  return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
}

struct optimizer_ref {
  std::string kind;
  double lr, momentum, b1, b2, eps;
  std::vector<double> m, v;
  void step(std::vector<double>& p, const std::vector<double>& g, long t) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    if (kind == "sgd") {
      for (std::size_t i = 0; i < p.size(); ++i) {
        m[i] = momentum * m[i] + g[i];
        p[i] -= lr * m[i];
      }
      return;
    }
    const double bc1 = 1 - std::pow(b1, double(t)), bc2 = 1 - std::pow(b2, double(t));
    for (std::size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

// Hyper-parameters shared by the reference and the distributed run.
constexpr double sgd_lr = 0.1, sgd_momentum = 0.9;
constexpr double adam_lr = 0.01, adam_b1 = 0.9, adam_b2 = 0.999, adam_eps = 1e-8;

struct reference {
  std::vector<double> losses;
  std::vector<std::vector<double>> input_grads;  ///< per step, dL/dx [tokens, d_model]
  problem final_params;
};

reference run_reference(const config& c, problem p) {
  const i64 T = c.tokens, D = c.dmodel, F = c.dff;
  const double lr = c.optimizer == "adam" ? adam_lr : sgd_lr;
  std::array<optimizer_ref, 4> o;
  for (auto& x : o) x = optimizer_ref{c.optimizer, lr, sgd_momentum, adam_b1, adam_b2, adam_eps, {}, {}};
  reference r;
  auto at = [](std::vector<double>& v, i64 i) -> double& { return v[static_cast<std::size_t>(i)]; };
  for (int s = 1; s <= c.steps; ++s) {
    std::vector<double> h(static_cast<std::size_t>(T * F)), a(h.size()), y(static_cast<std::size_t>(T * D));
    for (i64 t = 0; t < T; ++t)
      for (i64 f = 0; f < F; ++f) {
        double acc = at(p.b1, f);
        for (i64 d = 0; d < D; ++d) acc += at(p.x, t * D + d) * at(p.w1, d * F + f);
        at(h, t * F + f) = acc;
        at(a, t * F + f) = gelu_ref(acc);
      }
    for (i64 t = 0; t < T; ++t)
      for (i64 d = 0; d < D; ++d) {
        double acc = at(p.b2, d);
        for (i64 f = 0; f < F; ++f) acc += at(a, t * F + f) * at(p.w2, f * D + d);
        at(y, t * D + d) = acc;
      }
    double loss = 0;
    std::vector<double> dy(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double e = y[i] - p.target[i];
      loss += e * e;
      dy[i] = 2 * e / double(T * D);
    }
    r.losses.push_back(loss / double(T * D));
    std::vector<double> dw2(p.w2.size(), 0.0), db2(p.b2.size(), 0.0), dh(h.size(), 0.0), dw1(p.w1.size(), 0.0), db1(p.b1.size(), 0.0);
    for (i64 t = 0; t < T; ++t)
      for (i64 d = 0; d < D; ++d) {
        const double g = at(dy, t * D + d);
        at(db2, d) += g;
        for (i64 f = 0; f < F; ++f) {
          at(dw2, f * D + d) += at(a, t * F + f) * g;
          at(dh, t * F + f) += g * at(p.w2, f * D + d);
        }
      }
    std::vector<double> dx(p.x.size(), 0.0);
    for (i64 t = 0; t < T; ++t)
      for (i64 f = 0; f < F; ++f) {
        const double g = at(dh, t * F + f) * gelu_grad_ref(at(h, t * F + f));
        at(db1, f) += g;
        for (i64 d = 0; d < D; ++d) {
          at(dw1, d * F + f) += at(p.x, t * D + d) * g;
          at(dx, t * D + d) += g * at(p.w1, d * F + f);
        }
      }
    r.input_grads.push_back(std::move(dx));
    o[0].step(p.w1, dw1, s);
    o[1].step(p.b1, db1, s);
    o[2].step(p.w2, dw2, s);
    o[3].step(p.b2, db2, s);
  }
  r.final_params = p;
  return r;
}

// ---------------------------------------------------------------------------------------
// The distributed run: the same computation on the mesh, in float.
template <class Mesh, class Opt>
int train(const Mesh& mesh, const config& c, const problem& p, const reference& ref, Opt opt) {
  using axes = nn::sequence_parallel<1, 0>;  // mesh axis 1 tensor parallel, axis 0 data parallel
  using fc1_t = nn::column_parallel_linear<float, Mesh, axes>;
  using fc2_t = nn::row_parallel_linear<float, Mesh, axes>;
  const i64 T = c.tokens, D = c.dmodel, F = c.dff;
  const bool lead = mesh.rank() == 0;

  // Every parameter starts as the global tensor; ZeRO keeps only this rank's shard of it.
  auto w1 = nn::make_zero_param<axes::dp>(sc::distribute<typename fc1_t::weight_layout>(mesh, to_float(p.w1), std::array<i64, 2>{D, F}), opt);
  auto b1 = nn::make_zero_param<axes::dp>(sc::distribute<typename fc1_t::bias_layout>(mesh, to_float(p.b1), std::array<i64, 1>{F}), opt);
  auto w2 = nn::make_zero_param<axes::dp>(sc::distribute<typename fc2_t::weight_layout>(mesh, to_float(p.w2), std::array<i64, 2>{F, D}), opt);
  auto b2 = nn::make_zero_param<axes::dp>(sc::distribute<typename fc2_t::bias_layout>(mesh, to_float(p.b2), std::array<i64, 1>{D}), opt);
  fc1_t fc1(w1.gather(), b1.gather());
  fc2_t fc2(w2.gather(), b2.gather());

  // Inputs and targets, split by tokens over both axes (sequence parallel).
  auto x = sc::distribute<typename fc1_t::input_layout>(mesh, to_float(p.x), std::array<i64, 2>{T, D});
  auto target = sc::distribute<typename fc2_t::output_layout>(mesh, to_float(p.target), std::array<i64, 2>{T, D});

  if (lead) {
    std::printf("tensor_parallel_mlp: %s backend, mesh %dx%d (axis 0 data parallel, axis 1 tensor parallel), %d ranks\n", c.backend.c_str(),
                c.dp, c.tp, mesh.nranks());
    std::printf("  tokens %lld, d_model %lld, d_ff %lld, %s, %d steps; rank 0 holds:\n", (long long)T, (long long)D, (long long)F,
                c.optimizer.c_str(), c.steps);
    auto show = [](const char* what, const auto& t) {
      const auto e = t.local_extents();
      std::printf("    %-34s %-12s %lld", what, sc::to_string(t.layout()).c_str(), (long long)e[0]);
      for (std::size_t d = 1; d < e.size(); ++d) std::printf("x%lld", (long long)e[d]);
      std::printf("\n");
    };
    show("x [tokens, d_model]", x);
    show("W1 [d_model, d_ff] (used)", fc1.weight);
    show("W1 shard (ZeRO, with Adam m, v)", w1.local_shard());
    show("W2 [d_ff, d_model] (used)", fc2.weight);
    show("W2 shard (ZeRO)", w2.local_shard());
  }

  int mismatches = 0;
  for (int s = 1; s <= c.steps; ++s) {
    // Forward: all_gather(x) over TP -> local GEMM -> GELU -> local GEMM -> reduce_scatter over TP.
    const auto h = fc1.forward(x);
    const auto a = nn::gelu.forward(h);
    const auto y = fc2.forward(a);

    // MSE over all tokens: every element of y lives on exactly one rank.
    auto dy = sc::empty<typename fc2_t::output_layout, float>(mesh, std::array<i64, 2>{T, D});
    double local[2] = {0, 0}, sums[2] = {0, 0};  // sum of e^2, sum of y^2
    const double scale = 2.0 / double(T * D);
    for (std::size_t i = 0; i < y.local_size(); ++i) {
      const double e = double(y.data()[i]) - double(target.data()[i]);
      local[0] += e * e;
      local[1] += double(y.data()[i]) * double(y.data()[i]);
      dy.data()[i] = static_cast<float>(scale * e);
    }
    mesh.comm().all_reduce(local, sums, 2, sc::reduce_op::sum);
    const double loss = sums[0] / double(T * D), rms_y = std::sqrt(sums[1] / double(T * D));

    // Backward: all_gather(dy) over TP -> local GEMMs -> reduce_scatter(dx) over TP.
    const auto g2 = fc2.backward(a, dy);
    const auto da = nn::gelu.backward(h, g2.input);
    const auto g1 = fc1.backward(x, da);

    // ZeRO: reduce_scatter each gradient over DP, optimizer step on the shard, all_gather.
    w1.step(g1.weight);
    b1.step(g1.bias);
    w2.step(g2.weight);
    b2.step(g2.bias);
    fc1.weight = w1.gather();
    fc1.bias = b1.gather();
    fc2.weight = w2.gather();
    fc2.bias = b2.gather();

    const double want = ref.losses[static_cast<std::size_t>(s - 1)];
    const bool ok = std::abs(std::sqrt(loss) - std::sqrt(want)) <= loss_rtol * (std::sqrt(want) + rms_y);
    mismatches += ok ? 0 : 1;
    // The input gradient (what a layer below would receive), gathered: collective.
    const std::vector<float> dx = sc::to_global(g1.input);
    const std::vector<double>& dx_want = ref.input_grads[static_cast<std::size_t>(s - 1)];
    double dx_err = dx.size() == dx_want.size() ? 0 : 1, dx_max = 0;
    for (std::size_t i = 0; i < dx.size() && i < dx_want.size(); ++i) {
      dx_err = std::max(dx_err, std::abs(double(dx[i]) - dx_want[i]));
      dx_max = std::max(dx_max, std::abs(dx_want[i]));
    }
    const double gain = want > 0 ? 1 + rms_y / std::sqrt(want) : 1;  // rounding of y against e (see loss_rtol)
    const bool dx_ok = dx.size() == dx_want.size() && dx_err <= input_grad_rtol * dx_max * gain;
    mismatches += dx_ok ? 0 : 1;
    if (lead)
      std::printf("  step %d  loss %.7f  reference %.7f  %s   dL/dx max error %.1e of max |dL/dx| %.1e  %s\n", s, loss, want,
                  ok ? "ok" : "MISMATCH", dx_err, dx_max, dx_ok ? "ok" : "MISMATCH");
  }

  // Final weights, gathered on every rank, against the reference.
  double worst = 0;
  auto compare = [&](const char* name, const auto& t, const std::vector<double>& want) {
    const std::vector<float> got = sc::to_global(t);  // collective
    double err = 0;
    bool ok = got.size() == want.size();
    for (std::size_t i = 0; ok && i < want.size(); ++i) {
      const double e = std::abs(double(got[i]) - want[i]);
      err = std::max(err, e / (1 + std::abs(want[i])));
    }
    ok = ok && err <= weight_tol;
    worst = std::max(worst, err);
    mismatches += ok ? 0 : 1;
    if (lead) std::printf("  final %-3s max |w - ref| / (1 + |ref|) = %.2e  %s\n", name, err, ok ? "ok" : "MISMATCH");
  };
  compare("W1", fc1.weight, ref.final_params.w1);
  compare("b1", fc1.bias, ref.final_params.b1);
  compare("W2", fc2.weight, ref.final_params.w2);
  compare("b2", fc2.bias, ref.final_params.b2);
  if (lead)
    std::printf(mismatches ? "tensor_parallel_mlp: %d mismatches with the single-rank reference\n"
                           : "tensor_parallel_mlp: every step's loss and input gradient and the final weights match the single-rank "
                             "reference (RMS error within 1e-5 of itself + rms(y), dL/dx within 1e-5 of its largest element "
                             "times 1 + rms(y) / RMS error, weights within 1e-5 * (1 + |w|))\n",
                mismatches);
  return mismatches;
}

template <class Comm>
int run_rank(Comm& comm, const config& c, const problem& p, const reference& ref) {
  auto mesh = sc::make_mesh(comm, std::array<int, 2>{c.dp, c.tp});
  if (c.optimizer == "sgd") return train(mesh, c, p, ref, nn::sgd<float>{float(sgd_lr), float(sgd_momentum)});
  return train(mesh, c, p, ref, nn::adam<float>{float(adam_lr), float(adam_b1), float(adam_b2), float(adam_eps)});
}

}  // namespace

int main(int argc, char** argv) {
#if SHARDCAST_EXAMPLE_MPI
  bool use_mpi = false;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--backend") == 0 && std::strcmp(argv[i + 1], "mpi") == 0) use_mpi = true;
  if (use_mpi) {
    MPI_Init(&argc, &argv);
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    config c = parse(argc, argv);
    if (c.dp * c.tp != size) {
      if (rank == 0)
        std::fprintf(stderr, "tensor_parallel_mlp: mpirun started %d processes but --mesh %dx%d needs %d; use mpirun -np %d or another --mesh\n",
                     size, c.dp, c.tp, c.dp * c.tp, c.dp * c.tp);
      MPI_Finalize();
      return 2;
    }
    int bad = 0;
    try {
      const problem p = make_problem(c);
      const reference ref = run_reference(c, p);
      sc::mpi::communicator comm(MPI_COMM_WORLD);
      bad = run_rank(comm, c, p, ref);
    } catch (const std::exception& e) {
      // A rank that fails takes the job down rather than leaving its peers in a collective.
      std::fprintf(stderr, "tensor_parallel_mlp: rank %d: %s\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
  }
#endif
  const config c = parse(argc, argv);
  if (c.backend == "mpi") {
    std::fprintf(stderr, "tensor_parallel_mlp: this build has no MPI (configure with MPI installed and SHARDCAST_ENABLE_MPI=ON)\n");
    return 2;
  }
  try {
    const problem p = make_problem(c);
    const reference ref = run_reference(c, p);
    int bad = 0;
    sc::host::run(c.ranks, [&](sc::host::communicator& comm) {
      const int b = run_rank(comm, c, p, ref);
      if (comm.rank() == 0) bad = b;  // every rank counts the same mismatches
    });
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensor_parallel_mlp: %s\n", e.what());
    return 1;
  }
}
