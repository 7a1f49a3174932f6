#pragma once
// SearchPlan: stages 1-7 of warpbeam/search/stages.hpp on every DM trial of a DM-time plane.

#include <cstdint>
#include <memory>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/search/stages.hpp"

namespace warpbeam::search {

struct SearchConfig;

/// The widest boxcar searched on DM trial `trial` (plane-local) of a plane of n samples: the
/// largest power of 2 w <= boxcar_max with n - w + 1 >= kMinBoxcars * w, w <= 5^K /
/// kBaselineWidthRatio (K = baseline_levels(baseline_window(), n)) and w <= max_width[trial]
/// when given; at least 1 (a 1-sample boxcar is always searched when n >= kMinBoxcars).
/// Returns 0 when not even width 1 qualifies.
int widest_boxcar(const SearchConfig& config, std::int64_t n, std::int64_t trial);

struct SearchConfig {
  std::int64_t ndms = 0;      ///< DM trials (rows) of one plane
  std::int64_t nsamples = 0;  ///< samples per trial (columns) of one plane
  double tsamp_s = 0;         ///< sampling time (s)
  double baseline_s = 2.0;    ///< running-median window (s); heimdall's default baseline_length
  int boxcar_max = 4096;      ///< widths 1, 2, 4 ... up to this (samples; a power of 2)
  float snr_min = 6;          ///< detection threshold
  double min_rms = 0;         ///< trials whose robust RMS is <= this give no peaks
  /// Per DM trial of the plane: the widest boxcar (samples) worth searching; empty: no limit.
  /// The file search sets it, with zero-DM subtraction on, to the trial's largest delay (at least
  /// 1): a pulse wider than its DM sweep is mostly removed by zero-DM.
  std::vector<std::int32_t> max_width;
  /// At most this many peaks per plane; beyond it the highest S/N are kept (order: S/N
  /// descending, then dm_trial, filter, sample ascending) and a warning is given.
  std::int64_t max_peaks = 1 << 20;
  int threads = 0;  ///< CPU threads (0: OpenMP's default)

  /// Throws invalid_argument naming the field and its allowed range.
  void validate() const;
  /// The boxcar widths: 1, 2, 4 ... <= boxcar_max.
  std::vector<int> widths() const;
  /// The baseline window in samples: round(baseline_s / tsamp_s), at least 1.
  std::int64_t baseline_window() const;
};

namespace detail {
class SearchExecutor;
}

/// A search plan for planes of one shape; execute() allocates nothing but the peaks it returns.
class SearchPlan {
 public:
  /// Validates `config` and prepares scratch (on the device for Backend::cuda, which throws
  /// unsupported in a build without CUDA).
  SearchPlan(SearchConfig config, Backend backend);
  ~SearchPlan();
  SearchPlan(SearchPlan&&) noexcept;
  SearchPlan& operator=(SearchPlan&&) noexcept;

  const SearchConfig& config() const { return config_; }
  Backend backend() const { return backend_; }

  /// Searches a DM-time plane [ndms][nsamples] (float32; host memory for the CPU backend, device
  /// memory for CUDA, where only the peaks and the RMS come back; synchronous either way).
  /// Appends the peaks whose best sample is in [own_begin, own_end) (plane columns), with
  /// dm_trial offset by `dm_offset` and samples by `sample_offset`. Peaks are sorted by
  /// (dm_trial, filter, sample). Throws invalid_argument on a shape or memory-space mismatch.
  void execute(View<const float, 2> plane, std::int64_t own_begin, std::int64_t own_end,
               std::int32_t dm_offset, std::int64_t sample_offset, std::vector<Peak>& peaks,
               const Stream* stream = nullptr) const;

  /// The robust RMS of every trial of the last execute() (diagnostics and tests).
  const std::vector<double>& last_rms() const;

  /// The memory this plan holds besides the plane and the peaks: cpu: per thread a baseline,
  /// residual, S/N and two work rows (float) and a prefix sum (double) of nsamples each; cuda:
  /// the trial batches' decimation levels, prefix sums, per-trial statistics and the initial
  /// peak buffer on the device.
  Workspace workspace() const;
  /// workspace() of a plan of `config` on `backend`, without making it (config.ndms may be 0:
  /// the bytes are linear in it).
  static Workspace estimate_workspace(const SearchConfig& config, Backend backend);

 private:
  SearchConfig config_;
  Backend backend_;
  std::unique_ptr<detail::SearchExecutor> exec_;
  mutable std::vector<double> rms_;
};

}  // namespace warpbeam::search
