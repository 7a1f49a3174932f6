// Friends-of-friends clustering of peaks across sample, width and DM trial (after heimdall's
// label_candidate_clusters), and the conversion of clusters to candidates.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "warpbeam/format.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

namespace {

struct UnionFind {
  std::vector<std::size_t> parent;
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t i) {
    while (parent[i] != i)
      i = parent[i] = parent[parent[i]];
    return i;
  }
  void unite(std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

bool better(const Peak& a, const Peak& b) {
  if (a.snr != b.snr) return a.snr > b.snr;
  if (a.sample != b.sample) return a.sample < b.sample;
  if (a.dm_trial != b.dm_trial) return a.dm_trial < b.dm_trial;
  return a.filter < b.filter;
}

// Component label (the root index) of every peak.
std::vector<std::size_t> components(const std::vector<Peak>& p, const ClusterConfig& c) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return p[a].begin != p[b].begin ? p[a].begin < p[b].begin : a < b;
  });
  UnionFind uf(p.size());
  // Sorted by begin: the peaks whose span can come within time_tol of peak i's span (and begin
  // no earlier) are the ones that follow it while begin_j <= end_i + time_tol.
  for (std::size_t a = 0; a < order.size(); ++a) {
    const Peak& pi = p[order[a]];
    for (std::size_t b = a + 1; b < order.size(); ++b) {
      const Peak& pj = p[order[b]];
      if (pj.begin > pi.end + c.time_tol) break;
      if (std::abs(pi.dm_trial - pj.dm_trial) <= c.dm_tol &&
          std::abs(pi.filter - pj.filter) <= c.filter_tol)
        uf.unite(order[a], order[b]);
    }
  }
  std::vector<std::size_t> label(p.size());
  for (std::size_t i = 0; i < p.size(); ++i)
    label[i] = uf.find(i);
  return label;
}

void sort_clusters(std::vector<Cluster>& cl) {
  std::sort(cl.begin(), cl.end(),
            [](const Cluster& a, const Cluster& b) { return better(a.best, b.best); });
}

}  // namespace

void ClusterConfig::validate() const {
  require_range<std::int64_t>("cluster time_tol", time_tol, 0, std::int64_t{1} << 40);
  require_range("cluster filter_tol", filter_tol, 0, 64);
  require_range("cluster dm_tol", dm_tol, 0, 1 << 30);
}

std::vector<Cluster> cluster_peaks(const std::vector<Peak>& peaks, const ClusterConfig& config) {
  config.validate();
  const auto label = components(peaks, config);
  std::vector<Cluster> out;
  std::vector<std::size_t> index(peaks.size(), static_cast<std::size_t>(-1));
  for (std::size_t i = 0; i < peaks.size(); ++i) {
    std::size_t& k = index[label[i]];
    const Peak& p = peaks[i];
    if (k == static_cast<std::size_t>(-1)) {
      k = out.size();
      out.push_back({p, 1, p.begin, p.end});
      continue;
    }
    Cluster& c = out[k];
    if (better(p, c.best)) c.best = p;
    ++c.members;
    c.begin = std::min(c.begin, p.begin);
    c.end = std::max(c.end, p.end);
  }
  sort_clusters(out);
  return out;
}

Clusterer::Clusterer(ClusterConfig config) : config_(config) {
  config_.validate();
}

void Clusterer::add(const std::vector<Peak>& peaks) {
  peaks_.insert(peaks_.end(), peaks.begin(), peaks.end());
}

std::vector<Cluster> Clusterer::take_final(std::int64_t horizon) {
  const auto label = components(peaks_, config_);
  // A component is final when every member ends more than time_tol before the horizon.
  std::vector<std::int64_t> reach(peaks_.size(), std::numeric_limits<std::int64_t>::min());
  for (std::size_t i = 0; i < peaks_.size(); ++i)
    reach[label[i]] = std::max(reach[label[i]], peaks_[i].end);
  std::vector<Peak> done, keep;
  for (std::size_t i = 0; i < peaks_.size(); ++i)
    (reach[label[i]] + config_.time_tol < horizon ? done : keep).push_back(peaks_[i]);
  peaks_ = std::move(keep);
  return cluster_peaks(done, config_);
}

std::vector<Cluster> Clusterer::finish() {
  auto out = cluster_peaks(peaks_, config_);
  peaks_.clear();
  return out;
}

Candidate to_candidate(const Cluster& c, const std::vector<float>& dms, double tsamp_s,
                       std::int32_t beam) {
  Candidate k;
  const Peak& p = c.best;
  k.snr = p.snr;
  k.sample = p.sample;
  const std::int64_t w = p.width();
  k.time_s = (static_cast<double>(p.sample - w / 2) + 0.5 * static_cast<double>(w)) * tsamp_s;
  k.filter = p.filter;
  k.dm_trial = p.dm_trial;
  if (p.dm_trial < 0 || static_cast<std::size_t>(p.dm_trial) >= dms.size())
    fail(ErrorCategory::invalid_argument, "dm_trial {} outside the DM list of {} trials",
         p.dm_trial, dms.size());
  k.dm = dms[static_cast<std::size_t>(p.dm_trial)];
  k.members = c.members;
  k.begin = c.begin;
  k.end = c.end;
  k.beam = beam;
  return k;
}

}  // namespace warpbeam::search
