#pragma once
// RFI cleaning of a filterbank gulp before dedispersion (host code shared by both backends).

#include <cstdint>
#include <string>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/search/stats.hpp"

namespace warpbeam::search {

/// The channels a search leaves out: the user's mask (`warpbeam search --zap-chans`), one type
/// from the command line to the kernels. It holds the masked channel indices, sorted and
/// unique; the kernels' per-channel flags come from use_flags(), in the one polarity every
/// per-channel flag of the search has (1 = use, 0 = zapped: RfiReport::keep, the dedispersion
/// killmask).
class ChannelMask {
 public:
  ChannelMask() = default;
  /// The channels `channels` (any order; repeats are merged). Throws invalid_argument for a
  /// negative channel.
  explicit ChannelMask(std::vector<int> channels);
  /// Parses a channel list such as "0-10,200,300-310" (inclusive ranges, any order; "" is the
  /// empty mask). Throws invalid_argument naming the bad item.
  static ChannelMask parse(const std::string& spec);

  /// The masked channels, ascending.
  const std::vector<int>& channels() const { return channels_; }
  bool empty() const { return channels_.empty(); }
  bool contains(int channel) const;
  /// Throws invalid_argument when a channel is not below nchans.
  void validate(int nchans) const;
  /// nchans flags: 1 = use, 0 = masked.
  std::vector<std::uint8_t> use_flags(int nchans) const;
  bool operator==(const ChannelMask&) const = default;

 private:
  std::vector<int> channels_;
};

struct RfiConfig {
  /// Channels to ignore (the user's mask): zapped in every gulp, whatever their statistics.
  ChannelMask zap;
  /// A channel whose robust sigma differs from the median over channels by more than
  /// zap_sigma * max(kMadToSigma * MAD over channels, 0.01 * median) is zapped (0: never).
  double zap_sigma = 5;
  /// Subtract the mean over the kept channels from every time sample (Eatough et al. 2009).
  bool zero_dm = true;
  /// Throws invalid_argument naming the field (zap, zap_sigma).
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

/// The scratch clean_filterbank() allocates for a gulp of `nsamples` on `threads` threads (0:
/// OpenMP's default): per thread, 16 channel columns and a work row of nsamples floats.
Workspace clean_filterbank_workspace(std::int64_t nsamples, int threads = 0);

}  // namespace warpbeam::search
