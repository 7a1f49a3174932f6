#pragma once
// Simulated SIGPROC filterbanks: Gaussian noise plus dispersed pulses with intra-channel
// smearing, for the search's demo and its injection-recovery tests.
//
// Pulse model. A burst arrives at time_s (s from the file start; the peak of its intrinsic
// profile, at the highest channel centre frequency f_hi). Its intrinsic profile is a Gaussian
// of FWHM width_s. Channel c (centre f_c = fch1 + c foff, width |foff|) is split into nsub
// sub-channels at f_m (equally spaced, centred in the channel); sub-channel m arrives at
//   mu_m = time_s + k DM (f_m^-2 - f_hi^-2),   k = 4.148808e3 s MHz^2 pc^-1 cm^3
// so averaging them smears the pulse across the channel (nsub is chosen so that sub-channels
// are at most a quarter of min(tsamp, sigma_g) apart in arrival time, up to 4096). Sample j
// integrates [j tsamp, (j+1) tsamp):
//   s_c[j] = A / nsub * sum_m [Phi((t_{j+1} - mu_m) / sigma_g) - Phi((t_j - mu_m) / sigma_g)]
// with sigma_g = width_s / sqrt(8 ln 2); the fluence per channel (sum over j) is A, equal in
// every channel (flat spectrum).
//
// Injected S/N. The matched-filter S/N of the smeared pulse at its true DM: the series p_j
// obtained by shifting every channel back by its exact centre delay k DM (f_c^-2 - f_hi^-2) and
// summing the channels (the pulse "dedispersed at its true DM" without rounding delays), then
// filtering with p itself (the optimal filter) in white noise of rms sigma per channel:
//   snr = sqrt(sum_j p_j^2) / (sigma sqrt(nchans)).
// A search with whole-sample delays, a DM grid and boxcar filters recovers snr times an
// efficiency <= 1 (the tests compute it for their grid). Quantisation to nbits and clipping are
// not in the definition: at 8 bits and more (the default noise levels below) they are
// negligible; 1, 2 and 4 bits lose S/N.
//
// Noise: Gaussian, mean and rms per sample by nbits unless given: 32: 0 and 1; 16: 24576 and
// 4096; 8: 96 and 16; 4: 6 and 2; 2: 1.5 and 1; 1: 0.5 and 0.5. Values are rounded and clipped
// to the sample range. The random numbers are a counter-based hash of (seed, sample, channel),
// so the file is the same on every machine and thread count.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/io/sigproc.hpp"

namespace warpbeam::sim {

/// One dispersed pulse.
struct Burst {
  double dm = 300;        ///< pc cm^-3
  double snr = 20;        ///< injected S/N (see above)
  double width_s = 1e-3;  ///< FWHM of the intrinsic Gaussian (s)
  double time_s = 5;      ///< arrival of the peak at the top of the band (s from the file start)
};

struct FilterbankSimConfig {
  int nchans = 256;
  double fch1_mhz = 1500;  ///< centre of channel 0
  double foff_mhz = -1;    ///< channel step (either sign)
  double tsamp_s = 256e-6;
  int nbits = 8;  ///< 1, 2, 4, 8, 16 or 32
  double duration_s = 10;
  std::uint64_t seed = 1;
  double tstart_mjd = 60000;
  double noise_mean = -1;  ///< < 0: the default for nbits
  double noise_rms = -1;   ///< < 0: the default for nbits
  std::string source_name = "warpbeam_sim";
  std::vector<Burst> bursts;

  /// Throws invalid_argument naming the field (sizes, band reaching 0 MHz, bursts outside).
  void validate() const;
  std::int64_t nsamples() const;  ///< round(duration_s / tsamp_s)
  double mean() const;            ///< the noise mean used
  double rms() const;             ///< the noise rms used
  io::FilterbankHeader header() const;
};

/// The noise-free signal of one burst: channel c holds values[c][i] at samples first[c] + i,
/// in data units (before noise, quantisation and clipping).
struct BurstSignal {
  std::vector<std::int64_t> first;
  std::vector<std::vector<float>> values;
  double amplitude = 0;     ///< A: fluence per channel (data units x samples)
  int nsub = 1;             ///< sub-channels per channel
  double profile_norm = 0;  ///< sqrt(sum_j p_j^2) for A = 1
  double injected_snr = 0;  ///< = burst.snr
};

/// Computes the burst's signal and its amplitude from the injected S/N.
BurstSignal burst_signal(const FilterbankSimConfig& config, const Burst& burst);

/// Writes the filterbank to `path` (atomically) and a JSON side file `path + ".json"` with the
/// parameters, the seed, every burst with its amplitude, and provenance. Memory is bounded
/// (written in gulps). Returns the side file's JSON.
nlohmann::json simulate_filterbank(const FilterbankSimConfig& config, const std::string& path);

}  // namespace warpbeam::sim
