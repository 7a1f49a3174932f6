// `warpbeam plot CAND.h5 [--out PNG]`: redraws the diagnostic plot of a candidate file (one
// written by `warpbeam search --candidates-dir`, or by your_candmaker) with PLplot.
#include <filesystem>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/candidate_cutout.hpp"
#include "warpbeam/io/output_file.hpp"

namespace warpbeam::cli {

namespace {

void run_plot(const std::string& in, std::string out) {
  if (out.empty()) out = (std::filesystem::path(in).replace_extension(".png")).string();
  if (std::filesystem::path(out).extension() != ".png")
    fail(ErrorCategory::invalid_argument, "--out {}: the plot is a PNG (name it .png)", out);
  if (!io::candidate_plot_supported())
    fail(ErrorCategory::unsupported,
         "this build has no PLplot with its pngcairo driver: `warpbeam plot` draws nothing");
  io::check_outputs({out}, {in});  // before the work (io/output_file.hpp)
  const io::CandidateCutout c = io::read_candidate_h5(in);
  io::write_candidate_png(out, c);
  fmt::print("{} -> {}\n", in, out);
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "plot", "Draw a candidate file's diagnostic plot (profile, waterfall, DM-time) as a PNG");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("CAND", *in, "Candidate HDF5 file (warpbeam search --candidates-dir, your)")
      ->required();
  cmd->add_option("--out", *out, "The PNG (default: CAND with .png)");
  cmd->callback([in, out] { run_plot(*in, *out); });
}

}  // namespace warpbeam::cli
