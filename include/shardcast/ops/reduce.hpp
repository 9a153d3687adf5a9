#pragma once
/// @file ops/reduce.hpp
/// `reduce<D, Op>(x)`: reduces tensor dim D of x with Op (sum, avg, max, min, prod). Like
/// PyTorch's default, the dim is dropped: a rank-R input gives a rank-(R-1) result (rank 1
/// gives a rank-0 dtensor); `reduce<D, Op, keep_dim>(x)` keeps it with extent 1.
/// No communication: each rank reduces its local piece. The output layout follows, per
/// mesh axis, at compile time (for `dynamic_layout` tensors at run time):
///
/// | x on the axis        | output on the axis                                          |
/// |----------------------|-------------------------------------------------------------|
/// | shard<D>             | partial<Op> (partial<sum> for avg, see below)               |
/// | shard<E>, E != D     | shard<E>, renumbered shard<E-1> when E > D and D is dropped |
/// | replicate            | replicate                                                   |
/// | partial<Op>          | partial<Op> (the two reductions commute)                    |
/// | partial<sum>, Op avg | partial<sum> (the mean is linear)                           |
/// | partial<avg>, Op sum | partial<avg> (the sum is linear; floating-point types)      |
/// | partial<other op>    | compile error: redistribute x to replicate first            |
///
/// Reducing a sharded dim is the point: the result is left partial, and a later
/// `redistribute` (all_reduce, or reduce_scatter into a shard) finishes it when needed.
///
/// avg: a mean over a dim split into uneven parts is not the mean of the parts' means, so
/// every rank computes its local *sum* divided by the *global* extent of D; over a sharded D
/// that is a partial<sum> whose sum is the exact mean. avg also accepts partial<sum> and
/// partial<avg> inputs (the mean is linear), and sum accepts partial<avg> inputs of
/// floating-point types (the sum of the means is the mean of the sums); a result that would
/// mix partial<sum> (from a sharded D) with partial<avg> (from x) is refused. avg needs a
/// non-integral element type (an integer division of each part would not sum to the
/// division of the whole), and so does sum over a partial<avg>: a mean of integers is
/// truncated, and a sum of truncated means is not the truncated mean of the sums.
///
/// Empty parts: a rank whose piece has extent 0 along D holds Op's identity (0 for sum,
/// 1 for prod, the lowest value for max, the highest for min), so the partial result is
/// still exact. Over a global extent of 0, sum gives 0, prod 1, max/min the identity and
/// avg 0/0 (NaN).
///
/// @code
///   // 2x2 mesh, x [m, n]: layout<shard<0>, shard<1>>
///   auto r = sc::reduce<1, sc::sum>(x);                // [m]:    layout<shard<0>, partial<sum>>
///   auto k = sc::reduce<1, sc::max, sc::keep_dim>(x);  // [m, 1]: layout<shard<0>, partial<max>>
///   auto g = sc::redistribute<sc::layout<sc::shard<0>, sc::replicate>>(r);  // all_reduce on axis 1
/// @endcode
///
/// Local work goes through `detail::reduce_exec<memory_space>`: host loops here, and for
/// other memory spaces a portable version built only on `detail::memory_ops` region copies
/// and `detail::elementwise_exec::zip` (a halving tree: about log2(n) rounds of a few
/// launches each), which a memory space may replace with a specialisation of its own.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "../config.hpp"
#include "../detail/host_ops.hpp"
#include "../detail/wrapping.hpp"
#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../layout.hpp"
#include "../placement.hpp"
#include "elementwise.hpp"

