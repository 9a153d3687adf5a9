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
/// `matmul_illegal_on_mesh_axis<Axis, PA, PB>`) and the redistribute that fixes it.
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

/// Per-axis rule: `type` is C's placement on mesh axis `Axis` for A placement PA and B placement PB.
template <int Axis, class PA, class PB>
struct matmul_rule : matmul_illegal_on_mesh_axis<Axis, PA, PB> {};
template <int Axis>
struct matmul_rule<Axis, shard<0>, replicate> { using type = shard<0>; };
template <int Axis>
struct matmul_rule<Axis, replicate, shard<1>> { using type = shard<1>; };
template <int Axis>
struct matmul_rule<Axis, shard<1>, shard<0>> { using type = partial<sum>; };
template <int Axis>
struct matmul_rule<Axis, replicate, replicate> { using type = replicate; };
template <int Axis>
struct matmul_rule<Axis, partial<sum>, replicate> { using type = partial<sum>; };
template <int Axis>
struct matmul_rule<Axis, replicate, partial<sum>> { using type = partial<sum>; };

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
  static_assert(layout_type<LA> && layout_type<LB>, "shardcast::matmul: both operands need compile-time layouts (layout<P...>).");
  static_assert(LA::naxes == LB::naxes, "shardcast::matmul: A and B must live on the same mesh (same number of axes).");
  using type = typename detail::matmul_layout_impl<LA, LB, std::make_integer_sequence<int, LA::naxes>>::type;
};
/// Shorthand for matmul_layout<LA, LB>::type.
template <class LA, class LB>
using matmul_layout_t = typename matmul_layout<LA, LB>::type;

/// C = A * B. A is [m,k], B is [k,n], both rank 2 on the same mesh. No communication.
/// @param gemm local GEMM functor, called as gemm(m, n, k, a, lda, b, ldb, c, ldc) with
///        row-major pointers in the mesh's memory space; it must overwrite c. Device
///        backends pass their own (e.g. a cuBLAS wrapper).
/// @param s stream C is allocated on (device meshes; the GEMM functor carries its own stream)
/// @throws layout_error if the inner extents differ
template <class T, class LA, class LB, class Mesh, class Gemm = host_gemm>
  requires(!std::is_same_v<Gemm, typename Mesh::stream_type>)
dtensor<T, 2, matmul_layout_t<LA, LB>, Mesh> matmul(const dtensor<T, 2, LA, Mesh>& a, const dtensor<T, 2, LB, Mesh>& b, Gemm gemm = {},
                                                    typename Mesh::stream_type s = {}) {
  using LC = matmul_layout_t<LA, LB>;
  if constexpr (std::is_same_v<Gemm, host_gemm>)
    static_assert(std::is_same_v<typename Mesh::memory_space, host_memory>,
                  "shardcast::matmul: the default GEMM runs on the host; pass a device GEMM functor as the third argument.");
  if (!(a.mesh() == b.mesh())) {
    auto shape = [](const Mesh& m) {
      std::string t;
      for (int i = 0; i < Mesh::naxes; ++i) {
        if (i) t += "x";
        t += std::to_string(m.size(i));
      }
      return t;
    };
    throw layout_error("shardcast::matmul: A and B live on different meshes (A on a mesh " + shape(a.mesh()) + ", B on another mesh " +
                       shape(b.mesh()) + "); meshes compare equal only when one is a copy of the other, so create both on the same mesh");
  }
  const auto ea = a.global_extents(), eb = b.global_extents();
  SHARDCAST_EXPECTS(ea[1] == eb[0], "shardcast::matmul: A is " + std::to_string(ea[0]) + "x" + std::to_string(ea[1]) + " but B is " +
                                        std::to_string(eb[0]) + "x" + std::to_string(eb[1]) + "; A's columns must equal B's rows");
  auto c = empty<LC, T>(a.mesh(), std::array<std::int64_t, 2>{ea[0], eb[1]}, s);
  const box &ba = a.local_box(), &bb = b.local_box(), &bc = c.local_box();
  // Same balanced split over the same axes, so the boxes line up; checked for safety.
  SHARDCAST_EXPECTS(ba.off[0] == bc.off[0] && ba.ext[0] == bc.ext[0] && bb.off[1] == bc.off[1] && bb.ext[1] == bc.ext[1] &&
                        ba.off[1] == bb.off[0] && ba.ext[1] == bb.ext[0],
                    "shardcast::matmul: local pieces of A and B do not line up (meshes differ?)");
  if (c.local_size() > 0) gemm(bc.ext[0], bc.ext[1], ba.ext[1], a.data(), ba.ext[1], b.data(), bb.ext[1], c.data(), bc.ext[1]);
  return c;
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
template <class T, class LA, class LB, class Mesh>
  requires(!std::is_same_v<typename Mesh::memory_space, host_memory>)
dtensor<T, 2, matmul_layout_t<LA, LB>, Mesh> matmul(const dtensor<T, 2, LA, Mesh>& a, const dtensor<T, 2, LB, Mesh>& b,
                                                    typename Mesh::stream_type stream) {
  using space = typename Mesh::memory_space;
  static_assert(requires { detail::default_gemm<space>::make(std::declval<typename Mesh::stream_type>()); },
                "shardcast::matmul(a, b, stream): no default GEMM for this memory space; include <shardcast/cuda/gemm.hpp> "
                "(cuBLAS) for device meshes, or pass a GEMM functor: matmul(a, b, gemm, stream).");
  return matmul(a, b, detail::default_gemm<space>::make(stream), stream);
}

}  // namespace shardcast
