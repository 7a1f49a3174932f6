#pragma once
// Single-pulse search: RFI cleaning of a filterbank gulp, then on each DM trial of a DM-time
// plane a running-median baseline, a robust RMS, boxcar matched filters of widths 1, 2, 4 ...
// boxcar_max normalised to unit noise RMS, peaks over a threshold, and friends-of-friends
// clustering of the peaks into candidates. The streaming driver (search_filterbank) reads a
// SIGPROC file of any length in gulps with bounded memory.
//
// The model is heimdall (Barsdell et al. 2012, MNRAS 422, 379; the pipeline in its
// Pipeline/ folder): median-of-5 decimation for the baseline and the RMS, boxcars from a prefix
// sum, "giants" (peaks) per DM trial and width, and clustering across sample, width and DM
// trial. What differs from heimdall is stated where it differs.
//
// Every algorithm below is defined exactly, so that the CUDA executor (issue 3) reproduces the
// CPU executor: same peaks (dm_trial, sample, filter) with S/N within 1e-3 relative. Medians are
// selections (no rounding); sums that matter are in double (order-independent to ~1e-16).
// THE GPU PORT MUST FOLLOW, stage by stage, for every DM trial d of a plane of n samples:
//   1. baseline   running_median_baseline(): K = baseline_levels() decimations by 5 (median of
//                 5 for the first two levels, mean of 5 after; incomplete groups dropped), then
//                 linear interpolation back to every sample (positions in double);
//   2. residual   r[t] = x[t] - baseline[t] (float);
//   3. RMS        robust_rms(): sigma0 = kMadToSigma * tree_median(|r|); sigma = sqrt(sum of r^2
//                 over |r| <= kClipSigma * sigma0, divided by (count * kClipVarianceFactor)),
//                 sums in double; a trial with sigma <= min_rms (or not finite) gives no peaks;
//   4. widths     w = 1, 2, 4 ... up to widest_boxcar(config, n, d): boxcar_max, 5^K /
//                 kBaselineWidthRatio, the kMinBoxcars rule and the trial's max_width;
//   5. boxcars    prefix sum P (double) of r; for width w and centre sample t the window is
//                 [t - w/2, t - w/2 + w) (w/2 rounded down), a[t] = (P[end] - P[begin]) *
//                 (1 / (sigma * sqrt(w))) computed in double, rounded to float (boxcar_snr());
//   6. normalise  rho = robust_rms(a at the valid centres lo, lo + s, lo + 2s ... (lo = w/2,
//                 s = rms_stride(w) = max(1, w/4)), centre 0); S/N[t] = float(a[t] * (1 / rho))
//                 in double (normalise_boxcar()); a width with rho <= 0 is skipped. As
//                 heimdall, which re-measures the RMS of every filtered series: a alone has unit
//                 RMS only for white noise, while the baseline's own noise and any red noise
//                 inflate the wide boxcars' RMS;
//   7. peaks      find_peaks(): runs of consecutive samples with S/N >= snr_min inside the
//                 valid range; one peak per run at its largest S/N (first index on ties),
//                 kept when that sample is in the gulp's owned range.
// Where warpbeam departs from heimdall: the upper baseline levels average instead of taking
// medians (the median of 5 keeps 29 % of the variance per level, the mean 20 %: a 5-level
// median tree is 6 times noisier than the mean, and its noise dominated wide boxcars in tests);
// widths are capped by the baseline scale and, with zero-DM subtraction, by the trial's own
// dispersion sweep (a pulse wider than the sweep is mostly removed by zero-DM, and such widths
// only found noise); the RMS is clipped rather than a bare MAD.
// Clustering (cluster_peaks / Clusterer) and RFI cleaning (clean_filterbank) are host code that
// both backends share. The CPU executor (src/search/cpu.cpp) is the reference implementation of
// the stages; each stage is also a function below, which the tests check on their own.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/io/sigproc.hpp"

