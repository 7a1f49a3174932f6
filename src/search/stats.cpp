// Robust statistics and the per-DM-trial stages of the search: the definitions both executors
// follow (see the header for the exact rules).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "warpbeam/format.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

namespace {

// Median (the 3rd smallest) of 5 values by a branch-free min/max network:
// med5(a, b, c, d, e) = med3(e, max(min(a, b), min(c, d)), min(max(a, b), max(c, d))), since the
// smaller of two pair minima and the larger of two pair maxima cannot be the median.
inline float median3(float x, float y, float z) {
  return std::max(std::min(x, y), std::min(std::max(x, y), z));
}
inline float median5(const float* v) {
  return median3(v[4], std::max(std::min(v[0], v[1]), std::min(v[2], v[3])),
                 std::min(std::max(v[0], v[1]), std::max(v[2], v[3])));
}

// Mean of 5 values, summed left to right in double (so any implementation gets the same float).
inline float mean5(const float* v) {
  return static_cast<float>(((((static_cast<double>(v[0]) + v[1]) + v[2]) + v[3]) + v[4]) / 5.0);
}

// out[i] = median5(in + 5 i) for i < n / 5; in and out may alias (out <= in).
std::int64_t decimate5(const float* in, std::int64_t n, float* out) {
  const std::int64_t m = n / 5;
  for (std::int64_t i = 0; i < m; ++i)
    out[i] = median5(in + 5 * i);
  return m;
}

// out[i] = mean5(in + 5 i) for i < n / 5; in and out may alias (out <= in).
std::int64_t average5(const float* in, std::int64_t n, float* out) {
  const std::int64_t m = n / 5;
  for (std::int64_t i = 0; i < m; ++i)
    out[i] = mean5(in + 5 * i);
  return m;
}

// Baseline levels decimated by the median of 5 (the rest average).
constexpr int kMedianLevels = 2;

}  // namespace

float lower_median(const float* x, std::int64_t n, float* scratch) {
  if (n <= 0) fail(ErrorCategory::invalid_argument, "median of an empty series");
  if (scratch != x) std::memcpy(scratch, x, static_cast<std::size_t>(n) * sizeof(float));
  float* mid = scratch + (n - 1) / 2;
  std::nth_element(scratch, mid, scratch + n);
  return *mid;
}

float tree_median(const float* x, std::int64_t n, float* scratch) {
  if (n <= kTreeStop) return lower_median(x, n, scratch);
  std::int64_t m = decimate5(x, n, scratch);
  while (m > kTreeStop)
    m = decimate5(scratch, m, scratch);
  return lower_median(scratch, m, scratch);
}

