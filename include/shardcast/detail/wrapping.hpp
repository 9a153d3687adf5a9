#pragma once
/// @file detail/wrapping.hpp
/// Sums, differences and products of elements that wrap around modulo 2^bits over integers,
/// as the documentation promises (integer partial sums are taken in the element type, as
/// NCCL's are; elementwise integer arithmetic wraps, as torch's does): computed in an
/// unsigned type, whose arithmetic wraps by definition, instead of the signed overflow C++
/// leaves undefined (which an optimiser may assume never happens). Floating-point and
/// narrow types are added and multiplied as they are.

#include <type_traits>

#include "../config.hpp"

namespace shardcast::detail {

/// An unsigned type at least as wide as the integral T after promotion: integer arithmetic
/// done in it wraps around (modulo 2^bits of T once converted back) instead of overflowing.
template <class T>
using wrap_t = std::make_unsigned_t<std::common_type_t<T, unsigned>>;

/// a + b, wrapping over integers.
template <class T>
SHARDCAST_HOST_DEVICE constexpr T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
  else return static_cast<T>(a + b);
}
/// a - b, wrapping over integers.
template <class T>
SHARDCAST_HOST_DEVICE constexpr T wrapping_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
  else return static_cast<T>(a - b);
}
/// a * b, wrapping over integers.
template <class T>
SHARDCAST_HOST_DEVICE constexpr T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
  else return static_cast<T>(a * b);
}

}  // namespace shardcast::detail
