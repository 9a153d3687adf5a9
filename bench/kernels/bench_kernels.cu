// Kernel benchmarks, every figure measured in this run on device 0 and printed beside the
// device's copy bandwidth measured in the same run (cudaMemcpyAsync device to device):
//  - the fused reduce + epilogue (4 sources, as a p2p reduce-scatter of 4 ranks on one GPU)
//    on both of its paths (CUB DeviceTransform and the kernel), against the same reduction
//    followed by a separate epilogue kernel; float and bfloat16; with a bias (kernel path);
//  - the same with the result one element off the sources' alignment (both paths);
//  - region copies (the executor's pack): the unit kernel, cudaMemcpy2DAsync and CUB's
//    cub::DeviceMemcpy::Batched, for long and short rows of 16-, 8-, 4- and 2-byte units,
//    each line saying which way copy_region takes;
//  - the elementwise loops (map, zip).
// Inputs hold values in [-2, 2) (not zeros). Each figure is the mean of 10 runs after one.
// Bandwidth is bytes read + bytes written per second (GB/s = 1e9 B/s); "of copy" divides by
// the copy bandwidth so defined. Targets: fused >= 0.85 of copy and >= 1.3x the
// two-kernel version (docs/03_gpu.md).
// Usage: bench_kernels [MiB ...]   (default 256 512 1024: bytes of one float source buffer)
#include <cub/device/device_memcpy.cuh>
#include <shardcast/cuda/elementwise.cuh>
#include <shardcast/cuda/pack.cuh>
#include <shardcast/cuda/reduce_scatter.cuh>
#include <shardcast/ops/functors.hpp>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <vector>

namespace sc = shardcast;
namespace cu = shardcast::device;

namespace {
template <class F>
double time_ms(F&& f, cudaStream_t s, int reps = 10) {
  cudaEvent_t a, b;
  SHARDCAST_CUDA_TRY(cudaEventCreate(&a));
  SHARDCAST_CUDA_TRY(cudaEventCreate(&b));
  f();  // warm up
  SHARDCAST_CUDA_TRY(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) f();
  SHARDCAST_CUDA_TRY(cudaEventRecord(b, s));
  SHARDCAST_CUDA_TRY(cudaEventSynchronize(b));
  float ms = 0;
  SHARDCAST_CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  return double(ms) / reps;
}
double gbps(double bytes, double ms) { return bytes / (ms * 1e6); }
const char* verdict(bool met) { return met ? "met" : "MISSED"; }

// Values in [-2, 2) from a hash of the index: no timing on zeros.
template <class T>
__global__ void fill_kernel(T* p, std::size_t n, unsigned seed) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = sc::device::convert<T>(float(h >> 8) * (4.0f / 16777216.0f) - 2.0f);
  }
}

template <class T>
T* device_alloc(std::size_t bytes, cudaStream_t s) {
  static unsigned seed = 1;
  void* p = nullptr;
  SHARDCAST_CUDA_TRY(cudaMalloc(&p, bytes));
  fill_kernel<T><<<1024, 256, 0, s>>>(static_cast<T*>(p), bytes / sizeof(T), seed++);
  SHARDCAST_CUDA_TRY(cudaGetLastError());
  return static_cast<T*>(p);
}

// The baseline the region copy is compared with besides cudaMemcpy2DAsync: CUB's
// DeviceMemcpy::Batched, one buffer per row, the row pointers computed from the row index.
struct row_pointer_iterator {
  using value_type = void*;
  using difference_type = std::int64_t;
  using pointer = void**;
  using reference = void*;
  using iterator_category = std::random_access_iterator_tag;
  unsigned char* base = nullptr;
  cu::detail::region_plan plan{};
  bool dst = false;
  std::int64_t row = 0;
  __host__ __device__ void* operator[](std::int64_t k) const {
    return base + cu::detail::row_offset(plan, row + k, dst) * static_cast<std::int64_t>(plan.unit);
  }
  __host__ __device__ row_pointer_iterator operator+(std::int64_t k) const {
    row_pointer_iterator r = *this;
    r.row += k;
    return r;
  }
};
struct constant_size_iterator {
  using value_type = std::uint32_t;
  using difference_type = std::int64_t;
  using pointer = const std::uint32_t*;
  using reference = std::uint32_t;
  using iterator_category = std::random_access_iterator_tag;
  std::uint32_t bytes = 0;
  __host__ __device__ std::uint32_t operator[](std::int64_t) const { return bytes; }
  __host__ __device__ constant_size_iterator operator+(std::int64_t) const { return *this; }
};
struct batched_copy {
  row_pointer_iterator in, out;
  constant_size_iterator sizes;
  std::int64_t rows = 0;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  batched_copy(const unsigned char* src, unsigned char* dst, const cu::detail::region_plan& p)
      : in{const_cast<unsigned char*>(src), p, false, 0}, out{dst, p, true, 0},
        sizes{static_cast<std::uint32_t>(p.row_units() * p.unit)}, rows(p.rows()) {
    SHARDCAST_CUDA_TRY(cub::DeviceMemcpy::Batched(nullptr, temp_bytes, in, out, sizes, rows));
    SHARDCAST_CUDA_TRY(cudaMalloc(&temp, temp_bytes > 0 ? temp_bytes : 1));
  }
  ~batched_copy() { (void)cudaFree(temp); }
  void operator()(cudaStream_t s) { SHARDCAST_CUDA_TRY(cub::DeviceMemcpy::Batched(temp, temp_bytes, in, out, sizes, rows, s)); }
};

