#pragma once
// Volumetric delay-and-sum (DAS) beamforming for ultrasound: channel data [batch][rx][tx][sample]
// in, one complex value per frame and voxel [batch][voxel] out.
//
// For voxel n at p_n, transmit q, receiver m at r_m and frame b (Perrot et al., "So you think you
// can DAS? A viewpoint on delay-and-sum beamforming", Ultrasonics 111, 106309, 2021):
//
//   tau(q, n, m) = tau_tx(q, n) + |p_n - r_m| / c                  two-way time of flight (s)
//   i = (tau - t0) * fs,  k = floor(i),  f = i - k                  fractional sample index
//   out[b][n] = sum_q sum_m  w_tx(q, n) * w_rx(n, m) * ((1 - f) s[b][m][q][k] + f s[b][m][q][k+1])
//                                                   * exp(2 pi i fc tau)        (IQ data only)
//
// A term counts only when 0 <= i < nsamples - 1 (both samples exist). For IQ data the samples are
// baseband with respect to absolute time t = t0 + k / fs (as PyMUST's rf2iq and USTB make them),
// so the phase rotation exp(2 pi i fc tau) restores the carrier at the delay tau.
//
// Transmit delays tau_tx(q, n) follow the UFF convention (USTB): time zero is the moment the
// transmitted wave passes the origin (0, 0, 0) of the probe's coordinates:
//   plane wave, azimuth a and elevation e:  tau_tx = (x sin a cos e + y sin e + z cos a cos e) / c
//   diverging wave from virtual source s:    tau_tx = (|p - s| - |s|) / c
//   element delays d_e (PyMUST's TXdelay):   tau_tx = min_e (d_e + |p - e| / c)
// each plus the transmit's `delay` (s). Or the caller gives tau_tx for every (tx, voxel).
//
// Receive apodization by f-number F (depth / aperture width) with a window: the aperture of voxel
// n for element m has half-width h = dz / (2F), dz = z_n - z_m (no contribution when dz <= 0); the
// weight is window(u), u = rho / h, rho the lateral distance (x and y; only the coordinate across
// a row-column line element counts). Windows on u in [0, 1] (0 outside): boxcar 1; Hann
// 0.5 (1 + cos(pi u)); Tukey(alpha) 1 for u <= 1 - alpha, else 0.5 (1 + cos(pi (u - 1 + alpha) /
// alpha)) (Harris, Proc. IEEE 66, 1978).
//
// Units: SI everywhere (m, s, Hz). Coordinates: x along the array, y across it (matrix probes),
// z the depth, increasing away from the probe.

#include <array>
#include <complex>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::das {

using Vec3 = std::array<double, 3>;  ///< (x, y, z) in metres

/// Real radio-frequency samples or complex baseband (I/Q) samples.
enum class Signal { rf, iq };

/// Kernel variant (CUDA). The CPU backend has one implementation, the fp32 reference.
/// - baseline (BL): a thread per voxel and a tile of frames, data in the input layout, receive
///   delays computed in the kernel, transmit delays precomputed.
/// - batch_inner (BI): data permuted once to [sample][tx][rx][batch]; a warp is N voxels x B
///   frames, so neighbouring threads read consecutive frames with vector loads; each lane
///   computes the delays of one receiver and shares them with the lanes of its voxel by shuffles.
/// - tensor_core (TC): per voxel tile, receiver tile and distinct sample index, the weight matrix
///   [voxels x receivers] times the sample matrix [receivers x batch] by fp16 MMA, fp32 sums.
/// - tensor_core_window (TCW): per tile of 16 neighbouring voxels, receiver and window of 8
///   consecutive samples, the weight matrix [voxels x (8 samples, re/im)] (two taps per voxel
///   non-zero) times the sample matrix [(8 samples, re/im) x frames] by fp16 MMA (m16n8k16),
///   fp32 sums: each sample is read once per tile instead of once per voxel. Delays in float
///   with exact in-range and aperture decisions. fp16 storage only (as TC); RF runs as IQ with
///   a zero imaginary part (the cost of IQ).
enum class Algorithm { automatic, baseline, batch_inner, tensor_core, tensor_core_window };

/// How the CUDA kernels store channel data: fp32, or fp16 (half the bytes; sums stay fp32).
/// tensor_core and tensor_core_window always use fp16. Values must stay within +-65504 in fp16.
enum class Storage { fp32, fp16 };

/// Receive apodization window over the f-number aperture.
enum class Window { boxcar, hann, tukey };

