// The device list, the workers of a process and the split of a search over workers (see
// warpbeam/dist/work.hpp).
#include "warpbeam/dist/work.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dist {

std::vector<int> parse_gpu_list(const std::string& spec) {
  if (spec.empty())
    fail(ErrorCategory::invalid_argument, "--gpus is empty: give device numbers such as 0,1");
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    int v = 0;
    char extra = 0;
    if (item.empty() || std::sscanf(item.c_str(), "%d%c", &v, &extra) != 1 || v < 0 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      fail(ErrorCategory::invalid_argument,
           "--gpus '{}': '{}' is not a device number (a list such as 0,1,2)", spec, item);
    out.push_back(v);
  }
  return out;
}

std::vector<int> local_devices(Backend backend, const std::vector<int>& gpus, const Comm& comm) {
  if (backend == Backend::automatic)
    fail(ErrorCategory::invalid_argument, "local_devices needs a resolved backend");
  if (backend == Backend::cpu) {
    if (!gpus.empty())
      fail(ErrorCategory::invalid_argument,
           "--gpus needs the CUDA backend (--backend cuda, or auto on a machine with a GPU)");
    return {-1};
  }
  const int visible = device_count();
  if (visible < 1)
    fail(ErrorCategory::unsupported, "the CUDA backend needs a device; none is visible");
  for (int g : gpus)
    if (g >= visible)
      fail(ErrorCategory::invalid_argument, "--gpus: device {} is not visible ({} device{}: 0-{})",
           g, visible, visible == 1 ? "" : "s", visible - 1);
  std::vector<int> all = gpus;
  if (all.empty()) {
    all.resize(static_cast<std::size_t>(visible));
    std::iota(all.begin(), all.end(), 0);
  }
  if (comm.size() == 1) return all;
  return {all[static_cast<std::size_t>(comm.local_rank()) % all.size()]};
}

std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, int parts, int k) {
  if (parts < 1 || k < 0 || k >= parts || n < 0)
    fail(ErrorCategory::invalid_argument, "split_range({}, {}, {})", n, parts, k);
  const std::int64_t base = n / parts, extra = n % parts;
  const std::int64_t begin = k * base + std::min<std::int64_t>(k, extra);
  return {begin, begin + base + (k < extra ? 1 : 0)};
}

std::vector<std::vector<SearchTask>> partition_search(const std::vector<std::int64_t>& ndm,
                                                      const std::vector<double>& cost, int workers,
                                                      const std::vector<std::int64_t>& ngulps) {
  const auto nfiles = static_cast<int>(ndm.size());
  if (workers < 1) fail(ErrorCategory::invalid_argument, "{} workers: need at least one", workers);
  if (cost.size() != ndm.size() || nfiles < 1)
    fail(ErrorCategory::invalid_argument, "partition of {} files with {} costs", ndm.size(),
         cost.size());
  if (!ngulps.empty() && ngulps.size() != ndm.size())
    fail(ErrorCategory::invalid_argument, "partition of {} files with {} gulp counts", ndm.size(),
         ngulps.size());
  for (int f = 0; f < nfiles; ++f)
    if (ndm[f] < 1 || !(cost[f] > 0))
      fail(ErrorCategory::invalid_argument, "file {}: {} DM trials, cost {}", f, ndm[f], cost[f]);
  std::vector<std::vector<SearchTask>> out(static_cast<std::size_t>(workers));

  if (workers <= nfiles) {
    // Longest processing time first: a greedy split within 4/3 of the best.
    std::vector<int> order(static_cast<std::size_t>(nfiles));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cost[a] > cost[b]; });
    std::vector<double> load(static_cast<std::size_t>(workers), 0.0);
    for (int f : order) {
      const auto w =
          static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      load[w] += cost[f];
      out[w].push_back({f, 0, ndm[f], true});
    }
    for (auto& tasks : out)
      std::sort(tasks.begin(), tasks.end(),
                [](const SearchTask& a, const SearchTask& b) { return a.file < b.file; });
    return out;
  }

  // More workers than files: each file gets a group of workers that share its gulps or DM
  // trials.
  std::vector<int> group(static_cast<std::size_t>(nfiles), 1);
  for (int extra = workers - nfiles; extra > 0; --extra) {
    int best = 0;
    for (int f = 1; f < nfiles; ++f)
      if (cost[f] / group[f] > cost[best] / group[best]) best = f;
    ++group[static_cast<std::size_t>(best)];
  }
  int w = 0;
  for (int f = 0; f < nfiles; ++f) {
    const int k = group[static_cast<std::size_t>(f)];
    if (k > 1 && !ngulps.empty() && ngulps[static_cast<std::size_t>(f)] >= k) {
      // In time: each worker reads, cleans and searches only its gulps.
      for (int s = 0; s < k; ++s) {
        const auto [b, e] = split_range(ngulps[static_cast<std::size_t>(f)], k, s);
        out[static_cast<std::size_t>(w + s)].push_back({f, 0, ndm[f], false, b, e});
      }
      w += k;
      continue;
    }
    const int slices = static_cast<int>(std::min<std::int64_t>(k, ndm[f]));
    for (int s = 0; s < slices; ++s) {
      const auto [b, e] = split_range(ndm[f], slices, s);
      out[static_cast<std::size_t>(w + s)].push_back({f, b, e, slices == 1});
    }
    w += k;
  }
  return out;
}

}  // namespace warpbeam::dist
