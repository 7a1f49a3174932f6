#pragma once
// Incoherent dedispersion: filterbank [time][chan] in, DM-time plane [dm][time] out.
//
// Delay of channel c at dispersion measure DM, relative to the highest frequency of the band:
//   dt(c) = k * DM * (f_c^-2 - f_hi^-2),  k = 4.148808e3 s MHz^2 pc^-1 cm^3
// (Lorimer & Kramer, Handbook of Pulsar Astronomy, eq. 5.1), rounded to whole samples.
// Brute force: output sample t of trial d is  sum_c in[t + delay(d, c)][c]  over unmasked
// channels, for t = 0 .. nsamples_out-1 with nsamples_out = nsamples_in - max_delay (only valid
// samples), where max_delay is the largest delay of the largest DM.
//
// Two methods do fewer additions by summing along slightly different per-channel delays
// (Algorithm::subband and Algorithm::fdmt); DedispersionPlan::trials() reports the delays each
// output row really sums along and what that costs against brute force. Both keep the output
// shape and max_delay of brute force, so they are drop-in replacements.
//
// Config -> Plan -> execute, as every engine (DESIGN.md).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::dedisp {

/// Dispersion constant k in s MHz^2 pc^-1 cm^3 (as used by SIGPROC, dedisp and heimdall).
inline constexpr double kDispersionConstant = 4.148808e3;

/// Dispersion delay (s) of frequency f_mhz relative to f_ref_mhz at `dm` (pc cm^-3).
inline double dispersion_delay_s(double dm, double f_mhz, double f_ref_mhz) {
  return kDispersionConstant * dm * (1.0 / (f_mhz * f_mhz) - 1.0 / (f_ref_mhz * f_ref_mhz));
}

/// DM trial list by the rule of dedisp (Barsdell et al. 2012) and heimdall, after Levin (2012):
/// each step keeps the smearing added by the DM error within `tolerance` of the intrinsic width
/// sqrt(pulse_width^2 + tsamp^2). Starts at dm_min, ends at the first DM >= dm_max.
/// pulse_width_us in microseconds, tsamp_s in seconds, fch1/foff in MHz.
/// Throws invalid_argument for dm_min < 0, dm_max < dm_min, tolerance <= 1, widths <= 0.
std::vector<float> dm_list_dedisp(double dm_min, double dm_max, double pulse_width_us,
                                  double tolerance, int nchans, double tsamp_s, double fch1_mhz,
                                  double foff_mhz);

/// A plain linear list dm_min, dm_min + step, ... <= dm_max (step > 0).
std::vector<float> dm_list_linear(double dm_min, double dm_max, double step);

/// Kernel variant or method. `automatic` picks a brute-force kernel by backend and shape: on CUDA,
/// `packed` for nbits <= 8 and `tiled` otherwise; the CPU runs its tiled loop for automatic,
/// tiled and packed. (select_algorithm() chooses between brute force, subband and fdmt.)
///  - direct: one thread per (DM, output sample), unpacking on the fly (the baseline, as dedisp's
///    direct kernel; Barsdell et al. 2012).
///  - tiled: the ARTEMIS scheme (Armour et al. 2012): the input is corner-turned once to
///    [chan][time], each block covers a (DM, time) rectangle, the block's input span is staged in
///    shared memory and each thread holds several output samples in fp32 registers.
///  - packed: the tiled scheme with exact integer arithmetic for nbits <= 8: two output samples
///    per 32-bit add (two 16-bit lanes), flushed to 32-bit accumulators every <= 256 channels.
///  - subband: two-stage sub-band dedispersion (as PRESTO's prepsubband and AMBER): each
///    sub-band is dedispersed to a coarse DM grid, then the sub-bands are combined per fine DM
///    (SubbandConfig; the same trials as brute force with a bounded extra smearing).
///  - fdmt: the Fast Dispersion Measure Transform (Zackay & Ofek 2017, ApJ 835, 11): every
///    integer delay across the band in O(N_t N_delay log2 N_f), in time blocks; the plan outputs
///    the rows of the configured DMs (each at its integer delay across the band).
enum class Algorithm { automatic, direct, tiled, packed, subband, fdmt };