std::string_view to_string(Algorithm a);
std::string_view to_string(Storage s);
std::string_view to_string(Window w);
std::string_view to_string(Signal t);
/// Parse "auto"/"automatic", "bl"/"baseline", "bi"/"batch_inner", "tc"/"tensor_core",
/// "tcw"/"tensor_core_window".
Algorithm parse_algorithm(std::string_view s);
Storage parse_storage(std::string_view s);  ///< "fp32" or "fp16"
Window parse_window(std::string_view s);    ///< "boxcar", "hann" or "tukey"

/// A receive (or transmit) element: a point, or a line along x or y (row-column arrays, where the
/// time of flight is to the nearest point of the line).
enum class ElementKind : std::uint8_t { point, line_x, line_y };

/// Element geometry of the probe.
struct Probe {
  std::vector<Vec3> positions;     ///< element centres (m), [nelements]
  std::vector<ElementKind> kinds;  ///< [nelements] or empty (all points)
  double pitch = 0;                ///< element spacing (m), informative
  double element_width = 0;        ///< (m), informative
  std::size_t size() const { return positions.size(); }
};

/// Linear array of n elements along x, centred on x = 0 (PyMUST's convention), y = z = 0.
Probe linear_array(int n, double pitch, double element_width = 0);
/// nx x ny matrix array in the z = 0 plane, centred; element index = iy * nx + ix.
Probe matrix_array(int nx, int ny, double pitch_x, double pitch_y);
/// Row-column array: n rows (lines along x at y_i) then n columns (lines along y at x_i).
Probe row_column_array(int n, double pitch);

/// One transmit event.
struct Transmit {
  enum class Kind { plane_wave, diverging_wave, element_delays };
  Kind kind = Kind::plane_wave;
  double azimuth = 0;    ///< plane wave: steering angle in the x-z plane (rad)
  double elevation = 0;  ///< plane wave: steering angle towards y (rad)
  Vec3 source{};         ///< diverging wave: virtual source (m), behind the probe (z < 0)
  std::vector<double> element_delays;   ///< element_delays: firing delay per element (s); NaN = off
  std::vector<Vec3> element_positions;  ///< element_delays: element positions (empty: the probe)
  double delay = 0;  ///< added to tau_tx (s); UFF's wave.delay enters with a minus sign

  static Transmit plane(double azimuth, double elevation = 0);
  static Transmit diverging(const Vec3& source);
};

/// The most points Axis::size() reports (it saturates there) and the voxels parse_grid() accepts
/// (a grid is also checked against the memory budget by its user, e.g. `das --memory`).
inline constexpr std::int64_t kMaxAxisPoints = std::int64_t{1} << 31;
inline constexpr std::int64_t kMaxGridVoxels = std::int64_t{1} << 31;

/// One regularly spaced axis: start, start + step, ... <= stop (+1e-9 step of slack).
struct Axis {
  double start = 0, stop = 0, step = 1;
  std::int64_t size() const;
  double at(std::int64_t i) const { return start + static_cast<double>(i) * step; }
};

/// A regular grid; voxels() are ordered [z][y][x] (x fastest), so a 2-D grid (y of size 1) is an
/// image [z][x] with rows = depth, as PyMUST's meshgrid.
struct Grid {
  Axis x, y{0, 0, 1}, z;
  std::array<std::int64_t, 3> shape() const { return {z.size(), y.size(), x.size()}; }
  std::int64_t size() const;  ///< z x y x x, saturated at INT64_MAX
  bool is_2d() const { return y.size() == 1; }
  std::vector<Vec3> voxels() const;
};

/// Parses "x0:x1:dx,z0:z1:dz" (2-D) or "x0:x1:dx,y0:y1:dy,z0:z1:dz" (3-D), in metres.
/// Throws invalid_argument naming the problem (zero voxels, step <= 0, stop < start, a number that
/// is not finite, kMaxGridVoxels or more voxels).
Grid parse_grid(std::string_view spec);

/// CUDA tile sizes; 0 means the default (see docs/PERFORMANCE.md for the measured sweep).
struct CudaTuning {
  int batch_tile = 0;         ///< BL: frames per thread (4, 8 or 16)
  int bi_repeats = 0;         ///< BI: vector loads per lane and voxel (1, 2, 4 or 8)
  int threads_per_block = 0;  ///< BL, BI and TCW: 64..256, multiple of 32
  int warp_frames = 0;        ///< TCW: frames per warp (32, 64 or 128)
  int delay_bits = 0;         ///< BI with fp16 storage: delays in float (32) or double (64)
  int rx_split = 0;  ///< TCW: warps sharing one tile's receivers (1, 2, 4 or 8; divides the warps)
};

