#pragma once
// Simulated channelised antenna voltages: sky point sources, a dispersed pulsar and receiver
// noise seen by an array (BEST-2 by default), quantised (ci4 by default) and written as GUPPI raw
// with NANTS (docs/FORMATS.md).
//
// Model, per channel c (centre frequency f_c), time sample t and antenna a at position r_a:
//   x_a(t) = sum_s A_s(c, t) exp(+2 pi i f_c r_a.s_s / c0) + n_a(t)
// where A_s is a circular complex Gaussian of variance flux_s (a noise-like sky source; the same
// for every antenna, independent per channel and sample), n_a receiver noise of variance
// noise_power, and s_s the source's unit direction (East-North-Up) at the block's time (RA/Dec
// sources move). A pulsar's variance is peak_flux * exp(-(phase / width)^2 / 2) with its pulse
// arriving at t0 + k P + k_DM DM (f_c^-2 - f_hi^-2) (dedisp.hpp's constant, f in MHz).
// Quantisation: x * scale rounded to the nearest integer and clipped to +-7 (ci4) or +-127 (ci8),
// scale = quant_rms / sqrt(noise_power + sum of source fluxes) (per component).

#include <cstdint>
#include <string>
#include <vector>

#include "warpbeam/beamform.hpp"
#include "warpbeam/sample_type.hpp"

namespace warpbeam::sim {

struct SkySource {
  beamform::Pointing direction;
  double flux = 1;  ///< variance of the complex source signal, in units of noise_power
};

struct Pulsar {
  beamform::Pointing direction;
  double peak_flux = 1;  ///< variance at the pulse peak, in units of noise_power
  double period_s = 0.1;
  double dm = 50;         ///< pc cm^-3
  double width_s = 2e-3;  ///< Gaussian sigma of the pulse
  double t0_s = 0.05;     ///< arrival of the first pulse at the top of the band
};

struct VoltageSimConfig {
  beamform::ArrayGeometry array = beamform::best2_geometry();
  std::vector<double> freqs_hz = beamform::best2_frequencies_hz();  ///< [chan], uniform step
  int npol = 1;                  ///< pols (both pols see the same sky, independent noise)
  double tsamp_s = 1024 / 20e6;  ///< sampling time of a channel (critically sampled: 1/width)
  std::int64_t nsamples = 8192;  ///< per channel
  std::int64_t block_samples = 8192;
  double mjd_start = 60000.5;
  std::vector<SkySource> sources;
  std::vector<Pulsar> pulsars;
  double noise_power = 1;  ///< receiver noise variance per antenna (complex)
  double quant_rms = 2.0;  ///< RMS per component after scaling, in quantiser levels
  SampleType sample_type = SampleType::ci4;  ///< ci4 or ci8
  std::uint64_t seed = 1;
  std::string source_name = "SIM";
  /// Throws invalid_argument naming the field.
  void validate() const;
};

/// Simulates one block (samples [t0, t0 + nt) of the observation) into out, quantised,
/// [chan][time][antenna][pol]. Deterministic for a given seed, whatever the thread count.
void simulate_block(const VoltageSimConfig& config, std::int64_t t0, std::int64_t nt,
                    std::vector<std::uint8_t>& out);

/// Simulates the whole observation into a GUPPI raw file (atomically), with the parameters and
/// seed in its header cards (SIM_SEED, ...) and a JSON side file PATH.json with provenance.
void simulate_voltages(const VoltageSimConfig& config, const std::string& path);

}  // namespace warpbeam::sim
