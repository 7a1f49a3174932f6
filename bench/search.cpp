// `warpbeam bench search --config D1 [--backend cpu|cuda|auto] [--dedisp brute|subband|fdmt|auto]
// [--nsamples N] [--read-threads N] [--read-only] [--json FILE]`:
// the whole file search end to end (read, RFI, dedispersion, search, clustering) on a D1-shaped
// file (DESIGN.md: 1024 channels, 64 us, 8-bit, 2^20 samples, DM 0-1000) with an injected burst,
// simulated into the temp folder first (so it is read from the page cache). Reports seconds,
// the real-time factor, the bytes copied to and from the GPU, the stage times, and whether the
// burst came out on top (exit 1 if not). First, the read stage alone: the search's gulps read
// with one thread and with the search's read threads (cpu: and unpacked), alternately;
// --read-only stops there.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "bench/dedisp.hpp"
#include "bench/drivers.hpp"
#include "commands.hpp"
#include "search_report.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/sim/filterbank.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::bench {

namespace {

using json = nlohmann::json;

// The injected burst: bright enough to be the top candidate of any run, inside any length the
// benchmark allows (--nsamples >= 2^17 samples = 8.4 s).
constexpr sim::Burst kBurst{500, 25, 2e-3, 2.0};
constexpr std::uint64_t kSeed = 20261130;

// One pass of the read stage alone: every gulp of `plan` read from the file as the search's
// reader reads them (seek, read_raw of the gulp's rows with `threads` threads) into `rows` and,
// when `floats` is given, unpacked to float32 with `unpack_threads` OpenMP threads (what the CPU
// searcher does next; the CUDA one unpacks on the GPU).
struct ReadPass {
  double read_s = 0, unpack_s = 0;
  std::int64_t bytes = 0;
};
ReadPass read_pass(const std::string& fil, const search::FileSearchPlan& plan, int threads,
                   std::uint8_t* rows, float* floats, int unpack_threads) {
  using Clock = std::chrono::steady_clock;
  const auto source = io::open_filterbank(fil);
  source->set_read_threads(threads);
  const io::FilterbankHeader& h = plan.header();
  ReadPass p;
  const int omp_before = omp_get_max_threads();
  omp_set_num_threads(std::max(unpack_threads, 1));
  for (std::int64_t g = 0; g < plan.gulps(); ++g) {
    const search::GulpRange r = plan.gulp_range(g);
    const std::int64_t n = r.len() + plan.max_delay();
    const auto t0 = Clock::now();
    source->seek(r.p0);
    if (source->read_raw(n, rows) != n) fail(ErrorCategory::io, "bench search: short read");
    const auto t1 = Clock::now();
    p.read_s += std::chrono::duration<double>(t1 - t0).count();
    p.bytes += n * static_cast<std::int64_t>(h.bytes_per_sample());
    if (floats) {
      unpack_samples(rows, h.nbits, static_cast<std::size_t>(n * h.nchans), floats, h.is_signed);
      p.unpack_s += std::chrono::duration<double>(Clock::now() - t1).count();
    }
  }
  omp_set_num_threads(omp_before);
  return p;
}

// The read stage alone, one thread against `threads` (passes alternately, the best of each):
// what the reader thread and, cpu, the unpack cost on this machine's page cache.
json measure_reads(const std::string& fil, const search::FileSearchPlan& plan, Backend backend,
                   int threads, int unpack_threads, int passes) {
  const std::int64_t max_rows = plan.plane_samples() + plan.max_delay();
  const auto bytes = static_cast<std::size_t>(
      max_rows * static_cast<std::int64_t>(plan.header().bytes_per_sample()));
  std::optional<PinnedArray<std::uint8_t>> pinned;  // as the reader's buffers
  std::vector<std::uint8_t> plain;
  std::uint8_t* rows = nullptr;
  std::vector<float> floats;
  if (backend == Backend::cuda) {
    pinned.emplace(bytes);
    rows = pinned->data();
  } else {
    plain.resize(bytes);
    rows = plain.data();
    floats.resize(static_cast<std::size_t>(max_rows * plan.header().nchans));
  }
  float* out = floats.empty() ? nullptr : floats.data();
  ReadPass one, many;
  one.read_s = many.read_s = one.unpack_s = many.unpack_s = 1e30;
  for (int i = 0; i < passes; ++i) {
    const ReadPass a = read_pass(fil, plan, 1, rows, out, 1);
    const ReadPass b = read_pass(fil, plan, threads, rows, out, unpack_threads);
    one.bytes = a.bytes;
    many.bytes = b.bytes;
    one.read_s = std::min(one.read_s, a.read_s);
    many.read_s = std::min(many.read_s, b.read_s);
    one.unpack_s = std::min(one.unpack_s, a.unpack_s);
    many.unpack_s = std::min(many.unpack_s, b.unpack_s);
  }
  const double gb = static_cast<double>(one.bytes) / 1e9;
  fmt::print(
      "read stage alone ({} gulps, {:.3f} GB from the page cache, best of {} passes): "
      "1 thread {:.3f} s ({:.2f} GB/s), {} thread(s) {:.3f} s ({:.2f} GB/s): {:.2f}x\n",
      plan.gulps(), gb, passes, one.read_s, gb / one.read_s, threads, many.read_s, gb / many.read_s,
      one.read_s / many.read_s);
  if (out)
    fmt::print("unpack to float32 alone: 1 thread {:.3f} s, {} thread(s) {:.3f} s: {:.2f}x\n",
               one.unpack_s, unpack_threads, many.unpack_s, one.unpack_s / many.unpack_s);
  json j = {{"gulps", plan.gulps()},
            {"bytes", one.bytes},
            {"passes", passes},
            {"buffer", backend == Backend::cuda ? "pinned" : "pageable"},
            {"one_thread", {{"read_s", one.read_s}}},
            {"threads", threads},
            {"many_threads", {{"read_s", many.read_s}}}};
  if (out) {
    j["one_thread"]["unpack_s"] = one.unpack_s;
    j["many_threads"]["unpack_s"] = many.unpack_s;
    j["unpack_threads"] = unpack_threads;
  }
  return j;
}

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
  cfg.dedisp = search::parse_dedisp_method(o.dedisp);
  search::RunOptions run;
  run.threads = o.threads;
  run.progress = false;
  run.autotune = o.autotune;
  run.memory_bytes = std::int64_t{8} << 30;
  run.read_threads = o.read_threads;