namespace shardcast {

/// Pass as the third template argument of reduce to keep the reduced dim (extent 1):
/// `reduce<1, sum, keep_dim>(x)`.
inline constexpr bool keep_dim = true;

namespace detail {

// ---------------------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------------------

/// reduce<D, op> on one mesh axis with placement p; `keep` keeps dim D; `integers`: the
/// element type is integral (a sum over a partial<avg> of integers is refused).
constexpr axis_rule reduce_axis_rule(const placement_desc& p, int D, reduce_op op, bool keep, bool integers = false) {
  if (p.is_shard(D)) return {op_rule::ok, placement_desc::make_partial(op == reduce_op::avg ? reduce_op::sum : op)};
  if (p.is_shard()) return {op_rule::ok, placement_desc::make_shard(!keep && p.dim > D ? p.dim - 1 : p.dim)};
  if (p.is_replicate()) return {op_rule::ok, p};
  // Linear reductions of the linear partials: the mean of a partial<sum>, the sum of a partial<avg>.
  if (op == reduce_op::sum && p.op == reduce_op::avg) return {integers ? op_rule::integer_mean : op_rule::ok, p};
  const bool same = op == reduce_op::avg ? (p.op == reduce_op::sum || p.op == reduce_op::avg) : p.op == op;
  return same ? axis_rule{op_rule::ok, p} : axis_rule{op_rule::reduce_partial_op, p};
}

constexpr layout_rule reduce_rules(const runtime_layout& x, int D, reduce_op op, bool keep, bool integers = false) {
  layout_rule r = fold_axes(x.naxes, [&](int a) { return reduce_axis_rule(x[a], D, op, keep, integers); });
  if (r.err == op_rule::ok && !same_op_partials(r.out)) {
    r.err = op_rule::reduce_mixed_partials;
    for (int a = x.naxes - 1; a >= 0; --a)
      if (x[a].is_shard(D)) r.axis = a;
  }
  return r;
}

template <int Axis, class P, class Op>
struct reduce_partial_op_mismatch_on_mesh_axis {
  static_assert(!std::is_same_v<P, P>,
                "shardcast::reduce<D, Op>: x is partial with another reduce op than Op on the mesh axis named in "
                "reduce_partial_op_mismatch_on_mesh_axis<Axis, P, Op>; reducing the partial terms with Op is not Op of the true "
                "tensor (max(a1 + a2) != max(a1) + max(a2)). Redistribute x to replicate on that axis first (all_reduce), e.g. "
                "x2 = redistribute<layout<..., replicate, ...>>(x), or reduce with the partial's own op.");
};

template <int Axis, class L>
struct reduce_avg_mixes_partial_sum_and_avg_on_mesh_axis {
  static_assert(!std::is_same_v<L, L>,
                "shardcast::reduce<D, avg|sum>: D is sharded on the mesh axis named in reduce_avg_mixes_partial_sum_and_avg_on_mesh_axis<Axis, L>, "
                "which gives partial<sum> there, but x is partial<avg> on another axis, and a layout cannot mix partial ops. "
                "Redistribute x's partial<avg> axes to replicate first (all_reduce), e.g. x2 = redistribute<layout<..., replicate, ...>>(x).");
};

template <op_rule E, int Axis, class L, class Op>
struct reduce_error {};
template <int Axis, class L, class Op>
struct reduce_error<op_rule::reduce_partial_op, Axis, L, Op>
    : reduce_partial_op_mismatch_on_mesh_axis<Axis, typename placement_on_axis<L, Axis>::type, Op> {};
template <int Axis, class L, class Op>
struct reduce_error<op_rule::reduce_mixed_partials, Axis, L, Op> : reduce_avg_mixes_partial_sum_and_avg_on_mesh_axis<Axis, L> {};
template <int Axis, class L, class Op>
struct reduce_error<op_rule::integer_mean, Axis, L, Op>
    : partial_avg_of_integers_on_mesh_axis<Axis, typename placement_on_axis<L, Axis>::type, Op> {};

// ---------------------------------------------------------------------------------------
// Local reduction of [outer, n, inner] (row-major) over the middle dim into [outer, inner]
// ---------------------------------------------------------------------------------------

/// a op b for one reduce op, usable in kernels.
template <reduce_op O>
struct combine_fn {
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T a, T b) const {
    if constexpr (O == reduce_op::sum || O == reduce_op::avg) return wrapping_add(a, b);
    else if constexpr (O == reduce_op::prod) return wrapping_mul(a, b);
    // A NaN on either side wins (as torch.max/amax and numpy.max do), whatever the order
    // the terms meet in: `b > a ? b : a` alone keeps a NaN a but drops a NaN b.
    else if constexpr (O == reduce_op::max) return (b > a || b != b) ? b : a;
    else return (b < a || b != b) ? b : a;
  }
};

/// x / d, usable in kernels.
struct divide_by_fn {
  std::int64_t d;
  template <class T>
  SHARDCAST_HOST_DEVICE constexpr T operator()(T x) const {
    if constexpr (std::is_arithmetic_v<T>) return static_cast<T>(x / static_cast<T>(d));
    else return static_cast<T>(static_cast<float>(x) / static_cast<float>(d));  // __half etc.: d as T is inf from 65520 on
  }
};

/// Calls f(combine_fn<op>{}) with the op fixed at compile time.
template <class F>
decltype(auto) with_combine(reduce_op op, F&& f) {
  switch (op) {
    case reduce_op::prod: return f(combine_fn<reduce_op::prod>{});
    case reduce_op::max: return f(combine_fn<reduce_op::max>{});
    case reduce_op::min: return f(combine_fn<reduce_op::min>{});
    case reduce_op::sum:
    case reduce_op::avg: break;
  }
  return f(combine_fn<reduce_op::sum>{});
}

inline box box3(std::int64_t o_off, std::int64_t o, std::int64_t m_off, std::int64_t m, std::int64_t i) {
  box b;
  b.rank = 3;
  b.off[0] = o_off;
  b.ext[0] = o;
  b.off[1] = m_off;
  b.ext[1] = m;
  b.ext[2] = i;
  return b;
}

/// The reduction for any memory space, from memory_ops region copies and
/// elementwise_exec::zip: a halving tree that folds slices [rest, m) onto [0, m/2).
template <class Space>
struct portable_reduce {
  template <class T, class S>
  static void run(const T* in, T* out, std::size_t outer, std::size_t n, std::size_t inner, reduce_op op, std::int64_t divisor, S s) {
    const std::size_t total = outer * inner;
    if (total == 0) return;
    with_combine(op, [&](auto f) { fold(in, out, outer, n, inner, identity_of<T>(op), f, s); });
    if (op == reduce_op::avg) elementwise_exec<Space>::map(out, out, total, divide_by_fn{divisor}, s);
  }

