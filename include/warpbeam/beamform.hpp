#pragma once
// Coherent multi-beam beamformer: channelised antenna voltages in, beams out.
//
// For every channel c, polarisation p and time sample t, beam b is the weighted sum
//   v[b][p][t][c] = sum_a  w[c][p][b][a] * x[c][t][a][p]           (complex multiply-accumulate)
// (Magro et al. 2013, "A real-time, GPU-based, non-imaging back-end for radio telescopes" — the
// BEST-2 beamformer — eq. 1). The output is either the beam voltage v or its detected power
// |v|^2, optionally summed over the polarisations and integrated over `integration` samples:
//   P[b][s][t'][c] = sum_{t = t'N .. t'N+N-1} sum_{p in s} |v[b][p][t][c]|^2.
// Output order is [beam][pol or 1][time][chan]: each beam (and pol) is already a filterbank, so a
// search reads it in place (the transpose is fused into the beamformer's store).
//
// Weights come from the array geometry (see beamform/weights below): a plane wave from unit
// direction s (local East-North-Up) reaches antenna a at position r_a earlier by tau_a = r_a.s/c;
// with the e^{+2 pi i f t} convention its voltage is x_a = S exp(+2 pi i f tau_a), and the weight
// that phases it up is w_a = g_a exp(-2 pi i f tau_a) (g_a: calibration gain, 0 when masked).
// Beams are not normalised: a source of unit amplitude in the pointing direction gives |v| = the
// number of unmasked antennas (times |g|).
//
// Config -> Plan -> execute, as every engine (DESIGN.md).

#include <array>
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/sample_type.hpp"

