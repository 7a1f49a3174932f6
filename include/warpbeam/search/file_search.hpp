#pragma once
// The file search: a filterbank of any length, from any io::FilterbankSource (SIGPROC,
// PSRFITS, an array in memory), searched in gulps with bounded memory.
//
// Config -> Plan -> execute, as every engine (DESIGN.md):
//   FileSearchConfig  the physics: DM range and list rule, S/N, boxcars, baseline, RFI with the
//                     channel mask, clustering;
//   RunOptions        how it runs: gulp, threads, device, streams, memory budgets, autotune,
//                     progress (the candidates depend on none of them but the gulp: the
//                     statistics are per gulp);
//   FileSearchPlan    both, validated once, planned from a filterbank header: the DM list and
//                     delays, the gulps, the DM chunk, the memory each buffer takes;
//   execute(source)   reads the source through io::FilterbankSource and returns the candidates.
// search_filterbank(path, ...) is the one-call form.
//
// Streaming: the valid output samples [0, nsamples - max_delay) are cut into owned ranges of
// `gulp` samples (default: the largest of 2^17, twice the maximum delay and kMinBoxcars times
// the widest boxcar the baseline allows, then halved to fit the memory budget); each gulp
// dedisperses and searches its owned range plus a margin of boxcar_max samples on each side
// (clipped at the file's ends), reading input rows [start, end + max_delay). A peak is kept only
// by the gulp that owns its best sample, and clusters are built across gulps (Clusterer), so no
// pulse is lost at a gulp edge and none is counted twice. The statistics (RFI, baseline, RMS) are
// per gulp.
//
// Reading: the packed rows of each gulp are read one gulp ahead on a thread of their own, into
// one of two host buffers (pinned for cuda), each read split among RunOptions::read_threads
// threads (SIGPROC: positional reads), so the read of gulp n+1 overlaps the search of gulp n.
//
// Memory: every buffer of a gulp is what a plan reports (Workspace, as cufftGetSize): the
// reader's two gulps of packed rows; the cleaned float32 rows of a gulp,
// clean_filterbank_workspace(), the DM-time plane of one chunk of DM trials,
// DedispersionPlan::estimate_workspace() and SearchPlan::estimate_workspace() (cpu); per CUDA
// stream, the gulp, its channel
// rows with their statistics, the plane and the search scratch, plus the dedispersion plans'
// tables (cuda). The gulp is halved until they fit RunOptions::memory_bytes (and
// device_memory_bytes), then the DM list is cut into chunks that fit; if even one DM trial
// does not fit (nchans x max_delay is too large) the plan throws invalid_argument. The sub-band
// and FDMT plans hold buffers of their own (stage-1 series, FDMT level buffers: their
// estimate_workspace(), from the tables), one per CPU searcher and per CUDA stream: the chunk
// is halved until the largest chunk's plan fits too (dedisp automatic falls back to brute force
// when not even one trial's does; an explicit method throws invalid_argument).
//
// Backend cuda: everything but reading and clustering runs on the GPU: the packed samples of a
// gulp are copied to the device, cleaned there (the RFI statistics come back, the zapping is
// decided on the host by the same rules), dedispersed from channel-major float32 rows and
// searched; only the peaks come back. Two streams: while the GPU works on gulp n, gulp n+1
// (read ahead by the reader) is copied and its RFI stage runs on the other stream. Equal gulps give
// the CPU's candidates (set RunOptions::gulp to be sure: each backend halves the default for its
// own budgets).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/core.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/search/candidates.hpp"
#include "warpbeam/search/cluster.hpp"
#include "warpbeam/search/plan.hpp"
#include "warpbeam/search/rfi.hpp"