namespace warpbeam::search {

// =============================================================================================
// Robust statistics: the primitives every stage uses
// =============================================================================================

/// sigma of a Gaussian per unit of median absolute deviation: 1 / Phi^-1(3/4).
inline constexpr double kMadToSigma = 1.482602218505602;
/// Clipping radius of robust_rms(), in units of the MAD-based sigma0.
inline constexpr double kClipSigma = 3.0;
/// Variance of a unit Gaussian truncated to |x| <= 3: 1 - 6 phi(3) / (2 Phi(3) - 1).
inline constexpr double kClipVarianceFactor = 0.9733369246625415;
/// tree_median() stops decimating when at most this many values remain.
inline constexpr std::int64_t kTreeStop = 125;

/// Lower median: the value of rank floor((n - 1) / 2) in ascending order (n >= 1).
/// `scratch` is overwritten (n floats).
float lower_median(const float* x, std::int64_t n, float* scratch);

/// Median by median-of-5 decimation, as heimdall's GetRMSPlan: while more than kTreeStop values
/// remain, replace them by the lower medians of consecutive groups of 5 (an incomplete last
/// group is dropped); then return the lower median of what remains. For iid data every level
/// has the population median, so this is a consistent, parallel-friendly median estimate.
/// n >= 1; `scratch` is overwritten (n floats).
float tree_median(const float* x, std::int64_t n, float* scratch);

/// sigma of `x` about `centre`, robust to outliers (pulses, RFI):
///   sigma0 = kMadToSigma * tree_median(|x - centre|)
///   sigma  = sqrt( sum_{|x-centre| <= kClipSigma*sigma0} (x-centre)^2 /
///   (count*kClipVarianceFactor) )
/// with the sum and the count in double. When sigma0 is 0 (more than half the values equal the
/// centre, e.g. 1-bit data), sigma is the plain RMS about the mean (double). `scratch`: n floats.
double robust_rms(const float* x, std::int64_t n, float centre, float* scratch);

// =============================================================================================
// Per-DM-trial stages
// =============================================================================================

/// Decimation levels K of the running-median baseline: the largest K with 5^K <= window, but
/// at least 1, and at most the largest K with 5^K <= n (so 0 only when n < 5: then the baseline
/// is the lower median of the series). window_samples = the baseline window in samples
/// (heimdall: baseline_length = 2 s).
int baseline_levels(std::int64_t window_samples, std::int64_t n);

/// Running-median baseline of x[0..n) (heimdall's RemoveBaselinePlan idea): level 0 is x;
/// level k holds floor(n_{k-1} / 5) values; value i of level k summarises values 5i .. 5i+4 of
/// level k-1: for k <= 2 their lower median (median5), for k > 2 their mean computed as
/// float(((((double)a + b) + c) + d + e) / 5) (mean5). Level K = `levels` has n_K values, value
/// i centred on sample (i + 0.5) 5^K - 0.5. baseline[t] interpolates level K linearly at
/// u = (t + 0.5) / 5^K - 0.5 (u, its floor i and f = u - i in double; baseline =
/// float(y[i] + f * (y[i+1] - y[i])) in double), holding the end values beyond the first and last
/// centres. levels 0 (n < 5): the lower median of x everywhere. `scratch`: n / 5 + 8 floats.
void running_median_baseline(const float* x, std::int64_t n, int levels, float* baseline,
                             float* scratch);

/// One peak ("giant" in heimdall): the best sample of a run of consecutive samples whose S/N
/// (one DM trial, one boxcar width) is >= the threshold.
struct Peak {
  float snr = 0;  ///< S/N of the best sample of the run
  std::int32_t dm_trial = 0;
  std::int32_t filter = 0;  ///< log2 of the boxcar width
  std::int64_t sample = 0;  ///< centre sample t of the best boxcar (window [t - w/2, t - w/2 + w))
  std::int64_t begin = 0;   ///< first sample of the first boxcar of the run
  std::int64_t end = 0;     ///< last sample (inclusive) of the last boxcar of the run
  std::int32_t width() const { return std::int32_t{1} << filter; }
  bool operator==(const Peak&) const = default;
};

/// Boxcars are searched only where the series has at least kMinBoxcars * w valid centres, so
/// that the RMS of the filtered series can be measured (stage 6) to ~7 % or better.
inline constexpr std::int64_t kMinBoxcars = 128;
/// ... and only up to 5^K / kBaselineWidthRatio samples: the baseline would absorb a wider pulse
/// and its own noise would dominate wider boxcars (to search wider pulses, lengthen the baseline).
inline constexpr std::int64_t kBaselineWidthRatio = 8;

/// Boxcar S/N of width w at every centre sample of the valid range t in [w/2, n - w + w/2]
/// from the prefix sum `prefix` (n + 1 doubles, prefix[0] = 0, prefix[i+1] = prefix[i] + r[i]):
/// snr[t] = float((prefix[t - w/2 + w] - prefix[t - w/2]) * (1 / (sigma * sqrt(w)))) (double).
/// snr has n entries; those outside the valid range are set to 0.
void boxcar_snr(const double* prefix, std::int64_t n, int width, double sigma, float* snr);

/// The stride between the boxcars whose RMS normalise_boxcar() measures: max(1, width / 4)
/// (boxcars closer than their width share samples, so more would add little).
std::int64_t rms_stride(int width);

/// Stage 6: measures rho = robust_rms(snr at the valid centres w/2, w/2 + s, w/2 + 2s ...,
/// s = rms_stride(width); centre 0) and scales every valid value by its inverse
/// (float(double(snr) * (1 / rho))); returns rho (the values are left unchanged when rho <= 0 or
/// is not finite: the caller skips the width). `scratch`: 2 n floats.
double normalise_boxcar(float* snr, std::int64_t n, int width, float* scratch);

/// Appends the peaks of one S/N series (one DM trial, one width) to `out`: runs of consecutive
/// samples with snr >= snr_min within the valid range of `width` (see boxcar_snr); each run
/// gives the sample of its largest S/N (first on ties), kept if own_begin <= sample < own_end.
/// sample, begin and end are offset by `sample_offset`.
void find_peaks(const float* snr, std::int64_t n, int width, float snr_min, std::int64_t own_begin,
                std::int64_t own_end, std::int32_t dm_trial, std::int64_t sample_offset,
                std::vector<Peak>& out);

// =============================================================================================
// SearchPlan: the per-plane search (stages 1-6 for every DM trial)
// =============================================================================================

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