struct DasConfig {
  Signal signal = Signal::iq;
  std::int64_t batch = 1;     ///< frames per execute()
  std::int64_t nsamples = 0;  ///< samples per (frame, rx, tx)
  double fs = 0;              ///< sampling frequency (Hz) of the (RF or IQ) samples
  double t0 = 0;              ///< time of sample 0 (s)
  double c = 1540;            ///< sound speed (m/s)
  double fc = 0;              ///< centre (demodulation) frequency (Hz); required for IQ

  Probe probe;                      ///< receive elements
  std::vector<Vec3> voxels;         ///< where to beamform (m)
  std::vector<Transmit> transmits;  ///< transmit models, one per tx ...
  std::vector<double> tx_delays;    ///< ... or tau_tx given [ntx][nvoxels] (s), not both
  std::vector<float> tx_weights;    ///< [ntx][nvoxels], empty = all 1
  std::optional<double> fnumber;    ///< receive f-number (> 0); empty = full aperture
  Window window = Window::boxcar;
  double tukey_alpha = 0.5;  ///< Tukey taper fraction, (0, 1]

  Algorithm algorithm = Algorithm::automatic;  ///< CUDA variant; the CPU has only the reference
  Storage storage = Storage::fp32;             ///< CUDA channel-data storage
  CudaTuning tuning;
  int threads = 0;  ///< CPU threads (0: OpenMP's default)

  std::int64_t nrx() const { return static_cast<std::int64_t>(probe.size()); }
  std::int64_t nvoxels() const { return static_cast<std::int64_t>(voxels.size()); }
  /// Number of transmits: transmits.size(), or tx_delays.size() / nvoxels().
  std::int64_t ntx() const;

  /// Throws invalid_argument naming the field and the allowed range (zero voxels, f-number <= 0,
  /// fs <= 0, IQ without fc, table sizes that do not match ...).
  void validate() const;
};

/// DESIGN.md's reference configurations (geometry and sizes; the data are the caller's):
/// U1 (PyMUST rotating disk: 251 x 251 pixels, 128-element linear array, 334 IQ samples, 32
/// frames, one plane wave; receive f-number 1, boxcar, as mach's benchmark) and U2 (32 x 32
/// matrix probe, 512 IQ samples, one plane wave, 64^3 voxels, batch 128; full aperture, as
/// ffdas). Throws invalid_argument for another name.
DasConfig reference_config(std::string_view name);

/// The CUDA variant Algorithm::automatic resolves to for this config's shape and storage: BL
/// below 8 frames; else BI for fp32 storage, TCW for fp16 storage from 16 frames (BI below).
/// The rule and the H200 measurements behind it: docs/PERFORMANCE.md.
Algorithm automatic_algorithm(const DasConfig& config);

/// tau_tx(q, n) (s), [ntx][nvoxels], from the transmit models (or the given table).
std::vector<double> transmit_delays(const DasConfig& config);

namespace detail {
class Executor;
struct DelayParams;
struct Element;
}  // namespace detail

/// A DAS plan: transmit delays, voxel order and scratch for one shape; execute() allocates
/// nothing after the first call.
class DasPlan {
 public:
  /// Validates `config`, computes the transmit delay table, resolves backend and algorithm.
  /// Throws invalid_argument for a bad config or a CUDA algorithm asked of the CPU backend,
  /// unsupported for cuda in a build without it.
  DasPlan(DasConfig config, Backend backend);
  ~DasPlan();
  DasPlan(DasPlan&&) noexcept;
  DasPlan& operator=(DasPlan&&) noexcept;

  const DasConfig& config() const { return config_; }
  Backend backend() const { return backend_; }
  /// The resolved variant (cpu backend: Algorithm::automatic, meaning the reference).
  Algorithm algorithm() const { return algorithm_; }
  /// Input shape {batch, nrx, ntx, nsamples}; output shape {batch, nvoxels}.
  std::array<std::int64_t, 4> input_shape() const;
  std::array<std::int64_t, 2> output_shape() const;
  /// Points per execute: voxels x receivers x transmits x frames.
  double points() const;
  const std::vector<double>& tx_delays() const { return tx_delays_; }

  /// Beamforms RF (signal rf) or IQ (signal iq) channel data. Host memory for the cpu
  /// backend, device memory for cuda (asynchronous on `stream`; finished on return when stream
  /// is null). Throws invalid_argument on a shape, sample-type or memory-space mismatch.
  void execute(View<const float, 4> rf, View<std::complex<float>, 2> out,
               const Stream* stream = nullptr) const;
  void execute(View<const std::complex<float>, 4> iq, View<std::complex<float>, 2> out,
               const Stream* stream = nullptr) const;

