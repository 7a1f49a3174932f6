#pragma once
// The file search: a SIGPROC filterbank of any length searched in gulps with bounded memory.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/core.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/search/candidates.hpp"
#include "warpbeam/search/cluster.hpp"

namespace warpbeam::search {

struct FileSearchConfig {
  double dm_min = 0, dm_max = 2000;  ///< pc cm^-3
  double dm_tolerance = 1.25;        ///< DM list rule (dedisp::dm_list_dedisp)
  double pulse_width_us = 40;        ///< intrinsic width the DM list is built for (us)
  int boxcar_max = 4096;             ///< samples, a power of 2
  float snr_min = 6;
  double baseline_s = 2.0;
  std::vector<int> zap_channels;  ///< channels to ignore (indices; --zap-chans)
  double zap_sigma = 5;           ///< outlier channels (RfiConfig::zap_sigma; 0: none)
  bool zero_dm = true;            ///< zero-DM subtraction (RfiConfig::zero_dm)
  ClusterConfig cluster;
  /// Owned output samples per gulp (0: chosen from the memory budget).
  std::int64_t gulp = 0;
  /// Budget for the search's buffers (bytes); see search_filterbank() for the bound.
  std::int64_t memory_bytes = std::int64_t{2} << 30;
  int threads = 0;
  int beam = 0;          ///< written in every candidate
  bool progress = true;  ///< progress on stderr when it is a terminal
  // --- backend cuda ---
  /// Budget for the device buffers (bytes; 0: 80 % of the device's free memory).
  std::int64_t device_memory_bytes = 0;
  int device = 0;         ///< CUDA device index
  int gpu_streams = 2;    ///< 2: gulp n+1's read, copy and RFI overlap gulp n's work; 1: in turn
  bool autotune = false;  ///< dedisp::autotune() the dedispersion kernel on the gulp's shape

  void validate() const;
  nlohmann::json to_json() const;
};

/// Parses a channel list such as "0-10,200,300-310" (inclusive ranges, any order) into sorted,
/// unique indices; throws invalid_argument naming the bad item.
std::vector<int> parse_channel_list(const std::string& spec);

/// What a file search found and how it ran.
struct SearchResult {
  io::FilterbankHeader header;
  std::vector<float> dms;
  std::vector<Candidate> candidates;   ///< sorted by S/N, descending
  std::int32_t max_delay = 0;          ///< samples, at the largest DM
  std::int64_t nsamples_searched = 0;  ///< output samples (nsamples - max_delay)
  std::int64_t gulp = 0, gulps = 0, margin = 0;
  std::int64_t dm_chunk = 0;  ///< DM trials dedispersed at a time
  int widest_boxcar = 0;      ///< the widest boxcar searched (baseline, gulp and boxcar_max limits)
  std::int64_t memory_bytes = 0;         ///< the host buffers' size, by the bound below
  std::int64_t device_memory_bytes = 0;  ///< cuda: the device buffers' size, by its bound
  int min_channels_kept = 0;             ///< fewest channels kept by RFI cleaning in a gulp
  /// Per channel: why RFI cleaning zapped it in at least one gulp (ZapReason; the first reason
  /// seen), kZapNone for a channel kept in every gulp. to_json() lists them by reason.
  std::vector<std::uint8_t> zapped;
  /// Adds one gulp's reasons (RfiReport::reason) to `zapped`.
  void add_zapped(const std::vector<std::uint8_t>& gulp_reasons);
  /// The channels zapped for `reason` in at least one gulp, ascending.
  std::vector<int> zapped_channels(std::uint8_t reason) const;
  std::string backend;  ///< "cpu" or "cuda"
  /// Time of each stage (s). cpu: wall time of read, rfi, dedisp, search, cluster. cuda: read =
  /// host reads + copies to the GPU; rfi, dedisp and search = GPU time between events on the
  /// stream of each gulp (the two streams overlap, so the stages sum to more than the wall time);
  /// cluster = host.
  double seconds_read = 0, seconds_rfi = 0, seconds_dedisp = 0, seconds_search = 0,
         seconds_cluster = 0;
  /// Wall time of the runner before its first gulp (cuda: pinned host buffers, device buffers,
  /// streams; cpu: host buffers): a fixed cost per search, whatever the file's length.
  double seconds_setup = 0;
  std::int64_t bytes_to_device = 0, bytes_from_device = 0;  ///< cuda: bytes copied each way
  nlohmann::json to_json() const;                           ///< everything but the candidates
};

/// Searches a SIGPROC filterbank file.
///
/// Streaming: the valid output samples [0, nsamples - max_delay) are cut into owned ranges of
/// `gulp` samples (default: the largest of 2^17, twice the maximum delay and kMinBoxcars times
/// the widest boxcar the baseline allows, then halved to fit the memory budget); each gulp
/// dedisperses and searches its owned range plus a margin of boxcar_max samples on each side
/// (clipped at the file's ends), reading input rows [start, end + max_delay). A peak is kept only
/// by the gulp that owns its best sample, and clusters are built across gulps (Clusterer), so no
/// pulse is lost at a gulp edge and none is counted twice. The statistics (RFI, baseline, RMS) are
/// per gulp.
///
/// Memory bound (bytes), with rows = gulp + 2 margin + max_delay, L = gulp + 2 margin:
///   rows * (row_bytes + 8 nchans)        packed input, cleaned float input, dedispersion scratch
///   + rows * threads * 68                RFI statistics scratch (16 channels per thread)
///   + dm_chunk * L * 4                   the DM-time plane of one chunk of DM trials
///   + threads * L * 24                   search scratch (baseline, residual, prefix, S/N)
/// The gulp is halved until this fits memory_bytes, then the DM range is split into chunks;
/// if even one DM trial does not fit (nchans * max_delay is too large) it throws
/// invalid_argument naming the figure.
///
/// Backend cuda: everything but reading and clustering runs on the GPU (src/search/
/// file_search_cuda.cpp): the packed samples of a gulp are copied to the device, cleaned there
/// (the RFI stage's statistics come back, the zapping is decided on the host by the same rules),
/// dedispersed from channel-major float32 rows and searched; only the peaks come back. Two
/// streams with a set of buffers each: while the GPU works on gulp n, the host reads gulp n+1
/// and its copy and RFI stage run on the other stream. The host holds two gulps of packed
/// samples (pinned): 2 * rows * row_bytes <= memory_bytes. The device holds, per stream, the
/// packed gulp, its channel rows (rows * nchans * 4 bytes, padded) with their statistics
/// scratch (~0.24 of that), the plane of one chunk (dm_chunk * L * 4) and the search scratch
/// (512 trials * L * ~10 bytes), plus the dedispersion tables (~6 bytes per trial and channel
/// per plane length): within device_memory_bytes (0: 80 % of the free memory). The default
/// gulp follows the same rule as the CPU's, but each backend halves it for its own budgets; the
/// statistics are per gulp, so the two give the same candidates when their gulps are equal (set
/// `gulp` to be sure).
///
/// Throws io/format errors for a bad file; invalid_argument when the file is shorter than the
/// largest DM delay (naming --dm-max) or a parameter is out of range.
SearchResult search_filterbank(const std::string& path, const FileSearchConfig& config,
                               Backend backend);

}  // namespace warpbeam::search