const char* path_name(cu::detail::reduce_path p) { return p == cu::detail::reduce_path::cub ? "CUB" : "kernel"; }

// Fused vs two kernels for nsrc sources of In reduced into Out, both paths of the fused kernel.
template <class In, class Out>
void fused_vs_two(const char* label, std::size_t n, double copy_bw, cudaStream_t s) {
  constexpr int nsrc = 4;
  std::vector<In*> src(nsrc);
  for (auto& p : src) p = device_alloc<In>(n * sizeof(In), s);
  Out* dst = device_alloc<Out>(n * sizeof(Out), s);
  Out* tmp = device_alloc<Out>(n * sizeof(Out), s);
  std::vector<const In*> cs(src.begin(), src.end());
  const auto epi = cu::compose(cu::scale{0.25f}, cu::gelu{});
  const double moved = double(nsrc) * n * sizeof(In) + double(n) * sizeof(Out);
  const double cub_ms = time_ms([&] { cu::detail::reduce_sources_cub<nsrc>(cs.data(), dst, n, sc::reduce_op::sum, s, epi); }, s);
  const double ker_ms =
      time_ms([&] { cu::detail::reduce_sources_kernel_path(cs.data(), std::size_t(nsrc), dst, n, sc::reduce_op::sum, s, epi); }, s);
  // Two kernels: the reduction, then a separate epilogue pass (each on the same path).
  const double two_cub_ms = time_ms([&] {
    cu::detail::reduce_sources_cub<nsrc>(cs.data(), tmp, n, sc::reduce_op::sum, s, cu::identity{});
    const Out* one[1] = {tmp};
    cu::detail::reduce_sources_cub<1>(one, dst, n, sc::reduce_op::sum, s, epi);
  }, s);
  const double two_ker_ms = time_ms([&] {
    cu::detail::reduce_sources_kernel_path(cs.data(), std::size_t(nsrc), tmp, n, sc::reduce_op::sum, s, cu::identity{});
    const Out* one[1] = {tmp};
    cu::detail::reduce_sources_kernel_path(one, 1, dst, n, sc::reduce_op::sum, s, epi);
  }, s);
  const double cub_bw = gbps(moved, cub_ms), ker_bw = gbps(moved, ker_ms);
  std::printf("  fused reduce(%d)+scale+gelu %-14s reduce_sources picks %s\n", nsrc, label,
              path_name(cu::detail::choose_reduce_path<In, Out, decltype(epi)>(cs.data(), nsrc, dst, n)));
  std::printf("  fused reduce(%d)+scale+gelu %-14s CUB    %8.1f GB/s = %.3f of copy (>=0.85 %s) | two kernels %.3f ms, fused %.3f ms: "
              "%.2fx (>=1.3 %s)\n",
              nsrc, label, cub_bw, cub_bw / copy_bw, verdict(cub_bw >= 0.85 * copy_bw), two_cub_ms, cub_ms, two_cub_ms / cub_ms,
              verdict(two_cub_ms >= 1.3 * cub_ms));
  std::printf("  fused reduce(%d)+scale+gelu %-14s kernel %8.1f GB/s = %.3f of copy (>=0.85 %s) | two kernels %.3f ms, fused %.3f ms: "
              "%.2fx (>=1.3 %s)\n",
              nsrc, label, ker_bw, ker_bw / copy_bw, verdict(ker_bw >= 0.85 * copy_bw), two_ker_ms, ker_ms, two_ker_ms / ker_ms,
              verdict(two_ker_ms >= 1.3 * ker_ms));
  for (auto p : src) (void)cudaFree(p);
  (void)cudaFree(dst);
  (void)cudaFree(tmp);
}

