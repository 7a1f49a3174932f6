#pragma once
// The one per-gulp search, for every caller: the file search (FileSearchPlan::execute), the
// distributed search (src/dist/search.cpp) and the beam pipeline's stores (src/pipeline/). A
// documented internal interface: other folders of the library may call it (DESIGN.md: "one
// documented internal interface such as the GulpSearcher"); it is not public API.
//
// A GulpSearcher searches DM trials [dm_begin, dm_end) of the gulps of a FileSearchPlan. It
// owns the RFI cleaner, the DM-time plane, the dedispersion and search plans per (DM chunk, plane
// length), and the finishing of the peaks (each chunk's as SearchPlan::execute leaves them). A
// caller submits gulps one at a time; the searcher asks the caller's loader to put the gulp's
// packed rows (the plan's header: nbits, nchans) where it wants them, and hands each finished
// gulp's peaks to the caller's sink, in the order the gulps were submitted:
//   cpu   (gulp_searcher_cpu.cpp): one gulp at a time, synchronously: unpack, clean_filterbank,
//         per chunk the CPU dedispersion plan (float32 rows, the user's mask as killmask) and
//         SearchPlan; the sink runs before submit() returns.
//   cuda  (gulp_searcher_cuda.cpp): `lanes` CUDA streams (RunOptions::gpu_streams), each with its
//         own buffers; gulp n goes to lane n % lanes: the rows are copied to the device (from the
//         loader's host rows) or put there by the loader (device rows, e.g. the pipeline's beam
//         buffer), unpacked and corner-turned, their statistics come back, the host decides the
//         zapping (clean_filterbank()'s rules), and the cleaning, the dedispersion of each chunk
//         (channel-major; brute-force plans are shared by the lanes, a sub-band or FDMT plan
//         holds buffers and is the lane's own) and the search are enqueued; the peaks of gulp
//         n - 1 are collected
//         while gulp n runs. So the host's read of gulp n + 1 and its RFI stage overlap gulp n's
//         dedispersion and search.
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "warpbeam/device.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

/// The peaks of one gulp for the DM trials a searcher was given (sorted by dm_trial, filter,
/// sample within each DM chunk; at most max_peaks per chunk, as SearchPlan::execute). Peaks
/// carry the DM trial as an index into the whole DM list and samples from the file start, so
/// peaks of different DM ranges of one gulp can simply be concatenated before clustering.
struct GulpPeaks {
  std::int64_t gulp = 0;
  std::int64_t tag = 0;  ///< the caller's (the pipeline: the beam)
  std::vector<Peak> peaks;
  int channels_kept = 0;                 ///< channels RFI cleaning kept in this gulp
  std::vector<std::uint8_t> zap_reason;  ///< per channel: RfiReport::reason of this gulp
};
using GulpSink = std::function<void(GulpPeaks&&)>;

/// Where a gulp's packed rows [rows][row_bytes] may go (GulpSearcher::submit hands it to the
/// loader). The loader fills one of them and returns it, or returns its own host rows.
struct GulpInput {
  std::int64_t rows = 0, row_bytes = 0;
  /// A host buffer of the searcher for the rows (cuda: pinned, allocated on first use).
  std::function<std::uint8_t*()> host;
  /// cuda: the device buffer the cleaner reads; a loader that fills it enqueues its copy on
  /// `stream`. Null on the CPU.
  std::uint8_t* device = nullptr;
  const Stream* stream = nullptr;
};
/// Fills the gulp's rows and returns where they are: host() or device, or its own host memory,
/// which needs to stay valid only until submit() returns (cpu: unpacked by then; cuda: copied
/// to the device by then), so a caller can read the next gulp into it meanwhile.
using GulpLoader = std::function<const std::uint8_t*(GulpInput&)>;

/// Wall or device time per stage (s) and bytes moved, summed over gulps (SearchResult's
/// seconds_* say what each one measures).
struct StageTimes {
  double read = 0;       ///< search_gulps(): the reader thread's reads
  double read_wait = 0;  ///< host, in submit(): the loader's wall time (search_gulps: waiting
                         ///< for the reader thread)
  double unpack = 0;     ///< cpu: unpacking to float32 (cuda: in rfi, on the GPU)
  double copy = 0;       ///< cuda: the rows' copy to the device (GPU events)
  double rfi = 0, dedisp = 0, search = 0;
  double setup = 0;       ///< host: the searcher's (and reader's) buffers, before the first gulp
  double gulp_plans = 0;  ///< host: dedispersion and search plans made during the gulps
  double gpu_wait = 0;    ///< cuda, host: blocked on the GPU (RFI statistics, peaks)
  /// Dedispersion plans made: one per DM chunk (per lane for a CUDA sub-band plan) where a plan
  /// accepts shorter input (DedispersionPlan::accepts_shorter_input: made for the longest plane,
  /// it runs the shorter first and last gulps too), else one per chunk and plane length.
  std::int64_t dedisp_plans = 0;
  std::int64_t bytes_to_device = 0, bytes_from_device = 0;
  /// Adds another searcher's times and byte counts.
  StageTimes& operator+=(const StageTimes& o);
  /// Copies the stage times and byte counts into a search's result.
  void report_to(SearchResult& r) const;
};

