#pragma once
// EPIC: E-field Parallel Imaging Correlator (Thyagarajan et al. 2017, MNRAS 467, 715; the GPU
// form of Kent et al. 2019 and epic++). Each antenna's channelised voltage is gridded onto an
// aperture grid with a gridding convolution function (GCF), the grid is Fourier-transformed to
// the sky, and the polarisation products of the sky images are accumulated over the gulp's
// spectra; no visibilities are formed.
//
// Conventions (one page, used by every path, the simulator and the FITS writer):
// - Stand positions (x, y, z) in metres, East, North, Up. Gridding is in wavelengths with a
//   fixed cell du (wavelengths) for every channel, so every channel's image has the same
//   (l, m) pixels: du = cell_m / lambda_min, where cell_m is the aperture cell at the highest
//   frequency (<= lambda_min / 2, so the image covers the whole sky without aliasing).
// - A source in direction (l, m, n) gives antenna voltages E ~ exp(+2 pi i (x l + y m + z n) /
//   lambda) (an F-engine with a forward FFT sees a signal that arrives earlier with phase +).
//   The image is the forward 2-D DFT of the grid: pixel (x, y) of an N x N image is
//   l = (x - N/2) / (N du), m = (y - N/2) / (N du): centred, x to the East, y to the North.
// - Products per pixel: XX* = <|X|^2>, YY* = <|Y|^2>, XY* = <X conj(Y)>, where X is
//   polarisation 0 (LWA: the N-S dipole) and Y polarisation 1 (E-W). Stokes (IAU, linear
//   feeds; Hamaker & Bregman 1996): XX* = I + Q, YY* = I - Q, XY* = U + iV, so
//   I = (XX* + YY*)/2, Q = (XX* - YY*)/2, U = Re XY*, V = Im XY*.
// - GCF: the zeroth-order prolate spheroidal wave function psi_0(c, eta), c = pi S / 2, over a
//   support of S cells, separable in x and y, integrated over each cell by 5 x 5 midpoint
//   quadrature for each antenna and channel (antennas sit off-grid), normalised to unit sum per
//   antenna. A kernel of support S touches (S + 1) x (S + 1) cells.
// - Per gulp, for each channel and spectrum: grid X and Y, 2-D FFT each, accumulate XX*, YY*,
//   XY*. Then subtract the per-antenna autocorrelation image sum_i A_i |w_i(l, m)|^2 (A_i the
//   antenna's accumulated XX*, YY* or XY*, w_i the DFT of its gridded kernel), so the image
//   equals the image of the cross-correlations (visibilities i != j) alone, and multiply by the
//   grid correction 1 / |T(l, m)|^2, T the DFT of the mean GCF (each antenna's gridded kernel
//   taken relative to its own position, averaged over antennas). Pixels below the horizon
//   (l^2 + m^2 > 1: no sky, only aliasing and rounding noise that 1/|T|^2 would amplify up to
//   1e6-fold) and pixels where |T|^2 < 1e-6 are set to 0.
// - Units: the output is summed over the gulp's spectra and over baselines: a unit-power
//   point source (<|X|^2> = 1 ci4 unit^2) gives XX* = ntime * n_used * (n_used - 1) at its pixel.
//
// Config -> Plan -> execute, as every engine (DESIGN.md).

