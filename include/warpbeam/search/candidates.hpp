#pragma once
// Candidates of the single-pulse search (what io/candidates.hpp writes).

#include <cstdint>
#include <vector>

#include "warpbeam/search/cluster.hpp"

namespace warpbeam::search {

/// One candidate, as heimdall's .cand columns (io/candidates.hpp writes them).
struct Candidate {
  float snr = 0;
  std::int64_t sample = 0;    ///< centre sample of the best boxcar, from the file start
  double time_s = 0;          ///< arrival time at the top of the band of the boxcar's centre (s)
  std::int32_t filter = 0;    ///< log2 of the boxcar width
  std::int32_t dm_trial = 0;  ///< index in the DM list
  float dm = 0;               ///< pc cm^-3
  std::int64_t members = 0;   ///< peaks in the cluster
  std::int64_t begin = 0;     ///< first sample of the cluster
  std::int64_t end = 0;       ///< last sample of the cluster (inclusive)
  std::int32_t beam = 0;      ///< beam index (multi-beam searches; 0 for a single filterbank)
  std::int32_t width() const { return std::int32_t{1} << filter; }
};

/// Converts a cluster to a candidate: dm from the DM list; time_s = (sample - w/2 + w/2.0) *
/// tsamp (the centre of the boxcar window; samples start at their integration's start).
Candidate to_candidate(const Cluster& c, const std::vector<float>& dms, double tsamp_s,
                       std::int32_t beam = 0);

}  // namespace warpbeam::search
