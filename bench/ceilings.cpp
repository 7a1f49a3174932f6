// `warpbeam bench ceilings`: the device's measured copy bandwidth and fp32 rates, the ceilings
// every benchmark's roofline fraction is computed against (measured by ceilings.cu).
#include <fmt/format.h>

#include "bench/bench.hpp"
#include "bench/drivers.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::bench {

void bench_ceilings(const std::string& json_path) {
  const auto c = measure_device_ceilings();
  const std::string summary =
      fmt::format("ceilings: copy {:.2f} TB/s, fp32 add {:.2f} T/s, fp32 FMA {:.2f} TFLOP/s",
                  c.copy_bytes_per_s / 1e12, c.fp32_add_per_s / 1e12, c.fp32_fma_flop_per_s / 1e12);
  fmt::print("{}\n", summary);
  if (!json_path.empty()) {
    nlohmann::json j = {{"benchmark", "ceilings"},
                        {"summary", summary},
                        {"ceilings", to_json(c)},
                        {"provenance", provenance()}};
    io::write_text_file(json_path, j.dump(2) + "\n");
  }
}

}  // namespace warpbeam::bench
