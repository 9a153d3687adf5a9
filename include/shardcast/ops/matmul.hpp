#pragma once
/// @file ops/matmul.hpp
/// `matmul(a, b)`: distributed C[m,n] = A[m,k] * B[k,n] for rank-2 dtensors on one mesh.
/// The output layout is computed at compile time, one mesh axis at a time:
///
/// | A placement   | B placement   | C placement   |
/// |---------------|---------------|---------------|
/// | shard<0>      | replicate     | shard<0>      |
/// | replicate     | shard<1>      | shard<1>      |
/// | shard<1>      | shard<0>      | partial<sum>  |
/// | replicate     | replicate     | replicate     |
/// | partial<sum>  | replicate     | partial<sum>  |
/// | replicate     | partial<sum>  | partial<sum>  |
///
/// Any other pair is a compile error naming the mesh axis (in the instantiation of
/// `matmul_illegal_on_mesh_axis<Axis, PA, PB>`) and the redistribute that fixes it. With
/// a `dynamic_layout` operand the same table is applied at run time: C has a
/// `dynamic_layout`, and an illegal pair throws `layout_error` naming the axis and both
/// placements.
/// No communication happens inside matmul: every rank multiplies its local pieces with a
/// local GEMM (a pluggable functor; the default is a cache-blocked host GEMM).
///
/// @code
///   using row = sc::layout<sc::shard<0>, sc::replicate>;
///   auto c = sc::matmul(a /* row */, b /* layout<replicate, replicate> */);  // c: row
/// @endcode

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../distribute.hpp"
#include "../dtensor.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "../placement.hpp"
#include "elementwise.hpp"
#include "gemm.hpp"

