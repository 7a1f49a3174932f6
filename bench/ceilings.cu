// Measured device ceilings for roofline fractions: a large device-to-device copy (bytes read +
// written) and register-resident fp32 add / FMA loops (independent chains, enough warps).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "bench/bench.hpp"
#include "core/cuda_check.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::bench {
namespace {

constexpr int kChains = 8;
constexpr int kIters = 4096;

__global__ void fadd_kernel(float* out, float step) {
  float a[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i)
    a[i] = threadIdx.x + i;
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int i = 0; i < kChains; ++i)
      a[i] += step;
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i)
    s += a[i];
  if (s == -1.f) out[threadIdx.x] = s;  // never true: keeps the loop alive
}

__global__ void ffma_kernel(float* out, float m, float step) {
  float a[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i)
    a[i] = threadIdx.x + i;
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int i = 0; i < kChains; ++i)
      a[i] = fmaf(a[i], m, step);
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i)
    s += a[i];
  if (s == -1.f) out[threadIdx.x] = s;
}

template <class F>
float time_ms(F&& launch, int reps) {
  Event a, b;
  launch();  // warm-up
  a.record();
  for (int i = 0; i < reps; ++i)
    launch();
  b.record();
  b.synchronize();
  return b.elapsed_ms_since(a) / reps;
}

}  // namespace

DeviceCeilings measure_device_ceilings() {
  DeviceCeilings c;
  int sms = 0;
  WB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::size_t bytes = std::size_t{2} << 30;
  DeviceArray<char> src(bytes), dst(bytes);
  device_memset(src.data(), 1, bytes);
  const float copy_ms = time_ms(
      [&] {
        WB_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice));
      },
      10);
  c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3);

  DeviceArray<float> sink(1024);
  const int blocks = sms * 16, threads = 256;
  const double ops = static_cast<double>(blocks) * threads * kChains * kIters;
  const float add_ms = time_ms([&] { fadd_kernel<<<blocks, threads>>>(sink.data(), 1.0f); }, 5);
  WB_CUDA_CHECK_LAUNCH();
  c.fp32_add_per_s = ops / (add_ms * 1e-3);
  const float fma_ms =
      time_ms([&] { ffma_kernel<<<blocks, threads>>>(sink.data(), 0.999f, 1.0f); }, 5);
  WB_CUDA_CHECK_LAUNCH();
  c.fp32_fma_flop_per_s = 2 * ops / (fma_ms * 1e-3);
  return c;
}

}  // namespace warpbeam::bench
