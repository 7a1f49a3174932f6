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

/// Ceilings of the current device, measured (not from a datasheet), for roofline fractions.
struct DeviceCeilings {
  double copy_bytes_per_s = 0;     ///< device-to-device copy, bytes read + written per second
  double fp32_add_per_s = 0;       ///< independent fp32 adds per second (FADD throughput)
  double fp32_fma_flop_per_s = 0;  ///< fp32 FMA throughput in flop/s (2 per FMA)
};
/// Measures the ceilings on device 0 (~0.5 s). Throws unsupported without CUDA.
DeviceCeilings measure_device_ceilings();
/// JSON form of the ceilings.
nlohmann::json to_json(const DeviceCeilings& c);

/// DESIGN.md's reference configuration names (D1, B1, B2, E1, E2, E3, U1, U2).
std::vector<std::string> reference_config_names();

}  // namespace warpbeam::bench
