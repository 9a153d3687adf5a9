#pragma once
/// @file placement.hpp
/// Placements: how a tensor sits on one mesh axis (replicated, sharded along a dim, or
/// partial awaiting a reduction), as types for compile-time layouts and as a plain
/// `placement_desc` value for the planner and for layouts only known at run time.

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace shardcast {

/// Reduction carried by a `partial` placement; `avg` is sum divided by the axis size.
enum class reduce_op : std::uint8_t { sum, avg, max, min, prod };

/// Reduce-op tags, usable as `partial<max>`.
struct sum { static constexpr reduce_op value = reduce_op::sum; };
struct avg { static constexpr reduce_op value = reduce_op::avg; };
struct max { static constexpr reduce_op value = reduce_op::max; };
struct min { static constexpr reduce_op value = reduce_op::min; };
struct prod { static constexpr reduce_op value = reduce_op::prod; };

constexpr const char* to_string(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::avg: return "avg";
    case reduce_op::max: return "max";
    case reduce_op::min: return "min";
    case reduce_op::prod: return "prod";
  }
  return "?";
}

template <class Op>
concept reduce_op_tag = requires {
  { Op::value } -> std::convertible_to<reduce_op>;
};

enum class placement_kind : std::uint8_t { replicate, shard, partial };

/// One mesh axis' placement as a value: kind, the sharded dim, the partial op.
struct placement_desc {
  placement_kind kind = placement_kind::replicate;
  std::int8_t dim = -1;           ///< tensor dim for `shard`, -1 otherwise
  reduce_op op = reduce_op::sum;  ///< reduction for `partial`

  SHARDCAST_HOST_DEVICE constexpr bool is_replicate() const { return kind == placement_kind::replicate; }
  SHARDCAST_HOST_DEVICE constexpr bool is_shard() const { return kind == placement_kind::shard; }
  SHARDCAST_HOST_DEVICE constexpr bool is_partial() const { return kind == placement_kind::partial; }
  SHARDCAST_HOST_DEVICE constexpr bool is_shard(int d) const { return is_shard() && dim == d; }

  friend constexpr bool operator==(const placement_desc& a, const placement_desc& b) {
    return a.kind == b.kind && (a.kind != placement_kind::shard || a.dim == b.dim) &&
           (a.kind != placement_kind::partial || a.op == b.op);
  }

  static constexpr placement_desc make_replicate() { return {}; }
  static constexpr placement_desc make_shard(int d) { return {placement_kind::shard, static_cast<std::int8_t>(d), reduce_op::sum}; }
  static constexpr placement_desc make_partial(reduce_op o) { return {placement_kind::partial, -1, o}; }
};

/// Every rank along the axis holds the same full extent.
struct replicate {
  static constexpr placement_desc desc = placement_desc::make_replicate();
};

/// Tensor dim `D` is split across the axis (balanced split, see split.hpp).
template <int D>
struct shard {
  static_assert(D >= 0, "shardcast::shard<D>: D names a tensor dim and must be >= 0; use shard<0> for the outermost dim.");
  static constexpr int dim = D;
  static constexpr placement_desc desc = placement_desc::make_shard(D);
};

/// Every rank holds a full-extent value; the tensor is the `Op`-reduction across the axis.
template <class Op = sum>
struct partial {
  static_assert(reduce_op_tag<Op>, "shardcast::partial<Op>: Op must be one of shardcast::sum, avg, max, min, prod.");
  using op_type = Op;
  static constexpr placement_desc desc = placement_desc::make_partial(Op::value);
};

namespace detail {
template <class P>
struct is_placement : std::false_type {};
template <>
struct is_placement<replicate> : std::true_type {};
template <int D>
struct is_placement<shard<D>> : std::true_type {};
template <class Op>
struct is_placement<partial<Op>> : std::true_type {};
}  // namespace detail

/// A type is a placement when it is replicate, shard<D> or partial<Op>.
template <class P>
concept placement = detail::is_placement<P>::value;

}  // namespace shardcast