/// "automatic", "direct", "tiled", "packed", "subband", "fdmt".
std::string to_string(Algorithm a);
/// Parses the names of to_string() ("auto" too); throws invalid_argument otherwise.
Algorithm parse_algorithm(const std::string& name);

/// Tile sizes of the CUDA tiled and packed kernels; 0 means "the default" (see PERFORMANCE.md).
/// A block is dms_per_block warps-rows along DM x (threads_per_block / dms_per_block) lanes along
/// time; it covers dms_per_block DM trials and (threads_per_block / dms_per_block) *
/// samples_per_thread output samples. The tiled kernels validate these values (invalid_argument,
/// naming the field) and may lower dms_per_block / channels_per_stage so that the staged input
/// fits in shared memory; DedispersionPlan::tuning() reports what runs.
struct CudaTuning {
  int dms_per_block = 0;       ///< DM trials one thread block covers: 1..32
  int samples_per_thread = 0;  ///< output samples each thread accumulates in registers: 8, 16, 32
  int threads_per_block = 0;  ///< dms_per_block x (32 or 64 lanes along time), <= 1024 (512 for 32)
  int channels_per_stage = 0;  ///< channels staged in shared memory per round: 1..256
};

/// Throws invalid_argument naming the field when a non-zero value of `t` is out of range (the
/// combination is checked against the shape when a plan is made).
void validate(const CudaTuning& t);

/// Tile sizes of the CPU kernel (src/dedisp/cpu_tiled.cpp); 0 means "the default measured on the
/// development machine" (docs/PERFORMANCE.md).
struct CpuTuning {
  int dms_per_tile = 0;      ///< DM trials one tile accumulates (its rows stay in L1)
  int samples_per_tile = 0;  ///< output samples of one tile (multiple of 16)
};

