#pragma once
/// @file cuda/dtypes.hpp
/// dtype_of for CUDA's extended floating types (__half, __nv_bfloat16, fp8), and the
/// accumulator type kernels use for them (float).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "../comm/communicator.hpp"
#include "../config.hpp"

namespace shardcast {
template <> struct dtype_of<__half> { static constexpr dtype value = dtype::f16; };
template <> struct dtype_of<__nv_bfloat16> { static constexpr dtype value = dtype::bf16; };
template <> struct dtype_of<__nv_fp8_e4m3> { static constexpr dtype value = dtype::f8e4m3; };
template <> struct dtype_of<__nv_fp8_e5m2> { static constexpr dtype value = dtype::f8e5m2; };

namespace detail {
// max/min identities of the narrow floats (std::numeric_limits knows nothing of them).
template <> struct reduce_limits<__half> {
  static __half lowest() { return __float2half_rn(-__builtin_huge_valf()); }
  static __half highest() { return __float2half_rn(__builtin_huge_valf()); }
};
template <> struct reduce_limits<__nv_bfloat16> {
  static __nv_bfloat16 lowest() { return __float2bfloat16_rn(-__builtin_huge_valf()); }
  static __nv_bfloat16 highest() { return __float2bfloat16_rn(__builtin_huge_valf()); }
};
template <> struct reduce_limits<__nv_fp8_e4m3> {  // no infinities: +-448
  static __nv_fp8_e4m3 lowest() { return __nv_fp8_e4m3(-448.0f); }
  static __nv_fp8_e4m3 highest() { return __nv_fp8_e4m3(448.0f); }
};
template <> struct reduce_limits<__nv_fp8_e5m2> {  // +-inf (a float conversion would saturate them)
  static __nv_fp8_e5m2 lowest() { __nv_fp8_e5m2 r; r.__x = 0xFC; return r; }
  static __nv_fp8_e5m2 highest() { __nv_fp8_e5m2 r; r.__x = 0x7C; return r; }
};
}  // namespace detail

namespace device {

/// True for the 16- and 8-bit floating types, which are reduced in float.
template <class T>
inline constexpr bool is_narrow_float_v =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __nv_fp8_e4m3> ||
    std::is_same_v<T, __nv_fp8_e5m2>;

/// Type arithmetic on T is done in: float for narrow floats, T otherwise.
template <class T>
using acc_type_t = std::conditional_t<is_narrow_float_v<T>, float, T>;

/// Converts between element and accumulator types (round to nearest even for narrow floats).
template <class To, class From>
SHARDCAST_HOST_DEVICE inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half>) {
    return convert<To>(__half2float(v));
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(__bfloat162float(v));
  } else if constexpr (std::is_same_v<From, __nv_fp8_e4m3> || std::is_same_v<From, __nv_fp8_e5m2>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_fp8_e4m3> || std::is_same_v<To, __nv_fp8_e5m2>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace device
}  // namespace shardcast
