// The per-DM-trial stages of the GPU search (warpbeam/search.hpp, stages 1-3 and the prefix sum
// of stage 5): one thread block per trial of a batch.
//   baseline_levels_kernel  running_median_baseline()'s decimation: median of 5 for levels 1-2,
//                           mean of 5 after; the last level stays in scratch (a few values) and
//                           the baseline is interpolated from it wherever it is needed;
//   masked_levels_kernel    search_baseline()'s later passes: the same decimation of the series
//                           whose samples above kBaselineMaskSigma * sigma of the previous pass's
//                           residual are replaced by its baseline (its levels copied aside first);
//   residual_rms_kernel     robust_rms() of r = x - baseline, r computed on the fly;
//   prefix_kernel           P[0] = 0, P[t+1] = P[t] + r[t] in double, by a block-wide scan in
//                           tiles of 2048 samples (a different association than the CPU's loop:
//                           the sums agree to ~1e-16 relative).
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "search/cuda_kernels.hpp"
#include "search/cuda_stats.cuh"

namespace warpbeam::search::detail {
namespace {

constexpr int kScanPerThread = 4;  // samples per thread per tile of the prefix scan

/// The baseline at sample t, interpolated from the last level y[0 .. m-1] whose value i is
/// centred on (i + 0.5) step - 0.5; the CPU compiles y0 + f (y1 - y0) to one fused multiply-add,
/// and so does this (explicitly, so that the result is the same float).
__device__ __forceinline__ float baseline_at(const float* y, std::int64_t m, double step,
                                             std::int64_t t) {
  const double u = (static_cast<double>(t) + 0.5) / step - 0.5;
  if (u <= 0) return y[0];
  if (u >= static_cast<double>(m - 1)) return y[m - 1];
  const double fi = floor(u);
  const auto i = static_cast<std::int64_t>(fi);
  const double f = u - fi;
  const double y0 = y[i], y1 = y[i + 1];
  return static_cast<float>(__fma_rn(f, __dsub_rn(y1, y0), y0));
}

struct TrialView {
  const float* x;  // the trial's series
  float* a;        // its tree scratch
  float* b;
  float* y;  // its baseline level
  int row;   // plane row
};

__device__ __forceinline__ TrialView trial_view(const TrialBatch& bt) {
  const auto i = static_cast<std::int64_t>(blockIdx.x);
  TrialView v;
  v.row = bt.first + static_cast<int>(blockIdx.x);
  v.x = bt.plane + static_cast<std::int64_t>(v.row) * bt.n;
  v.a = bt.s.level_a + i * bt.s.a_stride;
  v.b = bt.s.level_b + i * bt.s.b_stride;
  v.y = bt.s.ylev + i * bt.s.a_stride;
  return v;
}

__device__ __forceinline__ bool usable(double sigma, double min_rms) {
  return sigma > min_rms && isfinite(sigma);
}

// The decimation levels of the series value(t), t < n, into v.y (the lower median when K = 0).
template <class Value>
__device__ void decimate_levels(const TrialBatch& bt, const TrialView& v, Value value,
                                StatsSmem& sm) {
  const std::int64_t tid = threadIdx.x, nt = blockDim.x;
  if (bt.levels <= 0) {  // fewer than 5 samples: the lower median everywhere
    const float med = block_tree_median(value, bt.n, v.a, v.b, sm);
    if (tid == 0) v.y[0] = med;
    return;
  }
  // Level k (n / 5^k values) from level k - 1: odd levels in a, even ones in b, the last in y.
  std::int64_t m = bt.n;
  const float* src = nullptr;  // level k - 1 for k >= 2 (level 0 is value())
  for (int k = 1; k <= bt.levels; ++k) {
    float* dst = k == bt.levels ? v.y : ((k & 1) ? v.a : v.b);
    const std::int64_t next = m / 5;
    const bool median = k <= kDevMedianLevels;
    for (std::int64_t i = tid; i < next; i += nt) {
      float g[5];
#pragma unroll
      for (int j = 0; j < 5; ++j)
        g[j] = k == 1 ? value(5 * i + j) : src[5 * i + j];
      dst[i] = median ? median5(g[0], g[1], g[2], g[3], g[4]) : mean5(g[0], g[1], g[2], g[3], g[4]);
    }
    __syncthreads();
    src = dst;
    m = next;
  }
}

__global__ void __launch_bounds__(kSearchThreads) baseline_levels_kernel(const TrialBatch bt) {
  __shared__ StatsSmem sm;
  const TrialView v = trial_view(bt);
  const float* x = v.x;
  decimate_levels(
      bt, v, [&](std::int64_t t) { return x[t]; }, sm);
}

__global__ void __launch_bounds__(kSearchThreads) masked_levels_kernel(const TrialBatch bt) {
  __shared__ StatsSmem sm;
  const TrialView v = trial_view(bt);
  float* prev = bt.s.yprev + static_cast<std::int64_t>(blockIdx.x) * bt.s.a_stride;
  for (std::int64_t i = threadIdx.x; i < bt.ylen; i += blockDim.x)
    prev[i] = v.y[i];
  __syncthreads();
  // As search_baseline(): r = x - b (float), masked to b where r > float(3 sigma) (in double).
  const auto limit = static_cast<float>(kDevBaselineMaskSigma * bt.sigma[v.row]);
  const float* x = v.x;
  const std::int64_t ylen = bt.ylen;
  const double step = bt.step;
  decimate_levels(
      bt, v,
      [&](std::int64_t t) {
        const float b = baseline_at(prev, ylen, step, t);
        return __fsub_rn(x[t], b) > limit ? b : x[t];
      },
      sm);
}

__global__ void __launch_bounds__(kSearchThreads)
    write_baseline_kernel(const TrialBatch bt, float* __restrict__ out) {
  const TrialView v = trial_view(bt);
  float* o = out + static_cast<std::int64_t>(blockIdx.x) * bt.n;
  for (std::int64_t t = threadIdx.x; t < bt.n; t += blockDim.x)
    o[t] = baseline_at(v.y, bt.ylen, bt.step, t);
}

__global__ void __launch_bounds__(kSearchThreads) residual_rms_kernel(const TrialBatch bt) {
  __shared__ StatsSmem sm;
  const TrialView v = trial_view(bt);
  const float* x = v.x;
  const float* y = v.y;
  const std::int64_t ylen = bt.ylen;
  const double step = bt.step;
  auto r = [&](std::int64_t t) { return x[t] - baseline_at(y, ylen, step, t); };
  const double sigma = block_robust_rms(r, bt.n, 0.0f, v.a, v.b, sm);
  if (threadIdx.x == 0) bt.sigma[v.row] = sigma;
}

__global__ void __launch_bounds__(kSearchThreads) prefix_kernel(const TrialBatch bt) {
  __shared__ double warp_total[32];
  const TrialView v = trial_view(bt);
  if (!usable(bt.sigma[v.row], bt.min_rms)) return;  // uniform over the block
  double* P = bt.s.prefix + static_cast<std::int64_t>(blockIdx.x) * (bt.n + 1);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nwarps = static_cast<int>(blockDim.x) / 32;
  const std::int64_t tile = static_cast<std::int64_t>(blockDim.x) * kScanPerThread;
  if (tid == 0) P[0] = 0.0;
  double carry = 0;
  for (std::int64_t t0 = 0; t0 < bt.n; t0 += tile) {
    const std::int64_t first = t0 + static_cast<std::int64_t>(tid) * kScanPerThread;
    double part[kScanPerThread];
    double local = 0;
#pragma unroll
    for (int j = 0; j < kScanPerThread; ++j) {
      const std::int64_t t = first + j;
      const float r = t < bt.n ? v.x[t] - baseline_at(v.y, bt.ylen, bt.step, t) : 0.0f;
      local += static_cast<double>(r);
      part[j] = local;
    }
    // Exclusive scan of the threads' totals: within the warp, then over the warps.
    double incl = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double u = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += u;
    }
    double excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0.0;
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      double w = lane < nwarps ? warp_total[lane] : 0.0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const double u = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += u;
      }
      if (lane < nwarps) warp_total[lane] = w;  // inclusive over the warps
    }
    __syncthreads();
    const double before = carry + (warp > 0 ? warp_total[warp - 1] : 0.0) + excl;
#pragma unroll
    for (int j = 0; j < kScanPerThread; ++j) {
      const std::int64_t t = first + j;
      if (t < bt.n) P[t + 1] = before + part[j];
    }
    carry += warp_total[nwarps - 1];
    __syncthreads();  // warp_total is rewritten by the next tile
  }
}

void check_batch(const TrialBatch& b) {
  if (b.count < 1 || b.n < 1)
    fail(ErrorCategory::invalid_argument, "search batch of " + std::to_string(b.count) +
                                              " trials x " + std::to_string(b.n) + " samples");
}

}  // namespace

void launch_baseline_levels(const TrialBatch& b, const Stream* stream) {
  check_batch(b);
  baseline_levels_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_masked_baseline_levels(const TrialBatch& b, const Stream* stream) {
  check_batch(b);
  masked_levels_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_search_baseline(const TrialBatch& b, const Stream* stream) {
  launch_baseline_levels(b, stream);
  launch_residual_rms(b, stream);
  for (int pass = 1; pass < kDevBaselinePasses; ++pass) {
    launch_masked_baseline_levels(b, stream);
    launch_residual_rms(b, stream);
  }
}

void launch_write_baseline(const TrialBatch& b, float* out, const Stream* stream) {
  check_batch(b);
  write_baseline_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b, out);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_residual_rms(const TrialBatch& b, const Stream* stream) {
  check_batch(b);
  residual_rms_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_prefix(const TrialBatch& b, const Stream* stream) {
  check_batch(b);
  prefix_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::search::detail
