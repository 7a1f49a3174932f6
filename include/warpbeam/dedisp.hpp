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

/// Kernel variant. `automatic` picks by backend and shape.
enum class Algorithm { automatic, direct, tiled };

/// Tile sizes of the CUDA tiled kernel; 0 means "the default measured on the H200".
struct CudaTuning {
  int dms_per_block = 0;       ///< DM trials one thread block covers
  int samples_per_thread = 0;  ///< output samples each thread accumulates in registers
  int threads_per_block = 0;   ///< threads of one block (along time)
};

/// Tile sizes of the CPU kernel (src/dedisp/cpu.cpp); 0 means "the default measured on the
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

  /// Throws invalid_argument naming the field and its allowed range.
  void validate() const;
};

/// Delays in samples, [ndm][nchans], relative to the highest frequency; round-to-nearest.
std::vector<std::int32_t> delay_table(const DedispersionConfig& config);

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
  /// shape or memory-space mismatch.
  void execute(View<const std::uint8_t, 2> in, View<float, 2> out,
               const Stream* stream = nullptr) const;

 private:
  DedispersionConfig config_;
  Backend backend_;
  std::vector<std::int32_t> delays_;
  std::int32_t max_delay_ = 0;
  std::unique_ptr<detail::Executor> exec_;
};

}  // namespace warpbeam::dedisp
