// RFI cleaning of a filterbank gulp: per-channel robust statistics, zapping of masked, dead and
// outlier channels, normalisation to unit sigma, zero-DM subtraction (Eatough, Keane & Lyne
// 2009, MNRAS 395, 410).
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string_view>
#include <utility>
#include <vector>

#include "search/rfi_rules.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

namespace {
constexpr int kChannelBlock = 16;  // channels gathered per pass (one cache line of a row)
}

namespace detail {

void decide_channels(RfiReport& r, const RfiConfig& config) {
  // Zap: the user's mask, dead channels, then outliers of sigma among the rest.
  const int nchans = static_cast<int>(r.median.size());
  r.keep.assign(r.median.size(), 1);
  r.reason.assign(r.median.size(), kZapNone);
  r.zapped_by_mask = r.zapped_dead = r.zapped_outlier = 0;
  for (int c = 0; c < nchans; ++c) {
    if (config.zap.contains(c)) {
      r.keep[c] = 0;
      r.reason[c] = kZapMask;
      ++r.zapped_by_mask;
    } else if (!(r.sigma[c] > 0) || !std::isfinite(r.sigma[c]) || !std::isfinite(r.median[c])) {
      r.keep[c] = 0;
      r.reason[c] = kZapDead;
      ++r.zapped_dead;
    }
  }
  if (config.zap_sigma > 0) {
    std::vector<double> s;
    for (int c = 0; c < nchans; ++c)
      if (r.keep[c]) s.push_back(r.sigma[c]);
    if (s.size() >= 3) {
      auto lower_median_d = [](std::vector<double> v) {
        auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
        std::nth_element(v.begin(), mid, v.end());
        return *mid;
      };
      const double med = lower_median_d(s);
      for (auto& x : s)
        x = std::abs(x - med);
      const double mad = lower_median_d(s);
      const double limit = config.zap_sigma * std::max(kMadToSigma * mad, 0.01 * med);
      for (int c = 0; c < nchans; ++c)
        if (r.keep[c] && std::abs(r.sigma[c] - med) > limit) {
          r.keep[c] = 0;
          r.reason[c] = kZapOutlier;
          ++r.zapped_outlier;
        }
    }
  }
}

}  // namespace detail

ChannelMask::ChannelMask(std::vector<int> channels) : channels_(std::move(channels)) {
  std::sort(channels_.begin(), channels_.end());
  channels_.erase(std::unique(channels_.begin(), channels_.end()), channels_.end());
  if (!channels_.empty() && channels_.front() < 0)
    fail(ErrorCategory::invalid_argument, "zap: channel {} is negative", channels_.front());
}

ChannelMask ChannelMask::parse(const std::string& spec) {
  // from_chars, not sscanf: an out-of-range number is an error, not undefined behaviour.
  const auto number = [](std::string_view t, long& v) {
    while (!t.empty() && t.front() == ' ')
      t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ')
      t.remove_suffix(1);
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size();
  };
  std::vector<std::pair<long, long>> ranges;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (spec.empty()) break;
      fail(ErrorCategory::invalid_argument, "channel list '{}': empty item", spec);
    }
    long a = 0, b = 0;
    const std::size_t dash = item.find('-', 1);
    const bool ok = dash == std::string::npos
                        ? number(item, a) && number(item, b)
                        : number(std::string_view(item).substr(0, dash), a) &&
                              number(std::string_view(item).substr(dash + 1), b);
    if (!ok)
      fail(ErrorCategory::invalid_argument,
           "channel list: '{}' is not a channel or a range such as 10-20", item);
    if (a < 0 || b < a || b > (1 << 24))
      fail(ErrorCategory::invalid_argument, "channel list: '{}' is not a valid channel range",
           item);
    ranges.emplace_back(a, b);
  }
  // Overlapping ranges merged before they are expanded: the list holds each channel once, at
  // most 2^24 + 1 of them (twenty "0-16777216" took 2.3 GB when expanded one by one).
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<long, long>> merged;
  for (const auto& r : ranges)
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  // The merged ranges are ascending and disjoint, so the list is already sorted, unique and
  // non-negative: it is filled in place, not re-sorted by the constructor (sorting 2^24 channels
  // again took 5.4 s under ASan: ReaderLimits.ChannelListsMergeRangesBeforeExpanding).
  std::size_t n = 0;
  for (const auto& [a, b] : merged)
    n += static_cast<std::size_t>(b - a + 1);
  ChannelMask mask;
  mask.channels_.resize(n);
  auto it = mask.channels_.begin();
  for (const auto& [a, b] : merged) {
    std::iota(it, it + (b - a + 1), static_cast<int>(a));
    it += b - a + 1;
  }
  return mask;
}

