// `warpbeam search FILE...`: the single-pulse search of SIGPROC filterbanks (RFI cleaning,
// dedispersion, baseline, boxcar filters, peaks, clustering); candidates as heimdall's .cand
// and JSON, a table of the best on stdout. Several files (beams), several GPUs (--gpus) and
// several processes (mpirun) share the work through warpbeam/dist/search.hpp; the candidates
// are the same, byte for byte, as one process writes.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "commands.hpp"
#include "search_report.hpp"
#include "warpbeam/dist/search.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/candidate_cutout.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::cli {

namespace {

struct SearchOptions {
  std::vector<std::string> paths;
  std::string output, json, zap_chans, backend = "cpu", gpus, dedisp = "brute";
  search::FileSearchConfig config;
  search::RunOptions run;
  double memory_mib = 2048, gpu_memory_mib = 0;
  int top = 10;
  bool no_zero_dm = false, beam_column = false, device_given = false;
  // Per-candidate products (--candidates-dir): your/FETCH HDF5 and a PNG.
  std::string candidates_dir;
  double candidates_snr = 8;
  int candidates_max = 100;
};

// The candidates worth a cutout: S/N >= snr_min, the best `max` of them (the list is sorted by
// S/N, best first).
std::vector<search::Candidate> chosen(const std::vector<search::Candidate>& all, double snr_min,
                                      int max) {
  std::vector<search::Candidate> v;
  for (const auto& c : all)
    if (c.snr >= snr_min && static_cast<int>(v.size()) < max) v.push_back(c);
  return v;
}

// Writes CAND_ID.h5 (and CAND_ID.png when PLplot is there) per chosen candidate into `dir`;
// returns the files written. On failure the files written so far are removed.
std::vector<std::string> write_candidate_products(const SearchOptions& o,
                                                  const std::vector<search::Candidate>& cands,
                                                  const std::vector<std::uint8_t>& zap) {
  std::vector<std::string> written;
  try {
    const bool png = io::candidate_plot_supported();
    if (!png && !cands.empty())
      warnf("this build has no PLplot (or no pngcairo driver): candidate PNGs are skipped");
    for (const auto& c : cands) {
      const auto source = io::open_filterbank(o.paths.at(static_cast<std::size_t>(c.beam)));
      io::CutoutConfig cc;
      cc.dm = c.dm;
      cc.tcand_s = c.time_s;
      cc.width = c.width();
      cc.snr = c.snr;
      if (static_cast<int>(zap.size()) == source->header().nchans) cc.kill_mask = zap;
      cc.search = {{"file", source->path()},
                   {"snr", c.snr},
                   {"sample", c.sample},
                   {"time_s", c.time_s},
                   {"filter", c.filter},
                   {"dm_trial", c.dm_trial},
                   {"dm", c.dm},
                   {"members", c.members},
                   {"begin", c.begin},
                   {"end", c.end},
                   {"beam", c.beam}};
      const io::CandidateCutout cut = io::make_candidate_cutout(*source, cc);
      const std::string stem = (std::filesystem::path(o.candidates_dir) / cut.cand_id).string();
      io::write_candidate_h5(stem + ".h5", cut);
      written.push_back(stem + ".h5");
      if (png) {
        io::write_candidate_png(stem + ".png", cut);
        written.push_back(stem + ".png");
      }
    }
  } catch (...) {
    std::error_code ec;
    for (const auto& f : written)
      std::filesystem::remove(f, ec);
    throw;
  }
  return written;
}

// The report of one file's search, from the run JSON of its (first) piece.
void print_file(const dist::FileReport& f, const search::FileSearchConfig& c,
                const dist::DistSearchResult& r) {
  const auto& h = f.header;
  const auto& run = f.pieces.front().run;
  fmt::print("{}: {} channels, {} samples ({:.3f} s), tsamp {} us\n", f.path, h.nchans, h.nsamples,
             h.duration_s(), h.tsamp * 1e6);
  const auto searched = run.at("nsamples_searched").get<std::int64_t>();
  const auto widest = run.at("widest_boxcar").get<int>();
  fmt::print(
      "searched {} samples: {} DM trials {:.2f}-{:.2f}, boxcars 1-{} (--boxcar-max {}), S/N >= "
      "{}, {} gulp(s) of {}, {}",
      searched, f.dms.size(), f.dms.front(), f.dms.back(), widest, c.boxcar_max, c.snr_min,
      run.at("gulps").get<std::int64_t>(), run.at("gulp").get<std::int64_t>(),
      run.at("backend").get<std::string>());
  if (run.contains("dedisp_method"))
    fmt::print(", {} dedispersion", run.at("dedisp_method").get<std::string>());
  if (r.files.size() == 1)
    fmt::print(" in {:.2f} s ({:.2f}x real time)", r.seconds, searched * h.tsamp / r.seconds);
  fmt::print("\n");
  // Every channel RFI cleaning zapped, by reason (a NaN or Inf sample zaps its channel as dead).
  const auto& z = run.at("zapped_channels");
  const auto nz = [&](const char* k) { return z.at(k).size(); };
  if (nz("mask") + nz("dead_or_nonfinite") + nz("outlier") > 0)
    fmt::print(
        "zapped channels (in at least one gulp): {} by --zap-chans, {} dead or non-finite "
        "(NaN/Inf), {} outliers; {} kept at least (list in --json: zapped_channels)\n",
        nz("mask"), nz("dead_or_nonfinite"), nz("outlier"), run.at("min_channels_kept").get<int>());
  if (widest < c.boxcar_max)
    fmt::print("(boxcars wider than {} need a longer --baseline or more data: see --help)\n",
               widest);
  if (r.workers > 1) return;  // stage times of one worker only
  const auto& t = run.at("seconds");
  fmt::print(
      "time (s): read {:.2f}, RFI {:.2f}, dedispersion {:.2f}, search {:.2f}, clustering "
      "{:.2f}; memory {} MiB\n",
      t.at("read").get<double>(), t.at("rfi").get<double>(), t.at("dedisp").get<double>(),
      t.at("search").get<double>(), t.at("cluster").get<double>(),
      run.at("memory_bytes").get<std::int64_t>() >> 20);
  if (run.at("backend").get<std::string>() == "cuda")
    fmt::print(
        "GPU: {} MiB of device buffers; copied {:.3f} GB to the device, {:.3f} MB back (stage "
        "times are GPU time on two overlapping streams)\n",
        run.at("device_memory_bytes").get<std::int64_t>() >> 20,
        run.at("bytes_to_device").get<std::int64_t>() / 1e9,
        run.at("bytes_from_device").get<std::int64_t>() / 1e6);
}

void run_search(SearchOptions& o, const dist::Comm& comm) {
  auto& c = o.config;
  dist::DistSearchConfig dc;
  std::exception_ptr error;
  try {  // usage errors (exit 2) before any file is opened, on every rank alike
    apply_search_options(c, o.run, o.no_zero_dm, o.zap_chans, o.memory_mib, o.gpu_memory_mib);
    c.dedisp = search::parse_dedisp_method(o.dedisp);
    c.validate();
    o.run.validate();
    if (!o.json.empty() && o.paths.size() > 1)
      fail(ErrorCategory::invalid_argument,
           "--json describes one file's search: give one FILE, or --output for several");
    if (o.device_given && !o.gpus.empty())
      fail(ErrorCategory::invalid_argument,
           "--device {} and --gpus {}: give one (--gpus lists the devices sharing the work)",
           o.run.device, o.gpus);
    // The products must be writable, and must not be an input: fail now, not after a long search.
    io::check_outputs({o.output, o.json}, o.paths);
    if (!o.candidates_dir.empty()) {
      if (!io::candidate_h5_supported())
        fail(ErrorCategory::unsupported, "--candidates-dir: this build has no HDF5");
      std::error_code ec;
      const auto parent = std::filesystem::absolute(o.candidates_dir).parent_path();
      if (!std::filesystem::is_directory(parent, ec))
        fail(ErrorCategory::io, "--candidates-dir '{}': folder '{}' does not exist",
             o.candidates_dir, parent.string());
      if (std::filesystem::exists(o.candidates_dir, ec) &&
          !std::filesystem::is_directory(o.candidates_dir, ec))
        fail(ErrorCategory::io, "--candidates-dir '{}' is a file, not a folder", o.candidates_dir);
    }
    dc.files = o.paths;
    dc.search = c;
    dc.run = o.run;
    dc.backend = parse_backend(o.backend);
    if (!o.gpus.empty()) dc.gpus = dist::parse_gpu_list(o.gpus);
    // --device picks the one GPU (and, as before --gpus, means nothing to the CPU backend).
    if (o.device_given && resolve_backend(dc.backend) == Backend::cuda) dc.gpus = {o.run.device};
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);
  const dist::DistSearchResult r = dist::search_files(dc, comm);
  const bool beam_column = o.beam_column || o.paths.size() > 1;

  // Rank 0 writes the products; every rank learns whether that worked.
  // The .cand, the JSON and the candidate products appear together or not at all (and a failure
  // removes neither a file that was there before nor anything but what the command wrote).
  std::vector<std::string> products;
  if (comm.is_root()) {
    try {
      io::StagedOutputs staged;
      if (!o.candidates_dir.empty()) {
        // The folder is made now (and removed again if the products fail).
        OutputFolder folder(o.candidates_dir);
        // The user's mask (--zap-chans) as the cutouts' kill mask: 1 = zapped.
        std::vector<std::uint8_t> zap;
        if (!c.zap.empty()) {
          zap = c.zap.use_flags(r.files.front().header.nchans);
          for (auto& z : zap)
            z = z ? 0 : 1;
        }
        products = write_candidate_products(
            o, chosen(r.candidates, o.candidates_snr, o.candidates_max), zap);
        folder.keep();
      }
      if (!o.output.empty()) io::write_cand(staged.temp(o.output), r.candidates, beam_column);
      if (!o.json.empty()) {
        const auto& f = r.files.front();
        nlohmann::json params = c.to_json();
        params.update(o.run.to_json());  // one flat object, as every product records it
        params["run"] = f.pieces.size() == 1 ? f.pieces.front().run : nlohmann::json(nullptr);
        if (r.workers > 1) params["distributed"] = r.to_json();
        io::write_candidates_json(staged.temp(o.json), r.candidates, f.header, f.path, params,
                                  f.dms);
      }
      staged.commit();
    } catch (...) {
      error = std::current_exception();
      // The candidate products this command wrote go with the .cand and JSON that failed.
      std::error_code ec;
      for (const auto& f : products)
        std::filesystem::remove(f, ec);
    }
  }
  comm.agree(error);
  if (!comm.is_root()) return;

  for (const auto& f : r.files)
    print_file(f, c, r);
  if (r.workers > 1)
    fmt::print("{} file(s) on {} worker(s) ({} rank(s), {}) in {:.2f} s\n", r.files.size(),
               r.workers, r.ranks, r.backend, r.seconds);
  fmt::print("{} candidate(s)\n", r.candidates.size());
  if (!o.candidates_dir.empty())
    fmt::print("{} candidate file(s) (S/N >= {}, at most {}) in {}\n", products.size(),
               o.candidates_snr, o.candidates_max, o.candidates_dir);
  std::vector<double> tsamps;  // beam b is file b: each candidate's width in its own file's tsamp
  for (const auto& f : r.files)
    tsamps.push_back(f.header.tsamp);
  print_candidates(r.candidates, tsamps, o.top);
}

}  // namespace

