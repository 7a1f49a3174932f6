#pragma once
// Internal: the pieces of the streaming file search, so that a driver that splits the work
// differently (several GPUs, MPI ranks over DM ranges) reuses them. search_filterbank() is:
//   1. plan_file_search()   the DM list, delays, gulps and DM chunks of the file (both backends;
//                           the memory model depends on the backend);
//   2. run_gulps_cpu() or run_gulps_cuda()   search DM trials [dm_begin, dm_end) of every gulp
//                           on one backend (one device) and hand the peaks of each gulp, before
//                           clustering and in gulp order, to a sink;
//   3. the sink clusters them across gulps (Clusterer) and the clusters become candidates.
// A peak carries its DM trial as an index into the whole DM list and its samples from the file
// start, so peaks of different DM ranges of the same gulp can simply be concatenated before
// clustering (a gulp is final for clustering once every range has delivered it).
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "warpbeam/dedisp.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search::detail {

/// The samples of gulp g: it owns output samples [own_begin, own_end) and searches the plane
/// [p0, p1) (the owned range plus a margin on each side, clipped at the file's ends), which
/// needs input rows [p0, p1 + max_delay).
struct GulpRange {
  std::int64_t own_begin = 0, own_end = 0, p0 = 0, p1 = 0;
  std::int64_t len() const { return p1 - p0; }
};

struct FileSearchLayout {
  std::string path;
  io::FilterbankHeader header;
  Backend backend = Backend::cpu;
  std::vector<float> dms;
  std::vector<std::int32_t> delays;  ///< [ndm][nchans] (samples)
  std::int32_t max_delay = 0;        ///< at the largest DM
  std::int64_t nout = 0;             ///< output samples: nsamples - max_delay
  std::int64_t margin = 0;           ///< boxcar_max
  std::int64_t gulp = 0, gulps = 0;  ///< owned samples per gulp, number of gulps
  std::int64_t chunk = 0;            ///< DM trials dedispersed and searched at a time
  std::int64_t plane_len = 0;        ///< the longest plane: min(gulp + 2 margin, nout)
  std::int64_t host_bytes = 0;       ///< host buffers, by the backend's bound
  std::int64_t device_bytes = 0;     ///< device buffers (CUDA), by its bound
  int threads = 1;                   ///< CPU threads
  RfiConfig rfi;
  dedisp::DedispersionConfig dedisp;  ///< template of chunk_dedisp() (no DMs)
  SearchConfig search;                ///< template of chunk_search()

  std::int64_t ndms() const { return static_cast<std::int64_t>(dms.size()); }
  GulpRange gulp_range(std::int64_t g) const;
  /// The largest delay of DM trial d (samples).
  std::int32_t trial_max_delay(std::int64_t d) const;
  /// Dedispersion of trials [d0, d1) into a plane of `len` samples: nsamples_in = len + the
  /// largest delay of trial d1 - 1 (float32 input, the user's channel mask as killmask).
  dedisp::DedispersionConfig chunk_dedisp(std::int64_t d0, std::int64_t d1, std::int64_t len) const;
  /// The search of such a plane: with zero-DM subtraction, each trial's widest boxcar is capped
  /// at its largest delay.
  SearchConfig chunk_search(std::int64_t d0, std::int64_t d1, std::int64_t len) const;
};

/// Plans the search of `path` (header `h`) on `backend` (cpu or cuda, resolved): DM list and
/// delays, gulp (FileSearchConfig::gulp, or the default halved until the buffers fit the
/// budgets), DM chunk. Throws invalid_argument when the file is shorter than the largest delay
/// or even one DM trial does not fit.
FileSearchLayout plan_file_search(const std::string& path, const io::FilterbankHeader& h,
                                  const FileSearchConfig& config, Backend backend);

/// The peaks of one gulp for the DM trials a runner was given (sorted by dm_trial, filter,
/// sample; at most max_peaks per plane, as SearchPlan::execute).
struct GulpPeaks {
  std::int64_t gulp = 0;
  std::vector<Peak> peaks;
  int channels_kept = 0;                 ///< channels RFI cleaning kept in this gulp
  std::vector<std::uint8_t> zap_reason;  ///< per channel: RfiReport::reason of this gulp
};
using PeakSink = std::function<void(GulpPeaks&&)>;

/// Wall or device time per stage (s) and bytes moved, summed over gulps.
struct StageTimes {
  double read = 0, rfi = 0, dedisp = 0, search = 0, setup = 0;
  std::int64_t bytes_to_device = 0, bytes_from_device = 0;

  /// Copies the stage times and byte counts into a search's result.
  void report_to(SearchResult& r) const {
    r.seconds_read = read;
    r.seconds_rfi = rfi;
    r.seconds_dedisp = dedisp;
    r.seconds_search = search;
    r.seconds_setup = setup;
    r.bytes_to_device = bytes_to_device;
    r.bytes_from_device = bytes_from_device;
  }
};

/// The fields of a search's result that follow from its layout (header, backend, DM list, gulps,
/// memory, widest boxcar), before any gulp is searched.
SearchResult planned_result(const FileSearchLayout& L);

/// Gulps [begin, end) of a search (end -1: to the last): a runner searches only these (a
/// worker's share of a file cut in time), reading only their rows.
struct GulpSpan {
  std::int64_t begin = 0, end = -1;
  /// [begin, end) with end resolved; throws invalid_argument when it is not within [0, gulps).
  std::pair<std::int64_t, std::int64_t> resolve(std::int64_t gulps) const;
};

/// The CPU runner: read, unpack, clean, dedisperse and search each gulp in turn.
void run_gulps_cpu(const FileSearchLayout& layout, std::int64_t dm_begin, std::int64_t dm_end,
                   const PeakSink& sink, StageTimes& times, GulpSpan span = {});

/// What the CUDA runner needs besides the layout.
struct CudaRunOptions {
  int device = 0;
  int streams = 2;        ///< 2: gulp n+1's read, copy and RFI overlap gulp n's work; 1: in turn
  bool autotune = false;  ///< dedisp::autotune() the dedispersion kernel first (cached)
};

/// The CUDA runner (CUDA builds): packed samples are copied to the GPU, which cleans,
/// dedisperses and searches them; only statistics and peaks come back. Two streams and two sets
/// of buffers: the host holds at most two gulps (pinned).
void run_gulps_cuda(const FileSearchLayout& layout, std::int64_t dm_begin, std::int64_t dm_end,
                    const CudaRunOptions& options, const PeakSink& sink, StageTimes& times,
                    GulpSpan span = {});

/// The CUDA runner's device bytes for planes of `plane_len` samples and `chunk` DM trials (two
/// sets of buffers and the dedispersion tables), and the budget it may use: the configured one,
/// or 80 % of the device's free memory.
std::int64_t cuda_device_bytes(const io::FilterbankHeader& h, std::int64_t plane_len,
                               std::int32_t max_delay, std::int64_t chunk, int streams);
std::int64_t cuda_device_budget(const FileSearchConfig& config);

}  // namespace warpbeam::search::detail
