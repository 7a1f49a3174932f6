// `warpbeam pipeline VOLTAGES.raw --beams FILE|--grid SPEC --dm-max DM --out DIR`: voltages ->
// beams -> dedispersion -> single-pulse search for every beam (warpbeam/pipeline.hpp). Writes
// DIR/candidates.cand (heimdall's columns + beam), DIR/candidates.json and DIR/pipeline.json
// (provenance, parameters, the run's summary with the bytes copied each way), all or none.
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "beamform_cli.hpp"
#include "commands.hpp"
#include "search_report.hpp"
#include "warpbeam/dist/comm.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/pipeline.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/stream.hpp"
#include "warpbeam/stream/capture.hpp"
#include "warpbeam/stream/status.hpp"

namespace warpbeam::cli {

namespace {

struct PipelineOptions {
  std::string in, beams_file, grid, out, json, zap_chans;
  std::string backend = "auto", algorithm = "auto", array = "best2", site, split = "auto";
  std::vector<int> mask;
  int integrate = 1, top = 10;
  double memory_mib = 2048, gpu_memory_mib = 0;
  bool no_zero_dm = false;
  pipeline::PipelineConfig config;
  // --listen: a live SPEAD stream instead of IN, of --blocks blocks (0: open-ended).
  std::string listen, http;
  std::int64_t blocks = 0;
  int ring_blocks = 8, socket_buffer_mib = 256, capture_core = -1;
  double idle_timeout = 0, duration = 0, start_timeout = 0, test_block_delay_ms = 0;
  nlohmann::json stream_record;  // the live run's counters (pipeline.json's "stream")
};

// DIR/candidates.cand, candidates.json, pipeline.json (and --json): all or none, and no folder
// left behind when they fail.
// pipeline.json's fields of every run, finished or not: provenance, input, parameters, and a
// live run's stream record.
nlohmann::json run_summary(const PipelineOptions& o) {
  nlohmann::json summary = {
      {"provenance", provenance()}, {"input", o.in}, {"parameters", o.config.to_json()}};
  if (!o.stream_record.is_null()) summary["stream"] = o.stream_record;
  return summary;
}

void write_products(const PipelineOptions& o, const pipeline::PipelineResult& r,
                    OutputFolder& folder) {
  const auto& c = o.config;
  nlohmann::json params = c.to_json();
  params["run"] = r.to_json();
  nlohmann::json summary = run_summary(o);
  summary["result"] = r.to_json();
  StagedOutputs staged;
  const auto path = [&](const char* name) {
    return (std::filesystem::path(o.out) / name).string();
  };
  io::write_cand(staged.temp(path("candidates.cand")), r.candidates, true);
  io::write_candidates_json(staged.temp(path("candidates.json")), r.candidates, r.header, o.in,
                            params, r.dms);
  io::write_text_file(staged.temp(path("pipeline.json")), summary.dump(2) + "\n");
  if (!o.json.empty()) io::write_text_file(staged.temp(o.json), summary.dump(2) + "\n");
  staged.commit();
  folder.keep();
}

void print_summary(const PipelineOptions& o, const pipeline::PipelineResult& r);

// DIR/candidates.cand of a live run, written as the search goes: each candidate is appended as a
// whole line (heimdall's columns and the beam) and flushed to the kernel as soon as it is final,
// so that `tail -f`, the status page and a run that dies all see whole lines. The file is new:
// one already there (an earlier run's) is refused rather than appended to or clobbered. At the
// end write_products() renames the sorted file (the file path's order) over it; after an error
// the lines found so far stay (an empty file is removed).
class LiveCandidates {
 public:
  explicit LiveCandidates(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno == EEXIST)
      fail(ErrorCategory::io,
           "'{}' exists: a live run writes its candidates to a new file as it finds them; give "
           "another --out folder, or move the earlier run's products away",
           path_);
    if (fd_ < 0) fail(ErrorCategory::io, "cannot create '{}': {}", path_, std::strerror(errno));
  }
  ~LiveCandidates() {
    if (fd_ >= 0) ::close(fd_);
    if (replaced_) return;
    if (written_ == 0)
      ::unlink(path_.c_str());
    else
      fmt::print(stderr, "warpbeam pipeline: '{}' keeps the {} candidate(s) found before the end\n",
                 path_, written_);
  }
  LiveCandidates(const LiveCandidates&) = delete;
  LiveCandidates& operator=(const LiveCandidates&) = delete;