  /// One execute() timed by CUDA events in two parts (ms): the layout change of the input (BI,
  /// TCW, TC permutes; BL fp16 conversion; 0 for BL fp32, which reads the input in place) and
  /// the beamforming kernel. Synchronises the stream. Throws unsupported on the cpu backend.
  struct Timing {
    double layout_ms = 0, kernel_ms = 0;
  };
  Timing execute_timed(View<const float, 4> rf, View<std::complex<float>, 2> out,
                       const Stream* stream = nullptr) const;
  Timing execute_timed(View<const std::complex<float>, 4> iq, View<std::complex<float>, 2> out,
                       const Stream* stream = nullptr) const;

 private:
  void run(const void* in, std::complex<float>* out, const Stream* stream,
           Event* layout_done = nullptr) const;
  Timing run_timed(const void* in, std::complex<float>* out, const Stream* stream) const;
  DasConfig config_;
  Backend backend_;
  Algorithm algorithm_ = Algorithm::automatic;
  std::vector<double> tx_delays_;
  std::unique_ptr<detail::DelayParams> params_;  // delay constants (src/das/delay.hpp)
  std::vector<detail::Element> elements_;        // receive elements
  std::unique_ptr<detail::Executor> exec_;
};

// ---------------------------------------------------------------------------------------------
// Pre- and post-processing
// ---------------------------------------------------------------------------------------------

/// I/Q demodulation of RF [nlines][nsamples] (each line a signal over time, sample n at
/// t0 + n/fs): down-mixing by exp(-2 pi i fc t), then a zero-phase 5th-order Butterworth low-pass
/// (forward-backward, odd-reflected edges of 3*(order+1) samples) with normalised cut-off
/// Wn = bandwidth * fc / fs (bandwidth as a fraction, 0.15 = 15 %) or min(2 fc / fs, 0.5) when
/// bandwidth <= 0, and a factor 2 to keep the envelope amplitude. This is the signal chain of
/// MUST/PyMUST's rf2iq (Madiena et al., IEEE TUFFC 65:795, 2018); the filter design is the
/// bilinear transform of the analog Butterworth prototype (Oppenheim & Schafer, Discrete-Time
/// Signal Processing, 3rd ed., sec. 7.2). Throws invalid_argument for Wn outside (0, 1).
std::vector<std::complex<float>> rf_to_iq(const float* rf, std::int64_t nlines,
                                          std::int64_t nsamples, double fs, double fc, double t0,
                                          double bandwidth);

/// Envelope |out| of beamformed data.
std::vector<float> envelope(const std::complex<float>* data, std::int64_t n);

/// Envelope of beamformed RF (real values) by the analytic signal along depth: for every frame
/// and (y, x) column of a volume [batch][nz][ny][nx], |IFFT(H . FFT(x))| over z, H = 1 at DC
/// (and at Nyquist for even nz), 2 at positive and 0 at negative frequencies (Marple, "Computing
/// the discrete-time analytic signal via FFT", IEEE Trans. Signal Process. 47:2600, 1999; as
/// scipy.signal.hilbert). The depth step must sample the RF carrier (dz < lambda / 4 for a
/// two-way path), or the carrier aliases. Throws invalid_argument for nz < 2 or an empty shape,
/// unsupported in a build without FFTW3F.
std::vector<float> envelope_along_depth(const float* rf, std::int64_t batch, std::int64_t nz,
                                        std::int64_t ny, std::int64_t nx);

/// Log compression: 20 log10(env / ref) clipped to [-dynamic_range_db, 0] dB, where ref is the
/// maximum of env (or `reference` when > 0). Throws invalid_argument for dynamic_range_db <= 0.
std::vector<float> log_compress(const std::vector<float>& env, double dynamic_range_db,
                                double reference = 0);

/// B-mode as PyMUST's bmode: 8-bit grey levels 255 (20 log10(env / max) + DR) / DR, clipped to
/// [0, 255] and truncated, with max over all of `env` (all frames). Returned as floats.
std::vector<float> bmode_levels(const std::vector<float>& env, double dynamic_range_db);

/// Axis of a volume slice.
enum class SliceAxis { x, y, z };
/// Extracts the 2-D slice at `index` along `axis` from a volume [nz][ny][nx]: returns the image
/// with rows = the slower remaining axis ([z][x] for y slices, [z][y] for x slices, [y][x] for z).
std::vector<float> slice(const std::vector<float>& volume, const std::array<std::int64_t, 3>& shape,
                         SliceAxis axis, std::int64_t index, std::int64_t* rows,
                         std::int64_t* cols);

}  // namespace warpbeam::das