namespace warpbeam::search {

/// How the file search dedisperses (FileSearchConfig::dedisp): brute force (the kernel dedisp
/// picks), the sub-band or the FDMT method (dedisp::Algorithm::subband / fdmt: the same DM
/// trials, each summed along slightly different whole-sample delays, with fewer additions), or
/// automatic: dedisp::select_algorithm() on the search's plane (the fastest method on the
/// backend whose predicted S/N is at least dedisp_min_snr of brute force's on every trial).
enum class DedispMethod { automatic, brute, subband, fdmt };
/// "auto", "brute", "subband", "fdmt".
std::string to_string(DedispMethod m);
/// Parses the names of to_string() ("automatic" too); throws invalid_argument naming the field
/// `dedisp` otherwise.
DedispMethod parse_dedisp_method(const std::string& name);

/// What is searched for: the physics of a file search. validate() throws invalid_argument naming
/// the field (e.g. "dm_max = 5 must be >= dm_min = 10").
struct FileSearchConfig {
  double dm_min = 0, dm_max = 2000;  ///< pc cm^-3
  double dm_tolerance = 1.25;        ///< DM list rule (dedisp::dm_list_dedisp)
  double pulse_width_us = 40;        ///< intrinsic width the DM list is built for (us)
  int boxcar_max = 4096;             ///< samples, a power of 2
  float snr_min = 6;
  double baseline_s = 2.0;  ///< running-median baseline window (s)
  ChannelMask zap;          ///< channels to ignore (RfiConfig::zap)
  double zap_sigma = 5;     ///< outlier channels (RfiConfig::zap_sigma; 0: none)
  bool zero_dm = true;      ///< zero-DM subtraction (RfiConfig::zero_dm)
  ClusterConfig cluster;
  int beam = 0;  ///< written in every candidate
  // --- dedispersion method (the DM trials are the same for every method) ---
  DedispMethod dedisp = DedispMethod::brute;
  /// The least S/N of a trial, as a fraction of brute force's (dedisp::TrialReport::
  /// snr_fraction): automatic's bound, and the sub-band grid's (SubbandConfig::
  /// min_snr_fraction). (0, 1].
  double dedisp_min_snr = 0.95;
  /// subband: the number of sub-bands, at most the channels (0: the fewest additions;
  /// dedisp::SubbandConfig::subbands).
  int subbands = 0;
  /// subband: a uniform coarse DM step (pc cm^-3; SubbandConfig::coarse_dm_step), refused when
  /// the smearing bound does not allow it for the sub-bands; 0: the grid the bound allows.
  double subband_dm_step = 0;

  void validate() const;
  nlohmann::json to_json() const;
};

/// How a file search runs. validate() throws invalid_argument naming the field.
struct RunOptions {
  /// Owned output samples per gulp (0: chosen from the memory budget). The statistics are per
  /// gulp, so this is the one option the candidates depend on.
  std::int64_t gulp = 0;
  /// Budget for the host buffers (bytes): see the header comment.
  std::int64_t memory_bytes = std::int64_t{2} << 30;
  int threads = 0;       ///< CPU threads (0: OpenMP's default)
  bool progress = true;  ///< progress on stderr when it is a terminal
  // --- backend cuda ---
  /// Budget for the device buffers (bytes; 0: 80 % of the device's free memory).
  std::int64_t device_memory_bytes = 0;
  int device = 0;         ///< CUDA device index
  int gpu_streams = 2;    ///< 2: gulp n+1's read, copy and RFI overlap gulp n's work; 1: in turn
  bool autotune = false;  ///< dedisp::autotune() the dedispersion kernel on the gulp's shape
  /// Threads that read one gulp of the file (0: half the hardware threads, 1 to 8). The gulps
  /// are read one ahead on a thread of their own whatever this is.
  int read_threads = 0;
  /// read_threads, or when 0 what it stands for on this machine.
  int resolved_read_threads() const;

