#pragma once
// Clustering of the peaks of the single-pulse search into candidates: friends-of-friends
// across sample, width and DM trial, as heimdall.

#include <cstdint>
#include <vector>

#include "warpbeam/search/stages.hpp"

namespace warpbeam::search {

/// Two peaks are friends when |dm_trial_i - dm_trial_j| <= dm_tol, |filter_i - filter_j| <=
/// filter_tol and the gap between their sample spans [begin, end] is at most time_tol samples
/// (begin_j <= end_i + time_tol and begin_i <= end_j + time_tol); clusters are the connected
/// components (so the result does not depend on the order of the peaks). heimdall's defaults: 3
/// samples, 3 filters, 200 DM trials (heimdall compares best samples; warpbeam compares spans,
/// which also links a wide boxcar to the narrow ones inside it).
struct ClusterConfig {
  std::int64_t time_tol = 3;
  std::int32_t filter_tol = 3;
  std::int32_t dm_tol = 200;
  void validate() const;
};

/// A cluster: its best peak (largest S/N; ties: smallest sample, dm_trial, filter), the number
/// of peaks, and the union of their spans.
struct Cluster {
  Peak best;
  std::int64_t members = 0;
  std::int64_t begin = 0, end = 0;
};

/// Clusters a set of peaks; the result is sorted by best S/N (descending), then sample.
std::vector<Cluster> cluster_peaks(const std::vector<Peak>& peaks, const ClusterConfig& config);

/// Incremental clustering for streaming: peaks arrive gulp by gulp; a cluster is final once no
/// peak to come can reach it.
class Clusterer {
 public:
  explicit Clusterer(ClusterConfig config);
  void add(const std::vector<Peak>& peaks);
  /// Returns (and forgets) the clusters that no future peak can join, given that every future
  /// peak has begin >= `horizon`.
  std::vector<Cluster> take_final(std::int64_t horizon);
  /// Returns every remaining cluster.
  std::vector<Cluster> finish();
  std::size_t pending() const { return peaks_.size(); }

 private:
  ClusterConfig config_;
  std::vector<Peak> peaks_;
};

}  // namespace warpbeam::search
