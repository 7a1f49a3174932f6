// warpbeam: the command-line interface. Each subcommand lives in its own cmd_*.cpp file.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace {

// Under mpirun every rank parses the same command line: rank 0 alone reports a usage error.
int usage_error(const std::string& msg) {
  if (warpbeam::launcher_rank() != 0) return 2;
  fmt::print(stderr, "warpbeam: error: {}\n", msg);
  fmt::print(stderr, "Run with --help for more information.\n");
  return 2;
}

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// A word where a subcommand of `app` belongs that names none: "" when `word` is one (or an
// option), else the error naming it and the nearest command. CLI11 said "A subcommand is
// required" for a mistyped one.
std::string unknown_subcommand(CLI::App& app, const std::string& word) {
  if (word.empty() || word[0] == '-') return "";
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return "";
  std::string best;
  std::size_t best_d = 3;  // suggest only close names
  for (const auto& n : names)
    if (const std::size_t d = edit_distance(word, n); d < best_d) best = n, best_d = d;
  std::string path = app.get_parent() ? app.get_name() + " " : "";
  return fmt::format("'{}{}' is not a warpbeam command{} (commands: {})", path, word,
                     best.empty() ? "" : fmt::format("; did you mean '{}{}'?", path, best),
                     fmt::join(names, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  warpbeam::set_command_line(argc, argv);
  warpbeam::io::remove_temps_on_signals();  // an interrupted command leaves no *.tmp.PID
  CLI::App app{"warpbeam: real-time signal processing for radio astronomy and ultrasound"};
  app.set_version_flag(
      "--version", fmt::format("warpbeam {} ({})", warpbeam::version(), warpbeam::git_commit()));
  app.require_subcommand(1);

  CLI::App* simulate = app.add_subcommand("simulate", "Make realistic test inputs");
  simulate->require_subcommand(1);
  CLI::App* bench = app.add_subcommand("bench", "Benchmark an engine on a reference configuration");
  bench->require_subcommand(1);

  using namespace warpbeam::cli;
  add_info_command(app);
  add_bench_ceilings_command(app);
  add_simulate_voltages_command(app);
  add_beamform_command(app);
  add_beam_pattern_command(app);
  add_bench_beamform_command(app);
  add_das_command(app);
  add_simulate_ultrasound_command(app);
  add_bench_das_command(app);
  add_image_command(app);
  add_simulate_station_command(app);
  add_bench_epic_command(app);
  add_bench_dedisp_command(app);
  add_search_command(app);
  add_plot_command(app);
  add_simulate_filterbank_command(app);
  add_demo_command(app);
  add_bench_search_command(app);
  add_bench_search_scaling_command(app);
  add_pipeline_command(app);
  add_bench_pipeline_command(app);
  add_send_command(app);

  // A mistyped command is named (also under simulate and bench).
  if (argc > 1) {
    std::string msg = unknown_subcommand(app, argv[1]);
    if (msg.empty() && argc > 2 &&
        (std::string(argv[1]) == "simulate" || std::string(argv[1]) == "bench"))
      msg = unknown_subcommand(*app.get_subcommand(argv[1]), argv[2]);
    if (!msg.empty()) return usage_error(msg);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  } catch (const warpbeam::Error& e) {
    fmt::print(stderr, "warpbeam: error: {}\n", e.what());
    return e.category() == warpbeam::ErrorCategory::invalid_argument ? 2 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "warpbeam: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