/// Settings of Algorithm::subband (src/dedisp/subband_plan.hpp has the derivation).
///
/// The band (channels in order of frequency) is cut into `subbands` contiguous sub-bands of
/// nearly equal channel counts. Stage 1 dedisperses each sub-band to its highest channel at the
/// coarse DMs; stage 2 sums, for each fine DM i (the config's list), the sub-band series of the
/// coarse DM j(i) of its group, each shifted by one whole-sample delay. Within sub-band s this
/// sums channel c at DM_j(i) instead of DM_i: an extra smearing (PRESTO's subband_smear, DDplan.py)
///   t_sb(i, s) = k |DM_i - DM_j(i)| (f_lo,s^-2 - f_hi,s^-2)
/// over the sub-band's channel centres. The coarse grid keeps, for every fine trial and every
/// sub-band, t_sb(i, s) <= smearing * W_s(DM_i), where W_s is the effective width of a pulse in
/// that sub-band (Cordes & McLaughlin 2003, as dm_list_dedisp's rule):
///   W_s(DM)^2 = pulse_width^2 + tsamp^2 + (8.3 us * |foff|_MHz * DM / f_lo,s,GHz^3)^2.
/// A box smearing of t = smearing * W added to a Gaussian pulse of FWHM W costs the matched
/// boxcar's S/N the factor (1 + 0.46 smearing^2)^(-1/4) at worst: 0.973 for the default 0.5.
/// Whole-sample delays add a second cost that the bound does not see: brute force rounds each
/// channel's delay once, the two stages round twice (within the sub-band, then the sub-band's
/// shift), which for pulses narrower than a sample costs several per cent of S/N. So stage 1 is
/// made at `phases` sub-sample offsets (0, 1/P, ...: the stage-1 delays of phase p are
/// round(exact delay within the sub-band + p/P)) and stage 2 takes, per fine trial and
/// sub-band, the phase and shift nearest its exact curve: the second rounding's error shrinks
/// from 1/2 to 1/(2P) of a sample for P times the stage-1 additions. A group also ends where a
/// member's predicted S/N (TrialReport::snr_fraction, which sees every rounding) would fall
/// below min_snr_fraction.
struct SubbandConfig {
  /// Number of sub-bands, 1 .. nchans. 0: the power of two (2 .. nchans/2) whose grid needs the
  /// fewest additions (stage 1: coarse DMs x channels; stage 2: fine DMs x sub-bands).
  int subbands = 0;
  /// Uniform coarse DM step (pc cm^-3) from the first trial DM; each fine trial uses the nearest
  /// coarse DM. Refused (invalid_argument, naming the largest step allowed) when it breaks the
  /// smearing bound. 0: groups of consecutive fine trials, each as wide as the bound allows, at
  /// the DM of its middle trial (a greedy pass over the fine list).
  double coarse_dm_step = 0;
  double smearing = 0.5;  ///< the bound above, as a fraction of W_s: (0, 4]
  /// The least predicted S/N fraction of a fine trial (automatic grid only): [0, 1].
  double min_snr_fraction = 0.95;
  /// Stage-1 phases per coarse DM, 1 .. 4. 0: per group, whichever of 1 and 2 needs fewer
  /// additions (one for a uniform coarse_dm_step).
  int phases = 0;
  /// An explicit grid instead of the derived one: [ndm] the coarse DM of each fine trial and
  /// [ndm] the stage-1 phases of that coarse DM, as a plan of a longer DM list reports them
  /// (TrialReport::coarse_dms[coarse_trial[i]] and coarse_phases[coarse_trial[i]]). A slice of
  /// that list then sums every trial along the same delays as the whole list's plan (the file
  /// search cuts its DM list into chunks and, across workers, slices: the candidates must not
  /// depend on the cut). Consecutive trials of one coarse DM and phase count share its stage-1
  /// rows. Needs subbands > 0 (the cut the grid was made for) and coarse_dm_step 0; the bound
  /// is not checked again (the stage-2 fit is: a coarse DM that no shift fits is refused).
  /// Empty: derived as above.
  std::vector<float> trial_coarse_dms;
  std::vector<int> trial_phases;
};

/// Settings of Algorithm::fdmt.
struct FdmtConfig {
  /// Output samples per time block (the transform is computed and written one block at a time;
  /// its intermediate rows hold block + their delay range samples). 0: automatic (CPU 8192,
  /// CUDA 65536), capped at nsamples_out.
  std::int64_t block = 0;
};

struct DedispersionConfig {
  int nchans = 0;
  double fch1_mhz = 0;  ///< centre of channel 0 (MHz)
  double foff_mhz = 0;  ///< channel step (MHz), either sign
  double tsamp_s = 0;   ///< sampling time (s)
  int nbits = 8;  ///< input sample size: 1, 2, 4, 8, 16 (unsigned unless is_signed) or 32 (float)
  bool is_signed = false;
  std::vector<float> dms;              ///< trial DMs (pc cm^-3), ascending
  std::int64_t nsamples_in = 0;        ///< time samples per execute() (the gulp, overlap included)
  std::vector<std::uint8_t> killmask;  ///< per channel: 1 = use, 0 = zap; empty = all used
  Algorithm algorithm = Algorithm::automatic;
  CudaTuning tuning;
  CpuTuning cpu_tuning;
  SubbandConfig subband;  ///< Algorithm::subband only
  FdmtConfig fdmt;        ///< Algorithm::fdmt only
  /// Intrinsic pulse width (us, > 0) assumed by the sub-band smearing bound and the S/N model of
  /// TrialReport (as dm_list_dedisp's pulse_width_us).
  double pulse_width_us = 40;
  int threads = 0;  ///< CPU threads (0: OpenMP's default)
  /// Input already corner-turned by the caller: execute_channel_major() takes float32 rows
  /// [nchans][row stride] on the device (the GPU search cleans each gulp into that layout).
  /// CUDA only: nbits must be 32, the killmask empty or all ones (zero a channel's row
  /// instead), algorithm automatic, tiled, subband or fdmt. The brute-force plan then owns no
  /// corner-turn scratch.
  bool channel_major = false;

