#pragma once
// Station simulator: channelised dual-polarisation voltages of an antenna array (e.g. LWA-SV's
// real stand layout) observing point sources and diffuse emission, quantised to ci4 -- the input
// of the EPIC imager and the beamformer, at gulp length.
//
// Model, per channel f and spectrum t, for stand i at (x, y, z) (m; East, North, Up) and
// polarisation p (0 = X, 1 = Y):
//   E_ip(t) = sum_k e_kp(t) exp(+2 pi i f (x l_k + y m_k + z n_k) / c) exp(-2 pi i f tau_ip)
//             + noise_ip(t)
// with n = sqrt(1 - l^2 - m^2) and tau the cable delay (a cable delays the signal). Source k
// emits a complex Gaussian signal, independent per spectrum and channel, with the coherency
// matrix <e e^H> = flux [[1 + q, u + i v], [u - i v, 1 - q]] (Stokes I = flux, fractional Q, U, V
// in the convention of epic.hpp: XX* = I + Q, XY* = U + iV). The receiver noise is independent
// per antenna and polarisation, of power `receiver_noise`. Diffuse emission is `ndiffuse` weak
// unpolarised sources at random directions above the horizon (uniform in solid angle) sharing
// the flux `diffuse_flux`. The voltages are scaled so that each real component has the rms
// `rms` (in ci4 levels), rounded and clipped to [-7, 7].

#include <array>
#include <complex>
#include <cstdint>
#include <vector>

namespace warpbeam::sim {

/// A point source of the station simulator (named apart from sim/voltages.hpp's SkySource: two
/// different structs of one name in one namespace broke the one-definition rule, and the linker
/// kept one copy of the vector code for both, reading past the smaller one).
struct StationSource {
  double l = 0, m = 0;         ///< direction cosines (East, North); l^2 + m^2 <= 1
  double flux = 1;             ///< Stokes I, in units of voltage power (<|X|^2> when unpolarised)
  double q = 0, u = 0, v = 0;  ///< fractional Stokes Q, U, V (q^2 + u^2 + v^2 <= 1)
};

struct StationSimConfig {
  std::vector<std::array<double, 3>> stand_xyz_m;  ///< [nstand] East, North, Up (m)
  std::vector<double> freqs_hz;                    ///< [nchan]
  std::int64_t ntime = 1000;                       ///< spectra
  std::vector<StationSource> sources;
  int ndiffuse = 0;
  double diffuse_flux = 0;
  double receiver_noise = 1;
  std::vector<double> cable_delay_s;  ///< [nstand][2]; empty: no cables
  double rms = 2.0;                   ///< target rms of each ci4 component (levels)
  /// Test mode: source signals of constant amplitude with random phases (z = exp(i phi) in
  /// place of a complex Gaussian), so that an unpolarised source's power does not fluctuate
  /// from spectrum to spectrum (its coherency is unchanged).
  bool constant_power = false;
  std::uint64_t seed = 1;
  int threads = 0;  ///< OpenMP threads (0: default)

  /// Throws invalid_argument naming the field.
  void validate() const;
};

struct StationSimOutput {
  std::vector<std::uint8_t> ci4;  ///< [nchan][ntime][nstand][2], real part in the high nibble
  double scale = 0;               ///< ci4 levels per unit voltage
  std::int64_t clipped = 0;       ///< components clipped to +-7
};

/// Simulates and quantises. Deterministic for a given config (seed and thread count aside:
/// each channel has its own random stream, so the result does not depend on threads).
StationSimOutput simulate_station(const StationSimConfig& config);

/// The unquantised voltages [nchan][ntime][nstand][2] (same random streams as simulate_station).
std::vector<std::complex<float>> simulate_station_voltages(const StationSimConfig& config);

}  // namespace warpbeam::sim