// Sources aligned, the result one element off their phase: the kernel path can move no
// vectors (element by element), DeviceTransform handles the alignment itself.
void fused_misaligned(std::size_t n, double copy_bw, cudaStream_t s) {
  constexpr int nsrc = 4;
  std::vector<float*> src(nsrc);
  for (auto& p : src) p = device_alloc<float>(n * sizeof(float), s);
  float* dst_base = device_alloc<float>((n + 1) * sizeof(float), s);
  float* dst = dst_base + 1;
  std::vector<const float*> cs(src.begin(), src.end());
  const auto epi = cu::compose(cu::scale{0.25f}, cu::gelu{});
  const std::size_t m = n - 1;  // sources and result one element apart in phase
  const double cub_ms = time_ms([&] { cu::detail::reduce_sources_cub<nsrc>(cs.data(), dst, m, sc::reduce_op::sum, s, epi); }, s);
  const double ker_ms =
      time_ms([&] { cu::detail::reduce_sources_kernel_path(cs.data(), std::size_t(nsrc), dst, m, sc::reduce_op::sum, s, epi); }, s);
  const double moved = double(nsrc + 1) * m * sizeof(float);
  std::printf("  fused reduce(%d)+scale+gelu float, result misaligned (reduce_sources picks %s): CUB %8.1f GB/s = %.3f of copy | "
              "kernel %8.1f GB/s = %.3f\n",
              nsrc, path_name(cu::detail::choose_reduce_path<float, float, decltype(epi)>(cs.data(), nsrc, dst, m)),
              gbps(moved, cub_ms), gbps(moved, cub_ms) / copy_bw, gbps(moved, ker_ms), gbps(moved, ker_ms) / copy_bw);
  for (auto p : src) (void)cudaFree(p);
  (void)cudaFree(dst_base);
}

// A bias over the innermost dim needs the element index: kernel path only.
void fused_bias(std::size_t n, double copy_bw, cudaStream_t s) {
  constexpr int nsrc = 4;
  const std::size_t cols = 4096;
  std::vector<float*> src(nsrc);
  for (auto& p : src) p = device_alloc<float>(n * sizeof(float), s);
  float* dst = device_alloc<float>(n * sizeof(float), s);
  float* bias = device_alloc<float>(cols * sizeof(float), s);
  std::vector<const float*> cs(src.begin(), src.end());
  const auto epi = cu::compose(cu::scale{0.25f}, cu::bias_add<float>{bias, cols}, cu::gelu{});
  const double ms = time_ms([&] { cu::reduce_sources(cs.data(), std::size_t(nsrc), dst, n, sc::reduce_op::sum, s, epi); }, s);
  const double bw = gbps(double(nsrc + 1) * n * sizeof(float), ms);
  std::printf("  fused reduce(%d)+scale+bias+gelu float          kernel %8.1f GB/s = %.3f of copy (>=0.85 %s)\n", nsrc, bw, bw / copy_bw,
              verdict(bw >= 0.85 * copy_bw));
  for (auto p : src) (void)cudaFree(p);
  (void)cudaFree(dst);
  (void)cudaFree(bias);
}

// Columns [c0, c0 + w) of a rows x cols matrix of T into a contiguous rows x w buffer.
template <class T>
void pack(const char* type, std::size_t bytes, std::int64_t cols, std::int64_t w, std::int64_t c0, double copy_bw, cudaStream_t s) {
  const std::int64_t rows = std::int64_t(bytes / sizeof(T)) / cols;
  const std::size_t n = std::size_t(rows * cols);
  T* src = device_alloc<T>(n * sizeof(T), s);
  T* dst = device_alloc<T>(n * sizeof(T), s);
  sc::box sb, db;
  sb.rank = db.rank = 2;
  sb.ext[0] = rows;
  sb.ext[1] = cols;
  db.ext[0] = rows;
  db.off[1] = c0;
  db.ext[1] = w;
  namespace dd = cu::detail;
  const dd::region_plan p =
      dd::plan_region(sizeof(T), sb, db, db, reinterpret_cast<std::uintptr_t>(src), reinterpret_cast<std::uintptr_t>(dst));
  const auto* from = reinterpret_cast<const unsigned char*>(src) + p.src_byte_offset;
  auto* to = reinterpret_cast<unsigned char*>(dst) + p.dst_byte_offset;
  batched_copy batched(from, to, p);
  const double batched_ms = time_ms([&] { batched(s); }, s);
  const double kernel_ms = time_ms([&] { dd::copy_rows_kernel(from, to, p, s); }, s);
  const double m2d_ms = time_ms([&] {
    SHARDCAST_CUDA_TRY(cudaMemcpy2DAsync(dst, w * sizeof(T), src + c0, cols * sizeof(T), w * sizeof(T), rows,
                                         cudaMemcpyDeviceToDevice, s));
  }, s);
  const double moved = 2.0 * double(rows * w) * sizeof(T);
  const dd::region_path path = dd::choose_region_path(p);
  const char* picked = path == dd::region_path::memcpy2d ? "cudaMemcpy2DAsync" : path == dd::region_path::kernel ? "kernel" : "memcpy";
  std::printf("  pack %lld x %lld of %lld %s cols from col %lld (%lld-byte rows, %d-byte units, copy_region picks %s): "
              "batched (CUB) %8.1f GB/s = %.3f of copy | kernel %8.1f GB/s = %.3f | cudaMemcpy2DAsync %8.1f GB/s = %.3f\n",
              (long long)rows, (long long)w, (long long)cols, type, (long long)c0, (long long)(w * sizeof(T)), int(p.unit), picked,
              gbps(moved, batched_ms), gbps(moved, batched_ms) / copy_bw, gbps(moved, kernel_ms), gbps(moved, kernel_ms) / copy_bw,
              gbps(moved, m2d_ms), gbps(moved, m2d_ms) / copy_bw);
  (void)cudaFree(src);
  (void)cudaFree(dst);
}