  // The read stage alone first (the gulps of the search's plan; brute force plans fastest and
  // has the same gulps unless a method's buffers halve them).
  json reads;
  {
    search::FileSearchConfig brute = cfg;
    brute.dedisp = search::DedispMethod::brute;
    const auto src = io::open_filterbank(fil);
    const search::FileSearchPlan plan(brute, run, src->header(), backend, fil);
    reads = measure_reads(fil, plan, backend, run.resolved_read_threads(), plan.threads(),
                          o.read_only ? 3 : 2);
  }
  if (o.read_only) {
    if (!o.json_path.empty()) {
      const json rec = {{"benchmark", "search-read"},
                        {"config", o.config},
                        {"backend", to_string(backend)},
                        {"nsamples", nsamples},
                        {"nchans", sc.nchans},
                        {"read_stage", reads},
                        {"method",
                         "the file simulated into the temp folder (page cache); every gulp of "
                         "the search's plan read (seek, read_raw) with 1 thread and with the "
                         "search's read threads, passes alternately, the best of each"},
                        {"provenance", provenance()}};
      io::write_text_file(o.json_path, rec.dump(2) + "\n");
    }
    return;
  }

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
      "search {} {} {}: {:.3f} s end to end from file ({:.1f}x real time; {} DM trials x {} "
      "samples, {} gulps), {:.3f} GB to the device, {:.3f} MB back; burst {}",
      o.config, r.backend, r.dedisp_method, median, rtf, r.dms.size(), r.nsamples_searched, r.gulps,
      r.bytes_to_device / 1e9, r.bytes_from_device / 1e6,
      found ? fmt::format("recovered at S/N {:.1f}", r.candidates.front().snr) : "NOT recovered");
  fmt::print("{}\n", summary);
  // The last run's stages: what each costs and which of them the wall time waited for.
  fmt::print(
      "stages (s): read {:.3f} ({} thread{}, beside the search, which waited {:.3f} for it), "
      "unpack {:.3f}, copy {:.3f}, RFI {:.3f}, dedispersion {:.3f}, search (baseline, RMS, "
      "boxcars, peaks) {:.3f}, clustering {:.3f}{}\n",
      r.seconds_read, r.read_threads, r.read_threads == 1 ? "" : "s", r.seconds_read_wait,
      r.seconds_unpack, r.seconds_copy, r.seconds_rfi, r.seconds_dedisp, r.seconds_search,
      r.seconds_cluster,
      r.backend == "cuda" ? " (copy to search: GPU time on two overlapping streams)" : "");
  fmt::print(
      "host (s): plan {:.3f}, setup {:.3f}, plans during the gulps {:.3f} ({} dedispersion "
      "plan{}), waiting for the GPU {:.3f}; the last run {:.3f} end to end\n",
      r.seconds_plan, r.seconds_setup, r.seconds_gulp_plans, r.dedisp_plans,
      r.dedisp_plans == 1 ? "" : "s", r.seconds_gpu_wait, r.seconds_total);
  if (!r.dedisp_choice.empty()) fmt::print("dedispersion: {}\n", r.dedisp_choice);
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
                {"read_stage", reads},
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
