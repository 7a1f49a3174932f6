#pragma once
// Robust statistics of the single-pulse search: the primitives every stage uses (medians by
// median-of-5 decimation as heimdall, a clipped robust RMS). Part of warpbeam/search.hpp.

#include <cstdint>

namespace warpbeam::search {

/// sigma of a Gaussian per unit of median absolute deviation: 1 / Phi^-1(3/4).
inline constexpr double kMadToSigma = 1.482602218505602;
/// Clipping radius of robust_rms(), in units of the MAD-based sigma0.
inline constexpr double kClipSigma = 3.0;
/// Variance of a unit Gaussian truncated to |x| <= 3: 1 - 6 phi(3) / (2 Phi(3) - 1).
inline constexpr double kClipVarianceFactor = 0.9733369246625415;
/// tree_median() stops decimating when at most this many values remain.
inline constexpr std::int64_t kTreeStop = 125;

/// Lower median: the value of rank floor((n - 1) / 2) in ascending order (n >= 1).
/// `scratch` is overwritten (n floats).
float lower_median(const float* x, std::int64_t n, float* scratch);

/// Median by median-of-5 decimation, as heimdall's GetRMSPlan: while more than kTreeStop values
/// remain, replace them by the lower medians of consecutive groups of 5 (an incomplete last
/// group is dropped); then return the lower median of what remains. For iid data every level
/// has the population median, so this is a consistent, parallel-friendly median estimate.
/// n >= 1; `scratch` is overwritten (n floats).
float tree_median(const float* x, std::int64_t n, float* scratch);

/// sigma of `x` about `centre`, robust to outliers (pulses, RFI):
///   sigma0 = kMadToSigma * tree_median(|x - centre|)
///   sigma  = sqrt( sum_{|x-centre| <= kClipSigma*sigma0} (x-centre)^2 /
///   (count*kClipVarianceFactor) )
/// with the sum and the count in double. When sigma0 is 0 (more than half the values equal the
/// centre, e.g. 1-bit data), sigma is the plain RMS about the mean (double). `scratch`: n floats.
double robust_rms(const float* x, std::int64_t n, float centre, float* scratch);

}  // namespace warpbeam::search
