#pragma once
// Internal: the channel-zapping rules of clean_filterbank(), shared by the CPU (rfi.cpp) and the
// GPU RFI stage (cuda_search.cpp), which measures the statistics on the device.
#include "warpbeam/search.hpp"

namespace warpbeam::search::detail {

/// From r.median and r.sigma (nchans entries each, already measured), fills r.keep and the zap
/// counters: the user's mask, dead channels (sigma 0 or not finite, or median not finite), then
/// outliers of sigma among the rest (RfiConfig::zap_sigma).
void decide_channels(RfiReport& r, const RfiConfig& config);

}  // namespace warpbeam::search::detail
