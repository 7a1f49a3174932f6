#pragma once
// The per-DM-trial stages of the single-pulse search, each defined exactly (part of
// warpbeam/search.hpp, whose header says what the search does).
//
// Every algorithm below is defined exactly, so that the CUDA executor (issue 3) reproduces the
// CPU executor: same peaks (dm_trial, sample, filter) with S/N within 1e-3 relative. Medians are
// selections (no rounding); sums that matter are in double (order-independent to ~1e-16).
// THE GPU PORT MUST FOLLOW, stage by stage, for every DM trial d of a plane of n samples:
//   1. baseline   search_baseline(): kBaselinePasses passes of running_median_baseline(): K =
//                 baseline_levels() decimations by 5 (median of 5 for the first two levels, mean
//                 of 5 after; incomplete groups dropped), then linear interpolation back to every
//                 sample (positions in double); each pass after the first decimates the series
//                 with the samples more than kBaselineMaskSigma * robust_rms() above the previous
//                 pass's baseline replaced by that baseline, so that a bright pulse does not
//                 raise its own baseline;
//   2. residual   r[t] = x[t] - baseline[t] (float);
//   3. RMS        robust_rms(): sigma0 = kMadToSigma * tree_median(|r|); sigma = sqrt(sum of r^2
//                 over |r| <= kClipSigma * sigma0, divided by (count * kClipVarianceFactor)),
//                 sums in double; a trial with sigma <= min_rms (or not finite) gives no peaks;
//   4. widths     w = 1, 2, 4 ... up to widest_boxcar(config, n, d): boxcar_max, 5^K /
//                 kBaselineWidthRatio, the kMinBoxcars rule and the trial's max_width;
//   5. boxcars    prefix sum P (double) of r; for width w and centre sample t the window is
//                 [t - w/2, t - w/2 + w) (w/2 rounded down), a[t] = (P[end] - P[begin]) *
//                 (1 / (sigma * sqrt(w))) computed in double, rounded to float (boxcar_snr());
//   6. normalise  rho = robust_rms(a at the valid centres lo, lo + s, lo + 2s ... (lo = w/2,
//                 s = rms_stride(w) = max(1, w/4)), centre 0); S/N[t] = float(a[t] * (1 / rho))
//                 in double (normalise_boxcar()); a width with rho <= 0 is skipped. As
//                 heimdall, which re-measures the RMS of every filtered series: a alone has unit
//                 RMS only for white noise, while the baseline's own noise and any red noise
//                 inflate the wide boxcars' RMS;
//   7. peaks      find_peaks(): runs of consecutive samples with S/N >= snr_min inside the
//                 valid range; one peak per run at its largest S/N (first index on ties),
//                 kept when that sample is in the gulp's owned range.
// Where warpbeam departs from heimdall: the upper baseline levels average instead of taking
// medians (the median of 5 keeps 29 % of the variance per level, the mean 20 %: a 5-level
// median tree is 6 times noisier than the mean, and its noise dominated wide boxcars in tests);
// widths are capped by the baseline scale and, with zero-DM subtraction, by the trial's own
// dispersion sweep (a pulse wider than the sweep is mostly removed by zero-DM, and such widths
// only found noise); the RMS is clipped rather than a bare MAD.
// Clustering (cluster_peaks / Clusterer) and RFI cleaning (clean_filterbank) are host code that
// both backends share. The CPU executor (src/search/cpu.cpp) is the reference implementation of
// the stages; each stage is also a function below, which the tests check on their own.

#include <cstdint>
#include <vector>

#include "warpbeam/search/stats.hpp"