  /// Throws invalid_argument naming the field and its allowed range.
  void validate() const;
};

/// What the output rows of a plan are (DedispersionPlan::trials()). Brute force sums along the
/// rounded delays of delay_table(); subband and fdmt along their own whole-sample delays, which
/// are reported here so that a caller (or a test) can check them and predict the S/N they give.
struct TrialReport {
  /// DM of each output row (pc cm^-3): the config's trials; for fdmt the DM of the row's integer
  /// delay across the band, fdmt_delay * tsamp / (k (f_lo^-2 - f_hi^-2)).
  std::vector<float> dms;
  /// [ndm][nchans] the delay (samples) at which each row sums each channel (killed channels
  /// too, though they are not summed). Brute force: delay_table(). All lie in [0, max_delay()].
  std::vector<std::int32_t> delays;
  /// [ndm] max over kept channels of |delays - delay_table()| (samples): 0 for brute force.
  std::vector<std::int32_t> max_delay_error;
  /// [ndm] the smearing (s) added against brute force: tsamp * sqrt(12 max(0, v - v_bf)), where v
  /// is the variance over kept channels of (delay - exact delay) in samples^2 and v_bf that of
  /// delay_table() (~1/12: rounding): the width of a box with the added variance.
  std::vector<float> smearing_s;
  /// [ndm] the S/N of a Gaussian pulse of the config's pulse_width_us found at this trial,
  /// relative to brute force's: ((s2 + v_bf) / (s2 + v))^(1/4), with s2 the pulse's variance in
  /// samples^2 (FWHM / 2.3548, the sample's 1/12, and the channel's smearing at the band centre
  /// as a box, 8.3 us |foff| DM / f^3), v and v_bf the variances over kept channels of the two
  /// methods' delays about the exact curve of the pulse's DM; the worst of a pulse at the trial's
  /// DM and at the midpoints to its neighbours (where the trial's own DM error adds to the
  /// method's scatter). A model, checked by the search's injection tests.
  std::vector<float> snr_fraction;
  // Algorithm::subband:
  int subbands = 0;                         ///< sub-bands (0 for the other methods)
  int subband_phases = 0;                   ///< the most stage-1 phases of a coarse DM
  std::vector<std::int32_t> coarse_phases;  ///< [coarse] stage-1 phases of each coarse DM
  std::vector<float> coarse_dms;            ///< the coarse DM grid (pc cm^-3), ascending
  std::vector<std::int32_t> coarse_trial;   ///< [ndm] index into coarse_dms of each fine trial
  std::vector<float> subband_smearing_s;    ///< [ndm] max over sub-bands of t_sb(i, s) (s)
  // Algorithm::fdmt:
  std::vector<std::int32_t> fdmt_delay;  ///< [ndm] the row's integer delay across the band
  std::int32_t fdmt_max_delay = 0;       ///< the largest integer delay computed
};

/// The work of one execute() (for rooflines): channel*sample additions and the bytes the method
/// must move at least (input read once, output written once, plus its intermediate rows written
/// and read once: stage-1 series for subband, every FDMT level).
struct OperationCount {
  double additions = 0;
  double bytes = 0;
};

/// Delays in samples, [ndm][nchans], relative to the highest frequency; round-to-nearest.
std::vector<std::int32_t> delay_table(const DedispersionConfig& config);

/// Quantised (8- or 16-bit) output, for memory-bound pipelines, as dedisp's out_nbits option:
///   out = clamp(rint(fma(sum, scale, offset)), 0, 2^out_nbits - 1)
/// computed in float32 (one fused multiply-add, round half to even), where `sum` is the float32
/// dedispersed sum that the float output would hold. NaN maps to 0.
struct OutputScaling {
  float scale = 1;
  float offset = 0;
};

