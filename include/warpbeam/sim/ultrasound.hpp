#pragma once
// Ultrasound channel-data simulator: point scatterers (and speckle) seen by a linear, matrix or
// row-column probe, plane or diverging transmits, RF or IQ samples.
//
// Model (linear acoustics, first-order scattering, no attenuation, omnidirectional elements):
//   s_m,q(t) = sum_j a_j p(t - tau_tx(q, x_j) - |x_j - r_m| / c) + noise,
// with the transmit delays of das::transmit_delays (UFF conventions) and the pulse
//   p(t) = exp(-t^2 / (2 sigma^2)) cos(2 pi fc t),  sigma = sqrt(2 ln 2) / (pi B),
// B = bandwidth * fc the -6 dB two-sided bandwidth of the Gaussian spectrum. IQ samples are the
// analytic signal demodulated with exp(-2 pi i fc t): sum_j a_j exp(-(t - tau_j)^2 / 2 sigma^2)
// exp(-2 pi i fc tau_j) (exact for the Gaussian envelope, up to its negligible negative-frequency
// tail). Row-column line elements receive from the nearest point of their line.

#include <cstdint>
#include <vector>

#include "warpbeam/das.hpp"
#include "warpbeam/io/ultrasound.hpp"

namespace warpbeam::sim {

struct UltrasoundSimConfig {
  das::Probe probe;
  std::vector<das::Transmit> transmits;
  std::vector<das::Vec3> scatterers;  ///< positions (m)
  std::vector<double> amplitudes;     ///< [scatterers]; empty = all 1
  das::Signal signal = das::Signal::rf;
  double fc = 5e6;         ///< centre frequency (Hz)
  double bandwidth = 0.6;  ///< fractional -6 dB bandwidth
  double fs = 20e6;        ///< sampling frequency (Hz)
  double c = 1540;         ///< sound speed (m/s)
  double t0 = 0;           ///< time of sample 0 (s)
  std::int64_t nsamples = 0;
  std::int64_t frames = 1;
  double noise = 0;        ///< white Gaussian noise, standard deviation relative to the largest
                           ///< scatterer amplitude
  std::uint32_t seed = 1;  ///< noise and speckle seed (recorded by the CLI)

  /// Throws invalid_argument naming the field.
  void validate() const;
};

/// Simulates the channel data [frames][rx][tx][sample]. Frames differ by their noise only.
io::UltrasoundData simulate_ultrasound(const UltrasoundSimConfig& config);

/// `count` speckle scatterers uniformly in the box [lo, hi] with Gaussian amplitudes of standard
/// deviation `sigma`, appended to config.scatterers / amplitudes.
void add_speckle(UltrasoundSimConfig& config, const das::Vec3& lo, const das::Vec3& hi,
                 std::int64_t count, double sigma, std::uint32_t seed);

}  // namespace warpbeam::sim
