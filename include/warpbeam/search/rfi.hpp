#pragma once
// RFI cleaning of a filterbank gulp before dedispersion (host code shared by both backends).

#include <cstdint>
#include <vector>

#include "warpbeam/search/stats.hpp"

namespace warpbeam::search {

struct RfiConfig {
  /// Channels to ignore (the user's mask, e.g. --zap-chans): empty or nchans entries, 1 = zap.
  std::vector<std::uint8_t> zap;
  /// A channel whose robust sigma differs from the median over channels by more than
  /// zap_sigma * max(kMadToSigma * MAD over channels, 0.01 * median) is zapped (0: never).
  double zap_sigma = 5;
  /// Subtract the mean over the kept channels from every time sample (Eatough et al. 2009).
  bool zero_dm = true;
  void validate(int nchans) const;
};

/// Why RFI cleaning zapped a channel: the user's mask; dead (sigma 0) or not finite (NaN or Inf
/// samples); an outlier of sigma among the channels.
enum ZapReason : std::uint8_t { kZapNone = 0, kZapMask = 1, kZapDead = 2, kZapOutlier = 3 };

/// Per-channel statistics of one gulp and the channels kept.
struct RfiReport {
  std::vector<float> median;       ///< per channel: tree_median of its samples
  std::vector<double> sigma;       ///< per channel: robust_rms about the median
  std::vector<std::uint8_t> keep;  ///< per channel: 1 = kept, 0 = zapped (mask, dead, outlier)
  /// per channel: why it was zapped (ZapReason), kZapNone when kept.
  std::vector<std::uint8_t> reason;
  int zapped_by_mask = 0, zapped_dead = 0, zapped_outlier = 0;
  int kept() const;
};

/// Cleans data[nsamples][nchans] in place: per channel, median m and robust sigma (robust_rms);
/// zaps masked channels, dead ones (sigma 0 or not finite) and outliers (RfiConfig::zap_sigma);
/// writes (x - m) / sigma for kept channels and 0 for zapped ones; then, with zero_dm, subtracts
/// from each time sample the mean of its kept channels (in double).
RfiReport clean_filterbank(float* data, std::int64_t nsamples, int nchans, const RfiConfig& config,
                           int threads = 0);

}  // namespace warpbeam::search