/// dedisp's mapping (Barsdell et al. 2012, dedisp kernels.cuh scale_output): scale =
/// (2^out_nbits - 1) / ((2^nbits - 1) * nchans) * (3 * 1024) / (255 * 16), offset 0 (dedisp
/// truncates where warpbeam rounds to nearest). For nbits 32 the input range is taken as 255.
/// Throws invalid_argument unless out_nbits is 8 or 16.
OutputScaling dedisp_output_scaling(const DedispersionConfig& config, int out_nbits);

/// The quantisation above for one value (host side; the CUDA kernels apply the same formula).
std::uint32_t quantise_output(float sum, const OutputScaling& s, int out_nbits);

namespace detail {
class Executor;
struct MethodTables;
}  // namespace detail

/// What a plan would sum and hold, without its buffers (DedispersionPlan::preview()).
struct PlanPreview {
  TrialReport trials;         ///< as DedispersionPlan::trials()
  Workspace workspace;        ///< as DedispersionPlan::estimate_workspace()
  OperationCount operations;  ///< as DedispersionPlan::operations()
};

/// A dedispersion plan: the delay table and scratch for one shape; execute() allocates nothing.
class DedispersionPlan {
 public:
  /// Validates `config`, computes the delay table, resolves the backend (throws unsupported
  /// when cuda is asked for in a build without it) and prepares the kernel.
  DedispersionPlan(DedispersionConfig config, Backend backend);
  ~DedispersionPlan();
  DedispersionPlan(DedispersionPlan&&) noexcept;
  DedispersionPlan& operator=(DedispersionPlan&&) noexcept;

  const DedispersionConfig& config() const { return config_; }
  Backend backend() const { return backend_; }
  std::int64_t ndms() const { return static_cast<std::int64_t>(config_.dms.size()); }
  /// Bytes of one input time sample (packed nbits x nchans).
  std::int64_t row_bytes() const;
  /// The largest delay (samples) over all DMs and channels: the overlap between gulps.
  std::int32_t max_delay() const { return max_delay_; }
  /// Valid output samples per trial: nsamples_in - max_delay.
  std::int64_t nsamples_out() const { return config_.nsamples_in - max_delay_; }
  /// The delay table [ndm][nchans] (samples).
  const std::vector<std::int32_t>& delays() const { return delays_; }

  /// Whether execute() and execute_channel_major() take a gulp shorter than the plan was made
  /// for: m input rows, max_delay() < m <= nsamples_in, giving m - max_delay() output samples
  /// per trial, bit for bit what a plan made for m rows gives (so a caller whose last gulp is
  /// shorter keeps one plan). True for Algorithm::subband on both backends (its tables do not
  /// depend on the gulp's length and every output sample is summed in the same order whatever
  /// the gulp); false for brute force (its CUDA tile tables are made for the length) and fdmt
  /// (its time blocks are capped at the planned output length).
  bool accepts_shorter_input() const { return accepts_shorter_input(config_, backend_); }
  /// Whether a plan of `config` on `backend` would (the caller decides the length it plans for).
  static bool accepts_shorter_input(const DedispersionConfig& config, Backend backend);