 private:
  template <class T, class F, class S>
  static void fold(const T* in, T* out, std::size_t outer, std::size_t n, std::size_t inner, T identity, F f, S s) {
    using ops = memory_ops<Space>;
    const std::size_t total = outer * inner;
    if (n == 0) return ops::fill(out, total, identity, s);
    if (n == 1) return ops::copy(out, in, total, s);
    const auto O = static_cast<std::int64_t>(outer), I = static_cast<std::int64_t>(inner);
    std::shared_ptr<T> cur_owner;  // keeps the current level alive (in is the caller's)
    const T* cur = in;
    auto m = static_cast<std::int64_t>(n);
    while (m > 1) {
      const std::int64_t h = m / 2, rest = m - h;
      const box cb = box3(0, O, 0, m, I);
      const box lo_box = box3(0, O, 0, h, I), hi_box = box3(0, O, rest, h, I);
      std::shared_ptr<T> lo_owner, hi_owner = ops::template allocate<T>(static_cast<std::size_t>(O * h * I), s);
      T* lo = out;  // the last round (m == 2) folds straight into out
      if (rest > 1) {
        lo_owner = ops::template allocate<T>(static_cast<std::size_t>(O * h * I), s);
        lo = lo_owner.get();
      }
      ops::copy_region(cur, cb, lo, lo_box, lo_box, s);
      ops::copy_region(cur, cb, hi_owner.get(), hi_box, hi_box, s);
      elementwise_exec<Space>::zip(lo, hi_owner.get(), lo, static_cast<std::size_t>(O * h * I), f, s);
      if (rest == h) {
        cur_owner = std::move(lo_owner);
      } else {  // odd m: the middle slice h joins the folded ones as slice h of the next level
        std::shared_ptr<T> next = ops::template allocate<T>(static_cast<std::size_t>(O * rest * I), s);
        const box nb = box3(0, O, 0, rest, I);
        ops::copy_region(lo, lo_box, next.get(), nb, lo_box, s);
        ops::copy_region(cur, cb, next.get(), nb, box3(0, O, h, 1, I), s);
        cur_owner = std::move(next);
      }
      cur = cur_owner.get();
      m = rest;
    }
  }
};

/// The per-memory-space local reduction: run(in, out, outer, n, inner, op, divisor, stream)
/// reduces row-major [outer, n, inner] over n into [outer, inner]; for avg it sums and
/// divides by `divisor` (the global extent of the reduced dim).
template <class Space>
struct reduce_exec : portable_reduce<Space> {};

/// Host loops: one pass over the input.
template <>
struct reduce_exec<host_memory> {
  template <class T>
  static void run(const T* in, T* out, std::size_t outer, std::size_t n, std::size_t inner, reduce_op op, std::int64_t divisor,
                  host_stream = {}) {
    const std::size_t total = outer * inner;
    if (total == 0) return;
    const T id = identity_of<T>(op);
    with_combine(op, [&](auto f) {
      for (std::size_t o = 0; o < outer; ++o) {
        const T* base = in + o * n * inner;
        T* orow = out + o * inner;
        if (inner == 1) {
          T acc = id;
          for (std::size_t j = 0; j < n; ++j) acc = f(acc, base[j]);
          *orow = acc;
          continue;
        }
        for (std::size_t i = 0; i < inner; ++i) orow[i] = n ? base[i] : id;
        for (std::size_t j = 1; j < n; ++j) {
          const T* row = base + j * inner;
          for (std::size_t i = 0; i < inner; ++i) orow[i] = f(orow[i], row[i]);
        }
      }
    });
    if (op == reduce_op::avg)
      for (std::size_t i = 0; i < total; ++i) out[i] = divide_by_fn{divisor}(out[i]);
  }
};

}  // namespace detail