namespace warpbeam::beamform {

/// Speed of light (m/s).
inline constexpr double kSpeedOfLight = 299792458.0;

/// What execute() writes.
enum class OutputKind {
  power,    ///< float32 |v|^2 (summed over pols if sum_pols, integrated over `integration`)
  voltage,  ///< complex float32 beam voltages (re, im interleaved), per pol, no integration
};

/// Kernel variant. `automatic` picks by backend and shape (see BeamformPlan::algorithm()).
/// Every CUDA variant computes the same product; they differ in speed and in the arithmetic
/// (fp32 on CUDA cores or fp16 operands with fp32 accumulation on tensor cores).
enum class Algorithm {
  automatic,
  register_tiled,   ///< fp32, CUDA cores: the BEST-2 paper's kernel as written in round 1 (voltages
                    ///< staged in shared memory per 16 antennas); the CPU reference on the CPU
  register_stream,  ///< fp32, CUDA cores: threads along time load and decode their own voltages,
                    ///< weights stay in shared memory for the block's life, output transposed
                    ///< through shared memory; deterministic (no atomics); CUDA only
  tensor_core,      ///< fp16 tensor-core complex GEMM (mma.sync), unpack fused; CUDA only
  cublas_fp16,      ///< unpack to fp16, cuBLAS batched GEMM (fp16 in, fp32 accumulate), then a
                    ///< detection kernel; deterministic; CUDA only
  tensor_int8,      ///< int8 tensor cores (mma.sync s8, exact int32 sums): ci4/ci8 voltages
                    ///< expanded to s8 in the kernel, weights quantised to s8 with one scale per
                    ///< channel and beam, detection (|v|^2, pol sum, integration in exact 64-bit
                    ///< integers) in the epilogue; power only, integration dividing 64;
                    ///< deterministic; CUDA only; not chosen by automatic until measured on the
                    ///< H200. Error of the int8 weights: docs/PERFORMANCE.md, "int8 weights"
  tensor_int8_stream,  ///< tensor_int8's arithmetic (bit-identical output) as a streaming kernel
                       ///< for small N (B1): a warp per channel keeps its int8 weights in
                       ///< registers for the block's life, voltages stream through cp.async,
                       ///< rows of 16 channels leave as 16-byte stores. ci4, nantennas <= 32,
                       ///< pols not summed, integration dividing 32 (else invalid_argument);
                       ///< deterministic; CUDA only; not chosen by automatic until measured
};
std::string_view to_string(Algorithm a);
/// Parses "auto", "register-tiled", "register-stream", "tensor-core", "cublas-fp16",
/// "tensor-int8", "tensor-int8-stream"; throws invalid_argument otherwise.
Algorithm parse_algorithm(std::string_view s);
/// True for the variants with fp16 operands (weights rounded to fp16; tolerance 1e-2).
bool uses_fp16(Algorithm a);
/// True for the variants with int8 weights (tensor_int8, tensor_int8_stream: weights quantised to
/// s8, one scale per channel and beam; see effective_weights()).
bool uses_int8(Algorithm a);
/// True for the variants that run on the CUDA backend only (every one but automatic and
/// register_tiled, the CPU's beamformer).
bool cuda_only(Algorithm a);

/// Tunables of the CUDA kernels; 0 means "the default measured on the H200".
///  register_tiled: a thread holds beams_per_thread x samples_per_thread complex accumulators
///    for one channel; a block is 8 channels x (threads_per_block / 8) threads along time.
///    beams_per_thread 8, 16 or 32; samples_per_thread 2 or 4; threads_per_block 128 or 256.
///  register_stream: a thread holds beams_per_thread x samples_per_thread accumulators of one
///    channel (samples 32 apart); a block is 8 warps = 8 channels. (32 x 1), (16 x 1) or (16 x 2);
///    threads_per_block must be 0 or 256.
///  cublas_fp16: gemm_output_bits is the GEMM's output type, 32 (fp32) or 16 (fp16, scaled by a
///    power of two so that it cannot overflow; half the intermediate bytes);
///    gemm_chunk_channels the channels per unpack-GEMM-detect round (0: as many as keep the
///    GEMM's output under 1 GiB).
///  tensor_int8: threads_per_block 256 (blocks of 64 beams x 128 samples, one per SM) or 128
///    (64 x 64, two per SM), for its GEMM kernel (integration 1, pols not summed).
struct CudaTuning {
  int beams_per_thread = 0;
  int samples_per_thread = 0;
  int threads_per_block = 0;
  int gemm_output_bits = 0;
  int gemm_chunk_channels = 0;
};

struct BeamformConfig {
  int nchans = 0;             ///< channels per execute()
  int nantennas = 0;          ///< antennas (stands) in the input
  int npol = 1;               ///< polarisations per antenna in the input: 1 or 2
  int nbeams = 0;             ///< beams formed
  std::int64_t nsamples = 0;  ///< time samples per channel per execute()
  SampleType sample_type = SampleType::ci4;
  Encoding encoding = Encoding::twos_complement;  ///< integer code -> value (ci4/ci8)
  std::vector<float> levels;  ///< custom code values (16 for ci4, 256 for ci8) overriding encoding
  OutputKind output = OutputKind::power;
  bool sum_pols = false;  ///< power only: sum |v|^2 over the polarisations
  int integration = 1;    ///< power only: samples summed into one output sample; divides nsamples
  Algorithm algorithm = Algorithm::automatic;
  /// automatic may pick the int8-weight kernel tensor_int8_stream where its limits allow (ci4,
  /// <= 32 antennas, pols not summed when npol = 2, integration dividing 32): 3.9x register_stream
  /// on B1 (H200, 2026-12-03), but its weights are int8, so beam power is within ~1 % of the exact
  /// (0.40 % on B1), not fp32's 1e-5 (docs/PERFORMANCE.md, "int8 weights"). Off by default.
  bool int8_weights = false;
  CudaTuning tuning;
  int threads = 0;  ///< CPU threads (0: OpenMP's default)

  /// Throws invalid_argument naming the field and its allowed range.
  void validate() const;
  /// Bytes of one input time row: nantennas * npol * bytes_per_complex.
  std::int64_t row_bytes() const;
  /// Output "pol" axis length: 1 when power is summed over pols, else npol.
  int nout_pols() const;
  /// Output time samples: nsamples / integration.
  std::int64_t nsamples_out() const;
  /// Floats per output row (one time sample of one beam): nchans (power) or 2 nchans (voltage).
  std::int64_t out_row_floats() const;
  /// Input shape {nchans, nsamples, row_bytes()} and output shape
  /// {nbeams, nout_pols(), nsamples_out(), out_row_floats()}.
  std::array<std::int64_t, 3> input_shape() const;
  std::array<std::int64_t, 4> output_shape() const;
  /// Real floating-point operations of one execute(): 8 per complex multiply-accumulate.
  double flops() const;
};

namespace detail {
class Executor;
struct Int8Weights;
}  // namespace detail

/// A beamforming plan: weights and scratch for one shape; execute() allocates nothing.
class BeamformPlan {
 public:
  /// Validates `config`, resolves the backend (unsupported: cuda without a device build, or
  /// tensor_core on the CPU) and the algorithm, and prepares the kernel. Weights start at zero.
  BeamformPlan(BeamformConfig config, Backend backend);
  ~BeamformPlan();
  BeamformPlan(BeamformPlan&&) noexcept;
  BeamformPlan& operator=(BeamformPlan&&) noexcept;