namespace shardcast {

namespace detail {
template <class...>
inline constexpr bool dependent_false = false;

/// Instantiated for an illegal (A, B) placement pair on mesh axis `Axis`; the compiler
/// prints this name with the axis and both placements before the message.
template <int Axis, class PA, class PB>
struct matmul_illegal_on_mesh_axis {
  static_assert(dependent_false<PA, PB>,
                "shardcast::matmul: illegal (A, B) placement pair on the mesh axis named in matmul_illegal_on_mesh_axis<Axis, PA, PB>. "
                "Legal pairs on each axis (A, B) -> C: (shard<0>, replicate) -> shard<0>; (replicate, shard<1>) -> shard<1>; "
                "(shard<1>, shard<0>) -> partial<sum>; (replicate, replicate) -> replicate; (partial<sum>, replicate) -> partial<sum>; "
                "(replicate, partial<sum>) -> partial<sum>. Redistribute A or B first, e.g. "
                "b2 = redistribute<layout<...replicate on that axis...>>(b), so the pair on that axis is one of these.");
  using type = replicate;
};

/// matmul on one mesh axis: C's placement for A placement `pa` and B placement `pb`, or
/// op_rule::matmul_pair when the pair is not in the table above. One source for the
/// compile-time layouts (matmul_rule) and the run-time checks of dynamic_layout operands.
constexpr axis_rule matmul_axis_rule(const placement_desc& pa, const placement_desc& pb) {
  const placement_desc sum_partial = placement_desc::make_partial(reduce_op::sum);
  if (pa.is_shard(0) && pb.is_replicate()) return {op_rule::ok, pa};
  if (pa.is_replicate() && pb.is_shard(1)) return {op_rule::ok, pb};
  if (pa.is_shard(1) && pb.is_shard(0)) return {op_rule::ok, sum_partial};
  if (pa.is_replicate() && pb.is_replicate()) return {op_rule::ok, pa};
  if (pa == sum_partial && pb.is_replicate()) return {op_rule::ok, pa};
  if (pa.is_replicate() && pb == sum_partial) return {op_rule::ok, pb};
  return {op_rule::matmul_pair, pa};
}

/// matmul's verdict on whole layouts: C's layout, or the first axis whose pair is illegal.
constexpr layout_rule matmul_rules(const runtime_layout& a, const runtime_layout& b) {
  return fold_axes(a.naxes, [&](int i) { return matmul_axis_rule(a[i], b[i]); });
}

/// Per-axis rule: `type` is C's placement on mesh axis `Axis` for A placement PA and B
/// placement PB (matmul_axis_rule), or the error struct's when the pair is illegal.
template <int Axis, class PA, class PB>
struct matmul_rule {
  static constexpr axis_rule r = matmul_axis_rule(PA::desc, PB::desc);
  using type = typename std::conditional_t<r.err == op_rule::ok, placement_from_impl<r.out.kind, r.out.dim, r.out.op>,
                                           matmul_illegal_on_mesh_axis<Axis, PA, PB>>::type;
};

template <class LA, class LB, class Seq>
struct matmul_layout_impl;
template <class... PA, class... PB, int... I>
struct matmul_layout_impl<layout<PA...>, layout<PB...>, std::integer_sequence<int, I...>> {
  using type = layout<typename matmul_rule<I, PA, PB>::type...>;
};
}  // namespace detail

/// The layout of matmul(A, B) for A of layout LA and B of layout LB (same number of axes).
template <class LA, class LB>
struct matmul_layout {
  static_assert(layout_type<LA> && layout_type<LB>,
                "shardcast::matmul_layout: both layouts must be compile-time layouts (layout<P...>); with a dynamic_layout operand "
                "matmul returns a dynamic_layout tensor (matmul_result_layout_t)");
  static_assert(LA::naxes == LB::naxes, "shardcast::matmul: A and B must live on the same mesh (same number of axes).");
  using type = typename detail::matmul_layout_impl<LA, LB, std::make_integer_sequence<int, LA::naxes>>::type;
};
/// Shorthand for matmul_layout<LA, LB>::type.
template <class LA, class LB>
using matmul_layout_t = typename matmul_layout<LA, LB>::type;

/// The layout type of matmul's result: matmul_layout_t<LA, LB> for two compile-time
/// layouts, dynamic_layout when either operand has a dynamic_layout (its layout value is
/// then checked and computed at run time, with the same rules).
template <class LA, class LB>
struct matmul_result_layout
    : std::conditional_t<detail::is_dynamic_v<LA> || detail::is_dynamic_v<LB>, std::type_identity<dynamic_layout>, matmul_layout<LA, LB>> {};
template <class LA, class LB>
using matmul_result_layout_t = typename matmul_result_layout<LA, LB>::type;

/// C = A * B. A is [m,k], B is [k,n], both rank 2 on the same mesh. No communication.
/// Either operand may have a dynamic_layout; C then has one too, and an illegal pair of
/// layouts throws instead of failing to compile.
/// @param gemm local GEMM functor, called as gemm(m, n, k, a, lda, b, ldb, c, ldc) with
///        row-major pointers in the mesh's memory space; it must overwrite c. Device
///        backends pass their own (e.g. a cuBLAS wrapper).
/// @param s stream C is allocated on (device meshes; the GEMM functor carries its own stream)
/// @throws layout_error if the operands live on different meshes, if the inner extents
///         differ, or (dynamic layouts) if the pair of placements on some mesh axis is not
///         in the table above (the message names the axis and both placements)
template <class TA, class TB, class LA, class LB, class Mesh, class Gemm = host_gemm>
  requires(!std::is_same_v<Gemm, typename Mesh::stream_type>)
dtensor<std::remove_const_t<TA>, 2, matmul_result_layout_t<LA, LB>, Mesh> matmul(const dtensor<TA, 2, LA, Mesh>& a, const dtensor<TB, 2, LB, Mesh>& b,
                                                                                 Gemm gemm = {}, typename Mesh::stream_type s = {}) {
  using T = std::remove_const_t<TA>;
  static_assert(detail::same_elements_v<TA, TB>,
                "shardcast::matmul: A and B have different element types; convert one first, e.g. map(b, [](U v) { return T(v); }).");
  using LC = matmul_result_layout_t<LA, LB>;
  constexpr const char* who = "shardcast::matmul";
  if constexpr (std::is_same_v<Gemm, host_gemm>)
    static_assert(std::is_same_v<typename Mesh::memory_space, host_memory>,
                  "shardcast::matmul: the default GEMM runs on the host; pass a device GEMM functor as the third argument.");
  detail::expect_same_mesh(who, a.mesh(), b.mesh(), "A", "B");
  const auto ea = a.global_extents(), eb = b.global_extents();
  SHARDCAST_EXPECTS(ea[1] == eb[0], "shardcast::matmul: A is " + std::to_string(ea[0]) + "x" + std::to_string(ea[1]) + " but B is " +
                                        std::to_string(eb[0]) + "x" + std::to_string(eb[1]) + "; A's columns must equal B's rows");
  runtime_layout lc{};
  if constexpr (std::is_same_v<LC, dynamic_layout>) {
    const detail::layout_rule r = detail::matmul_rules(a.layout(), b.layout());
    detail::expect_legal(who, r, a.layout(), b.layout());
    lc = r.out;
  }
  auto c = detail::make_output<T, 2, LC>(a.mesh(), std::array<std::int64_t, 2>{ea[0], eb[1]}, lc, s);
  const box &ba = a.local_box(), &bb = b.local_box(), &bc = c.local_box();
  // Same balanced split over the same axes, so the boxes line up; checked for safety.
  SHARDCAST_EXPECTS(ba.off[0] == bc.off[0] && ba.ext[0] == bc.ext[0] && bb.off[1] == bc.off[1] && bb.ext[1] == bc.ext[1] &&
                        ba.off[1] == bb.off[0] && ba.ext[1] == bb.ext[0],
                    "shardcast::matmul: local pieces of A and B do not line up (meshes differ?)");
  // Row strides at least 1, so a BLAS accepts an empty piece of the contracted dim (k = 0 on
  // this rank, C not empty): BLAS requires lda >= max(1, k), as nn::detail::gemm_op_dtensor does.
  if (c.local_size() > 0)
    gemm(bc.ext[0], bc.ext[1], ba.ext[1], a.data(), std::max<std::int64_t>(1, ba.ext[1]), b.data(), std::max<std::int64_t>(1, bb.ext[1]),
         c.data(), bc.ext[1]);
  return c;
}

/// Operands that are not both matrices: a compile-time message.
template <class TA, int RA, class LA, class TB, int RB, class LB, class Mesh, class... Rest>
  requires(RA != 2 || RB != 2)
void matmul(const dtensor<TA, RA, LA, Mesh>&, const dtensor<TB, RB, LB, Mesh>&, Rest&&...) {
  static_assert(RA == 2 && RB == 2,
                "shardcast::matmul: A and B must be matrices (rank 2: [m, k] and [k, n]); a vector is a [1, n] or [n, 1] matrix, and batched "
                "rows are the rows of one [rows, k] matrix.");
}

namespace detail {
/// The local GEMM of `matmul(a, b, stream)` per memory space: `static G make(stream)`.
/// The device one (cuBLAS) is defined by <shardcast/cuda/gemm.hpp>.
template <class Space>
struct default_gemm;
}  // namespace detail

/// Device meshes: C = A * B with the default device GEMM (cuBLAS on `stream`; include
/// <shardcast/cuda/gemm.hpp> and link CUDA::cublas). C is allocated on `stream`.
/// @throws layout_error if the inner extents differ; cuda_error if cuBLAS fails
template <class TA, class TB, class LA, class LB, class Mesh>
  requires(!std::is_same_v<typename Mesh::memory_space, host_memory>)
dtensor<std::remove_const_t<TA>, 2, matmul_result_layout_t<LA, LB>, Mesh> matmul(const dtensor<TA, 2, LA, Mesh>& a, const dtensor<TB, 2, LB, Mesh>& b,
                                                                                 typename Mesh::stream_type stream) {
  using space = typename Mesh::memory_space;
  static_assert(requires { detail::default_gemm<space>::make(std::declval<typename Mesh::stream_type>()); },
                "shardcast::matmul(a, b, stream): no default GEMM for this memory space; include <shardcast/cuda/gemm.hpp> "
                "(cuBLAS) for device meshes, or pass a GEMM functor: matmul(a, b, gemm, stream).");
  return matmul(a, b, detail::default_gemm<space>::make(stream), stream);
}

}  // namespace shardcast
