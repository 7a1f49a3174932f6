#pragma once
// Benchmark helpers shared by `warpbeam bench ...`: timing, the JSON record every benchmark
// writes, and the names of DESIGN.md's reference configurations.

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace warpbeam::bench {

/// Median, min and max of repeated timings, in seconds.
struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int repeats = 0;
};

/// Runs `fn` `warmup` times, then `repeats` times, timing each with a host clock (fn must
/// finish its device work before returning); returns the statistics.
Timing time_host(const std::function<void()>& fn, int warmup, int repeats);

/// DESIGN.md's reference configuration names (D1, B1, B2, E1, E2, E3, U1, U2).
std::vector<std::string> reference_config_names();

}  // namespace warpbeam::bench
