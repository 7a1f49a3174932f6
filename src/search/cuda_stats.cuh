#pragma once
// Internal: the robust statistics of warpbeam/search.hpp as block-wide device functions. A whole
// thread block computes one statistic of one series; every thread gets the result. Each function
// contains __syncthreads(), so every thread of the block must call it (no early return before).
//
// Exactness: median5/median3/lower medians select values (the same value as the CPU, whatever
// the order); mean5 sums left to right in double as the CPU; the clipped sums are in double (a
// different order than the CPU's, so they agree to ~1e-16 relative).
#include <cuda_runtime.h>

#include <cstdint>

#include "search/cuda_kernels.hpp"

namespace warpbeam::search::detail {

/// Shared memory every block-wide statistic uses (one per block, declared by the kernel).
struct StatsSmem {
  float small[128];  // the <= kDevTreeStop values of a lower median
  float fresult;
  double dred[33];  // warp partial sums + the broadcast slot
};

// std::min / std::max of the CPU (they return the first argument on ties and NaN).
__device__ __forceinline__ float fmin_std(float a, float b) {
  return (b < a) ? b : a;
}
__device__ __forceinline__ float fmax_std(float a, float b) {
  return (a < b) ? b : a;
}
__device__ __forceinline__ float median3(float x, float y, float z) {
  return fmax_std(fmin_std(x, y), fmin_std(fmax_std(x, y), z));
}
/// The 3rd smallest of 5 (the CPU's min/max network).
__device__ __forceinline__ float median5(float v0, float v1, float v2, float v3, float v4) {
  return median3(v4, fmax_std(fmin_std(v0, v1), fmin_std(v2, v3)),
                 fmin_std(fmax_std(v0, v1), fmax_std(v2, v3)));
}
/// float(((((v0 + v1) + v2) + v3) + v4) / 5) in double, as the CPU.
__device__ __forceinline__ float mean5(float v0, float v1, float v2, float v3, float v4) {
  const double s =
      __dadd_rn(__dadd_rn(__dadd_rn(__dadd_rn(static_cast<double>(v0), v1), v2), v3), v4);
  return static_cast<float>(__ddiv_rn(s, 5.0));
}

/// Sum of one double per thread over the block; every thread gets the total.
__device__ inline double block_sum(double v, StatsSmem& sm) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nwarps = static_cast<int>((blockDim.x + 31) / 32);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();  // the slots may still be read by a previous call
  if (lane == 0) sm.dred[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = lane < nwarps ? sm.dred[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      w += __shfl_down_sync(0xffffffffu, w, o);
    if (lane == 0) sm.dred[32] = w;
  }
  __syncthreads();
  return sm.dred[32];
}

/// The lower median (rank floor((m - 1) / 2)) of m <= 128 values in sm.small.
__device__ inline float block_lower_median_small(int m, StatsSmem& sm) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) sm.fresult = __int_as_float(0x7fc00000);  // NaN unless a value is chosen
  __syncthreads();
  const int k = (m - 1) / 2;
  for (int i = tid; i < m; i += static_cast<int>(blockDim.x)) {
    const float v = sm.small[i];
    int less = 0, leq = 0;
    for (int j = 0; j < m; ++j) {
      less += sm.small[j] < v;
      leq += sm.small[j] <= v;
    }
    if (less <= k && k < leq) sm.fresult = v;  // every such v is the same value
  }
  __syncthreads();
  const float r = sm.fresult;
  __syncthreads();
  return r;
}

/// tree_median() of the m values value(0 .. m-1) (computed on the fly, any functor): while more
/// than kTreeStop values remain, lower medians of groups of 5 (an incomplete group dropped),
/// ping-ponging between a (>= m / 5 floats) and b (>= m / 25 floats).
template <class F>
__device__ float block_tree_median(const F& value, std::int64_t m, float* a, float* b,
                                   StatsSmem& sm) {
  const std::int64_t tid = threadIdx.x, nt = blockDim.x;
  if (m <= kDevTreeStop) {
    for (std::int64_t i = tid; i < m; i += nt)
      sm.small[i] = value(i);
    __syncthreads();
    return block_lower_median_small(static_cast<int>(m), sm);
  }
  std::int64_t mm = m / 5;
  for (std::int64_t i = tid; i < mm; i += nt)
    a[i] = median5(value(5 * i), value(5 * i + 1), value(5 * i + 2), value(5 * i + 3),
                   value(5 * i + 4));
  __syncthreads();
  float* cur = a;
  float* other = b;
  while (mm > kDevTreeStop) {
    const std::int64_t next = mm / 5;
    for (std::int64_t i = tid; i < next; i += nt) {
      const float* v = cur + 5 * i;
      other[i] = median5(v[0], v[1], v[2], v[3], v[4]);
    }
    __syncthreads();
    float* t = cur;
    cur = other;
    other = t;
    mm = next;
  }
  for (std::int64_t i = tid; i < mm; i += nt)
    sm.small[i] = cur[i];
  __syncthreads();
  return block_lower_median_small(static_cast<int>(mm), sm);
}

/// robust_rms() of value(0 .. m-1) about `centre`: sigma0 = kMadToSigma * tree median of
/// |x - centre|; sigma = sqrt(sum of (x - centre)^2 over |x - centre| <= 3 sigma0 / (count *
/// kClipVarianceFactor)) in double; when sigma0 is 0, the plain RMS about the mean (double).
template <class F>
__device__ double block_robust_rms(const F& value, std::int64_t m, float centre, float* a, float* b,
                                   StatsSmem& sm) {
  const std::int64_t tid = threadIdx.x, nt = blockDim.x;
  auto absdev = [&](std::int64_t i) { return fabsf(value(i) - centre); };
  const double sigma0 =
      kDevMadToSigma * static_cast<double>(block_tree_median(absdev, m, a, b, sm));
  if (sigma0 > 0) {
    const double clip = kDevClipSigma * sigma0;
    double sum = 0, count = 0;
    for (std::int64_t i = tid; i < m; i += nt) {
      const double d = static_cast<double>(fabsf(value(i) - centre));
      if (d <= clip) {
        sum += d * d;
        count += 1.0;
      }
    }
    sum = block_sum(sum, sm);
    count = block_sum(count, sm);
    return sqrt(sum / (count * kDevClipVarianceFactor));
  }
  double mean = 0;
  for (std::int64_t i = tid; i < m; i += nt)
    mean += static_cast<double>(value(i));
  mean = block_sum(mean, sm) / static_cast<double>(m);
  double var = 0;
  for (std::int64_t i = tid; i < m; i += nt) {
    const double d = static_cast<double>(value(i)) - mean;
    var += d * d;
  }
  var = block_sum(var, sm);
  return sqrt(var / static_cast<double>(m));
}

}  // namespace warpbeam::search::detail
