#pragma once
// Incoherent (brute-force) dedispersion: filterbank [time][chan] in, DM-time plane [dm][time] out.
//
// Delay of channel c at dispersion measure DM, relative to the highest frequency of the band:
//   dt(c) = k * DM * (f_c^-2 - f_hi^-2),  k = 4.148808e3 s MHz^2 pc^-1 cm^3
// (Lorimer & Kramer, Handbook of Pulsar Astronomy, eq. 5.1), rounded to whole samples.
// Output sample t of trial d is  sum_c in[t + delay(d, c)][c]  over unmasked channels, for
// t = 0 .. nsamples_out-1 with nsamples_out = nsamples_in - max_delay (only valid samples), where
// max_delay is the largest delay of the largest DM.
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

/// Kernel variant. `automatic` picks by backend and shape: on CUDA, `packed` for nbits <= 8 and
/// `tiled` otherwise. The CPU backend has one kernel and ignores the choice.
///  - direct: one thread per (DM, output sample), unpacking on the fly (the baseline, as dedisp's
///    direct kernel; Barsdell et al. 2012).
///  - tiled: the ARTEMIS scheme (Armour et al. 2012): the input is corner-turned once to
///    [chan][time], each block covers a (DM, time) rectangle, the block's input span is staged in
///    shared memory and each thread holds several output samples in fp32 registers.
///  - packed: the tiled scheme with exact integer arithmetic for nbits <= 8: two output samples
///    per 32-bit add (two 16-bit lanes), flushed to 32-bit accumulators every <= 256 channels.
enum class Algorithm { automatic, direct, tiled, packed };

/// "automatic", "direct", "tiled", "packed".
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
  int threads = 0;  ///< CPU threads (0: OpenMP's default)
  /// Input already corner-turned by the caller: execute_channel_major() takes float32 rows
  /// [nchans][row stride] on the device (the GPU search cleans each gulp into that layout).
  /// CUDA tiled kernel only: nbits must be 32, the killmask empty or all ones (zero a channel's
  /// row instead), algorithm automatic or tiled. The plan then owns no corner-turn scratch.
  bool channel_major = false;

  /// Throws invalid_argument naming the field and its allowed range.
  void validate() const;
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
}

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

  /// Dedisperses one gulp. in: packed samples [nsamples_in][row_bytes()]; out: float32
  /// [ndms][nsamples_out()]. Both in host memory for the CPU backend, device memory for CUDA
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
  /// Asynchronous on `stream` (synchronous when null). The plan holds no scratch on this path,
  /// so concurrent streams may share it. Throws invalid_argument on a shape, stride or space
  /// mismatch, or when the plan was not made for channel-major input.
  void execute_channel_major(View<const float, 2> in, View<float, 2> out,
                             const Stream* stream = nullptr) const;

  /// The kernel variant that runs (`automatic` resolved on CUDA; the config's value on CPU).
  Algorithm algorithm() const;
  /// The tile sizes that run (CUDA tiled/packed: after defaults and shared-memory limits).
  CudaTuning tuning() const;
  /// One line naming the kernel and its tile sizes, for logs and benchmark records.
  std::string kernel_description() const;

  /// The memory this plan holds besides the caller's input and output: host bytes (CPU: the
  /// unpacked [chan][time] scratch and the delay table) and device bytes (CUDA: the delay and
  /// tile tables, the corner-turn scratch).
  Workspace workspace() const;
  /// An upper bound of workspace() for a plan of `config` on `backend`, without making it (no
  /// device needed; the DM list's length matters, not its values, and it may be empty: linear
  /// in the number of DM trials). CUDA tiled/packed: the tile tables are counted for tiles of
  /// one DM trial (any device's shared memory).
  static Workspace estimate_workspace(const DedispersionConfig& config, Backend backend);

 private:
  DedispersionConfig config_;
  Backend backend_;
  std::vector<std::int32_t> delays_;
  std::int32_t max_delay_ = 0;
  std::unique_ptr<detail::Executor> exec_;
};

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