  void validate() const;
  nlohmann::json to_json() const;
};

/// The samples of gulp g: it owns output samples [own_begin, own_end) and searches the plane
/// [p0, p1) (the owned range plus a margin on each side, clipped at the file's ends), which
/// needs input rows [p0, p1 + max_delay).
struct GulpRange {
  std::int64_t own_begin = 0, own_end = 0, p0 = 0, p1 = 0;
  std::int64_t len() const { return p1 - p0; }
};

/// What a file search found and how it ran.
struct SearchResult {
  io::FilterbankHeader header;
  std::vector<float> dms;
  std::vector<Candidate> candidates;   ///< sorted by S/N, descending
  std::int32_t max_delay = 0;          ///< samples, at the largest DM
  std::int64_t nsamples_searched = 0;  ///< output samples (nsamples - max_delay)
  std::int64_t gulp = 0, gulps = 0, margin = 0;
  std::int64_t gulps_searched = 0;  ///< gulps searched (< gulps when the hook stopped it)
  std::int64_t dm_chunk = 0;        ///< DM trials dedispersed at a time
  int widest_boxcar = 0;  ///< the widest boxcar searched (baseline, gulp and boxcar_max limits)
  std::int64_t memory_bytes = 0;         ///< the host buffers, by the plans' reports
  std::int64_t device_memory_bytes = 0;  ///< cuda: the device buffers, by the plans' reports
  int min_channels_kept = 0;             ///< fewest channels kept by RFI cleaning in a gulp
  /// Per channel: why RFI cleaning zapped it in at least one gulp (ZapReason; the first reason
  /// seen), kZapNone for a channel kept in every gulp. to_json() lists them by reason.
  std::vector<std::uint8_t> zapped;
  /// Adds one gulp's reasons (RfiReport::reason) to `zapped`.
  void add_zapped(const std::vector<std::uint8_t>& gulp_reasons);
  /// The channels zapped for `reason` in at least one gulp, ascending.
  std::vector<int> zapped_channels(std::uint8_t reason) const;
  std::string backend;        ///< "cpu" or "cuda"
  std::string dedisp_method;  ///< the method that ran: "brute", "subband" or "fdmt"
  std::string dedisp_choice;  ///< why (dedisp automatic): modelled times, S/N; else ""
  /// Time of each stage (s), summed over gulps. read: the reader thread's reads of the packed
  /// rows (beside the search: the gulps are read one ahead); read_wait: the time the search
  /// waited for them (what the read adds to the wall time). cpu: unpack, rfi, dedisp, search =
  /// wall time. cuda: copy (the rows to the GPU), rfi (unpack, statistics, cleaning), dedisp and
  /// search (baseline, RMS, boxcars, peaks) = GPU time between events on the stream of each
  /// gulp (two streams overlap, so these sum to more than the wall time); gpu_wait = host time
  /// blocked on the GPU (the RFI statistics, the peaks). cluster: host, clustering.
  double seconds_read = 0, seconds_read_wait = 0, seconds_unpack = 0, seconds_copy = 0,
         seconds_rfi = 0, seconds_dedisp = 0, seconds_search = 0, seconds_cluster = 0,
         seconds_gpu_wait = 0;
  /// Wall time of the runner before its first gulp (cuda: pinned host buffers, device buffers,
  /// streams; cpu: host buffers): a fixed cost per search, whatever the file's length.
  double seconds_setup = 0;
  /// Host: dedispersion and search plans made during the gulps (each new chunk and plane
  /// length; sub-band and FDMT plans per CUDA stream).
  double seconds_gulp_plans = 0;
  /// Dedispersion plans made during the gulps: one per DM chunk where the method's plan runs the
  /// shorter gulps too (sub-band; per CUDA stream), else one per chunk and plane length.
  std::int64_t dedisp_plans = 0;
  /// Wall time of the FileSearchPlan (search_filterbank(); 0 when the caller made it) and of
  /// the whole search (execute(), plus seconds_plan in search_filterbank()).
  double seconds_plan = 0, seconds_total = 0;
  std::int64_t bytes_to_device = 0, bytes_from_device = 0;  ///< cuda: bytes copied each way
  int read_threads = 0;  ///< threads per read of a gulp (RunOptions::resolved_read_threads)
  nlohmann::json to_json() const;  ///< everything but the candidates
};

/// Called by execute() after each gulp with the gulps done so far and the gulps in all; return
/// false to stop before the next gulp (e.g. on Ctrl-C, or when a live stream ends): the gulps in
/// flight are finished and execute() returns what was found in the gulps searched.
using GulpHook = std::function<bool(std::int64_t gulps_done, std::int64_t gulps)>;

/// A file search planned for one filterbank header: copyable, immutable, made once per file.
class FileSearchPlan {
 public:
  /// Validates `config` and `options`, resolves `backend`, and plans the DM list, the delays,
  /// the gulps and the DM chunk from `header`. `name` names the data in messages (a path).
  /// Throws invalid_argument naming the field: a parameter out of range, a masked channel
  /// outside the header's channels, data shorter than the largest DM delay (dm_max), or a budget
  /// that does not hold one DM trial (memory_bytes, device_memory_bytes); unsupported for cuda
  /// in a build without it.
  FileSearchPlan(FileSearchConfig config, RunOptions options, const io::FilterbankHeader& header,
                 Backend backend, std::string name = {});

