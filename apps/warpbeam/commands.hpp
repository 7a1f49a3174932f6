#pragma once
// Every subcommand of the CLI registers itself through one of these functions (one file each).
// A subcommand reports errors by throwing warpbeam::Error; main() maps invalid_argument to exit
// code 2 (a usage error) and every other category to exit code 1.

#include <CLI/CLI.hpp>

#include "warpbeam/core.hpp"
#include "warpbeam/io/output_file.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace warpbeam::cli {

/// The folder of a command's products (`--out DIR`): made if missing — its parent must exist, so a
/// typo does not create a tree of folders — and removed again with whatever is in it when the
/// command fails before keep() (a failed run leaves no folder it made). Throws Error(io).
/// The folder holding `path` (a file, or a folder given with or without a trailing '/'): "" for
/// a bare name in the working folder.
inline std::filesystem::path parent_folder(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.parent_path();
}

class OutputFolder {
 public:
  explicit OutputFolder(const std::string& dir) : dir_(dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (dir_.empty())  // `--out ''`: a command line that cannot work (exit 2)
      throw Error(ErrorCategory::invalid_argument, "the output folder (--out) is empty");
    if (fs::is_directory(dir_, ec)) return;
    if (fs::exists(dir_, ec))
      throw Error(ErrorCategory::io,
                  "cannot use '" + dir_ + "' as the output folder: it is a file");
    // A link whose target is missing: never replaced, and named as what it is.
    if (fs::is_symlink(fs::symlink_status(dir_, ec)))
      throw Error(ErrorCategory::io,
                  "cannot use '" + dir_ + "' as the output folder: it is a symbolic link to '" +
                      fs::read_symlink(dir_, ec).string() + "', which does not exist");
    const fs::path parent = parent_folder(dir_);
    if (!parent.empty() && parent != fs::path(dir_).root_path() && !fs::is_directory(parent, ec))
      throw Error(ErrorCategory::io,
                  "cannot create '" + dir_ + "': '" + parent.string() +
                      (fs::exists(parent, ec) ? "' is a file, not a folder" : "' does not exist"));
    if (!fs::create_directory(dir_, ec) || ec)
      throw Error(ErrorCategory::io, "cannot create the folder '" + dir_ + "': " + ec.message());
    created_ = true;
  }
  ~OutputFolder() {
    std::error_code ec;
    if (created_ && !kept_) std::filesystem::remove_all(dir_, ec);
  }
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  void keep() { kept_ = true; }

 private:
  std::string dir_;
  bool created_ = false, kept_ = false;
};

/// A file of the shared data folder (e.g. "lwa/lwasv-ssmif.txt"): under $WARPBEAM_DATA when that
/// is set, else under ../shared/data (the folder beside the repository, as the README's
/// commands assume when run from the repository root); "" when neither holds it.
inline std::string default_data_file(const std::string& rel) {
  std::vector<std::string> roots;
  if (const char* d = std::getenv("WARPBEAM_DATA"); d && *d) roots.emplace_back(d);
  roots.emplace_back("../shared/data");
  for (const auto& root : roots) {
    const std::string p = root + "/" + rel;
    if (std::filesystem::is_regular_file(p)) return p;
  }
  return {};
}

// Each function adds its subcommand to `app`; `simulate ...` and `bench ...` subcommands add
// themselves under app.get_subcommand("simulate") / ("bench"), which main() creates first.
void add_info_command(CLI::App& app);
void add_bench_ceilings_command(CLI::App& app);
void add_simulate_voltages_command(CLI::App& app);
void add_beamform_command(CLI::App& app);
void add_beam_pattern_command(CLI::App& app);
void add_bench_beamform_command(CLI::App& app);
void add_das_command(CLI::App& app);
void add_simulate_ultrasound_command(CLI::App& app);
void add_bench_das_command(CLI::App& app);
void add_image_command(CLI::App& app);
void add_simulate_station_command(CLI::App& app);
void add_bench_epic_command(CLI::App& app);
void add_bench_dedisp_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_search_command(CLI::App& app);
void add_simulate_filterbank_command(CLI::App& app);
void add_demo_command(CLI::App& app);
/// `bench search --config D1 --backend cpu|cuda` (cmd_bench_search.cpp): the file search end to
/// end on a simulated D1 file with an injected burst.
void add_bench_search_command(CLI::App& app);
/// `bench search-scaling` (cmd_bench_search_scaling.cpp): the D1 search on one GPU and on all.
void add_bench_search_scaling_command(CLI::App& app);

/// `pipeline VOLTAGES --beams|--grid ... --out DIR` (cmd_pipeline.cpp): voltages -> beams ->
/// search.
void add_pipeline_command(CLI::App& app);
/// `bench pipeline --config B1 --backend cpu|cuda` (cmd_bench_pipeline.cpp).
void add_bench_pipeline_command(CLI::App& app);

/// `send tbf|voltages FILE ADDRESS` (cmd_send.cpp): test senders of live streams.
void add_send_command(CLI::App& app);
/// The capture options of `image --listen` and `pipeline --listen` (cmd_send.cpp):
/// --socket-buffer MIB (the receive socket's buffer) and --capture-core N (the core the capture
/// thread runs on alone).
void add_capture_options(CLI::App& cmd, int& socket_buffer_mib, int& capture_core);

/// Adds the CLI11 validator-free `--backend cpu|cuda|auto` option to `cmd`.
void add_backend_option(CLI::App& cmd, std::string& backend);

}  // namespace warpbeam::cli