#include <array>
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::epic {

inline constexpr double kSpeedOfLight = 299792458.0;  ///< m/s

/// Which implementation runs. `reference` is the CPU path (FFTW); `multikernel` (grid, cuFFT,
/// multiply-accumulate in separate kernels, fp32: the Bifrost-style baseline) and `fused` (one
/// thread-block cluster per channel, everything on chip, fp16 FFT with fp32 accumulation) are
/// CUDA paths. `automatic` picks reference on the CPU and fused on CUDA when it supports the
/// shape (grid 64, 128 or 256; aperture within 64 cells), else multikernel.
enum class Algorithm { automatic, reference, multikernel, fused };

std::string to_string(Algorithm a);
/// Parses "auto", "reference" (or "cpu"), "multikernel", "fused"; throws invalid_argument.
Algorithm parse_algorithm(const std::string& s);

/// The four products of the output, in this order along its second axis.
enum Product { kXX = 0, kYY = 1, kXYre = 2, kXYim = 3 };

/// Tunables of the fused CUDA kernel; 0 / -1 mean "the default chosen on the H200" (sweeps of
/// 2026-11-29: 2 spectra per pass with XY* in registers for N = 64 and 128, 3 spectra per pass
/// with XY* in registers for N = 256; docs/PERFORMANCE.md).
struct FusedTuning {
  int xy_in_shared = -1;     ///< keep the XY* accumulators in shared memory (1) or registers (0)
  int spectra_per_pass = 0;  ///< spectra whose row FFTs share one pass and one cluster barrier
  /// Clusters per channel, each summing a contiguous part of the gulp's spectra (the parts are
  /// added in the finalisation). 0: chosen from the device's cluster occupancy so that the
  /// launch fills whole waves (e.g. 132 channels on 16 resident clusters of 8 would take 9
  /// waves, the last a quarter full; 4 parts make 33 full ones).
  int time_split = 0;
  /// Count cycles per stage (row FFTs, cluster barrier, column FFTs) with clock64 in one warp
  /// lane per warp; read back with EpicPlan::fused_profile(). For the benchmark only.
  bool profile = false;
};

/// The fused kernel's variants built for grid size n (64, 128, 256), with time_split 0: every
/// (xy_in_shared, spectra_per_pass) pair the benchmark sweeps. Some need more shared memory than
/// a device offers: their plans are refused (ErrorCategory::unsupported).
std::vector<FusedTuning> fused_variants(int n);

/// Cycle counts of the fused kernel's stages, summed over warps and batches (FusedTuning::profile).
struct FusedProfile {
  double row_cycles = 0;      ///< gathering and row FFTs, hand-over stores included
  double barrier_cycles = 0;  ///< cluster arrive -> wait, the next batch's unpack included
  double column_cycles = 0;   ///< column FFTs and accumulation
  double batches = 0;         ///< warp-batches counted (divide by it for a per-warp mean)
  int time_split = 0;         ///< clusters per channel used
  int active_clusters = 0;    ///< clusters (or blocks, N = 64) resident at once on the device
};

/// Tunables of the multi-kernel CUDA path.
struct MultikernelTuning {
  int batch = 0;  ///< spectra gridded and transformed per cuFFT call (0: scratch-bounded default)
};

struct EpicConfig {
  int nchan = 0;                 ///< channels per gulp
  int nstand = 0;                ///< dual-polarisation stands (inputs) per spectrum
  std::int64_t ntime = 0;        ///< spectra per gulp (LWA-SV: 1000 = 40 ms)
  std::vector<double> freqs_hz;  ///< [nchan] centre frequencies (Hz)
  std::vector<std::array<double, 3>> stand_xyz_m;  ///< [nstand] East, North, Up (m)
  std::vector<std::uint8_t> stand_ok;              ///< [nstand] 1 = use, 0 = flagged; empty = all
  /// [nchan][nstand][2] complex factors applied to each voltage before gridding (e.g. cable-delay
  /// corrections exp(+2 pi i f tau)); empty = 1.
  std::vector<std::complex<float>> calibration;
  bool phase_to_zenith = true;  ///< multiply by exp(-2 pi i z / lambda): phase centre = zenith

  int grid_size = 128;  ///< N: the image is N x N pixels (even; fused: 64, 128 or 256)
  double cell_m = 0;    ///< aperture cell (m) at the highest frequency; 0 = lambda_min / 2
  int support = 2;      ///< S: GCF support in cells, 1 .. 9
  /// Stands farther than this from the centroid of the usable stands are not gridded (LWA-SV's
  /// outrigger, stand 256 at x = -293 m, would otherwise stretch the aperture fivefold).
  double max_stand_radius_m = 150;

  Algorithm algorithm = Algorithm::automatic;
  FusedTuning fused;
  MultikernelTuning multikernel;
  int threads = 0;  ///< CPU threads (0: OpenMP's default)

  /// Throws invalid_argument naming the field and its allowed range.
  void validate() const;
  double max_frequency_hz() const;
  /// du: the aperture cell in wavelengths (the same for every channel).
  double cell_wavelengths() const;
};

/// Pixel <-> direction cosines of an N x N EPIC image with cell du (wavelengths).
struct ImageGeometry {
  int n = 0;
  double du = 0.5;
  double l(double x) const { return (x - n / 2) / (n * du); }  ///< East
  double m(double y) const { return (y - n / 2) / (n * du); }  ///< North
  double x(double l) const { return n / 2 + l * n * du; }
  double y(double m) const { return n / 2 + m * n * du; }
  double pixel_rad() const { return 1.0 / (n * du); }  ///< pixel size in l (radians at zenith)
};

/// One antenna's gridded kernel at one channel: weight(ix, iy) = wy[iy] * wx[ix] on cells
/// x0 + ix, y0 + iy (ix, iy in 0 .. S), in grid cells after the channel's shift (which moves
/// the aperture's lowest cell to 0: a shift changes the image's phase only, not its products).
struct Footprint {
  int x0 = 0, y0 = 0;
  double u = 0, v = 0;  ///< the antenna's exact position in cells (shifted as x0, y0)
  std::vector<float> wx, wy;
};

namespace detail {
struct PlanTables;
class Executor;
}  // namespace detail

class EpicPlan {
 public:
  /// Validates `config`, places the antennas (flags, radius cut), computes the GCF footprints,
  /// the grid correction and the autocorrelation tables, resolves the backend and algorithm and
  /// prepares the executor. Throws invalid_argument for a bad config or an aperture that does
  /// not fit the grid, unsupported for an algorithm the backend or shape cannot run.
  EpicPlan(EpicConfig config, Backend backend);
  ~EpicPlan();
  EpicPlan(EpicPlan&&) noexcept;
  EpicPlan& operator=(EpicPlan&&) noexcept;

  const EpicConfig& config() const { return config_; }
  Backend backend() const { return backend_; }
  Algorithm algorithm() const { return algorithm_; }
  ImageGeometry geometry() const;
  /// Stands that are gridded (0-based), ascending.
  const std::vector<int>& used_stands() const;
  /// Usable stands left out for lying beyond max_stand_radius_m.
  const std::vector<int>& distant_stands() const;
  /// The gridded kernel of stand `stand` (must be used) at channel `chan`.
  Footprint footprint(int chan, int stand) const;
  /// Rows and columns of the grid the aperture spans at channel `chan` (footprints included).
  std::array<int, 2> aperture_cells(int chan) const;
  /// The grid correction 1/|T|^2, [nchan][N][N] in the output's (centred) layout.
  std::vector<float> grid_correction() const;
  /// The fused kernel's stage cycles of the last execute() (synchronises), zeros unless the
  /// fused path runs with FusedTuning::profile; time_split and active_clusters always.
  FusedProfile fused_profile() const;

  /// Shapes: in [nchan][ntime][nstand][2] ci4 bytes; out [nchan][4][N][N] float32 (XX*, YY*,
  /// Re XY*, Im XY*). Host memory for the CPU backend, device memory for CUDA (asynchronous on
  /// `stream`; synchronous when null). Throws invalid_argument on a shape or space mismatch.
  void execute(View<const std::uint8_t, 4> in, View<float, 4> out,
               const Stream* stream = nullptr) const;

 private:
  EpicConfig config_;
  Backend backend_;
  Algorithm algorithm_;
  std::unique_ptr<detail::PlanTables> tables_;
  std::unique_ptr<detail::Executor> exec_;
};

/// Stokes I, Q, U, V from [nchan][4][N][N] products (same layout out; may alias in): I =
/// (XX*+YY*)/2, Q = (XX*-YY*)/2, U = Re XY*, V = Im XY* (host memory).
void to_stokes(const float* products, float* stokes, std::int64_t nchan, int n);

/// Benchmark context: seconds that cuFFT alone needs for `transforms` in-place n x n complex
/// 2-D transforms (fp32, or fp16 when `half`), run in batches of up to 2 GiB (the median of 3
/// runs after a warm-up). Throws unsupported without CUDA, cuda on a cuFFT failure.
double cufft_reference_time_s(int n, std::int64_t transforms, bool half);

/// The zeroth-order prolate spheroidal wave function psi_0(c, eta) for |eta| <= 1, normalised to
/// psi_0(c, 0) = 1, from its Legendre expansion (the eigenvector of the prolate operator
/// -(d/deta)(1 - eta^2)(d/deta) + c^2 eta^2 with the smallest eigenvalue chi_0(c); Xiao,
/// Rokhlin & Yarvin 2001). Returns 0 for |eta| > 1. `chi` (optional) receives chi_0(c).
double prolate_spheroidal(double c, double eta, double* chi = nullptr);

}  // namespace warpbeam::epic