  void append(const std::vector<search::Candidate>& c) {
    if (c.empty()) return;
    const std::string text = io::format_cand(c, true);
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(ErrorCategory::io, "cannot append to '{}': {}", path_, std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    written_ += static_cast<std::int64_t>(c.size());
  }
  std::int64_t written() const { return written_; }
  /// The final products replaced the file: nothing to remove or report.
  void replaced() { replaced_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  std::int64_t written_ = 0;
  bool replaced_ = false;
};

// A candidate as a line of the status page's table.
nlohmann::json board_line(const search::Candidate& c) {
  return {{"beam", c.beam},
          {"snr", std::round(c.snr * 10) / 10},
          {"dm", c.dm},
          {"time_s", c.time_s},
          {"boxcar", std::int64_t{1} << c.filter}};
}

// `warpbeam pipeline --listen spead://HOST:PORT [--blocks N] [--duration S]`: the pipeline on a
// live SPEAD stream (warpbeam/stream/spead.hpp) through the ring. Open-ended (no --blocks) the
// search is planned as for an endless stream and its tail when the stream ends (the end of the
// stream, --idle-timeout, --duration or a signal): PipelinePlan::open_ended. --blocks N plans
// exactly N blocks (the blocks that never came at the end are zeros). Either way the products
// equal the file path's on the same voltages (open-ended: see PipelinePlan for the one
// exception). A block that never came before the last one (dropped because the ring was full,
// or lost whole) is searched as zeros, and pipeline.json lists it. Candidates are appended to
// DIR/candidates.cand as they become final (LiveCandidates).
void run_listen(PipelineOptions& o) {
  auto& c = o.config;
  require_range("--duration", o.duration, 0.0, 1e9);  // CLI11's Range lets NaN through
  require_range("--start-timeout", o.start_timeout, 0.0, 1e9);
  apply_search_options(c.search, c.run, o.no_zero_dm, o.zap_chans, o.memory_mib, o.gpu_memory_mib);
  c.integration = o.integrate;
  c.algorithm = beamform::parse_algorithm(o.algorithm);
  c.split = pipeline::parse_split(o.split);
  c.pointings = load_pointings(o.beams_file, o.grid);
  c.array = load_array(o.array, o.site);
  if (!o.mask.empty()) {
    c.array.mask.assign(static_cast<std::size_t>(c.array.nantennas()), 1);
    for (int a : o.mask) {
      require_range("--mask antenna", a, 0, c.array.nantennas() - 1);
      c.array.mask[static_cast<std::size_t>(a)] = 0;
    }
  }
  c.validate();
  const Backend backend = parse_backend(o.backend);
  check_algorithm_backend(c.algorithm, backend);
  const bool open_ended = o.blocks == 0;
  stream::SpeadCaptureConfig sc;
  sc.listen = stream::parse_endpoint(o.listen, "spead", "--listen", true);
  sc.ring_blocks = o.ring_blocks;
  sc.idle_timeout_s = o.idle_timeout;
  sc.socket_buffer_mib = o.socket_buffer_mib;
  sc.capture_core = o.capture_core;
  sc.validate();
  std::optional<stream::Endpoint> http;
  if (!o.http.empty()) http = stream::parse_http_address(o.http);
  if (!stream::spead_supported())
    fail(ErrorCategory::unsupported,
         "this build has no spead2: --listen spead:// is unavailable (scripts/build-spead2)");
  io::check_outputs({o.json}, {o.beams_file, o.array});  // output_file.hpp's rule
  OutputFolder folder(o.out);
  {
    const auto in_out = [&](const char* name) {
      return (std::filesystem::path(o.out) / name).string();
    };
    io::check_outputs(
        {in_out("candidates.cand"), in_out("candidates.json"), in_out("pipeline.json"), o.json},
        {o.beams_file, o.array});
  }
  LiveCandidates live((std::filesystem::path(o.out) / "candidates.cand").string());

  stream::StreamCounters counters;
  stream::StopOnSignals signals;
  stream::SpeadVoltageCapture capture(sc, counters);
  const stream::StatusLine line(counters, "warpbeam pipeline");
  stream::StatusBoard board("warpbeam pipeline --listen " + sc.listen.to_string());
  std::unique_ptr<stream::StatusServer> server;
  if (http) server = std::make_unique<stream::StatusServer>(*http, counters, &line, board);
  // The address bound (port 0 asks the kernel for one); Endpoint::to_string brackets an IPv6
  // host (spead://[::1]:7148).
  const std::string address =
      stream::Endpoint{sc.listen.scheme, sc.listen.host, capture.port()}.to_string();
  fmt::print(stderr, "warpbeam pipeline: listening on {}{}\n", address,
             server ? fmt::format("; status page {}/",
                                  stream::Endpoint{"http", http->host, server->port()}.to_string())
                    : "");
  const auto listening = std::chrono::steady_clock::now();
  if (!capture.wait_for_info(o.start_timeout > 0 ? o.start_timeout : -1,
                             [] { return stream::StopOnSignals::requested(); })) {
    if (stream::StopOnSignals::requested())  // a listener stopped before its sender started
      fail(ErrorCategory::io,
           "{}: interrupted (signal {}) before the stream's description arrived: nothing was "
           "searched",
           address, stream::StopOnSignals::signal());
    if (o.start_timeout > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - listening).count() >=
            o.start_timeout)
      fail(ErrorCategory::io,
           "{}: no stream within {} s of listening (--start-timeout): nothing "
           "was searched",
           address, o.start_timeout);
    fail(ErrorCategory::io, "{}: the stream ended before its description arrived", address);
  }
  const io::VoltageStreamInfo info = capture.info();
  o.in = info.source_name;
  const auto started = std::chrono::steady_clock::now();  // --duration counts from here
  pipeline::PipelinePlan plan(c, info, open_ended ? pipeline::PipelinePlan::open_ended : o.blocks,
                              backend);
  // The blocks the search is planned for: --blocks, or (open-ended) until the stream ends.
  const std::int64_t planned = open_ended ? std::numeric_limits<std::int64_t>::max() : o.blocks;
  // Candidates out as soon as they are final: the .cand, the counter, the status page.
  const auto publish = [&] {
    const std::vector<search::Candidate> found = plan.take_candidates();
    if (found.empty()) return;
    live.append(found);
    folder.keep();  // a live run keeps what it has written, whatever happens later
    counters.candidates += static_cast<std::int64_t>(found.size());
    std::vector<nlohmann::json> lines;
    for (const auto& cand : found)
      lines.push_back(board_line(cand));
    board.add_candidates(lines);
  };
  fmt::print(stderr,
             "warpbeam pipeline: {} channels x {} antennas x {} pol(s), blocks of {} samples\n",
             info.nchans, info.nantennas, info.npol, info.block_samples);

  nlohmann::json missing = nlohmann::json::array();
  std::int64_t next = 0;
  const auto mjd = [&](std::int64_t k) {
    return info.mjd_start + static_cast<double>(k * info.block_samples) * info.tsamp_s / 86400;
  };
  // A block that never came costs little (PipelinePlan::execute_zeros: no beamforming, and no
  // search of a gulp of zeros): an engine that fell behind and dropped blocks catches up instead
  // of searching zeros at full cost while the ring overflows, and the end of a short stream is
  // not a stall (the H200's B1 run of 2026-12-02 searched its 111 dropped blocks at full cost).
  const auto feed_zeros = [&](std::int64_t until) {
    for (; next < until && next < planned; ++next) {
      plan.execute_zeros(mjd(next));
      missing.push_back(next);
      publish();
    }
  };
  // Where the engine's time goes: waiting for blocks, or executing them.
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  double waiting_s = 0, engine_s = 0;
  std::string reason = "end of stream";
  // The heaps that reached the search, against the heaps of the blocks searched: every other heap
  // is zeros in the products, whatever lost it (the kernel's socket buffer, spead2, a late or
  // truncated block, a stream that ended early) and is counted lost, but for the blocks dropped
  // whole because the ring was full (dropped_blocks).
  std::int64_t heaps_per_block = 0, heaps_searched = 0;
  while (next < planned) {
    if (stream::StopOnSignals::requested()) {
      reason = fmt::format("signal {}", stream::StopOnSignals::signal());
      break;
    }
    if (o.duration > 0 && since(started) >= o.duration) {
      reason = "--duration";
      break;
    }
    bool closed = false;
    auto t = Clock::now();
    stream::Block* b = capture.ring().next(std::chrono::milliseconds(100), &closed);
    waiting_s += since(t);
    if (!b) {
      if (closed) break;
      continue;
    }
    const std::int64_t seq = b->info.sequence;
    if (seq >= next && seq < planned) {
      t = Clock::now();
      feed_zeros(seq);
      plan.execute(b->data, b->bytes, mjd(seq));
      publish();
      engine_s += since(t);
      ++next;
      heaps_per_block = b->info.packets_expected;
      heaps_searched += b->info.packets_received;
      if (o.test_block_delay_ms > 0)
        std::this_thread::sleep_for(
            std::chrono::duration<double, std::milli>(o.test_block_delay_ms));
      ++counters.blocks_processed;
      counters.bytes_processed += static_cast<std::int64_t>(b->bytes);
    }
    capture.ring().release(b);
    counters.ring_filled = static_cast<std::int64_t>(capture.ring().filled());
  }
  capture.stop();
  // Blocks the capture handed over that the loop did not take: an end by --duration or a signal
  // leaves those already queued in the ring (and --blocks those past it). They are not searched;
  // counting them accounts for every delivered block (blocks_delivered = blocks_processed +
  // unsearched_blocks).
  std::int64_t unsearched = 0, unsearched_heaps = 0;
  while (stream::Block* b = capture.ring().next(std::chrono::milliseconds(0))) {
    ++unsearched;
    unsearched_heaps += b->info.packets_received;
    capture.ring().release(b);
  }
  counters.ring_filled = static_cast<std::int64_t>(capture.ring().filled());
  if (reason == "end of stream" && capture.timed_out())
    reason = fmt::format("no packet for {} s (--idle-timeout)", o.idle_timeout);
  const auto t_end = Clock::now();
  if (!open_ended)
    feed_zeros(o.blocks);  // the blocks that never came (the run ended early, or the stream short)
  if (next == 0)
    fail(ErrorCategory::io, "{}: {} before the first block: nothing to search", address, reason);
  if (heaps_per_block == 0) heaps_per_block = capture.heaps_per_block();
  // What the stream was, for pipeline.json (after_end_s: the seconds from its end to the
  // products).
  const auto stream_record = [&](double after_end_s) {
    const std::int64_t dropped_heaps = counters.dropped_blocks.load() * heaps_per_block;
    const std::int64_t lost =
        std::max<std::int64_t>(next * heaps_per_block - heaps_searched - dropped_heaps, 0);
    nlohmann::json k = counters.to_json();
    return nlohmann::json{
        {"address", address},
        {"ended_by", reason},
        {"open_ended", open_ended},
        {"blocks_searched", next},
        {"lost_packets", lost},
        {"heaps_per_block", heaps_per_block},
        {"heaps_searched", heaps_searched},
        {"dropped_blocks", k["dropped_blocks"]},
        {"unsearched_blocks", unsearched},
        {"unsearched_heaps", unsearched_heaps},
        {"zero_filled_blocks", missing},
        {"seconds", {{"waiting", waiting_s}, {"engine", engine_s}, {"after_end", after_end_s}}},
        {"counters", k}};
  };
  std::optional<pipeline::PipelineResult> result;
  try {
    result = plan.finish();
  } catch (const Error& e) {
    // A stream that ended shorter than the search needs (the dispersion delay and a gulp): the
    // file path refuses such a file before the run, a live stream's end comes unannounced. The
    // run failed, but what the stream was stays on record (a new user's trial of 2026-12-03,
    // finding 2: it exited 2 with the file's advice and left nothing).
    if (e.category() != ErrorCategory::invalid_argument) throw;
    o.stream_record = stream_record(since(t_end));
    nlohmann::json summary = run_summary(o);
    summary["error"] = e.what();
    const std::string record = (std::filesystem::path(o.out) / "pipeline.json").string();
    StagedOutputs staged;
    io::write_text_file(staged.temp(record), summary.dump(2) + "\n");
    if (!o.json.empty()) io::write_text_file(staged.temp(o.json), summary.dump(2) + "\n");
    staged.commit();
    folder.keep();
    fail(ErrorCategory::io,
         "{}: {} after {} block(s), too short to search ({}); the stream's "
         "record is in '{}'",
         address, reason, next, e.what(), record);
  }
  const pipeline::PipelineResult& r = *result;
  publish();  // the candidates the end made final
  counters.candidates = static_cast<std::int64_t>(r.candidates.size());
  o.stream_record = stream_record(since(t_end));
  write_products(o, r, folder);
  live.replaced();
  fmt::print(
      stderr,
      "warpbeam pipeline: {}: {} block(s) processed, {} dropped (ring full), {} zero-filled, "
      "{} heap(s) lost{}\n",
      reason, counters.blocks_processed.load(), counters.dropped_blocks.load(), missing.size(),
      o.stream_record["lost_packets"].get<std::int64_t>(),
      unsearched > 0 ? fmt::format(", {} received but not searched (queued at the end)", unsearched)
                     : std::string());
  print_summary(o, r);
}

void run(PipelineOptions& o, const dist::Comm& comm) {
  auto& c = o.config;
  auto& sc = c.search;
  auto& run = c.run;
  Backend backend = Backend::automatic;
  std::unique_ptr<io::GuppiReader> reader;
  std::optional<OutputFolder> folder;
  std::exception_ptr error;
  try {  // usage errors (exit 2) before the file is opened, on every rank alike
    apply_search_options(sc, run, o.no_zero_dm, o.zap_chans, o.memory_mib, o.gpu_memory_mib);
    c.integration = o.integrate;
    c.algorithm = beamform::parse_algorithm(o.algorithm);
    c.split = pipeline::parse_split(o.split);
    c.comm = &comm;
    c.pointings = load_pointings(o.beams_file, o.grid);
    c.array = load_array(o.array, o.site);
    if (!o.mask.empty()) {
      c.array.mask.assign(static_cast<std::size_t>(c.array.nantennas()), 1);
      for (int a : o.mask) {
        require_range("--mask antenna", a, 0, c.array.nantennas() - 1);
        c.array.mask[static_cast<std::size_t>(a)] = 0;
      }
    }
    c.validate();
    backend = parse_backend(o.backend);
    check_algorithm_backend(c.algorithm, backend);
    // The products' folders, now rather than after a long run: --json's must exist; --out is
    // made (or found) by rank 0, and removed again if the run fails.
    io::check_outputs({o.json}, {o.in, o.beams_file, o.array});
    if (comm.is_root()) {
      folder.emplace(o.out);
      const auto in_out = [&](const char* name) {
        return (std::filesystem::path(o.out) / name).string();
      };
      io::check_outputs(
          {in_out("candidates.cand"), in_out("candidates.json"), in_out("pipeline.json"), o.json},
          {o.in, o.beams_file, o.array});
    }
    reader = std::make_unique<io::GuppiReader>(o.in);  // GUPPI raw (it needs the block count)
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);
  pipeline::PipelineResult r = pipeline::run_pipeline(*reader, reader->nblocks(), c, backend);

  // Rank 0 writes the products, all or none; every rank learns whether that worked.
  if (comm.is_root()) {
    try {
      write_products(o, r, *folder);
    } catch (...) {
      error = std::current_exception();
    }
  }
  comm.agree(error);
  if (!comm.is_root()) return;

  print_summary(o, r);
}

void print_summary(const PipelineOptions& o, const pipeline::PipelineResult& r) {
  const auto& h = r.header;
  fmt::print(
      "{}: {} beams of {} channels, {} samples ({:.3f} s) each, tsamp {} us, {} block(s); {} DM "
      "trials {:.2f}-{:.2f}, {} gulp(s) of {}\n",
      o.in, r.nbeams, h.nchans, h.nsamples, h.duration_s(), h.tsamp * 1e6, r.blocks, r.dms.size(),
      r.dms.front(), r.dms.back(), r.gulps, r.gulp);
  fmt::print(
      "{} backend ({} beamformer): {:.2f} s for {:.3f} s of voltages ({:.2f}x real time); read "
      "{:.2f} s, beamform {:.2f} s, search {:.2f} s (rows in {:.2f}, RFI {:.2f}, dedispersion "
      "{:.2f}, plane search {:.2f})\n",
      r.backend, r.algorithm, r.seconds_total, r.observation_s,
      r.seconds_total > 0 ? r.observation_s / r.seconds_total : 0.0, r.seconds_read,
      r.seconds_beamform, r.seconds_search, r.seconds_search_read, r.seconds_rfi, r.seconds_dedisp,
      r.seconds_plane_search);
  if (r.zero_blocks > 0)
    fmt::print("{} block(s) of zeros in {:.2f} s ({} gulp(s) of zeros not searched)\n",
               r.zero_blocks, r.seconds_zero_blocks, r.gulps_skipped);
  if (r.backend == "cuda")
    fmt::print(
        "copied {} bytes to the device, {} bytes back (the beams: {} bytes, {} device to "
        "device)\n",
        r.bytes_to_device, r.bytes_from_device, r.beam_bytes, r.bytes_device_to_device);
  if (r.workers > 1)
    fmt::print("{} workers ({} rank(s)), split by {}: {} bytes of beam rows between {}\n",
               r.workers, r.ranks, r.split,
               r.ranks > 1 ? r.bytes_between_ranks : r.bytes_between_devices,
               r.ranks > 1 ? "ranks" : "devices");
  fmt::print("{} candidate(s) -> {}\n", r.candidates.size(), o.out);
  print_candidates(r.candidates, h.tsamp, o.top);
  const std::size_t n = o.top > 0 ? std::min(r.candidates.size(), static_cast<std::size_t>(o.top))
                                  : r.candidates.size();
  if (n > 0) {
    fmt::print("beams of the best:");
    for (std::size_t i = 0; i < n; ++i)
      fmt::print(" {}", r.candidates[i].beam);
    fmt::print("\n");
  }
}

}  // namespace

void add_pipeline_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "pipeline",
      "Voltages -> beams -> dedispersion -> single-pulse search for every beam (GUPPI raw)");
  auto o = std::make_shared<PipelineOptions>();
  auto& sc = o->config.search;
  auto& ro = o->config.run;
  cmd->add_option("IN", o->in, "Voltage file (GUPPI raw with NANTS)");
  cmd->add_option("--listen", o->listen,
                  "Search a live SPEAD voltage stream received on spead://HOST:PORT instead of IN "
                  "(`warpbeam send voltages`)");
  cmd->add_option("--blocks", o->blocks,
                  "--listen: the stream's length in voltage blocks, the ones that never came "
                  "searched as zeros (default: open-ended, until the stream ends)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd->add_option("--duration", o->duration,
                  "--listen: end after this many seconds from the stream's start (0: never)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--ring-blocks", o->ring_blocks, "--listen: blocks of the ring")
      ->check(CLI::Range(3, 1 << 16))
      ->capture_default_str();
  add_capture_options(*cmd, o->socket_buffer_mib, o->capture_core);
  cmd->add_option("--idle-timeout", o->idle_timeout,
                  "--listen: end after this many seconds without a packet, counted from the first "
                  "packet: a listener waits for its stream to start (0: at the stream's stop "
                  "heap)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--start-timeout", o->start_timeout,
                  "--listen: give up (exit 1, no products) when no stream has started this many "
                  "seconds after listening (0: wait until a signal)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--http", o->http,
                  "--listen: serve /metrics (Prometheus) and a live page at 127.0.0.1:PORT");
  cmd->add_option("--test-block-delay-ms", o->test_block_delay_ms)
      ->check(CLI::Range(0.0, 1e6))
      ->group("");
  cmd->add_option("--beams", o->beams_file,
                  "Beam list: 'azel AZ EL [NAME]', 'radec RA DEC [NAME]' or 'lm L M [NAME]' "
                  "per line (degrees; RA/Dec beams track)");
  cmd->add_option("--grid", o->grid,
                  "Beam grid FRAME:A0:A1:NA:B0:B1:NB, e.g. azel:170:190:5:60:70:3");
  cmd->add_option("--out", o->out,
                  "Output folder: candidates.cand (+ beam column), candidates.json, "
                  "pipeline.json")
      ->required();
  cmd->add_option("--json", o->json, "Also write the run's summary (pipeline.json) here");
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--algorithm", o->algorithm,
                  "Beamformer: auto, register-tiled, register-stream, tensor-core, cublas-fp16, "
                  "tensor-int8 or tensor-int8-stream")
      ->check(CLI::IsMember({"auto", "register-tiled", "register-stream", "tensor-core",
                             "cublas-fp16", "tensor-int8", "tensor-int8-stream"}))
      ->capture_default_str();
  cmd->add_flag("--int8-weights", o->config.int8_weights,
                "Let auto pick the int8-weight beamformer (tensor-int8-stream: ci4, <= 32 "
                "antennas): ~4x faster on B1, beam power within ~1 % instead of 1e-5");
  cmd->add_option("--array", o->array, "best2, or a file of antenna positions 'E N U' (m)")
      ->capture_default_str();
  cmd->add_option("--site", o->site, "Observatory 'LON_DEG,LAT_DEG,HEIGHT_M' (default Medicina)");
  cmd->add_option("--mask", o->mask, "Antenna indices to leave out (sub-arraying)")->delimiter(',');
  cmd->add_option("--integrate", o->integrate, "Voltage samples summed into one beam sample")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--dm-min", sc.dm_min, "Smallest DM (pc cm^-3)")->capture_default_str();
  cmd->add_option("--dm-max", sc.dm_max, "Largest DM (pc cm^-3)")->capture_default_str();
  cmd->add_option("--dm-tol", sc.dm_tolerance, "DM list tolerance (dedisp's rule, > 1)")
      ->capture_default_str();
  cmd->add_option("--pulse-width", sc.pulse_width_us,
                  "Intrinsic pulse width the DM list is built for (us)")
      ->capture_default_str();
  cmd->add_option("--boxcar-max", sc.boxcar_max, "Widest boxcar (samples, a power of 2)")
      ->capture_default_str();
  cmd->add_option("--snr-min", sc.snr_min, "Detection threshold (S/N)")->capture_default_str();
  cmd->add_option("--zap-chans", o->zap_chans, "Channels to ignore, e.g. 0-10,200");
  cmd->add_flag("--no-zero-dm", o->no_zero_dm, "Do not subtract the zero-DM time series");
  cmd->add_option("--zap-sigma", sc.zap_sigma, "Zap outlier channels (MADs; 0: off)")
      ->capture_default_str();
  cmd->add_option("--baseline", sc.baseline_s, "Running-median baseline window (s)")
      ->capture_default_str();
  cmd->add_option("--gulp", ro.gulp, "Beam samples searched per gulp (0: from the budgets)")
      ->capture_default_str();
  cmd->add_option("--threads", ro.threads, "CPU threads (0: all)")->capture_default_str();
  cmd->add_option("--memory", o->memory_mib, "Host memory budget (MiB)")->capture_default_str();
  cmd->add_option("--gpu-memory", o->gpu_memory_mib,
                  "CUDA: budget for the device buffers (MiB; 0: 80% of the free memory)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--device", ro.device, "CUDA device index")
      ->check(CLI::Range(0, 1023))
      ->capture_default_str();
  cmd->add_option("--gpus", o->config.devices,
                  "CUDA: devices sharing the work, e.g. 0,1 (default: --device alone; under "
                  "mpirun each rank takes one, local rank mod the list)")
      ->delimiter(',');
  cmd->add_option("--split", o->split,
                  "Several devices or ranks: channels (each ingests a sub-band and sends every "
                  "beam's rows to the one searching it), beams (each ingests every channel and "
                  "forms and searches its own beams) or auto (channels)")
      ->check(CLI::IsMember({"auto", "channels", "beams"}))
      ->capture_default_str();
  cmd->add_option("--gpu-streams", ro.gpu_streams,
                  "CUDA: search streams (2: one beam's RFI stage overlaps the previous beam's "
                  "search)")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  cmd->add_option("--top", o->top, "Candidates shown in the table (0: all)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->footer(
      "Each beam is searched as `warpbeam search` searches a filterbank (same gulps, RFI "
      "cleaning, DM list, boxcars and clustering). --backend cuda keeps the beams on the GPU: "
      "only the voltages go there and only RFI statistics and peaks come back. Several GPUs "
      "(--gpus) or MPI ranks (mpirun -n N warpbeam pipeline ...) share the work (--split); the "
      "candidates are the same as one worker finds.");
  cmd->callback([o, cmd] {
    if (o->listen.empty() == o->in.empty())
      fail(ErrorCategory::invalid_argument,
           "give either IN (a voltage file) or --listen spead://...");
    // The live stream's options mean nothing for a file: refused, not ignored.
    if (o->listen.empty())
      for (const char* opt : {"--blocks", "--duration", "--ring-blocks", "--socket-buffer",
                              "--capture-core", "--idle-timeout", "--start-timeout", "--http"})
        if (cmd->count(opt) > 0)
          fail(ErrorCategory::invalid_argument, "{} is for --listen (a live stream), not a file",
               opt);
    if (!o->listen.empty())
      return naming_flags(kSearchFlags,
                          [&] { naming_flags(kPipelineFlags, [&] { run_listen(*o); }); });
    const dist::Comm& comm = dist::Comm::world();
    dist::run_collective(comm, [&] {
      naming_flags(kSearchFlags, [&] { naming_flags(kPipelineFlags, [&] { run(*o, comm); }); });
    });
  });
}

}  // namespace warpbeam::cli
