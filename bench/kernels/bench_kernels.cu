// Fused reduce + epilogue vs reduce then a separate epilogue kernel, and region pack vs
// cudaMemcpy2DAsync, each as GB/s and as a fraction of the D2D copy bandwidth measured here.
// Usage: bench_kernels [MiB ...]   (default 256 512 1024: bytes of the output buffer)
#include <shardcast/cuda/pack.cuh>
#include <shardcast/cuda/reduce_scatter.cuh>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace sc = shardcast;

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
  std::printf("device: %s\n", prop.name);
  cudaStream_t s;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
  const int nsrc = 4;  // four ranks' chunks (p2p reduce-scatter of 4 ranks on one GPU)
  for (std::size_t m : mib) {
    const std::size_t bytes = m << 20, n = bytes / sizeof(float);
    std::vector<float*> src(nsrc);
    float *dst, *tmp;
    for (auto& p : src) SHARDCAST_CUDA_TRY(cudaMalloc(&p, bytes));
    SHARDCAST_CUDA_TRY(cudaMalloc(&dst, bytes));
    SHARDCAST_CUDA_TRY(cudaMalloc(&tmp, bytes));
    for (auto p : src) SHARDCAST_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, s));
    // Copy bandwidth: read + write of `bytes`.
    const double copy_ms = time_ms([&] { SHARDCAST_CUDA_TRY(cudaMemcpyAsync(dst, src[0], bytes, cudaMemcpyDeviceToDevice, s)); }, s);
    const double copy_bw = gbps(2.0 * bytes, copy_ms);
    std::vector<const float*> cs(src.begin(), src.end());
    const auto epi = sc::device::compose(sc::device::scale{0.25f}, sc::device::gelu{});
    // Fused: nsrc reads + 1 write.
    const double fused_ms = time_ms([&] { sc::device::reduce_sources(cs.data(), cs.size(), dst, n, sc::reduce_op::sum, s, epi); }, s);
    // Two kernels: reduce (nsrc reads + 1 write), then epilogue (1 read + 1 write).
    const double two_ms = time_ms([&] {
      sc::device::reduce_sources(cs.data(), cs.size(), tmp, n, sc::reduce_op::sum, s);
      sc::device::apply_epilogue(tmp, dst, n, epi, s);
    }, s);
    const double fused_bw = gbps(double(nsrc + 1) * bytes, fused_ms);
    std::printf("%6zu MiB  copy %8.1f GB/s | fused reduce(%d)+scale+gelu %8.1f GB/s (%.2f of copy) | two kernels %.3f ms, fused %.3f ms: %.2fx\n",
                m, copy_bw, nsrc, fused_bw, fused_bw / copy_bw, two_ms, fused_ms, two_ms / fused_ms);
    // Pack: columns [c0, c0+w) of a rows x 4096 float matrix into a contiguous rows x w buffer.
    const std::int64_t cols = 4096, rows = std::int64_t(n) / cols, w = 1024, c0 = 1024;
    sc::box sb, db, rg;
    sb.rank = db.rank = rg.rank = 2;
    sb.ext[0] = rows; sb.ext[1] = cols;
    db.ext[0] = rows; db.off[1] = c0; db.ext[1] = w;
    rg = db;
    const double pack_ms = time_ms([&] { sc::device::copy_region(src[0], sb, dst, db, rg, s); }, s);
    const double m2d_ms = time_ms([&] {
      SHARDCAST_CUDA_TRY(cudaMemcpy2DAsync(dst, w * sizeof(float), src[0] + c0, cols * sizeof(float), w * sizeof(float), rows,
                                           cudaMemcpyDeviceToDevice, s));
    }, s);
    const double moved = 2.0 * double(rows * w) * sizeof(float);
    std::printf("%6zu MiB  pack %lld x %lld of %lld cols: copy_region %8.1f GB/s (%.2f of copy) | cudaMemcpy2DAsync %8.1f GB/s\n", m,
                (long long)rows, (long long)w, (long long)cols, gbps(moved, pack_ms), gbps(moved, pack_ms) / copy_bw, gbps(moved, m2d_ms));
    for (auto p : src) (void)cudaFree(p);
    (void)cudaFree(dst);
    (void)cudaFree(tmp);
  }
  (void)cudaStreamDestroy(s);
  return 0;
}