  /// Dedisperses one gulp. in: packed samples [nsamples_in][row_bytes()]; out: float32
  /// [ndms][nsamples_out()] (or fewer rows in and the matching output where
  /// accepts_shorter_input()). Both in host memory for the CPU backend, device memory for CUDA
  /// (asynchronous on `stream`; synchronous when stream is null). Throws invalid_argument on a
  /// shape or memory-space mismatch, or (CUDA) a 16/32-bit input not aligned to its sample size
  /// (cudaMalloc'd buffers are). One execute() at a time per plan: the CUDA kernels corner-turn
  /// the gulp into the plan's scratch, so concurrent streams need one plan each.
  void execute(View<const std::uint8_t, 2> in, View<float, 2> out,
               const Stream* stream = nullptr) const;
  /// As above, with the output quantised to 8 or 16 bits by `scaling` (see OutputScaling). The
  /// CUDA kernels write the quantised values directly (a quarter or half of the output bytes);
  /// the CPU backend quantises a float32 result in a temporary buffer (allocated per call).
  void execute(View<const std::uint8_t, 2> in, View<std::uint8_t, 2> out,
               const OutputScaling& scaling, const Stream* stream = nullptr) const;
  void execute(View<const std::uint8_t, 2> in, View<std::uint16_t, 2> out,
               const OutputScaling& scaling, const Stream* stream = nullptr) const;
  /// Dedisperses channel-major float32 input (a plan made with config.channel_major, CUDA):
  /// in has shape [nchans][nsamples_in] with strides {row_stride, 1}, row_stride >=
  /// nsamples_in, and in.data holds nchans x row_stride floats: the kernel may read a row's
  /// elements nsamples_in .. row_stride - 1, which feed only output samples past nsamples_out
  /// (any value, NaN included, is harmless). out: float32 [ndms][nsamples_out()], device.
  /// Where accepts_shorter_input(), in may have m < nsamples_in samples per row (m >
  /// max_delay(); out then [ndms][m - max_delay()]), elements m .. row_stride - 1 as above.
  /// Asynchronous on `stream` (synchronous when null). The plan holds no scratch on this path,
  /// so concurrent streams may share it. Throws invalid_argument on a shape, stride or space
  /// mismatch, or when the plan was not made for channel-major input.
  void execute_channel_major(View<const float, 2> in, View<float, 2> out,
                             const Stream* stream = nullptr) const;

  /// The output rows: their DMs, the delays they sum along, the smearing added against brute
  /// force (see TrialReport).
  const TrialReport& trials() const;
  /// Additions and minimum bytes of one execute() (see OperationCount).
  OperationCount operations() const;

  /// The kernel variant that runs (`automatic` resolved on CUDA; the config's value on CPU).
  Algorithm algorithm() const;
  /// The tile sizes that run (CUDA tiled/packed: after defaults and shared-memory limits).
  CudaTuning tuning() const;
  /// One line naming the kernel and its tile sizes, for logs and benchmark records.
  std::string kernel_description() const;

  /// The memory this plan holds besides the caller's input and output: host bytes (CPU: the
  /// unpacked [chan][time] scratch and the delay table; subband and fdmt also their stage-1
  /// series or level buffers, and on both backends their host tables) and device bytes (CUDA:
  /// the delay and tile tables, the corner-turn scratch; subband: the stage-1 series of the
  /// whole gulp; fdmt: two level buffers of one time block).
  Workspace workspace() const;
  /// An upper bound of workspace() for a plan of `config` on `backend`, without making it (no
  /// device needed). Brute force: the DM list's length matters, not its values, and it may be
  /// empty: linear in the number of DM trials. CUDA tiled/packed: the tile tables are counted
  /// for tiles of one DM trial (any device's shared memory). subband and fdmt: the values
  /// matter (the grid and the tree follow from them), so `config` is validated and the
  /// method's host tables are derived as the plan would (no buffers are allocated); their
  /// CUDA stage-1 tile tables are counted for one-DM tiles. Throws as the plan does.
  static Workspace estimate_workspace(const DedispersionConfig& config, Backend backend);
  /// The trials, the workspace estimate and the operation count of a plan of `config` on
  /// `backend`, from the tables alone (no buffers, no device: a caller picks a method or sizes
  /// a budget with it, e.g. the file search derives one sub-band grid for its whole DM list).
  /// Throws as the plan does.
  static PlanPreview preview(const DedispersionConfig& config, Backend backend);

 private:
  DedispersionConfig config_;
  Backend backend_;
  std::vector<std::int32_t> delays_;
  std::int32_t max_delay_ = 0;
  std::shared_ptr<const detail::MethodTables> tables_;  // subband / fdmt tables, the report
  std::unique_ptr<detail::Executor> exec_;
};