 private:
  SearchConfig config_;
  Backend backend_;
  std::unique_ptr<detail::SearchExecutor> exec_;
  mutable std::vector<double> rms_;
};

// =============================================================================================
// Clustering: friends-of-friends across sample, width and DM trial (heimdall)
// =============================================================================================

/// Two peaks are friends when |dm_trial_i - dm_trial_j| <= dm_tol, |filter_i - filter_j| <=
/// filter_tol and the gap between their sample spans [begin, end] is at most time_tol samples
/// (begin_j <= end_i + time_tol and begin_i <= end_j + time_tol); clusters are the connected
/// components (so the result does not depend on the order of the peaks). heimdall's defaults: 3
/// samples, 3 filters, 200 DM trials (heimdall compares best samples; warpbeam compares spans,
/// which also links a wide boxcar to the narrow ones inside it).
struct ClusterConfig {
  std::int64_t time_tol = 3;
  std::int32_t filter_tol = 3;
  std::int32_t dm_tol = 200;
  void validate() const;
};

/// A cluster: its best peak (largest S/N; ties: smallest sample, dm_trial, filter), the number
/// of peaks, and the union of their spans.
struct Cluster {
  Peak best;
  std::int64_t members = 0;
  std::int64_t begin = 0, end = 0;
};

/// Clusters a set of peaks; the result is sorted by best S/N (descending), then sample.
std::vector<Cluster> cluster_peaks(const std::vector<Peak>& peaks, const ClusterConfig& config);