  const BeamformConfig& config() const { return config_; }
  Backend backend() const { return backend_; }
  /// The algorithm in use (never automatic): on CUDA cublas_fp16 when nbeams >= 128 and
  /// nantennas >= 64 (large N: the GEMM is big enough to feed the tensor cores), else
  /// register_stream (tensor_int8_stream instead where config().int8_weights allows it and its
  /// limits are met; tensor_int8 only when asked for); register_tiled on the CPU.
  Algorithm algorithm() const { return algorithm_; }
  /// The CUDA tuning in use (defaults filled in; zeros on the CPU).
  CudaTuning tuning() const;

  /// Sets the weights, complex [nchans][npol][nbeams][nantennas] in host memory (copied; on
  /// CUDA the upload is asynchronous on `stream` and ordered before later execute() calls on it).
  /// Tracking beams call this once per block of samples. Throws invalid_argument on a shape
  /// mismatch or a non-finite weight.
  void set_weights(View<const std::complex<float>, 4> weights, const Stream* stream = nullptr);
  /// The weights as the kernel applies them (rounded to fp16 for tensor_core and cublas_fp16;
  /// scale * q for tensor_int8(_stream), q in [-127, 127], one scale per channel and beam), same
  /// layout.
  const std::vector<std::complex<float>>& effective_weights() const { return weights_; }

  /// Beamforms one block. in: bytes [nchans][nsamples][row_bytes()]; out: float32
  /// config().output_shape(). Host memory for the CPU backend, device memory for CUDA
  /// (asynchronous on `stream`, synchronous when null). Throws invalid_argument on a shape or
  /// memory-space mismatch.
  void execute(View<const std::uint8_t, 3> in, View<float, 4> out,
               const Stream* stream = nullptr) const;

