#pragma once
/// @file cuda/gemm.hpp
/// `device::cublas_gemm`: the local-GEMM hook of ops/gemm.hpp on device memory, with cuBLAS
/// (`cublasGemmEx_64`, and `cublasGemmStridedBatchedEx_64` for the strided-batch form), and
/// the default GEMM of `matmul(a, b, stream)` on device meshes.
///
/// Both call forms of the hook are provided, row-major like every shardcast buffer:
/// @code
///   sc::device::cublas_gemm g(stream);                                   // owns a handle, bound to `stream`
///   g(m, n, k, d_a, k, d_b, n, d_c, n);                                  // C = A * B
///   g(sc::gemm_op::t, sc::gemm_op::n, i, o, t, d_x, i, d_dy, o, d_dw, o, true);  // dW += X^T * dY
///   g(sc::gemm_op::n, sc::gemm_op::t, s, s, d, d_q, d, s * d, d_k, d, s * d, d_s, s, s * s, h, false);  // S_i = Q_i K_i^T, i < h
///   auto c = sc::matmul(a, b, stream);                                   // device dtensors: cuBLAS on `stream`
/// @endcode
/// Row-major operands are passed to column-major cuBLAS by computing C^T = op(B)^T op(A)^T
/// (see `device::detail::to_column_major`, tested on the host). Element types: float and
/// double (computed in their own precision; float may opt into TF32), `__half` and
/// `__nv_bfloat16` (fp32 accumulation, `CUBLAS_COMPUTE_32F`).
/// Host code may include this file (it needs cuBLAS headers, not nvcc); link `CUDA::cublas`.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "../comm/communicator.hpp"
#include "../error.hpp"
#include "../ops/gemm.hpp"
#include "../ops/matmul.hpp"
#include "check.hpp"
#include "dtypes.hpp"
#include "index_math.hpp"

namespace shardcast::detail {
[[noreturn]] inline void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  throw cuda_error(std::string("cuBLAS error ") + cublasGetStatusName(st) + " (" + cublasGetStatusString(st) + ") in " + expr + " [" +
                   file + ":" + std::to_string(line) + "]");
}
}  // namespace shardcast::detail