/// The layout of reduce<D, Op, KeepDim>(x) for x of layout L and rank R (see the table in
/// the file comment). Example: reduce_layout_t<layout<shard<0>, shard<1>>, 2, 1, sum> is
/// layout<shard<0>, partial<sum>>. T, the element type, matters for a sum over a
/// partial<avg>, which integers refuse.
template <class L, int R, int D, class Op, bool KeepDim = false, class T = float>
struct reduce_layout {
  static_assert(layout_type<L>, "shardcast::reduce_layout: L must be a compile-time layout<P...>.");
  static_assert(reduce_op_tag<Op>, "shardcast::reduce<D, Op>: Op must be one of shardcast::sum, avg, max, min, prod.");
  static constexpr detail::layout_rule rule = detail::reduce_rules(L::desc, D, Op::value, KeepDim, std::is_integral_v<T>);
  using type = typename std::conditional_t<
      rule.err == detail::op_rule::ok, detail::layout_from<rule.out>,
      detail::fail_with<detail::reduce_error<rule.err, rule.axis, L, Op>, typename detail::layout_from<detail::all_replicate<L::naxes>()>::type>>::type;
};
/// Shorthand for reduce_layout<L, R, D, Op, KeepDim, T>::type.
template <class L, int R, int D, class Op, bool KeepDim = false, class T = float>
using reduce_layout_t = typename reduce_layout<L, R, D, Op, KeepDim, T>::type;

/// Reduces tensor dim D with Op; see the file comment for layouts, avg and empty parts.
/// @tparam D the tensor dim to reduce, 0 <= D < R
/// @tparam Op sum, avg, max, min or prod
/// @tparam KeepDim false (default): the result has rank R-1; keep_dim: rank R, extent 1 at D
/// @param x input (unchanged)
/// @param s stream for device meshes (host meshes ignore it)
/// @throws layout_error for a dynamic_layout x whose layout is refused (compile error otherwise)
/// @code
///   // 1-axis mesh of 4, x [10]: layout<shard<0>>, uneven parts 3,3,2,2
///   auto t = sc::reduce<0, sc::avg>(x);   // rank 0, layout<partial<sum>>; to_global(t) is the mean
/// @endcode
template <int D, class Op, bool KeepDim = false, class T, int R, class L, class Mesh>
auto reduce(const dtensor<T, R, L, Mesh>& x, typename Mesh::stream_type s = {}) {
  static_assert(reduce_op_tag<Op>, "shardcast::reduce<D, Op>: Op must be one of shardcast::sum, avg, max, min, prod.");
  static_assert(D >= 0 && D < R, "shardcast::reduce<D, Op>: D names a tensor dim and must satisfy 0 <= D < rank; use a dim of x.");
  static_assert(!(Op::value == reduce_op::avg && std::is_integral_v<T>),
                "shardcast::reduce<D, avg>: the element type is integral, and integer means of the parts do not add up to the mean; "
                "convert to a floating type first (map(x, [](int v) { return double(v); })) or reduce with sum.");
  constexpr int RO = KeepDim ? R : R - 1;
  constexpr bool dyn = detail::is_dynamic_v<L>;
  using LY = typename std::conditional_t<dyn, std::type_identity<dynamic_layout>, reduce_layout<L, R, D, Op, KeepDim, T>>::type;
  runtime_layout ly;
  if constexpr (dyn) {
    const detail::layout_rule r = detail::reduce_rules(x.layout(), D, Op::value, KeepDim, std::is_integral_v<T>);
    detail::expect_legal(("shardcast::reduce<" + std::to_string(D) + ", " + to_string(Op::value) + ">").c_str(), r, x.layout(), runtime_layout{});
    ly = r.out;
  }
  const auto& ex = x.global_extents();
  std::array<std::int64_t, static_cast<std::size_t>(RO)> ey{};
  for (int d = 0, k = 0; d < R; ++d) {
    if (d == D && !KeepDim) continue;
    ey[static_cast<std::size_t>(k++)] = d == D ? 1 : ex[static_cast<std::size_t>(d)];
  }
  auto y = detail::make_output<std::remove_const_t<T>, RO, LY>(x.mesh(), ey, ly, s);
  const box& bx = x.local_box();
  std::size_t outer = 1, inner = 1;
  for (int d = 0; d < D; ++d) outer *= static_cast<std::size_t>(bx.ext[d]);
  for (int d = D + 1; d < R; ++d) inner *= static_cast<std::size_t>(bx.ext[d]);
  SHARDCAST_EXPECTS(y.local_size() == outer * inner, "shardcast::reduce: the local piece of the result does not match the input's");
  detail::reduce_exec<typename Mesh::memory_space>::run(x.data(), y.data(), outer, static_cast<std::size_t>(bx.ext[D]), inner, Op::value,
                                                        ex[static_cast<std::size_t>(D)], s);
  return y;
}

}  // namespace shardcast