  const FileSearchConfig& config() const { return config_; }
  const RunOptions& options() const { return options_; }
  const io::FilterbankHeader& header() const { return header_; }
  const std::string& name() const { return name_; }
  Backend backend() const { return backend_; }
  int threads() const { return threads_; }  ///< CPU threads, resolved

  const std::vector<float>& dms() const { return dms_; }
  std::int64_t ndms() const { return static_cast<std::int64_t>(dms_.size()); }
  /// Delays [ndms][nchans] (samples) of the DM list.
  const std::vector<std::int32_t>& delays() const { return delays_; }
  std::int32_t max_delay() const { return max_delay_; }  ///< at the largest DM
  /// The largest delay of DM trial d (samples).
  std::int32_t trial_max_delay(std::int64_t d) const;
  std::int64_t nsamples_searched() const { return nout_; }  ///< nsamples - max_delay
  std::int64_t margin() const { return margin_; }           ///< boxcar_max
  std::int64_t gulp() const { return gulp_; }               ///< owned samples per gulp
  std::int64_t gulps() const { return gulps_; }
  std::int64_t dm_chunk() const { return chunk_; }  ///< DM trials dedispersed at a time
  /// The longest plane: min(gulp + 2 margin, nsamples_searched).
  std::int64_t plane_samples() const { return plane_len_; }
  GulpRange gulp_range(std::int64_t g) const;
  /// The memory the search takes, by the plans' reports (see the header comment).
  Workspace workspace() const { return workspace_; }
  /// The dedispersion method that runs (FileSearchConfig::dedisp resolved for this header and
  /// backend): Algorithm::automatic (brute force: the kernel the backend picks), subband or
  /// fdmt.
  dedisp::Algorithm dedisp_algorithm() const { return dedisp_algorithm_; }
  /// Why that method (dedisp automatic: each method's modelled time and predicted S/N), or "".
  const std::string& dedisp_choice() const { return dedisp_choice_; }

  /// The RFI cleaning of every gulp.
  RfiConfig rfi() const;
  /// The dedispersion of DM trials [d0, d1) into a plane of `len` samples: float32 rows
  /// (channel-major on cuda), nsamples_in = len + the largest delay of trial d1 - 1, with the
  /// plan's method. subband: the grid derived once for the whole DM list (SubbandConfig::
  /// trial_coarse_dms), so that every chunk and slice sums each trial along the same delays;
  /// subband and fdmt take no killmask (the cleaned gulp holds zeros in zapped channels), so
  /// that both backends sum along the same delays.
  dedisp::DedispersionConfig dedispersion_config(std::int64_t d0, std::int64_t d1,
                                                 std::int64_t len) const;
  /// The search of such a plane; with zero-DM subtraction each trial's widest boxcar is capped at
  /// its largest delay (a pulse wider than its sweep is mostly removed by zero-DM).
  SearchConfig search_config(std::int64_t d0, std::int64_t d1, std::int64_t len) const;

  /// Searches `source` (whose header must be the plan's: nchans, nbits, tsamp, nsamples) and
  /// returns the candidates; `hook` is called after each gulp (see GulpHook). Throws io/format
  /// errors from the source, invalid_argument for a source of another shape.
  SearchResult execute(io::FilterbankSource& source, const GulpHook& hook = {}) const;

 private:
  FileSearchConfig config_;
  RunOptions options_;
  io::FilterbankHeader header_;
  std::string name_;
  Backend backend_ = Backend::cpu;
  int threads_ = 1;
  std::vector<float> dms_;
  std::vector<std::int32_t> delays_;
  std::int32_t max_delay_ = 0;
  std::int64_t nout_ = 0, margin_ = 0, gulp_ = 0, gulps_ = 0, chunk_ = 0, plane_len_ = 0;
  Workspace workspace_;
  dedisp::Algorithm dedisp_algorithm_ = dedisp::Algorithm::automatic;
  std::string dedisp_choice_;
  dedisp::SubbandConfig subband_;  // subband: the whole list's grid

  void choose_dedisp_method(std::int64_t len);
};

/// The one-call search of a filterbank file (io::open_filterbank(path)): plans and executes.
SearchResult search_filterbank(const std::string& path, const FileSearchConfig& config,
                               const RunOptions& options, Backend backend);

}  // namespace warpbeam::search