void add_search_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("search", "Single-pulse search of SIGPROC filterbanks (beams)");
  auto o = std::make_shared<SearchOptions>();
  auto& c = o->config;
  auto& run = o->run;
  cmd->add_option("FILE", o->paths,
                  "SIGPROC filterbank files (several: beams 0, 1, ... in this order)")
      ->required();
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
  cmd->add_option("--candidates-dir", o->candidates_dir,
                  "Write each candidate's your/FETCH HDF5 cutout and diagnostic PNG here "
                  "(CAND_ID.h5, CAND_ID.png; see docs/FORMATS.md)");
  cmd->add_option("--candidates-snr", o->candidates_snr,
                  "--candidates-dir: only candidates of this S/N or more")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--candidates-max", o->candidates_max,
                  "--candidates-dir: at most this many (the best by S/N)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_flag("--beam-column", o->beam_column,
                "Add the beam as a 10th .cand column (always with several files)");
  cmd->add_option("--threads", run.threads, "CPU threads (0: all)")->capture_default_str();
  cmd->add_option("--memory", o->memory_mib, "Memory budget for the search's buffers (MiB)")
      ->capture_default_str();
  cmd->add_option("--gulp", run.gulp, "Output samples per gulp (0: from the memory budget)")
      ->capture_default_str();
  cmd->add_option("--top", o->top, "Candidates shown in the table (0: all)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--gpu-memory", o->gpu_memory_mib,
                  "CUDA: budget for the device buffers (MiB; 0: 80% of the free memory, shared "
                  "by the workers of a device)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--device", run.device, "CUDA device index (one device; see --gpus)")
      ->check(CLI::Range(0, 1023))
      ->each([o](const std::string&) { o->device_given = true; })
      ->capture_default_str();
  cmd->add_option("--gpus", o->gpus,
                  "CUDA devices sharing the work, e.g. 0,1 or 0,0 (default: every visible one; "
                  "under mpirun each rank takes one, local rank mod the list)");
  cmd->add_option("--read-threads", run.read_threads,
                  "Threads reading each gulp of the file (0: half the hardware threads, at most "
                  "8); the gulps are read one ahead of the search on a thread of their own")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--gpu-streams", run.gpu_streams,
                  "CUDA: 2 overlaps gulp n+1's read, copy and RFI stage with gulp n's work; 1 "
                  "runs the gulps in turn")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  cmd->add_option("--dedisp", o->dedisp,
                  "Dedispersion: brute (force), subband (two-stage), fdmt (Zackay & Ofek), or "
                  "auto: the fastest on the backend whose predicted S/N is at least "
                  "--dedisp-min-snr of brute force's on every trial")
      ->check(CLI::IsMember({"auto", "brute", "subband", "fdmt"}))
      ->capture_default_str();
  cmd->add_option("--dedisp-min-snr", c.dedisp_min_snr,
                  "S/N bound (fraction of brute force's) of auto and of the sub-band grid")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  cmd->add_option("--subbands", c.subbands,
                  "subband: number of sub-bands, at most the channels (0: the fewest additions)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--subband-dm-step", c.subband_dm_step,
                  "subband: a uniform coarse DM step (pc cm^-3; 0: the grid the smearing bound "
                  "allows); refused when too coarse for the sub-bands")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_flag("--autotune", run.autotune,
                "CUDA: time a few dedispersion kernels and tile sizes on the gulp's shape first "
                "(cached per shape in $XDG_CACHE_HOME/warpbeam/dedisp-tuning.json)");
  cmd->footer(
      "--backend cuda runs RFI cleaning, dedispersion and the search on the GPU (only the packed "
      "samples go there, only the peaks come back); reading and clustering stay on the host. "
      "auto picks cuda when a GPU is present. Both backends give the same candidates. Several "
      "files, GPUs (--gpus) or MPI ranks (mpirun -n N warpbeam search ...) split the files and "
      "DM ranges; the candidates are the same as one process finds.");
  cmd->callback([o] {
    const dist::Comm& comm = dist::Comm::world();
    dist::run_collective(comm, [&] { naming_flags(kSearchFlags, [&] { run_search(*o, comm); }); });
  });
}

}  // namespace warpbeam::cli