namespace warpbeam::search {

/// Decimation levels K of the running-median baseline: the largest K with 5^K <= window, but
/// at least 1, and at most the largest K with 3 * 5^K <= n, so that the last level has at least
/// three values and the baseline can follow a slow trend (0 only when n < 5: then the baseline
/// is the lower median of the series). window_samples = the baseline window in samples
/// (heimdall: baseline_length = 2 s). With only 5^K <= n, a file shorter than the window had one
/// value, a flat baseline, and a bright pulse's zero-DM trough inflated the noise (issue 18, B4).
int baseline_levels(std::int64_t window_samples, std::int64_t n);

/// Running-median baseline of x[0..n) (heimdall's RemoveBaselinePlan idea): level 0 is x;
/// level k holds floor(n_{k-1} / 5) values; value i of level k summarises values 5i .. 5i+4 of
/// level k-1: for k <= 2 their lower median (median5), for k > 2 their mean computed as
/// float(((((double)a + b) + c) + d + e) / 5) (mean5). Level K = `levels` has n_K values, value
/// i centred on sample (i + 0.5) 5^K - 0.5. baseline[t] interpolates level K linearly at
/// u = (t + 0.5) / 5^K - 0.5 (u, its floor i and f = u - i in double; baseline =
/// float(y[i] + f * (y[i+1] - y[i])) in double), holding the end values beyond the first and last
/// centres. levels 0 (n < 5): the lower median of x everywhere. `scratch`: n / 5 + 8 floats.
void running_median_baseline(const float* x, std::int64_t n, int levels, float* baseline,
                             float* scratch);

/// Stage 1's passes and mask (see the header comment and search_baseline()).
inline constexpr int kBaselinePasses = 3;
inline constexpr double kBaselineMaskSigma = 3.0;

/// Stage 1: the baseline of x[0..n) as the search uses it. b_0 = running_median_baseline(x);
/// for p = 1 .. kBaselinePasses - 1: r[t] = x[t] - b_{p-1}[t] (float), s = robust_rms(r, centre
/// 0), m[t] = r[t] > float(kBaselineMaskSigma * s) ? b_{p-1}[t] : x[t], b_p =
/// running_median_baseline(m); the result is the last b. `masked`: n floats; `scratch`:
/// 2 n floats (at least n / 5 + 8).
void search_baseline(const float* x, std::int64_t n, int levels, float* baseline, float* masked,
                     float* scratch);

/// One peak ("giant" in heimdall): the best sample of a run of consecutive samples whose S/N
/// (one DM trial, one boxcar width) is >= the threshold.
struct Peak {
  float snr = 0;  ///< S/N of the best sample of the run
  std::int32_t dm_trial = 0;
  std::int32_t filter = 0;  ///< log2 of the boxcar width
  std::int64_t sample = 0;  ///< centre sample t of the best boxcar (window [t - w/2, t - w/2 + w))
  std::int64_t begin = 0;   ///< first sample of the first boxcar of the run
  std::int64_t end = 0;     ///< last sample (inclusive) of the last boxcar of the run
  std::int32_t width() const { return std::int32_t{1} << filter; }
  bool operator==(const Peak&) const = default;
};

/// Boxcars are searched only where the series has at least kMinBoxcars * w valid centres, so
/// that the RMS of the filtered series can be measured (stage 6) to ~7 % or better.
inline constexpr std::int64_t kMinBoxcars = 128;
/// ... and only up to 5^K / kBaselineWidthRatio samples: the baseline would absorb a wider pulse
/// and its own noise would dominate wider boxcars (to search wider pulses, lengthen the baseline).
inline constexpr std::int64_t kBaselineWidthRatio = 8;

/// Boxcar S/N of width w at every centre sample of the valid range t in [w/2, n - w + w/2]
/// from the prefix sum `prefix` (n + 1 doubles, prefix[0] = 0, prefix[i+1] = prefix[i] + r[i]):
/// snr[t] = float((prefix[t - w/2 + w] - prefix[t - w/2]) * (1 / (sigma * sqrt(w)))) (double).
/// snr has n entries; those outside the valid range are set to 0.
void boxcar_snr(const double* prefix, std::int64_t n, int width, double sigma, float* snr);

/// The stride between the boxcars whose RMS normalise_boxcar() measures: max(1, width / 4)
/// (boxcars closer than their width share samples, so more would add little).
std::int64_t rms_stride(int width);

/// Stage 6: measures rho = robust_rms(snr at the valid centres w/2, w/2 + s, w/2 + 2s ...,
/// s = rms_stride(width); centre 0) and scales every valid value by its inverse
/// (float(double(snr) * (1 / rho))); returns rho (the values are left unchanged when rho <= 0 or
/// is not finite: the caller skips the width). `scratch`: 2 n floats.
double normalise_boxcar(float* snr, std::int64_t n, int width, float* scratch);

/// Appends the peaks of one S/N series (one DM trial, one width) to `out`: runs of consecutive
/// samples with snr >= snr_min within the valid range of `width` (see boxcar_snr); each run
/// gives the sample of its largest S/N (first on ties), kept if own_begin <= sample < own_end.
/// sample, begin and end are offset by `sample_offset`.
void find_peaks(const float* snr, std::int64_t n, int width, float snr_min, std::int64_t own_begin,
                std::int64_t own_end, std::int32_t dm_trial, std::int64_t sample_offset,
                std::vector<Peak>& out);

}  // namespace warpbeam::search
