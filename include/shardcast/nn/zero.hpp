#pragma once
/// @file nn/zero.hpp
/// ZeRO-style sharded parameters (Rajbhandari et al. 2020, arXiv:1910.02054): a parameter
/// that the layers use replicated over the data-parallel (DP) axis is stored split over it.
/// Each DP rank keeps its shard of the parameter and of the optimizer state; `step`
/// reduce-scatters the gradient (a partial sum over DP, as the layers' backward passes
/// return it) so each rank receives the summed gradient of its shard, updates the shard
/// with SGD with momentum or Adam, and `gather` all-gathers the parameter for the next
/// forward pass. Both are one `redistribute` each; the update is elementwise and local.
///
/// The DP axis shards the first tensor dim no other mesh axis shards, so the
/// reduce-scatter and the all-gather are single collectives over the DP axis. A parameter
/// with every dim already sharded (a 1-D bias split over the TP axis) is split further
/// along dim 0; when the DP axis comes before that axis the split nests the other way and
/// the planner moves it with one collective over both axes (a local pad before the
/// reduce-scatter, a local slice after the all-gather): correct, with more traffic on a
/// small tensor (3/4 of it per rank on a 2x2 mesh, against 1/4 over DP alone).
///
/// Worked example, 2x2 mesh, axis 0 data parallel, axis 1 tensor parallel, a column-parallel weight W [5, 7]:
/// @code
///   // use layout layout<R, S(1)>: (.,1) holds W[:, 4..6]      stored: layout<S(0), S(1)>: (1,1) holds W[3..4, 4..6]
///   auto w = shardcast::nn::make_zero_param<0>(fc1.weight, shardcast::nn::adam<float>{1e-3f});
///   fc1.weight = w.gather();                 // all_gather over axis 0
///   auto g = fc1.backward(x, dy);            // g.weight: layout<P(sum), S(1)>
///   w.step(g.weight);                        // reduce_scatter over axis 0, Adam on the 2x3 shard
/// @endcode

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../ops/functors.hpp"
#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../redistribute.hpp"
#include "detail/layout_ops.hpp"
#include "detail/local.hpp"

namespace shardcast::nn {

namespace detail {
/// buf = mu * buf + g
template <class S>
struct momentum_fn {
  S mu;
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T buf, T g) const { return static_cast<T>(static_cast<T>(mu) * buf + g); }
};
/// p - a * d
template <class S>
struct sub_scaled_fn {
  S a;
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T p, T d) const { return static_cast<T>(p - static_cast<T>(a) * d); }
};
/// beta * m + (1 - beta) * g
template <class S>
struct ema_fn {
  S beta;
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T m, T g) const { return static_cast<T>(static_cast<T>(beta) * m + (T(1) - static_cast<T>(beta)) * g); }
};
/// beta * v + (1 - beta) * g * g
template <class S>
struct ema_sq_fn {
  S beta;
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T v, T g) const {
    return static_cast<T>(static_cast<T>(beta) * v + (T(1) - static_cast<T>(beta)) * g * g);
  }
};
/// step_size * m / (sqrt(v) / sqrt_bc2 + eps)
template <class S>
struct adam_dir_fn {
  S step_size, sqrt_bc2, eps;
  template <class T>
  SHARDCAST_HOST_DEVICE T operator()(T m, T v) const {
    using std::sqrt;
    return static_cast<T>(static_cast<T>(step_size) * m / (sqrt(v) / static_cast<T>(sqrt_bc2) + static_cast<T>(eps)));
  }
};

/// The tensor dim the DP axis shards: the first dim no other axis shards, else dim 0.
template <class L, int R, int DpAxis>
constexpr int zero_shard_dim() {
  for (int d = 0; d < R; ++d)
    if (!dim_sharded_elsewhere<L>(d, DpAxis)) return d;
  return 0;
}
}  // namespace detail

/// SGD with momentum, as PyTorch's `torch.optim.SGD` (no dampening, no weight decay, no Nesterov):
/// buf = momentum * buf + g; p -= lr * buf (buf starts at zero, so the first step uses g).
/// @tparam S the type of the hyper-parameters
template <class S = float>
struct sgd {
  S lr;            ///< learning rate
  S momentum = 0;  ///< momentum factor (0: plain SGD)

  static constexpr int state_buffers = 1;
  /// One step on n local elements: p (updated), g (the summed gradient; may be overwritten),
  /// state[0] the momentum buffer; `t` is the 1-based step number.
  template <class Exec, class T, class Stream>
  void update(T* p, T* g, T* const* state, std::size_t n, long t, Stream s) const {
    (void)t;
    Exec::zip(state[0], g, state[0], n, detail::momentum_fn<S>{momentum}, s);
    Exec::zip(p, state[0], p, n, detail::sub_scaled_fn<S>{lr}, s);
  }
};

