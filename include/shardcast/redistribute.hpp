#pragma once
/// @file redistribute.hpp
/// `redistribute<To>(x [, stream])`: converts a dtensor to another layout with the plan
/// the planner chose at compile time (`static_plan<From, To, R>`), executed as a fold
/// over its steps. For dynamic-layout tensors, `redistribute(x, layout [, stream])`
/// plans at run time with the real mesh shape and extents. The input is never modified;
/// redistributing to the same layout returns a handle sharing the input's storage.
///
/// @code
///   auto y = shardcast::redistribute<shardcast::layout<shardcast::replicate, shardcast::shard<1>>>(x);
/// @endcode

#include <utility>

#include "detail/executor.hpp"
#include "dtensor.hpp"
#include "plan.hpp"

namespace shardcast {

namespace detail {
template <class T, int R, class L, class Mesh>
piece<T> piece_of(const dtensor<T, R, L, Mesh>& x) {
  return piece<T>{x.owner(), x.data(), x.local_box()};
}
}  // namespace detail

/// Converts `x` to layout `To`; the plan is a compile-time constant.
/// @tparam To target layout, e.g. layout<replicate, shard<0>>
/// @param x input (unchanged)
/// @param s stream for device backends (ignored by host backends)
/// @throws comm_error if a collective fails
template <class To, class T, int R, class From, class Mesh>
  requires(!std::same_as<From, dynamic_layout>)
dtensor<T, R, To, Mesh> redistribute(const dtensor<T, R, From, Mesh>& x, typename Mesh::stream_type s = {}) {
  static_assert(check_layout<To, Mesh::naxes, R>());
  static_assert(detail::same_op_partials(To::desc),
                "shardcast::redistribute: the target layout mixes partial reduce ops across axes; use one op for every partial axis.");
  constexpr const plan& p = static_plan<From, To, R>;
  if constexpr (p.nsteps == 0) {
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data());
  } else {
    detail::piece<T> cur = detail::piece_of(x);
    detail::executor<T, Mesh> ex(x.mesh(), x.global_extents().data(), R, s);
    [&]<std::size_t... I>(std::index_sequence<I...>) { (ex.run(p.steps[I], cur), ...); }(std::make_index_sequence<static_cast<std::size_t>(p.nsteps)>{});
    return dtensor<T, R, To, Mesh>(x.mesh(), x.global_extents(), std::move(cur.owner), cur.data);
  }
}

/// Converts a dynamic-layout tensor to `to`, planned at run time for the real mesh and extents.
/// @throws layout_error if `to` does not fit the mesh or the tensor's rank
template <class T, int R, class Mesh>
dtensor<T, R, dynamic_layout, Mesh> redistribute(const dtensor<T, R, dynamic_layout, Mesh>& x, const runtime_layout& to,
                                                  typename Mesh::stream_type s = {}) {
  const plan p = make_plan(x.layout(), to, x.mesh().shape(), x.global_extents());
  detail::piece<T> cur = detail::piece_of(x);
  detail::executor<T, Mesh> ex(x.mesh(), x.global_extents().data(), R, s);
  for (int i = 0; i < p.nsteps; ++i) ex.run(p.steps[i], cur);
  return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), std::move(cur.owner), cur.data, to);
}

/// Runs an explicit plan on a dynamic-layout tensor (the plan's source must be x's layout).
template <class T, int R, class Mesh>
dtensor<T, R, dynamic_layout, Mesh> execute(const plan& p, const dtensor<T, R, dynamic_layout, Mesh>& x, typename Mesh::stream_type s = {}) {
  SHARDCAST_EXPECTS(p.src == x.layout(), "shardcast::execute: the plan starts from \"" + to_string(p.src) + "\" but the tensor has layout \"" +
                                             to_string(x.layout()) + "\"");
  detail::piece<T> cur = detail::piece_of(x);
  detail::executor<T, Mesh> ex(x.mesh(), x.global_extents().data(), R, s);
  for (int i = 0; i < p.nsteps; ++i) ex.run(p.steps[i], cur);
  return dtensor<T, R, dynamic_layout, Mesh>(x.mesh(), x.global_extents(), std::move(cur.owner), cur.data, p.dst);
}

}  // namespace shardcast