class GulpSearcher {
 public:
  /// A searcher of DM trials [dm_begin, dm_end) of `plan`'s gulps on the plan's backend, on CUDA
  /// device `device` (the pipeline's stores have devices of their own; the file search passes
  /// plan.options().device) with plan.options().gpu_streams lanes. `host_input`: the loaders
  /// fill GulpInput::host(), so the searcher holds a host buffer for the rows up front (cuda:
  /// pinned, one per lane); false: they put the rows in GulpInput::device or return their own
  /// (search_gulps(): the reader's buffers), and a buffer is made only if a loader asks for
  /// host(). `plan` must outlive the searcher. Throws invalid_argument for an empty or outside
  /// DM range.
  static std::unique_ptr<GulpSearcher> make(const FileSearchPlan& plan, std::int64_t dm_begin,
                                            std::int64_t dm_end, int device,
                                            bool host_input = true);
  /// The memory a searcher of `chunk` DM trials per plane, planes of up to `plane_len` samples,
  /// holds on `backend` (the plan's budget is computed from this): its buffers plus the
  /// dedispersion and search plans' workspace reports. Brute force (`method_plan` null): linear
  /// in `chunk`. subband / fdmt: `method_plan` is the estimate_workspace() of the largest
  /// chunk's dedispersion plan, which the CPU searcher holds once and the CUDA one per lane
  /// (their buffers cannot be shared by two streams). `host_input` as make()'s: whether the
  /// searcher's own host buffers for the packed rows are counted.
  static Workspace estimate(const io::FilterbankHeader& header, Backend backend,
                            std::int64_t plane_len, std::int32_t max_delay, std::int64_t chunk,
                            int threads, int lanes, const Workspace* method_plan = nullptr,
                            bool host_input = true);

  virtual ~GulpSearcher() = default;
  /// Searches gulp `gulp` (plan.gulp_range(gulp); `rows` input rows from its p0: plane + max
  /// delay); `load` provides the rows. Finished gulps go to `sink` in submission order (cuda:
  /// the previous gulp, once this one is enqueued).
  virtual void submit(std::int64_t gulp, std::int64_t tag, std::int64_t rows,
                      const GulpLoader& load, const GulpSink& sink) = 0;
  /// Finishes every gulp in flight (to `sink`, in order).
  virtual void flush(const GulpSink& sink) = 0;
  virtual const StageTimes& times() const = 0;
  /// What it holds now (host and device bytes).
  virtual Workspace workspace() const = 0;
};

/// A worker's share of a planned file search: gulps [gulp_begin, gulp_end) and DM trials
/// [dm_begin, dm_end) (end -1: to the last).
struct SearchSlice {
  std::int64_t gulp_begin = 0, gulp_end = -1, dm_begin = 0, dm_end = -1;
  /// The slice with its ends resolved; throws invalid_argument when it is empty or not within
  /// the plan's gulps and DM trials.
  SearchSlice resolve(const FileSearchPlan& plan) const;
};

/// Searches `slice` of `plan`, reading its gulps from `source`, on CUDA device `device`
/// (cuda), and hands each gulp's peaks, in gulp order, to `sink`; stops submitting gulps when
/// `sink` returns false. The gulps are read one ahead on a thread of its own (GulpReader,
/// plan.options().read_threads per read, which it sets on `source`). Adds the stage times to
/// `times`.
void search_gulps(const FileSearchPlan& plan, io::FilterbankSource& source,
                  const SearchSlice& slice, int device,
                  const std::function<bool(GulpPeaks&&)>& sink, StageTimes& times);

/// The fields of a search's result that follow from its plan (header, backend, DM list, gulps,
/// memory, widest boxcar), before any gulp is searched.
SearchResult planned_result(const FileSearchPlan& plan);

/// The device memory budget of a search on `options.device`: options.device_memory_bytes, or
/// 80 % of the device's free memory (CUDA builds; throws unsupported otherwise).
std::int64_t device_memory_budget(const RunOptions& options);

}  // namespace warpbeam::search