/// Adam (Kingma & Ba, arXiv:1412.6980) in PyTorch's `torch.optim.Adam` arrangement (no weight decay, no AMSGrad):
/// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
/// @tparam S the type of the hyper-parameters
template <class S = float>
struct adam {
  S lr = S(1e-3);       ///< learning rate
  S beta1 = S(0.9);     ///< decay of the first moment
  S beta2 = S(0.999);   ///< decay of the second moment
  S eps = S(1e-8);      ///< added to the denominator

  static constexpr int state_buffers = 2;
  /// One step on n local elements: p (updated), g (the summed gradient; overwritten with
  /// the update), state[0] = m, state[1] = v; `t` is the 1-based step number.
  template <class Exec, class T, class Stream>
  void update(T* p, T* g, T* const* state, std::size_t n, long t, Stream s) const {
    const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
    Exec::zip(state[0], g, state[0], n, detail::ema_fn<S>{beta1}, s);
    Exec::zip(state[1], g, state[1], n, detail::ema_sq_fn<S>{beta2}, s);
    Exec::zip(state[0], state[1], g, n, detail::adam_dir_fn<S>{static_cast<S>(static_cast<double>(lr) / bc1), static_cast<S>(std::sqrt(bc2)), eps}, s);
    Exec::zip(p, g, p, n, fn::sub, s);
  }
};

template <int DpAxis, class Tensor, class Optimizer>
class zero_param;

/// A parameter sharded over the DP axis with its optimizer state; see the file comment.
/// @tparam DpAxis the data-parallel mesh axis (the parameter must be replicated over it when used)
/// @tparam T, R, UseLayout, Mesh the dtensor the layers use (e.g. column_parallel_linear::weight_type)
/// @tparam Optimizer sgd<S> or adam<S> (or a type with the same `state_buffers` and `update`)
template <int DpAxis, class T, int R, class UseLayout, class Mesh, class Optimizer>
class zero_param<DpAxis, dtensor<T, R, UseLayout, Mesh>, Optimizer> {
  static_assert(DpAxis >= 0 && DpAxis < Mesh::naxes, "shardcast::nn::zero_param<DpAxis, ...>: DpAxis must be an axis of the mesh.");
  static_assert(UseLayout::desc[DpAxis].is_replicate(),
                "shardcast::nn::zero_param: the parameter must be replicated over the data-parallel axis where the layers use it "
                "(ZeRO splits exactly that copy); check DpAxis against the layer's parallel_axes.");
  static_assert(Optimizer::state_buffers >= 0 && Optimizer::state_buffers <= 4,
                "shardcast::nn::zero_param: Optimizer::state_buffers must be between 0 and 4.");
  using ops = shardcast::detail::memory_ops<typename Mesh::memory_space>;
  using exec = detail::local_exec<typename Mesh::memory_space>;

 public:
  using stream_type = typename Mesh::stream_type;
  /// The tensor dim the DP axis splits in storage.
  static constexpr int shard_dim = detail::zero_shard_dim<UseLayout, R, DpAxis>();
  using use_layout = UseLayout;                                                         ///< as the layers use it
  using shard_layout = detail::replace_placement_t<UseLayout, DpAxis, shardcast::shard<shard_dim>>;  ///< as stored
  using grad_layout = detail::replace_placement_t<UseLayout, DpAxis, partial<sum>>;     ///< as backward returns it
  using tensor_type = dtensor<T, R, use_layout, Mesh>;
  using shard_type = dtensor<T, R, shard_layout, Mesh>;
  using grad_type = dtensor<T, R, grad_layout, Mesh>;

  /// Keeps this rank's shard of `full` (copied; `full` is unchanged) and zeroed optimizer state.
  /// Collective over the mesh: usually a local slice, but a parameter whose stored split
  /// nests the other way (the column bias in the file comment) takes an all_gather first.
  zero_param(const tensor_type& full, Optimizer opt, stream_type s = {}) : opt_(opt) {
    const auto sliced = redistribute<shard_layout>(full, s);  // a local slice, or an all_gather and a slice (see above)
    param_ = copy_of(sliced, s);
    for (int i = 0; i < Optimizer::state_buffers; ++i) {
      state_[i] = fresh_like(sliced, s);
      ops::fill(state_[i].data(), state_[i].local_size(), T{}, s);
    }
  }

  /// The same from a parameter of const elements (only read).
  zero_param(const dtensor<const T, R, use_layout, Mesh>& full, Optimizer opt, stream_type s = {})
      : zero_param(shardcast::detail::unconst(full), opt, s) {}

  /// Not copyable: a copy would share the shard and the optimizer state (a dtensor is a
  /// handle) but count its steps apart, so Adam's bias correction would go wrong on both.
  /// Use `clone` for an independent copy (a checkpoint); moving is fine.
  zero_param(const zero_param&) = delete;
  zero_param& operator=(const zero_param&) = delete;
  zero_param(zero_param&&) noexcept = default;
  zero_param& operator=(zero_param&&) noexcept = default;

