// The B2 benchmark's baseline: cuBLAS complex GEMM (cublasCgemmStridedBatched) on the beamformer's
// shapes, fp32 and with TF32 tensor-core math, timed with CUDA events in the same run.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform {
namespace {

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCategory::cuda,
         std::string("cuBLAS error ") + std::to_string(static_cast<int>(s)) + " in " + what);
}

struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { cublas_check(cublasCreate(&h), "cublasCreate"); }
  ~Handle() { cublasDestroy(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

__global__ void fill_complex(float2* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned x = static_cast<unsigned>(i) * 2654435761u + seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    p[i] = make_float2(static_cast<float>(x & 0xFFFF) / 65536.f - 0.5f,
                       static_cast<float>(x >> 16) / 65536.f - 0.5f);
  }
}

}  // namespace

double cublas_cgemm_ms(int m, int n, int k, int batch, bool tf32, int repeats) {
  const std::size_t sa = static_cast<std::size_t>(m) * k, sb = static_cast<std::size_t>(k) * n,
                    sc = static_cast<std::size_t>(m) * n;
  DeviceArray<float2> a(sa * batch), b(sb * batch), c(sc * batch);
  fill_complex<<<1024, 256>>>(a.data(), a.size(), 1u);
  WB_CUDA_CHECK_LAUNCH();
  fill_complex<<<1024, 256>>>(b.data(), b.size(), 2u);
  WB_CUDA_CHECK_LAUNCH();
  Handle h;
  cublas_check(cublasSetMathMode(h.h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode");
  const cuComplex alpha{1.f, 0.f}, beta{0.f, 0.f};
  // Column-major: C (m x n) = A (m x k) B (k x n).
  auto run = [&] {
    cublas_check(
        cublasCgemmStridedBatched(
            h.h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
            reinterpret_cast<const cuComplex*>(a.data()), m, static_cast<long long>(sa),
            reinterpret_cast<const cuComplex*>(b.data()), k, static_cast<long long>(sb), &beta,
            reinterpret_cast<cuComplex*>(c.data()), m, static_cast<long long>(sc), batch),
        "cublasCgemmStridedBatched");
  };
  run();  // warm-up (and heuristics)
  WB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    Event e0, e1;
    e0.record();
    run();
    e1.record();
    e1.synchronize();
    ms.push_back(e1.elapsed_ms_since(e0));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

__global__ void fill_half(__half* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2half(static_cast<float>((i * 2654435761u) % 1024) / 1024.f - 0.5f);
}

double cublas_hgemm_flops(int n, int repeats) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  DeviceArray<__half> a(nn), b(nn);
  DeviceArray<float> c(nn);
  fill_half<<<1024, 256>>>(a.data(), nn);
  WB_CUDA_CHECK_LAUNCH();
  fill_half<<<1024, 256>>>(b.data(), nn);
  WB_CUDA_CHECK_LAUNCH();
  Handle h;
  const float alpha = 1.f, beta = 0.f;
  auto run = [&] {
    cublas_check(cublasGemmEx(h.h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16F,
                              n, b.data(), CUDA_R_16F, n, &beta, c.data(), CUDA_R_32F, n,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  run();
  WB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    Event e0, e1;
    e0.record();
    run();
    e1.record();
    e1.synchronize();
    ms.push_back(e1.elapsed_ms_since(e0));
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * n * static_cast<double>(n) * n / (ms[ms.size() / 2] * 1e-3);
}

}  // namespace warpbeam::beamform