/// The choice of select_algorithm(): the method, the modelled seconds of each candidate and why.
struct AlgorithmChoice {
  Algorithm algorithm = Algorithm::automatic;     ///< automatic (brute force), subband or fdmt
  double brute_s = 0, subband_s = 0, fdmt_s = 0;  ///< modelled execute() time; < 0: not eligible
  float subband_snr = 0, fdmt_snr = 0;            ///< worst snr_fraction over the trials
  std::string reason;
  /// The sub-band candidate's trials (its grid: coarse_dms, coarse_trial, coarse_phases) when
  /// it could be planned, so that a caller who takes it need not derive the grid again.
  TrialReport subband_trials;
};

/// Picks the fastest method on `backend` for `config`'s shape whose worst predicted S/N fraction
/// (TrialReport::snr_fraction) is >= min_snr_fraction: brute force (returned as automatic),
/// subband (config.subband as given) or fdmt. The time model: additions and bytes of
/// OperationCount over per-backend rates (src/dedisp/select.cpp says where each rate comes
/// from). Builds the candidates' tables, not their scratch. Throws as DedispersionPlan does.
AlgorithmChoice select_algorithm(const DedispersionConfig& config, Backend backend,
                                 double min_snr_fraction = 0.95);

// ---------------------------------------------------------------------------------------------
// Autotuning of the CUDA kernels
// ---------------------------------------------------------------------------------------------

/// One kernel variant and tile size tried by autotune().
struct AutotuneTrial {
  Algorithm algorithm = Algorithm::automatic;
  CudaTuning tuning;    ///< as requested
  double kernel_s = 0;  ///< median execute() time (s); < 0 when the plan could not be made
};

struct AutotuneOptions {
  bool use_cache = true;   ///< read the cache first and store the winner
  bool refresh = false;    ///< measure even when the shape is in the cache
  int repeats = 3;         ///< timed runs per candidate (after one warm-up)
  std::string cache_path;  ///< empty: default_autotune_cache_path()
};

struct AutotuneResult {
  Algorithm algorithm = Algorithm::automatic;  ///< the winner (tiled or packed; direct if asked)
  CudaTuning tuning;                           ///< the winner's tile sizes (as run)
  double kernel_s = 0;                         ///< its median time (s) when measured or cached
  bool from_cache = false;
  std::string key;         ///< the cache key of the shape
  std::string cache_path;  ///< the cache file used ("" when caching is off or impossible)
  std::vector<AutotuneTrial> trials;  ///< what was measured (empty when from the cache)
};

/// Tries a small set of CUDA kernel variants and tile sizes on `config`'s shape (random input
/// made on the GPU; it allocates one input and one float32 output of the shape; a channel_major
/// config is timed through the ordinary packed input, corner turn included) and returns the
/// fastest; the winner is cached per shape in a JSON file. `config.algorithm` limits the search:
/// automatic tries packed (nbits <= 8) and tiled, tiled or packed only that one, direct nothing.
/// The cache key is nchans, nbits, ndm, nsamples_in, the max-delay bucket (next power of two),
/// the requested algorithm and the device name. Apply the result with
/// `config.algorithm = r.algorithm; config.tuning = r.tuning;`.
/// Throws unsupported without a CUDA device; a broken cache file is ignored with a warning.
AutotuneResult autotune(const DedispersionConfig& config, const AutotuneOptions& options = {});

/// The cache key of autotune() for `config` on the device named `device_name`.
std::string autotune_cache_key(const DedispersionConfig& config, const std::string& device_name);

/// $XDG_CACHE_HOME/warpbeam/dedisp-tuning.json, else ~/.cache/warpbeam/dedisp-tuning.json
/// ("" when neither variable is set).
std::string default_autotune_cache_path();

/// Fills `bytes` of device memory with reproducible pseudo-random bytes (a counter-based hash of
/// `seed` and the byte index), for tests and benchmarks that need data made on the GPU.
/// Asynchronous on `stream` (synchronous when null); throws unsupported without CUDA.
void random_device_bytes(std::uint8_t* device_ptr, std::size_t bytes, std::uint64_t seed,
                         const Stream* stream = nullptr);

}  // namespace warpbeam::dedisp