  /// An independent copy: this rank's shard and optimizer state copied into new buffers,
  /// with the same step count and hyper-parameters. Local (no communication).
  zero_param clone(stream_type s = {}) const {
    zero_param c(opt_, t_);
    c.param_ = copy_of(param_, s);
    for (int i = 0; i < Optimizer::state_buffers; ++i) c.state_[i] = copy_of(state_[i], s);
    return c;
  }

  /// Collective over the mesh: the whole parameter in `use_layout` (all-gather over the DP axis).
  tensor_type gather(stream_type s = {}) const { return redistribute<use_layout>(param_, s); }

  /// Collective: reduce-scatters `grad` over the DP axis and applies one optimizer step to
  /// this rank's shard. `grad` is unchanged.
  /// @throws layout_error if grad lives on another mesh or its extents differ from the parameter's
  void step(const grad_type& grad, stream_type s = {}) {
    shardcast::detail::expect_same_mesh("shardcast::nn::zero_param::step", grad.mesh(), param_.mesh(), "grad", "the parameter");
    SHARDCAST_EXPECTS(grad.global_extents() == param_.global_extents(),
                      "shardcast::nn::zero_param::step: the gradient's extents differ from the parameter's; pass this parameter's gradient");
    auto g = redistribute<shard_layout>(grad, s);  // reduce_scatter(sum) over the DP axis
    if (g.data() == grad.data()) {                 // never write into the caller's gradient
      auto c = fresh_like(g, s);
      ops::copy(c.data(), g.data(), g.local_size(), s);
      g = c;
    }
    ++t_;
    T* st[Optimizer::state_buffers > 0 ? Optimizer::state_buffers : 1] = {};
    for (int i = 0; i < Optimizer::state_buffers; ++i) st[i] = state_[i].data();
    if (param_.local_size() > 0) opt_.template update<exec>(param_.data(), g.data(), st, param_.local_size(), t_, s);
  }

  /// The same for a gradient of const elements (only read).
  void step(const dtensor<const T, R, grad_layout, Mesh>& grad, stream_type s = {}) { step(shardcast::detail::unconst(grad), s); }

  /// This rank's shard of the parameter.
  const shard_type& local_shard() const { return param_; }
  /// This rank's shard of optimizer state buffer i (sgd: 0 = momentum; adam: 0 = m, 1 = v).
  /// @throws layout_error unless 0 <= i < Optimizer::state_buffers
  const shard_type& state(int i) const {
    SHARDCAST_EXPECTS(i >= 0 && i < Optimizer::state_buffers,
                      "shardcast::nn::zero_param::state(i): i is out of range; the optimizer has Optimizer::state_buffers buffers "
                      "(sgd: 1, the momentum; adam: 2, m and v)");
    return state_[i];
  }
  /// The optimizer's hyper-parameters (mutable, e.g. for a learning-rate schedule).
  Optimizer& optimizer() { return opt_; }
  const Optimizer& optimizer() const { return opt_; }
  /// Steps taken so far.
  long steps() const { return t_; }

 private:
  zero_param(const Optimizer& opt, long t) : opt_(opt), t_(t) {}
  static shard_type fresh_like(const shard_type& x, stream_type s) { return empty<shard_layout, T>(x.mesh(), x.global_extents(), s); }
  static shard_type copy_of(const shard_type& x, stream_type s) {
    auto c = fresh_like(x, s);
    ops::copy(c.data(), x.data(), x.local_size(), s);
    return c;
  }

  Optimizer opt_;
  shard_type param_;
  shard_type state_[Optimizer::state_buffers > 0 ? Optimizer::state_buffers : 1];
  long t_ = 0;
};

/// Makes the ZeRO-sharded parameter of `full` over mesh axis `DpAxis`.
/// @tparam DpAxis the data-parallel mesh axis
template <int DpAxis, class T, int R, class L, class Mesh, class Optimizer>
zero_param<DpAxis, dtensor<T, R, L, Mesh>, Optimizer> make_zero_param(const dtensor<T, R, L, Mesh>& full, Optimizer opt,
                                                                       typename Mesh::stream_type s = {}) {
  return zero_param<DpAxis, dtensor<T, R, L, Mesh>, Optimizer>(full, opt, s);
}
/// The same from a parameter of const elements (only read): the stored shard's elements are
/// mutable, as the optimizer writes them.
template <int DpAxis, class T, int R, class L, class Mesh, class Optimizer>
zero_param<DpAxis, dtensor<T, R, L, Mesh>, Optimizer> make_zero_param(const dtensor<const T, R, L, Mesh>& full, Optimizer opt,
                                                                       typename Mesh::stream_type s = {}) {
  return zero_param<DpAxis, dtensor<T, R, L, Mesh>, Optimizer>(full, opt, s);
}

}  // namespace shardcast::nn
