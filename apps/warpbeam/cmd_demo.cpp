// `warpbeam demo`: the main job on an embedded default. Simulates ~10 s of filterbank data with
// one dispersed burst, searches it with the default parameters and prints the injected burst
// against the recovered one. Exits 1 if the burst is not recovered.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "commands.hpp"
#include "search_report.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/sim/filterbank.hpp"

namespace warpbeam::cli {

namespace {

void run_demo(const std::string& keep_dir, std::uint64_t seed, const std::string& backend) {
  sim::FilterbankSimConfig sc;
  sc.nchans = 256;
  sc.fch1_mhz = 1500;
  sc.foff_mhz = -1;
  sc.tsamp_s = 256e-6;
  sc.nbits = 8;
  sc.duration_s = 10;
  sc.seed = seed;
  const sim::Burst burst{350, 25, 2e-3, 3.2};
  sc.bursts = {burst};

  namespace fs = std::filesystem;
  const fs::path dir = keep_dir.empty()
                           ? fs::temp_directory_path() / fmt::format("warpbeam-demo-{}", ::getpid())
                           : fs::path(keep_dir);
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    bool on;
    ~Cleanup() {
      std::error_code ec;
      if (on) fs::remove_all(dir, ec);
    }
  } cleanup{dir, keep_dir.empty()};
  const std::string fil = (dir / "demo.fil").string();

  fmt::print(
      "warpbeam demo: simulating {} s, {} channels {:.1f}-{:.1f} MHz, tsamp {} us, {} bits "
      "(seed {})\n",
      sc.duration_s, sc.nchans, sc.fch1_mhz + (sc.nchans - 1) * sc.foff_mhz, sc.fch1_mhz,
      sc.tsamp_s * 1e6, sc.nbits, seed);
  sim::simulate_filterbank(sc, fil);

  search::FileSearchConfig cfg;  // the defaults of `warpbeam search`
  fmt::print("searching {} (DM {}-{}, S/N >= {})\n", fil, cfg.dm_min, cfg.dm_max, cfg.snr_min);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = search::search_filterbank(fil, cfg, search::RunOptions{}, parse_backend(backend));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(
      "searched {} DM trials x {} samples, boxcars 1-{}, in {:.2f} s ({}): {} "
      "candidate(s)\n\n",
      r.dms.size(), r.nsamples_searched, r.widest_boxcar, secs, r.backend, r.candidates.size());

  if (r.candidates.empty()) fail(ErrorCategory::io, "demo: the burst was not recovered");
  const auto& c = r.candidates.front();
  fmt::print("{:<12} {:>12} {:>12}\n", "", "injected", "recovered");
  fmt::print("{:<12} {:>12.2f} {:>12.2f}\n", "DM", burst.dm, c.dm);
  fmt::print("{:<12} {:>12.4f} {:>12.4f}\n", "time (s)", burst.time_s, c.time_s);
  fmt::print("{:<12} {:>12.3f} {:>12.3f}  (FWHM vs boxcar of {} samples)\n", "width (ms)",
             burst.width_s * 1e3, c.width() * sc.tsamp_s * 1e3, c.width());
  fmt::print("{:<12} {:>12.1f} {:>12.1f}\n\n", "S/N", burst.snr, c.snr);
  print_candidates(r.candidates, sc.tsamp_s, 5);
  const bool ok = std::abs(c.dm - burst.dm) < 0.05 * burst.dm &&
                  std::abs(c.time_s - burst.time_s) < 2 * burst.width_s;
  fmt::print("\n{}\n", ok ? "recovered: the top candidate is the injected burst"
                          : "NOT recovered: the top candidate is not the injected burst");
  if (!ok) fail(ErrorCategory::io, "demo: the burst was not recovered");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "demo", "Simulate ~10 s with one dispersed burst, search it, print injected vs recovered");
  auto keep = std::make_shared<std::string>();
  auto seed = std::make_shared<std::uint64_t>(42);
  auto backend = std::make_shared<std::string>("cpu");
  cmd->add_option("--keep", *keep, "Keep the simulated file in this folder");
  cmd->add_option("--seed", *seed, "Random seed of the simulation")->capture_default_str();
  add_backend_option(*cmd, *backend);
  cmd->callback([=] { run_demo(*keep, *seed, *backend); });
}

}  // namespace warpbeam::cli
