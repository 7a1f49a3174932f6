// RFI cleaning of a filterbank gulp: per-channel robust statistics, zapping of masked, dead and
// outlier channels, normalisation to unit sigma, zero-DM subtraction (Eatough, Keane & Lyne
// 2009, MNRAS 395, 410).
#include <omp.h>

#include <algorithm>
#include <cmath>
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
    if (!config.zap.empty() && config.zap[c]) {
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

void RfiConfig::validate(int nchans) const {
  if (!zap.empty() && static_cast<int>(zap.size()) != nchans)
    fail(ErrorCategory::invalid_argument, "the channel mask has {} entries for {} channels",
         zap.size(), nchans);
  if (!(zap_sigma >= 0) || !std::isfinite(zap_sigma))
    fail(ErrorCategory::invalid_argument, "zap_sigma = {} must be >= 0", zap_sigma);
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