double robust_rms(const float* x, std::int64_t n, float centre, float* scratch) {
  for (std::int64_t i = 0; i < n; ++i)
    scratch[i] = std::abs(x[i] - centre);
  // tree_median overwrites the |x - centre| values: recompute them in the clipped sum.
  const double sigma0 = kMadToSigma * tree_median(scratch, n, scratch);
  if (sigma0 > 0) {
    const double clip = kClipSigma * sigma0;
    double sum = 0, count = 0;
    for (std::int64_t i = 0; i < n; ++i) {  // branch-free, so that it vectorises
      const auto a = static_cast<double>(std::abs(x[i] - centre));
      const double in = a <= clip ? 1.0 : 0.0;
      sum += in * a * a;
      count += in;
    }
    return std::sqrt(sum / (count * kClipVarianceFactor));
  }
  double mean = 0;
  for (std::int64_t i = 0; i < n; ++i)
    mean += x[i];
  mean /= static_cast<double>(n);
  double var = 0;
  for (std::int64_t i = 0; i < n; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  return std::sqrt(var / static_cast<double>(n));
}

int baseline_levels(std::int64_t window_samples, std::int64_t n) {
  if (n < 5) return 0;
  int k = 1;
  std::int64_t p = 5;
  while (p * 5 <= window_samples && p * 15 <= n) {
    p *= 5;
    ++k;
  }
  return k;
}

void running_median_baseline(const float* x, std::int64_t n, int levels, float* baseline,
                             float* scratch) {
  if (levels <= 0) {
    const float m = lower_median(x, n, scratch);
    std::fill(baseline, baseline + n, m);
    return;
  }
  std::int64_t m = decimate5(x, n, scratch);
  double step = 5;
  for (int k = 2; k <= levels; ++k) {
    m = k <= kMedianLevels ? decimate5(scratch, m, scratch) : average5(scratch, m, scratch);
    step *= 5;
  }
  if (m < 1) fail(ErrorCategory::invalid_argument, "baseline: {} levels for {} samples", levels, n);
  const float* y = scratch;
  for (std::int64_t t = 0; t < n; ++t) {
    const double u = (static_cast<double>(t) + 0.5) / step - 0.5;
    if (u <= 0) {
      baseline[t] = y[0];
    } else if (u >= static_cast<double>(m - 1)) {
      baseline[t] = y[m - 1];
    } else {
      const double fi = std::floor(u);
      const auto i = static_cast<std::int64_t>(fi);
      const double f = u - fi;
      baseline[t] = static_cast<float>(static_cast<double>(y[i]) +
                                       f * (static_cast<double>(y[i + 1]) - y[i]));
    }
  }
}

void search_baseline(const float* x, std::int64_t n, int levels, float* baseline, float* masked,
                     float* scratch) {
  running_median_baseline(x, n, levels, baseline, scratch);
  for (int pass = 1; pass < kBaselinePasses; ++pass) {
    for (std::int64_t t = 0; t < n; ++t)
      masked[t] = x[t] - baseline[t];  // the residual of the previous pass
    const auto limit =
        static_cast<float>(kBaselineMaskSigma * robust_rms(masked, n, 0.0f, scratch));
    for (std::int64_t t = 0; t < n; ++t)
      masked[t] = masked[t] > limit ? baseline[t] : x[t];
    running_median_baseline(masked, n, levels, baseline, scratch);
  }
}

int widest_boxcar(const SearchConfig& c, std::int64_t n, std::int64_t trial) {
  const int levels = baseline_levels(c.baseline_window(), n);
  std::int64_t scale = 1;
  for (int k = 0; k < levels; ++k)
    scale *= 5;
  std::int64_t limit = std::min<std::int64_t>(c.boxcar_max, scale / kBaselineWidthRatio);
  if (!c.max_width.empty())
    limit = std::min<std::int64_t>(limit, c.max_width[static_cast<std::size_t>(trial)]);
  limit = std::max<std::int64_t>(limit, 1);
  int w = 0;
  for (std::int64_t x = 1; x <= limit && n - x + 1 >= kMinBoxcars * x; x *= 2)
    w = static_cast<int>(x);
  return w;
}

void boxcar_snr(const double* prefix, std::int64_t n, int width, double sigma, float* snr) {
  const std::int64_t h = width / 2;
  const std::int64_t lo = h, hi = n - width + h;  // valid centres, inclusive
  const double inv = 1.0 / (sigma * std::sqrt(static_cast<double>(width)));
  std::int64_t t = 0;
  for (; t < std::min(lo, n); ++t)
    snr[t] = 0;
  for (; t <= hi; ++t)
    snr[t] = static_cast<float>((prefix[t - h + width] - prefix[t - h]) * inv);
  for (t = std::max(t, hi + 1); t < n; ++t)
    snr[t] = 0;
}

std::int64_t rms_stride(int width) {
  return std::max(1, width / 4);
}

double normalise_boxcar(float* snr, std::int64_t n, int width, float* scratch) {
  const std::int64_t lo = width / 2, count = n - width + 1;
  if (count < 1) return 0;
  // Boxcars closer than their width share samples: every (w/4)-th one carries the information.
  const std::int64_t stride = rms_stride(width), m = (count + stride - 1) / stride;
  float* sub = scratch + m;  // robust_rms needs m floats of scratch after the m values
  for (std::int64_t i = 0; i < m; ++i)
    sub[i] = snr[lo + i * stride];
  const double rho = robust_rms(sub, m, 0.0f, scratch);
  if (!(rho > 0) || !std::isfinite(rho)) return rho;
  const double inv = 1.0 / rho;
  for (std::int64_t t = lo; t < lo + count; ++t)
    snr[t] = static_cast<float>(static_cast<double>(snr[t]) * inv);
  return rho;
}

void find_peaks(const float* snr, std::int64_t n, int width, float snr_min, std::int64_t own_begin,
                std::int64_t own_end, std::int32_t dm_trial, std::int64_t sample_offset,
                std::vector<Peak>& out) {
  const std::int64_t h = width / 2;
  const std::int64_t lo = h, hi = n - width + h;
  const auto filter = static_cast<std::int32_t>(std::countr_zero(static_cast<unsigned>(width)));
  std::int64_t t = lo;
  while (t <= hi) {
    if (!(snr[t] >= snr_min)) {
      ++t;
      continue;
    }
    const std::int64_t start = t;
    std::int64_t best = t;
    for (; t <= hi && snr[t] >= snr_min; ++t)
      if (snr[t] > snr[best]) best = t;
    const std::int64_t stop = t - 1;
    if (best >= own_begin && best < own_end) {
      Peak p;
      p.snr = snr[best];
      p.dm_trial = dm_trial;
      p.filter = filter;
      p.sample = best + sample_offset;
      p.begin = start - h + sample_offset;
      p.end = stop - h + width - 1 + sample_offset;
      out.push_back(p);
    }
  }
}

}  // namespace warpbeam::search