void elementwise(std::size_t n, double copy_bw, cudaStream_t s) {
  using ew = sc::detail::elementwise_exec<sc::device_memory>;
  float* a = device_alloc<float>(n * sizeof(float), s);
  float* b = device_alloc<float>(n * sizeof(float), s);
  float* c = device_alloc<float>(n * sizeof(float), s);
  const double map_ms = time_ms([&] { ew::map(a, c, n, sc::fn::gelu, s); }, s);
  const double zip_ms = time_ms([&] { ew::zip(a, b, c, n, sc::fn::add, s); }, s);
  const double map_bw = gbps(2.0 * n * sizeof(float), map_ms), zip_bw = gbps(3.0 * n * sizeof(float), zip_ms);
  std::printf("  elementwise float: map gelu %8.1f GB/s = %.3f of copy | zip add %8.1f GB/s = %.3f of copy\n", map_bw, map_bw / copy_bw,
              zip_bw, zip_bw / copy_bw);
  (void)cudaFree(a);
  (void)cudaFree(b);
  (void)cudaFree(c);
}

}  // namespace

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("bench_kernels: no CUDA device; nothing measured\n");
    return 0;
  }
  std::vector<std::size_t> mib;
  for (int i = 1; i < argc; ++i) mib.push_back(std::strtoull(argv[i], nullptr, 10));
  if (mib.empty()) mib = {256, 512, 1024};
  cudaDeviceProp prop{};
  SHARDCAST_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
  for (std::size_t m : mib) {
    const std::size_t bytes = m << 20, n = bytes / sizeof(float);
    float* x = device_alloc<float>(bytes, s);
    float* y = device_alloc<float>(bytes, s);
    // Copy bandwidth: read + write of `bytes`.
    const double copy_ms = time_ms([&] { SHARDCAST_CUDA_TRY(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s)); }, s);
    const double copy_bw = gbps(2.0 * bytes, copy_ms);
    (void)cudaFree(x);
    (void)cudaFree(y);
    std::printf("%zu MiB per source: device copy (cudaMemcpyAsync D2D) %.1f GB/s\n", m, copy_bw);
    fused_vs_two<float, float>("float", n, copy_bw, s);
    fused_vs_two<__nv_bfloat16, __nv_bfloat16>("bfloat16", n, copy_bw, s);
    fused_vs_two<float, __nv_bfloat16>("float->bf16", n, copy_bw, s);
    fused_misaligned(n, copy_bw, s);
    fused_bias(n, copy_bw, s);
    pack<float>("float", bytes, 4096, 1024, 1024, copy_bw, s);   // 4 KiB rows, 16-byte units
    pack<float>("float", bytes, 64, 16, 16, copy_bw, s);         // 64-byte rows, 16-byte units
    pack<float>("float", bytes, 4096, 1022, 2, copy_bw, s);      // 4088-byte rows, 8-byte units
    pack<float>("float", bytes, 4096, 1023, 1, copy_bw, s);      // 4092-byte rows, 4-byte units
    pack<__half>("half", bytes, 4096, 2047, 1, copy_bw, s);      // 4094-byte rows, 2-byte units
    for (std::int64_t w : {255, 127, 63, 31})                    // shorter rows of 4-byte units
      pack<float>("float", bytes, 2 * (w + 1), w, 1, copy_bw, s);
    pack<float>("float", bytes, 64, 15, 1, copy_bw, s);          // 60-byte rows, 4-byte units
    elementwise(n, copy_bw, s);
    std::fflush(stdout);
  }
  (void)cudaStreamDestroy(s);
  return 0;
}
