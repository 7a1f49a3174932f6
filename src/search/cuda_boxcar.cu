// The per-width stages of the GPU search (warpbeam/search.hpp, stages 5-7), one thread block
// per DM trial of a batch, for one boxcar width w:
//   boxcar_rms_kernel  rho = robust_rms() of the boxcar series a at the centres w/2 + j s
//                      (s = rms_stride(w)), a computed from the prefix sum on the fly;
//   peaks_kernel       S/N[t] = float(double(a[t]) / rho) over the valid centres, one peak per
//                      run of S/N >= snr_min at the run's first maximum, kept when it falls in
//                      the gulp's owned range. The thread that sees a run start walks the run
//                      (runs are short; a run longer than a thread's stride is still found once,
//                      by the thread of its first sample).
// a[t] = float((P[t - w/2 + w] - P[t - w/2]) * (1 / (sigma sqrt(w)))) in double, as
// boxcar_snr(); the peaks go to a device buffer through one atomic counter.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "search/cuda_kernels.hpp"
#include "search/cuda_stats.cuh"

namespace warpbeam::search::detail {
namespace {

__device__ __forceinline__ bool usable(double v, double min_rms) {
  return v > min_rms && isfinite(v);
}

/// The boxcar of width w centred on t (window [t - h, t - h + w)), as boxcar_snr().
__device__ __forceinline__ float boxcar_at(const double* P, std::int64_t t, int w, std::int64_t h,
                                           double inv) {
  return static_cast<float>(__dmul_rn(__dsub_rn(P[t - h + w], P[t - h]), inv));
}

/// 1 / (sigma sqrt(w)), as boxcar_snr().
__device__ __forceinline__ double boxcar_scale(double sigma, int w) {
  return 1.0 / (sigma * sqrt(static_cast<double>(w)));
}

struct WidthView {
  const double* P;
  float* a;
  float* b;
  int row;
  double sigma;
  bool searched;  // the trial has a usable sigma and searches this width
};

__device__ __forceinline__ WidthView width_view(const TrialBatch& bt, const WidthArgs& wa) {
  const auto i = static_cast<std::int64_t>(blockIdx.x);
  WidthView v;
  v.row = bt.first + static_cast<int>(blockIdx.x);
  v.P = bt.s.prefix + i * (bt.n + 1);
  v.a = bt.s.level_a + i * bt.s.a_stride;
  v.b = bt.s.level_b + i * bt.s.b_stride;
  v.sigma = bt.sigma[v.row];
  v.searched =
      usable(v.sigma, bt.min_rms) && wa.width <= bt.widest[v.row] && bt.n - wa.width + 1 >= 1;
  return v;
}

__global__ void __launch_bounds__(kSearchThreads)
    boxcar_rms_kernel(const TrialBatch bt, const WidthArgs wa) {
  __shared__ StatsSmem sm;
  const WidthView v = width_view(bt, wa);
  if (!v.searched) {  // uniform over the block
    if (threadIdx.x == 0) wa.rho[blockIdx.x] = 0.0;
    return;
  }
  const int w = wa.width;
  const std::int64_t h = w / 2, count = bt.n - w + 1;
  const std::int64_t stride = w / 4 > 1 ? w / 4 : 1;  // rms_stride()
  const std::int64_t m = (count + stride - 1) / stride;
  const double inv = boxcar_scale(v.sigma, w);
  const double* P = v.P;
  auto sub = [&](std::int64_t j) { return boxcar_at(P, h + j * stride, w, h, inv); };
  const double rho = block_robust_rms(sub, m, 0.0f, v.a, v.b, sm);
  if (threadIdx.x == 0) wa.rho[blockIdx.x] = rho;
}

__global__ void __launch_bounds__(kSearchThreads)
    peaks_kernel(const TrialBatch bt, const WidthArgs wa) {
  const WidthView v = width_view(bt, wa);
  const double rho = wa.rho[blockIdx.x];
  if (!v.searched || !(rho > 0) || !isfinite(rho)) return;
  const int w = wa.width;
  const std::int64_t h = w / 2, lo = h, hi = bt.n - w + h;  // valid centres, inclusive
  const double inv = boxcar_scale(v.sigma, w), inv_rho = 1.0 / rho;
  const double* P = v.P;
  const float thr = wa.snr_min;
  auto snr = [&](std::int64_t t) {
    return static_cast<float>(__dmul_rn(static_cast<double>(boxcar_at(P, t, w, h, inv)), inv_rho));
  };
  for (std::int64_t t = lo + threadIdx.x; t <= hi; t += blockDim.x) {
    const float s = snr(t);
    if (!(s >= thr)) continue;
    if (t > lo && snr(t - 1) >= thr) continue;  // inside a run that started earlier
    std::int64_t best = t, u = t + 1;
    float best_snr = s;
    for (; u <= hi; ++u) {
      const float su = snr(u);
      if (!(su >= thr)) break;
      if (su > best_snr) {
        best_snr = su;
        best = u;
      }
    }
    if (best < wa.own_begin || best >= wa.own_end) continue;
    const unsigned long long k = atomicAdd(wa.count, 1ull);
    if (k >= wa.capacity) continue;  // counted: the host grows the buffer and runs again
    DevicePeak p;
    p.snr = best_snr;
    p.dm_trial = v.row + wa.dm_offset;
    p.filter = wa.filter;
    p.pad = 0;
    p.sample = best + wa.sample_offset;
    p.begin = t - h + wa.sample_offset;
    p.end = (u - 1) - h + w - 1 + wa.sample_offset;
    wa.peaks[k] = p;
  }
}

__global__ void __launch_bounds__(kSearchThreads)
    write_snr_kernel(const TrialBatch bt, const WidthArgs wa, float* __restrict__ out) {
  const WidthView v = width_view(bt, wa);
  float* o = out + static_cast<std::int64_t>(blockIdx.x) * bt.n;
  const bool ok = usable(v.sigma, bt.min_rms);
  const int w = wa.width;
  const std::int64_t h = w / 2, lo = h, hi = bt.n - w + h;
  const double rho = wa.rho[blockIdx.x];
  const bool normalise = v.searched && rho > 0 && isfinite(rho);
  const double inv = ok ? boxcar_scale(v.sigma, w) : 0.0, inv_rho = normalise ? 1.0 / rho : 1.0;
  for (std::int64_t t = threadIdx.x; t < bt.n; t += blockDim.x) {
    float s = 0.0f;
    if (ok && t >= lo && t <= hi) {
      s = boxcar_at(v.P, t, w, h, inv);
      if (normalise) s = static_cast<float>(__dmul_rn(static_cast<double>(s), inv_rho));
    }
    o[t] = s;
  }
}

void check(const TrialBatch& b, const WidthArgs& w) {
  if (b.count < 1 || b.n < 1 || w.width < 1 || w.rho == nullptr)
    fail(ErrorCategory::invalid_argument, "search width batch: " + std::to_string(b.count) +
                                              " trials x " + std::to_string(b.n) +
                                              " samples, width " + std::to_string(w.width));
}

}  // namespace

void launch_boxcar_rms(const TrialBatch& b, const WidthArgs& w, const Stream* stream) {
  check(b, w);
  boxcar_rms_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b, w);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_peaks(const TrialBatch& b, const WidthArgs& w, const Stream* stream) {
  check(b, w);
  peaks_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b, w);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_write_snr(const TrialBatch& b, const WidthArgs& w, float* out, const Stream* stream) {
  check(b, w);
  write_snr_kernel<<<b.count, kSearchThreads, 0, WB_STREAM(stream)>>>(b, w, out);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::search::detail