/// Evaluates a cublasStatus_t expression; throws shardcast::cuda_error naming the status,
/// the expression and file:line unless it is CUBLAS_STATUS_SUCCESS.
#define SHARDCAST_CUBLAS_TRY(call)                                                                \
  do {                                                                                            \
    const cublasStatus_t shardcast_cublas_try_status_ = (call);                                   \
    if (shardcast_cublas_try_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::shardcast::detail::throw_cublas_error(shardcast_cublas_try_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace shardcast::device {

namespace detail {

/// cuBLAS type tags of an element type: storage type, compute type, and the type of alpha/beta.
template <class T>
struct cublas_types {
  static constexpr bool supported = false;
};
template <>
struct cublas_types<float> {
  static constexpr bool supported = true;
  static constexpr cudaDataType_t data = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using scalar = float;
};
template <>
struct cublas_types<double> {
  static constexpr bool supported = true;
  static constexpr cudaDataType_t data = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
  using scalar = double;
};
template <>
struct cublas_types<__half> {
  static constexpr bool supported = true;
  static constexpr cudaDataType_t data = CUDA_R_16F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using scalar = float;
};
template <>
struct cublas_types<__nv_bfloat16> {
  static constexpr bool supported = true;
  static constexpr cudaDataType_t data = CUDA_R_16BF;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using scalar = float;
};

/// Sets a borrowed handle's stream and pointer mode for one call and puts them back after,
/// so the caller's later cuBLAS calls on that handle see their own settings. The stream is
/// set only when it differs from the handle's: cublasSetStream also resets the handle's
/// workspace to cuBLAS's default pool (cuBLAS documentation), so a handle given a
/// workspace with cublasSetWorkspace keeps it when the call uses the handle's own stream,
/// and must be given it again after a call on another stream.
class handle_scope {
 public:
  handle_scope(cublasHandle_t h, cudaStream_t s) : h_(h) {
    SHARDCAST_CUBLAS_TRY(cublasGetStream(h_, &old_stream_));
    SHARDCAST_CUBLAS_TRY(cublasGetPointerMode(h_, &old_mode_));
    if (s != old_stream_) {
      SHARDCAST_CUBLAS_TRY(cublasSetStream(h_, s));
      stream_changed_ = true;
    }
    SHARDCAST_CUBLAS_TRY(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST));  // alpha and beta live on the host
  }
  ~handle_scope() {
    if (stream_changed_) (void)cublasSetStream(h_, old_stream_);
    (void)cublasSetPointerMode(h_, old_mode_);
  }
  handle_scope(const handle_scope&) = delete;
  handle_scope& operator=(const handle_scope&) = delete;

 private:
  cublasHandle_t h_;
  cudaStream_t old_stream_ = nullptr;
  cublasPointerMode_t old_mode_ = CUBLAS_POINTER_MODE_HOST;
  bool stream_changed_ = false;
};

}  // namespace detail

/// Options of cublas_gemm.
struct cublas_gemm_options {
  /// float only: let cuBLAS round the inputs to TF32 on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
  bool allow_tf32 = false;
};

/// A GEMM functor for the local-GEMM hook (ops/gemm.hpp) on device memory: cuBLAS on one
/// stream, with a cuBLAS handle it owns (created here, destroyed with the last copy) or
/// borrows (never destroyed here; its stream and pointer mode are restored after each call).
/// Copies share the handle; a handle must not be used by two host threads at once, so give
/// each thread (each rank of p2p::run or nccl::run_local) its own functor.
class cublas_gemm {
 public:
  using options = cublas_gemm_options;

  /// Creates and owns a handle on the current device, bound to stream `s`.
  /// @throws cuda_error if cublasCreate fails.
  explicit cublas_gemm(cudaStream_t s = {}, options o = {}) : s_(s), o_(o) {
    cublasHandle_t h = nullptr;
    SHARDCAST_CUBLAS_TRY(cublasCreate(&h));
    h_ = std::shared_ptr<cublasContext>(h, [](cublasHandle_t x) { (void)cublasDestroy(x); });
  }
  /// Borrows `existing` (not destroyed here) and runs on stream `s`.
  cublas_gemm(cublasHandle_t existing, cudaStream_t s, options o = {})
      : h_(existing, [](cublasHandle_t) {}), s_(s), o_(o), borrowed_(true) {}

  /// The cuBLAS handle.
  cublasHandle_t handle() const { return h_.get(); }
  /// The stream every call is ordered on.
  cudaStream_t stream() const { return s_; }

  /// C[m,n] = A[m,k] * B[k,n], row-major device buffers with row strides lda, ldb, ldc; C overwritten.
  /// @throws layout_error if a row stride is shorter than its row; cuda_error if cuBLAS fails.
  template <class T>
  void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c,
                  std::int64_t ldc) const {
    (*this)(gemm_op::n, gemm_op::n, m, n, k, a, lda, b, ldb, c, ldc, false);
  }

  /// C = op(A) * op(B), or C += op(A) * op(B) when `accumulate`; op(A) is m x k, op(B) k x n,
  /// A stored k x m when ta == gemm_op::t (likewise B), all row-major on the device.
  /// @throws layout_error if a row stride is shorter than its row; cuda_error if cuBLAS fails.
  template <class T>
  void operator()(gemm_op ta, gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b,
                  std::int64_t ldb, T* c, std::int64_t ldc, bool accumulate) const {
    using tt = detail::cublas_types<std::remove_cv_t<T>>;
    static_assert(tt::supported,
                  "shardcast::device::cublas_gemm: the element type must be float, double, __half or __nv_bfloat16; "
                  "convert the operands to one of these or pass your own GEMM functor.");
    SHARDCAST_EXPECTS(detail::gemm_strides_valid(ta, tb, m, n, k, lda, ldb, ldc),
                      "shardcast::device::cublas_gemm: a row stride is shorter than its row (m=" + std::to_string(m) + ", n=" +
                          std::to_string(n) + ", k=" + std::to_string(k) + ", lda=" + std::to_string(lda) + ", ldb=" +
                          std::to_string(ldb) + ", ldc=" + std::to_string(ldc) +
                          "); row-major strides must be at least the stored row length");
    if (m == 0 || n == 0) return;
    if (k == 0) {  // an empty sum: C = 0, or C unchanged
      if (!accumulate)
        SHARDCAST_CUDA_TRY(cudaMemset2DAsync(c, std::size_t(ldc) * sizeof(T), 0, std::size_t(n) * sizeof(T), std::size_t(m), s_));
      return;
    }
    const detail::column_major_gemm g = detail::to_column_major(ta, tb, m, n, k, lda, ldb, ldc);
    const typename tt::scalar alpha = 1, beta = accumulate ? 1 : 0;
    const cublasComputeType_t compute = compute_type<T>();
    auto call = [&] {
      SHARDCAST_CUBLAS_TRY(cublasGemmEx_64(h_.get(), g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n,
                                           g.k, &alpha, b, tt::data, g.ldx, a, tt::data, g.ldy, &beta, c, tt::data, g.ldc, compute,
                                           CUBLAS_GEMM_DEFAULT));
    };
    run(call);
  }

  /// The strided batch (ops/gemm.hpp): for i < batch, C_i = op(A_i) * op(B_i) (or +=) with
  /// X_i = x + i * stride_x, in one cublasGemmStridedBatchedEx_64 call; a stride of 0 reads
  /// one matrix for every i (cuBLAS allows it for A and B). `matmul` calls this form for its
  /// batched and broadcast products.
  /// @throws layout_error if a row stride is shorter than its row, a stride is negative or
  ///         C's matrices overlap; cuda_error if cuBLAS fails.
  template <class T>
  void operator()(gemm_op ta, gemm_op tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, std::int64_t stride_a,
                  const T* b, std::int64_t ldb, std::int64_t stride_b, T* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch,
                  bool accumulate) const {
    using tt = detail::cublas_types<std::remove_cv_t<T>>;
    static_assert(tt::supported,
                  "shardcast::device::cublas_gemm: the element type must be float, double, __half or __nv_bfloat16; "
                  "convert the operands to one of these or pass your own GEMM functor.");
    SHARDCAST_EXPECTS(detail::gemm_strides_valid(ta, tb, m, n, k, lda, ldb, ldc) &&
                          detail::gemm_batch_valid(m, n, ldc, stride_a, stride_b, stride_c, batch),
                      "shardcast::device::cublas_gemm: bad strided batch (m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                          ", k=" + std::to_string(k) + ", lda=" + std::to_string(lda) + ", ldb=" + std::to_string(ldb) +
                          ", ldc=" + std::to_string(ldc) + ", strides " + std::to_string(stride_a) + ", " + std::to_string(stride_b) +
                          ", " + std::to_string(stride_c) + ", batch=" + std::to_string(batch) +
                          "); row strides must be at least the stored row length, batch strides not negative, and C's "
                          "matrices must not overlap (stride_c >= (m-1)*ldc + n)");
    if (m == 0 || n == 0 || batch == 0) return;
    if (batch == 1) return (*this)(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    if (k == 0) {  // empty sums: each C = 0, or unchanged
      if (!accumulate) {
        if (stride_c == m * ldc)  // the matrices follow each other: one block of batch * m rows
          SHARDCAST_CUDA_TRY(cudaMemset2DAsync(c, std::size_t(ldc) * sizeof(T), 0, std::size_t(n) * sizeof(T), std::size_t(batch * m), s_));
        else
          for (std::int64_t i = 0; i < batch; ++i)
            SHARDCAST_CUDA_TRY(cudaMemset2DAsync(c + i * stride_c, std::size_t(ldc) * sizeof(T), 0, std::size_t(n) * sizeof(T),
                                                 std::size_t(m), s_));
      }
      return;
    }
    // C^T_i = op(B_i)^T op(A_i)^T: cuBLAS's first operand is B (with B's batch stride).
    const detail::column_major_gemm g = detail::to_column_major(ta, tb, m, n, k, lda, ldb, ldc);
    const typename tt::scalar alpha = 1, beta = accumulate ? 1 : 0;
    const cublasComputeType_t compute = compute_type<T>();
    auto call = [&] {
      SHARDCAST_CUBLAS_TRY(cublasGemmStridedBatchedEx_64(h_.get(), g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                         g.m, g.n, g.k, &alpha, b, tt::data, g.ldx, stride_b, a, tt::data, g.ldy,
                                                         stride_a, &beta, c, tt::data, g.ldc, stride_c, batch, compute,
                                                         CUBLAS_GEMM_DEFAULT));
    };
    run(call);
  }

 private:
  template <class T>
  cublasComputeType_t compute_type() const {
    if constexpr (std::is_same_v<std::remove_cv_t<T>, float>)
      if (o_.allow_tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
    return detail::cublas_types<std::remove_cv_t<T>>::compute;
  }
  /// Runs `call` on this functor's stream: a borrowed handle's settings are put back after.
  template <class F>
  void run(F& call) const {
    if (borrowed_) {
      detail::handle_scope scope(h_.get(), s_);
      call();
    } else {
      SHARDCAST_CUBLAS_TRY(cublasSetStream(h_.get(), s_));
      call();
    }
  }

  std::shared_ptr<cublasContext> h_;
  cudaStream_t s_ = nullptr;
  options o_{};
  bool borrowed_ = false;
};

namespace detail {
/// One owned cuBLAS handle per (host thread, device), made on first use and destroyed when
/// the thread ends: matmul(a, b, stream) would otherwise pay cublasCreate on every call.
inline cublasHandle_t thread_cublas_handle() {
  struct pool {
    struct entry {
      int device;
      cublasHandle_t h;
    };
    entry e[16]{};
    int n = 0;
    ~pool() {
      for (int i = 0; i < n; ++i) (void)cublasDestroy(e[i].h);
    }
  };
  thread_local pool p;
  int dev = 0;
  SHARDCAST_CUDA_TRY(cudaGetDevice(&dev));
  for (int i = 0; i < p.n; ++i)
    if (p.e[i].device == dev) return p.e[i].h;
  SHARDCAST_EXPECTS(p.n < 16, "shardcast::matmul: one host thread used more than 16 CUDA devices");
  cublasHandle_t h = nullptr;
  SHARDCAST_CUBLAS_TRY(cublasCreate(&h));
  p.e[p.n++] = {dev, h};
  return h;
}
}  // namespace detail

}  // namespace shardcast::device

namespace shardcast::detail {
/// The GEMM `matmul(a, b, stream)` uses on device meshes: cuBLAS on `stream`, with this
/// thread's handle for the current device.
template <>
struct default_gemm<device_memory> {
  static device::cublas_gemm make(cudaStream_t s) { return device::cublas_gemm(device::detail::thread_cublas_handle(), s); }
};
}  // namespace shardcast::detail
