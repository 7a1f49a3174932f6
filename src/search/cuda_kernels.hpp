#pragma once
// Internal: the launch functions of the CUDA search kernels (plain C++, no CUDA types), one
// kernel per stage of warpbeam/search.hpp so that each is tested against its CPU twin:
//   cuda_trial.cu   stages 1-3 and 5: baseline, residual, robust RMS, prefix sum (per DM trial)
//   cuda_boxcar.cu  stages 6-7: robust RMS of each boxcar series, S/N and peaks (per width)
//   cuda_rfi.cu     the RFI stage of a gulp: unpack + corner turn, per-channel statistics,
//                   normalisation and zero-DM subtraction
// cuda_search.cpp owns the scratch and calls these on a stream. Every kernel runs one thread
// block per DM trial (or channel) and follows the CPU definitions operation by operation:
// medians are selections (exact), means of 5 are summed left to right in double, sums that
// matter are in double (their order differs from the CPU's; the float results agree to ~1e-16
// relative before rounding).
#include <cstddef>
#include <cstdint>

#include "warpbeam/device.hpp"

namespace warpbeam::search::detail {

// The constants of warpbeam/search.hpp, for the kernels (which cannot include it);
// cuda_search.cpp checks that they are equal.
inline constexpr double kDevMadToSigma = 1.482602218505602;
inline constexpr double kDevClipSigma = 3.0;
inline constexpr double kDevClipVarianceFactor = 0.9733369246625415;
inline constexpr std::int64_t kDevTreeStop = 125;
inline constexpr int kDevMedianLevels = 2;            // baseline levels decimated by median of 5
inline constexpr int kDevBaselinePasses = 3;          // search_baseline()'s passes
inline constexpr double kDevBaselineMaskSigma = 3.0;  // and its mask

/// Threads per block of every per-trial and per-channel kernel.
inline constexpr int kSearchThreads = 512;

/// A peak as the kernels write it (the layout of search::Peak without its methods).
struct DevicePeak {
  float snr;
  std::int32_t dm_trial;
  std::int32_t filter;
  std::int32_t pad;
  std::int64_t sample, begin, end;
};

/// Per-trial scratch of a batch of DM trials (row i belongs to trial first + i).
struct TrialScratch {
  float* level_a = nullptr;  ///< [batch][a_stride], a_stride >= n / 5: tree levels 1, 3, 5 ...
  float* level_b = nullptr;  ///< [batch][b_stride], b_stride >= n / 25: tree levels 2, 4 ...
  float* ylev = nullptr;     ///< [batch][a_stride]: the baseline's last decimation level
  float* yprev = nullptr;    ///< [batch][a_stride]: the previous pass's (masked passes)
  double* prefix = nullptr;  ///< [batch][n + 1]: the prefix sum of the residual
  std::int64_t a_stride = 0, b_stride = 0;
};

/// One batch of DM trials of a plane [ndm][n] (device).
struct TrialBatch {
  const float* plane = nullptr;          ///< row 0 of the plane (not of the batch)
  std::int64_t n = 0;                    ///< samples per trial
  int first = 0;                         ///< first trial of the batch (plane row)
  int count = 0;                         ///< trials in the batch (one block each)
  int levels = 0;                        ///< baseline decimation levels K (baseline_levels())
  std::int64_t ylen = 0;                 ///< values of level K (1 when K = 0: the median)
  double step = 1;                       ///< 5^K
  double min_rms = 0;                    ///< SearchConfig::min_rms
  double* sigma = nullptr;               ///< [ndm] per plane row: the robust RMS (stage 3)
  const std::int32_t* widest = nullptr;  ///< [ndm]: widest_boxcar() of each plane row
  TrialScratch s;
};

/// Stage 1: the baseline's decimation levels of each trial into s.ylev (s.ylev[i][0] = the lower
/// median of the trial when K = 0).
void launch_baseline_levels(const TrialBatch& b, const Stream* stream);
/// Stage 1's later passes (search_baseline()): the levels of the series masked by the current
/// levels (kept in s.yprev) and sigma (stage 3 of the previous pass), into s.ylev.
void launch_masked_baseline_levels(const TrialBatch& b, const Stream* stream);
/// All of stage 1 and stage 3: baseline_levels, residual_rms, then kDevBaselinePasses - 1 times
/// masked_baseline_levels and residual_rms (sigma[first + i] is the last pass's).
void launch_search_baseline(const TrialBatch& b, const Stream* stream);
/// Tests: the baseline itself, out[i][t] for batch row i (row stride n).
void launch_write_baseline(const TrialBatch& b, float* out, const Stream* stream);
/// Stages 2-3: sigma[first + i] = robust_rms(x - baseline) (needs the levels).
void launch_residual_rms(const TrialBatch& b, const Stream* stream);
/// Stage 5's prefix sum of the residual into s.prefix, for trials with a usable sigma.
void launch_prefix(const TrialBatch& b, const Stream* stream);

/// What the per-width kernels need besides the batch.
struct WidthArgs {
  int width = 1;
  int filter = 0;              ///< log2(width)
  double* rho = nullptr;       ///< [batch]: robust RMS of the boxcar series (stage 6)
  float snr_min = 6;           ///< stage 7
  std::int64_t own_begin = 0;  ///< plane columns owned by this gulp
  std::int64_t own_end = 0;
  std::int32_t dm_offset = 0;           ///< added to the plane row in every peak
  std::int64_t sample_offset = 0;       ///< added to every sample
  DevicePeak* peaks = nullptr;          ///< [capacity]
  unsigned long long* count = nullptr;  ///< peaks found (may exceed capacity: then rerun)
  unsigned long long capacity = 0;
};

/// Stage 6: rho[i] = robust_rms of the boxcar series at the centres w/2 + j * rms_stride(w)
/// (0 when the width is not searched on that trial).
void launch_boxcar_rms(const TrialBatch& b, const WidthArgs& w, const Stream* stream);
/// Stage 7: the peaks of every run of S/N >= snr_min (needs rho).
void launch_peaks(const TrialBatch& b, const WidthArgs& w, const Stream* stream);
/// Tests: the series normalise_boxcar() leaves, out[i][t] (0 outside the valid centres; the
/// unnormalised boxcar where rho is not usable; all 0 for a trial whose sigma is not usable).
void launch_write_snr(const TrialBatch& b, const WidthArgs& w, float* out, const Stream* stream);

/// The RFI stage of one gulp of `rows` time samples.
struct RfiArgs {
  const std::uint8_t* raw = nullptr;  ///< packed [rows][row_bytes] (device)
  std::int64_t row_bytes = 0;
  std::int64_t rows = 0;
  int nchans = 0;
  int nbits = 8;
  bool is_signed = false;
  float* data = nullptr;     ///< [nchans][stride] float32: unpacked, then cleaned in place
  std::int64_t stride = 0;   ///< >= rows
  float* level_a = nullptr;  ///< [nchans][a_stride], a_stride >= rows / 5 (tree medians)
  float* level_b = nullptr;  ///< [nchans][b_stride], b_stride >= rows / 25
  std::int64_t a_stride = 0, b_stride = 0;
  float* median = nullptr;             ///< [nchans] out of the statistics, in of the cleaning
  double* sigma = nullptr;             ///< [nchans] out of the statistics
  const float* scale = nullptr;        ///< [nchans] in: 1/sigma of kept channels, 0 otherwise
  const std::uint8_t* keep = nullptr;  ///< [nchans] in: 1 = kept
  int kept = 0;
  bool zero_dm = true;
};

/// Unpacks and corner-turns raw [rows][row_bytes] into data [nchans][stride] (float32, as
/// unpack_samples()).
void launch_rfi_unpack(const RfiArgs& a, const Stream* stream);
/// Per channel: median = tree_median, sigma = robust_rms about it (as clean_filterbank()).
void launch_rfi_stats(const RfiArgs& a, const Stream* stream);
/// Per time sample: kept channels to (x - median) * scale, zapped ones to 0, then minus the mean
/// of the kept channels (zero-DM; summed in channel order in double, as the CPU).
void launch_rfi_clean(const RfiArgs& a, const Stream* stream);

}  // namespace warpbeam::search::detail
