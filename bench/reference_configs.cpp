// Reference configurations of DESIGN.md and the timing helpers of `warpbeam bench`.
#include <algorithm>
#include <chrono>

#include "bench/bench.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::bench {

Timing time_host(const std::function<void()>& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i)
    fn();
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(std::max(repeats, 1)));
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back(), static_cast<int>(t.size())};
}

std::vector<std::string> reference_config_names() {
  return {"D1", "B1", "B2", "E1", "E2", "E3", "U1", "U2"};
}

}  // namespace warpbeam::bench

namespace warpbeam::bench {

nlohmann::json to_json(const DeviceCeilings& c) {
  return {{"copy_bytes_per_s", c.copy_bytes_per_s},
          {"fp32_add_per_s", c.fp32_add_per_s},
          {"fp32_fma_flop_per_s", c.fp32_fma_flop_per_s}};
}

#ifndef WARPBEAM_HAVE_CUDA
DeviceCeilings measure_device_ceilings() {
  fail(ErrorCategory::unsupported, "device ceilings need the CUDA backend");
}
#endif

}  // namespace warpbeam::bench
