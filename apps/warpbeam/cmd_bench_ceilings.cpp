// `warpbeam bench ceilings`: the device's measured copy bandwidth and fp32 rates, the ceilings
// every benchmark's roofline fraction is computed against.
#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/bench.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

void add_bench_ceilings_command(CLI::App& app) {
  auto* bench = app.get_subcommand("bench");
  auto* cmd =
      bench->add_subcommand("ceilings", "Measure the device's copy bandwidth and fp32 rates");
  auto json = std::make_shared<std::string>();
  cmd->add_option("--json", *json, "Write the record as JSON to this file");
  cmd->callback([json] {
    io::check_outputs({*json});  // before the work: output_file.hpp's rule
    const auto c = bench::measure_device_ceilings();
    const std::string summary = fmt::format(
        "ceilings: copy {:.2f} TB/s, fp32 add {:.2f} T/s, fp32 FMA {:.2f} TFLOP/s",
        c.copy_bytes_per_s / 1e12, c.fp32_add_per_s / 1e12, c.fp32_fma_flop_per_s / 1e12);
    fmt::print("{}\n", summary);
    if (!json->empty()) {
      nlohmann::json j = {{"benchmark", "ceilings"},
                          {"summary", summary},
                          {"ceilings", bench::to_json(c)},
                          {"provenance", provenance()}};
      io::write_text_file(*json, j.dump(2) + "\n");
    }
  });
}

}  // namespace warpbeam::cli
