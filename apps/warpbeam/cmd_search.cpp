// `warpbeam search FILE`: the single-pulse search of a SIGPROC filterbank (RFI cleaning,
// dedispersion, baseline, boxcar filters, peaks, clustering); candidates as heimdall's .cand
// and JSON, a table of the best on stdout.
#include <chrono>

#include <fmt/format.h>

#include "commands.hpp"
#include "search_report.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::cli {

namespace {

struct SearchOptions {
  std::string path, output, json, zap_chans, backend = "cpu";
  search::FileSearchConfig config;
  double memory_mib = 2048, gpu_memory_mib = 0;
  int top = 10;
  bool no_zero_dm = false, beam_column = false;
};

void run_search(SearchOptions& o) {
  auto& c = o.config;
  c.zero_dm = !o.no_zero_dm;
  c.zap_channels = search::parse_channel_list(o.zap_chans);
  c.memory_bytes = static_cast<std::int64_t>(o.memory_mib * 1024 * 1024);
  c.device_memory_bytes = static_cast<std::int64_t>(o.gpu_memory_mib * 1024 * 1024);
  c.validate();  // usage errors (exit 2) before the file is opened
  const Backend backend = parse_backend(o.backend);
  const auto t0 = std::chrono::steady_clock::now();
  const search::SearchResult r = search::search_filterbank(o.path, c, backend);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& h = r.header;

  nlohmann::json params = c.to_json();
  params["run"] = r.to_json();
  if (!o.output.empty()) io::write_cand(o.output, r.candidates, o.beam_column);
  if (!o.json.empty()) io::write_candidates_json(o.json, r.candidates, h, o.path, params, r.dms);

  fmt::print("{}: {} channels, {} samples ({:.3f} s), tsamp {} us\n", o.path, h.nchans, h.nsamples,
             h.duration_s(), h.tsamp * 1e6);
  fmt::print(
      "searched {} samples: {} DM trials {:.2f}-{:.2f}, boxcars 1-{} (--boxcar-max {}), S/N >= "
      "{}, {} gulp(s) of {}, {} in {:.2f} s ({:.2f}x real time)\n",
      r.nsamples_searched, r.dms.size(), r.dms.front(), r.dms.back(), r.widest_boxcar, c.boxcar_max,
      c.snr_min, r.gulps, r.gulp, r.backend, secs, r.nsamples_searched * h.tsamp / secs);
  if (r.widest_boxcar < c.boxcar_max)
    fmt::print("(boxcars wider than {} need a longer --baseline or more data: see --help)\n",
               r.widest_boxcar);
  fmt::print(
      "time (s): read {:.2f}, RFI {:.2f}, dedispersion {:.2f}, search {:.2f}, clustering "
      "{:.2f}; memory {} MiB\n",
      r.seconds_read, r.seconds_rfi, r.seconds_dedisp, r.seconds_search, r.seconds_cluster,
      r.memory_bytes >> 20);
  if (r.backend == "cuda")
    fmt::print(
        "GPU: {} MiB of device buffers; copied {:.3f} GB to the device, {:.3f} MB back (stage "
        "times are GPU time on two overlapping streams)\n",
        r.device_memory_bytes >> 20, r.bytes_to_device / 1e9, r.bytes_from_device / 1e6);
  fmt::print("{} candidate(s)\n", r.candidates.size());
  print_candidates(r.candidates, h.tsamp, o.top);
}

}  // namespace

void add_search_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("search", "Single-pulse search of a SIGPROC filterbank");
  auto o = std::make_shared<SearchOptions>();
  auto& c = o->config;
  cmd->add_option("FILE", o->path, "SIGPROC filterbank file")->required();
  cmd->add_option("--dm-min", c.dm_min, "Smallest DM (pc cm^-3)")->capture_default_str();
  cmd->add_option("--dm-max", c.dm_max, "Largest DM (pc cm^-3)")->capture_default_str();
  cmd->add_option("--dm-tol", c.dm_tolerance, "DM list tolerance (dedisp's rule, > 1)")
      ->capture_default_str();
  cmd->add_option("--pulse-width", c.pulse_width_us,
                  "Intrinsic pulse width the DM list is built for (us)")
      ->capture_default_str();
  cmd->add_option("--boxcar-max", c.boxcar_max,
                  "Widest boxcar (samples, a power of 2); the search also stops at 1/8 of the "
                  "baseline's decimation scale and at 1/128 of the gulp")
      ->capture_default_str();
  cmd->add_option("--snr-min", c.snr_min, "Detection threshold (S/N)")->capture_default_str();
  cmd->add_option("--zap-chans", o->zap_chans,
                  "Channels to ignore, e.g. 0-10,200,300-310 (inclusive ranges)");
  cmd->add_flag("--no-zero-dm", o->no_zero_dm, "Do not subtract the zero-DM time series");
  cmd->add_option("--zap-sigma", c.zap_sigma,
                  "Zap channels whose robust sigma is this many MADs from the others' (0: off)")
      ->capture_default_str();
  cmd->add_option("--baseline", c.baseline_s, "Running-median baseline window (s)")
      ->capture_default_str();
  cmd->add_option("--output", o->output, "Write candidates as heimdall's .cand to this file");
  cmd->add_option("--json", o->json, "Write candidates, parameters and header as JSON");
  cmd->add_flag("--beam-column", o->beam_column, "Add the beam as a 10th .cand column");
  cmd->add_option("--threads", c.threads, "CPU threads (0: all)")->capture_default_str();
  cmd->add_option("--memory", o->memory_mib, "Memory budget for the search's buffers (MiB)")
      ->capture_default_str();
  cmd->add_option("--gulp", c.gulp, "Output samples per gulp (0: from the memory budget)")
      ->capture_default_str();
  cmd->add_option("--top", o->top, "Candidates shown in the table (0: all)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--gpu-memory", o->gpu_memory_mib,
                  "CUDA: budget for the device buffers (MiB; 0: 80% of the free memory)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--device", c.device, "CUDA device index")
      ->check(CLI::Range(0, 1023))
      ->capture_default_str();
  cmd->add_option("--gpu-streams", c.gpu_streams,
                  "CUDA: 2 overlaps gulp n+1's read, copy and RFI stage with gulp n's work; 1 "
                  "runs the gulps in turn")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  cmd->add_flag("--autotune", c.autotune,
                "CUDA: time a few dedispersion kernels and tile sizes on the gulp's shape first "
                "(cached per shape in $XDG_CACHE_HOME/warpbeam/dedisp-tuning.json)");
  cmd->footer(
      "--backend cuda runs RFI cleaning, dedispersion and the search on the GPU (only the packed "
      "samples go there, only the peaks come back); reading and clustering stay on the host. "
      "auto picks cuda when a GPU is present. Both backends give the same candidates.");
  cmd->callback([o] { run_search(*o); });
}

}  // namespace warpbeam::cli