bool ChannelMask::contains(int channel) const {
  return std::binary_search(channels_.begin(), channels_.end(), channel);
}

void ChannelMask::validate(int nchans) const {
  if (!channels_.empty() && channels_.back() >= nchans)
    fail(ErrorCategory::invalid_argument, "zap: channel {} is outside 0-{}", channels_.back(),
         nchans - 1);
}

std::vector<std::uint8_t> ChannelMask::use_flags(int nchans) const {
  std::vector<std::uint8_t> f(static_cast<std::size_t>(std::max(nchans, 0)), 1);
  for (int c : channels_)
    if (c < nchans) f[static_cast<std::size_t>(c)] = 0;
  return f;
}

void RfiConfig::validate(int nchans) const {
  zap.validate(nchans);
  if (!(zap_sigma >= 0) || !std::isfinite(zap_sigma))
    fail(ErrorCategory::invalid_argument, "zap_sigma = {} must be >= 0", zap_sigma);
}

Workspace clean_filterbank_workspace(std::int64_t nsamples, int threads) {
  const std::int64_t n = threads > 0 ? threads : omp_get_max_threads();
  return {n * (kChannelBlock + 1) * nsamples * static_cast<std::int64_t>(sizeof(float)), 0};
}

int RfiReport::kept() const {
  return static_cast<int>(std::count(keep.begin(), keep.end(), 1));
}

RfiReport clean_filterbank(float* data, std::int64_t nsamples, int nchans, const RfiConfig& config,
                           int threads) {
  config.validate(nchans);
  if (nsamples <= 0) fail(ErrorCategory::invalid_argument, "RFI cleaning of an empty gulp");
  const int nthreads = threads > 0 ? threads : omp_get_max_threads();
  RfiReport r;
  r.median.assign(static_cast<std::size_t>(nchans), 0.f);
  r.sigma.assign(static_cast<std::size_t>(nchans), 0.0);
  r.keep.assign(static_cast<std::size_t>(nchans), 1);

  // Per-channel median and robust sigma, gathering blocks of channels column-wise.
  const int nblocks = (nchans + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel num_threads(nthreads)
  {
    std::vector<float> cols(static_cast<std::size_t>(kChannelBlock * nsamples));
    std::vector<float> work(static_cast<std::size_t>(nsamples));
#pragma omp for schedule(dynamic)
    for (int b = 0; b < nblocks; ++b) {
      const int c0 = b * kChannelBlock, nc = std::min(kChannelBlock, nchans - c0);
      for (std::int64_t t = 0; t < nsamples; ++t)
        for (int k = 0; k < nc; ++k)
          cols[k * nsamples + t] = data[t * nchans + c0 + k];
      for (int k = 0; k < nc; ++k) {
        const float* col = cols.data() + k * nsamples;
        const float m = tree_median(col, nsamples, work.data());
        r.median[c0 + k] = m;
        r.sigma[c0 + k] = robust_rms(col, nsamples, m, work.data());
      }
    }
  }

  detail::decide_channels(r, config);

  // Normalise kept channels to zero median and unit sigma; zero the zapped ones; zero-DM.
  std::vector<float> scale(static_cast<std::size_t>(nchans), 0.f);
  for (int c = 0; c < nchans; ++c)
    if (r.keep[c]) scale[c] = static_cast<float>(1.0 / r.sigma[c]);
  const int kept = r.kept();
#pragma omp parallel for schedule(static) num_threads(nthreads)
  for (std::int64_t t = 0; t < nsamples; ++t) {
    float* row = data + t * nchans;
    double sum = 0;
    for (int c = 0; c < nchans; ++c) {
      const float v = r.keep[c] ? (row[c] - r.median[c]) * scale[c] : 0.f;
      row[c] = v;
      sum += v;
    }
    if (config.zero_dm && kept > 0) {
      const auto mean = static_cast<float>(sum / kept);
      for (int c = 0; c < nchans; ++c)
        if (r.keep[c]) row[c] -= mean;
    }
  }
  return r;
}

}  // namespace warpbeam::search
