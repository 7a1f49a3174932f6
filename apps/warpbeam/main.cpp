// warpbeam: the command-line interface. Each subcommand lives in its own cmd_*.cpp file.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

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