 private:
  BeamformConfig config_;
  Backend backend_;
  Algorithm algorithm_;
  CudaTuning tuning_;
  std::vector<float> table_;
  std::vector<std::complex<float>> weights_;
  std::shared_ptr<detail::Int8Weights> int8_;  // tensor_int8: the quantised weights
  std::unique_ptr<detail::Executor> exec_;
  void apply_weights(const Stream* stream);  // weights_ -> what the kernel applies -> exec_
};

// -------------------------------------------------------------------------------------------
// Weights from geometry
// -------------------------------------------------------------------------------------------

/// Where the array is on Earth (WGS84 geodetic).
struct Observatory {
  double longitude_rad = 0;  ///< east positive
  double latitude_rad = 0;
  double height_m = 0;
};

/// The array: antenna positions in metres in a local East-North-Up frame at the observatory,
/// per-antenna complex calibration gains and a mask (sub-arraying).
struct ArrayGeometry {
  Observatory site;
  std::vector<std::array<double, 3>> enu_m;  ///< [antenna] (east, north, up), metres
  std::vector<std::complex<float>> gains;    ///< [antenna][pol]; empty: all 1
  std::vector<std::uint8_t> mask;            ///< [antenna]: 1 = use, 0 = drop; empty: all used
  int nantennas() const { return static_cast<int>(enu_m.size()); }
  /// Throws invalid_argument for an empty array, non-finite positions or gains/mask sizes that
  /// do not match (gains: nantennas * npol).
  void validate(int npol) const;
};

/// The BEST-2 array (Medicina Northern Cross, the paper's test bed) as warpbeam simulates it:
/// 32 receivers on a 4 (east) x 8 (north) grid: 8 cylinders of the N-S arm 10 m apart (north),
/// each 23.5 m long cut into 4 receivers 5.875 m apart (east), centred on the origin, at
/// Medicina (44.5206 N, 11.6469 E, 25 m). An idealised layout (no cable delays, flat ground).
ArrayGeometry best2_geometry();
/// The BEST-2 band: 1024 channels of 19.53125 kHz over 20 MHz centred on 408 MHz; channel i has
/// the centre frequency 398 MHz + (i + 0.5) * 20 MHz / 1024 (Hz returned).
std::vector<double> best2_frequencies_hz(int nchans = 1024);

/// How a beam direction is given.
enum class Frame {
  direction_cosines,  ///< (l, m): east and north components of the unit vector; fixed
  azel,               ///< (azimuth from north through east, elevation), radians; fixed
  radec,              ///< ICRS (RA, Dec), radians: a tracking beam, converted at each time
};
std::string_view to_string(Frame f);

struct Pointing {
  Frame frame = Frame::azel;
  double a = 0, b = 0;  ///< (l, m), (az, el) or (ra, dec) per the frame
  std::string name;     ///< optional label (filterbank source_name)
};

/// True when any pointing is in (RA, Dec): its weights change with time.
bool is_tracking(const std::vector<Pointing>& pointings);

/// Unit vector (east, north, up) of `p` at UTC time `mjd_utc` (MJD). (RA, Dec) are converted to
/// observed azimuth/elevation with ERFA's eraAtco13 (ICRS -> observed: precession, nutation,
/// aberration, Earth rotation; no refraction; DUT1 and polar motion taken as 0).
/// Throws invalid_argument when the direction is below the horizon (elevation < 0) or (l, m) is
/// outside the unit circle, naming the beam by `index`.
std::array<double, 3> direction_enu(const Pointing& p, const Observatory& site, double mjd_utc,
                                    int index = 0);

/// Azimuth and elevation (radians) of a unit ENU vector.
std::array<double, 2> enu_to_azel(const std::array<double, 3>& s);

/// The weights w[c][p][b][a] = mask_a * g_{a,p} * exp(-2 pi i f_c (r_a . s_b) / c) for beams
/// pointing at `pointings` at time `mjd_utc` (ignored unless tracking). freqs_hz: [nchans].
/// Throws as direction_enu() and ArrayGeometry::validate().
std::vector<std::complex<float>> compute_weights(const ArrayGeometry& array,
                                                 const std::vector<Pointing>& pointings,
                                                 const std::vector<double>& freqs_hz, int npol,
                                                 double mjd_utc = 51544.5);

/// Parses a beam list: one beam per line, "azel AZ_DEG EL_DEG [NAME]", "radec RA DEC [NAME]"
/// (RA as degrees or hh:mm:ss.s, Dec as degrees or dd:mm:ss.s) or "lm L M [NAME]"; '#' starts a
/// comment. Throws invalid_argument naming the line for anything else.
std::vector<Pointing> parse_beam_list(const std::string& text);
/// A grid of beams "FRAME:A0:A1:NA:B0:B1:NB" (degrees for azel/radec, unitless for lm), e.g.
/// "azel:170:190:5:70:80:3". Throws invalid_argument for a malformed spec or a count < 1.
std::vector<Pointing> parse_beam_grid(const std::string& spec);

/// Relative response of the array to a unit plane wave from direction `s` at frequency f_hz for
/// weights w[a] (one channel and pol): sum_a w_a exp(+2 pi i f r_a.s / c). Used for beam patterns.
std::complex<double> array_response(const ArrayGeometry& array, const std::complex<float>* weights,
                                    double f_hz, const std::array<double, 3>& s);

// -------------------------------------------------------------------------------------------
// Benchmark baseline
// -------------------------------------------------------------------------------------------

/// Median milliseconds of cublasCgemmStridedBatched (fp32 complex; TF32 math mode when `tf32`)
/// for C[m x n] = A[m x k] B[k x n] over `batch` matrices, measured with CUDA events after a
/// warm-up. The B2 benchmark's baseline. Throws unsupported without CUDA.
double cublas_cgemm_ms(int m, int n, int k, int batch, bool tf32, int repeats = 5);
/// Measured fp16 tensor-core rate (flop/s) of a cuBLAS n x n x n GEMM (cublasGemmEx, fp16 inputs,
/// fp32 accumulation, as the tensor-core beamformer): the ceiling its fraction is quoted against.
double cublas_hgemm_flops(int n = 8192, int repeats = 5);

}  // namespace warpbeam::beamform