/// Incremental clustering for streaming: peaks arrive gulp by gulp; a cluster is final once no
/// peak to come can reach it.
class Clusterer {
 public:
  explicit Clusterer(ClusterConfig config);
  void add(const std::vector<Peak>& peaks);
  /// Returns (and forgets) the clusters that no future peak can join, given that every future
  /// peak has begin >= `horizon`.
  std::vector<Cluster> take_final(std::int64_t horizon);
  /// Returns every remaining cluster.
  std::vector<Cluster> finish();
  std::size_t pending() const { return peaks_.size(); }

 private:
  ClusterConfig config_;
  std::vector<Peak> peaks_;
};

// =============================================================================================
// Candidates
// =============================================================================================

/// One candidate, as heimdall's .cand columns (io/candidates.hpp writes them).
struct Candidate {
  float snr = 0;
  std::int64_t sample = 0;    ///< centre sample of the best boxcar, from the file start
  double time_s = 0;          ///< arrival time at the top of the band of the boxcar's centre (s)
  std::int32_t filter = 0;    ///< log2 of the boxcar width
  std::int32_t dm_trial = 0;  ///< index in the DM list
  float dm = 0;               ///< pc cm^-3
  std::int64_t members = 0;   ///< peaks in the cluster
  std::int64_t begin = 0;     ///< first sample of the cluster
  std::int64_t end = 0;       ///< last sample of the cluster (inclusive)
  std::int32_t beam = 0;      ///< beam index (multi-beam searches; 0 for a single filterbank)
  std::int32_t width() const { return std::int32_t{1} << filter; }
};

/// Converts a cluster to a candidate: dm from the DM list; time_s = (sample - w/2 + w/2.0) *
/// tsamp (the centre of the boxcar window; samples start at their integration's start).
Candidate to_candidate(const Cluster& c, const std::vector<float>& dms, double tsamp_s,
                       std::int32_t beam = 0);

// =============================================================================================
// RFI cleaning of a filterbank gulp (host code shared by both backends)
// =============================================================================================

struct RfiConfig {
  /// Channels to ignore (the user's mask, e.g. --zap-chans): empty or nchans entries, 1 = zap.
  std::vector<std::uint8_t> zap;
  /// A channel whose robust sigma differs from the median over channels by more than
  /// zap_sigma * max(kMadToSigma * MAD over channels, 0.01 * median) is zapped (0: never).
  double zap_sigma = 5;
  /// Subtract the mean over the kept channels from every time sample (Eatough et al. 2009).
  bool zero_dm = true;
  void validate(int nchans) const;
};

/// Per-channel statistics of one gulp and the channels kept.
struct RfiReport {
  std::vector<float> median;       ///< per channel: tree_median of its samples
  std::vector<double> sigma;       ///< per channel: robust_rms about the median
  std::vector<std::uint8_t> keep;  ///< per channel: 1 = kept, 0 = zapped (mask, dead, outlier)
  int zapped_by_mask = 0, zapped_dead = 0, zapped_outlier = 0;
  int kept() const;
};

/// Cleans data[nsamples][nchans] in place: per channel, median m and robust sigma (robust_rms);
/// zaps masked channels, dead ones (sigma 0 or not finite) and outliers (RfiConfig::zap_sigma);
/// writes (x - m) / sigma for kept channels and 0 for zapped ones; then, with zero_dm, subtracts
/// from each time sample the mean of its kept channels (in double).
RfiReport clean_filterbank(float* data, std::int64_t nsamples, int nchans, const RfiConfig& config,
                           int threads = 0);

// =============================================================================================
// The file search (streaming driver)
// =============================================================================================

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
  std::string backend;                   ///< "cpu" or "cuda"
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
/// pipeline_cuda.cpp): the packed samples of a gulp are copied to the device, cleaned there
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
