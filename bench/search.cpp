// `warpbeam bench search --config D1 [--backend cpu|cuda|auto] [--nsamples N] [--json FILE]`:
// the whole file search end to end (read, RFI, dedispersion, search, clustering) on a D1-shaped
// file (DESIGN.md: 1024 channels, 64 us, 8-bit, 2^20 samples, DM 0-1000) with an injected burst,
// simulated into the temp folder first (so it is read from the page cache). Reports seconds,
// the real-time factor, the bytes copied to and from the GPU, the stage times, and whether the
// burst came out on top (exit 1 if not).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "bench/dedisp.hpp"
#include "bench/drivers.hpp"
#include "commands.hpp"
#include "search_report.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/sim/filterbank.hpp"

namespace warpbeam::bench {

namespace {

using json = nlohmann::json;

// The injected burst: bright enough to be the top candidate of any run, inside any length the
// benchmark allows (--nsamples >= 2^17 samples = 8.4 s).
constexpr sim::Burst kBurst{500, 25, 2e-3, 2.0};
constexpr std::uint64_t kSeed = 20261130;

}  // namespace

void bench_search(const SearchBenchOptions& o) {
  const DedispBenchSetup d1 = dedisp_bench_setup(o.config);
  const Backend backend = resolve_backend(parse_backend(o.backend));
  sim::FilterbankSimConfig sc;
  sc.nchans = d1.config.nchans;
  sc.fch1_mhz = d1.config.fch1_mhz;
  sc.foff_mhz = d1.config.foff_mhz;
  sc.tsamp_s = d1.config.tsamp_s;
  sc.nbits = d1.config.nbits;
  const std::int64_t nsamples = o.nsamples > 0 ? o.nsamples : d1.nsamples_in_full;
  sc.duration_s = static_cast<double>(nsamples) * sc.tsamp_s;
  sc.seed = kSeed;
  sc.source_name = "warpbeam bench search " + o.config;
  sc.bursts = {kBurst};

  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("warpbeam-bench-search-{}", ::getpid());
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string fil = (dir / "d1.fil").string();
  fmt::print(stderr, "bench search: simulating {} ({} samples x {} channels)\n", fil, nsamples,
             sc.nchans);
  const auto ts = std::chrono::steady_clock::now();
  sim::simulate_filterbank(sc, fil);
  const double sim_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();

  search::FileSearchConfig cfg;
  cfg.dm_min = 0;
  cfg.dm_max = 1000;  // D1's DM range and list rule (40 us, tolerance 1.25)
  search::RunOptions run;
  run.threads = o.threads;
  run.progress = false;
  run.autotune = o.autotune;
  run.memory_bytes = std::int64_t{8} << 30;
  std::vector<double> seconds;
  search::SearchResult r;
  for (int i = 0; i < std::max(o.repeats, 1); ++i) {
    fmt::print(stderr, "bench search: run {} of {} ({})\n", i + 1, o.repeats, to_string(backend));
    const auto t0 = std::chrono::steady_clock::now();
    r = search::search_filterbank(fil, cfg, run, backend);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid =
      sorted.size() / 2;  // the median; of an even count, the middle pair's mean
  const double median = sorted.size() % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
  const double data_s = static_cast<double>(nsamples) * sc.tsamp_s;
  const double rtf = data_s / median;

  const bool found = !r.candidates.empty() &&
                     std::abs(r.candidates.front().dm - kBurst.dm) <= 0.05 * kBurst.dm &&
                     std::abs(r.candidates.front().time_s - kBurst.time_s) <= 0.05;
  const std::string summary = fmt::format(
      "search {} {}: {:.3f} s end to end from file ({:.1f}x real time; {} DM trials x {} "
      "samples, {} gulps), {:.3f} GB to the device, {:.3f} MB back; burst {}",
      o.config, r.backend, median, rtf, r.dms.size(), r.nsamples_searched, r.gulps,
      r.bytes_to_device / 1e9, r.bytes_from_device / 1e6,
      found ? fmt::format("recovered at S/N {:.1f}", r.candidates.front().snr) : "NOT recovered");
  fmt::print("{}\n", summary);
  fmt::print(
      "stages (s): read {:.3f}, RFI {:.3f}, dedispersion {:.3f}, search {:.3f}, "
      "clustering {:.3f}\n",
      r.seconds_read, r.seconds_rfi, r.seconds_dedisp, r.seconds_search, r.seconds_cluster);
  cli::print_candidates(r.candidates, sc.tsamp_s, 5);

  if (!o.json_path.empty()) {
    json params = cfg.to_json();
    params.update(run.to_json());
    json top = json::object();
    if (!r.candidates.empty()) {
      const auto& c = r.candidates.front();
      top = {{"snr", c.snr},           {"dm", c.dm},
             {"time_s", c.time_s},     {"filter", c.filter},
             {"dm_trial", c.dm_trial}, {"sample", c.sample},
             {"members", c.members}};
    }
    json rec = {{"benchmark", "search"},
                {"config", o.config},
                {"backend", r.backend},
                {"summary", summary},
                {"seconds", median},
                {"seconds_each_run", seconds},
                {"data_seconds", data_s},
                {"real_time_factor", rtf},
                {"nchans", sc.nchans},
                {"nsamples", nsamples},
                {"ndms", r.dms.size()},
                {"bytes_to_device", r.bytes_to_device},
                {"bytes_from_device", r.bytes_from_device},
                {"simulation_seconds", sim_s},
                {"run", r.to_json()},
                {"parameters", params},
                {"injected",
                 {{"dm", kBurst.dm},
                  {"snr", kBurst.snr},
                  {"width_s", kBurst.width_s},
                  {"time_s", kBurst.time_s},
                  {"seed", kSeed}}},
                {"top_candidate", top},
                {"candidates", r.candidates.size()},
                {"burst_recovered", found},
                {"method",
                 "file simulated into the temp folder (so read from the page cache); wall time "
                 "of search_filterbank() (plans, reads, copies, kernels, clustering), median "
                 "of the runs"},
                {"provenance", provenance()}};
    io::write_text_file(o.json_path, rec.dump(2) + "\n");
  }
  if (!found) fail(ErrorCategory::io, "bench search: the injected burst was not the top candidate");
}

}  // namespace warpbeam::bench
