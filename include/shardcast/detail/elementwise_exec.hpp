#pragma once
/// @file detail/elementwise_exec.hpp
/// The per-memory-space customization point that runs elementwise loops on local pieces.
/// The host specialisation is in ops/elementwise.hpp, the device one in
/// cuda/elementwise.cuh. Each provides (out may alias the inputs):
/// @code
///   template <class T, class U, class F>          static void map(const T* in, U* out, std::size_t n, F f, stream_type s);
///   template <class T, class U, class V, class F> static void zip(const T* a, const U* b, V* out, std::size_t n, F f, stream_type s);
///   template <class T, class U, class V, class F> static void zip_rows(const T* a, const U* row, V* out, std::size_t rows,
///                                                                      std::size_t cols, F f, stream_type s);
///   // zip_rows: out[r*cols + c] = f(a[r*cols + c], row[c])
///   template <class T, class U, class V, class F> static void zip_broadcast(const T* a, const U* b, V* out, std::size_t outer,
///                                                                           std::size_t mid, std::size_t inner, F f, stream_type s);
///   // zip_broadcast: out[(o*mid + m)*inner + k] = f(a[(o*mid + m)*inner + k], b[o*inner + k]) (b broadcast along the middle dim)
/// @endcode

namespace shardcast::detail {

template <class Space>
struct elementwise_exec;

}  // namespace shardcast::detail
