// Ultrasound channel-data simulator (point scatterers, speckle); model in sim/ultrasound.hpp.
#include "warpbeam/sim/ultrasound.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "warpbeam/format.hpp"

namespace warpbeam::sim {

void UltrasoundSimConfig::validate() const {
  if (probe.size() == 0) fail(ErrorCategory::invalid_argument, "simulate: the probe is empty");
  if (transmits.empty()) fail(ErrorCategory::invalid_argument, "simulate: no transmits");
  if (scatterers.empty()) fail(ErrorCategory::invalid_argument, "simulate: no scatterers");
  if (!amplitudes.empty() && amplitudes.size() != scatterers.size())
    fail(ErrorCategory::invalid_argument, "simulate: {} amplitudes for {} scatterers",
         amplitudes.size(), scatterers.size());
  if (!(fc > 0)) fail(ErrorCategory::invalid_argument, "simulate: fc = {} Hz must be > 0", fc);
  if (!(bandwidth > 0 && bandwidth <= 2))
    fail(ErrorCategory::invalid_argument, "simulate: bandwidth = {} must be in (0, 2]", bandwidth);
  if (!(fs > 0)) fail(ErrorCategory::invalid_argument, "simulate: fs = {} Hz must be > 0", fs);
  if (!(c > 0)) fail(ErrorCategory::invalid_argument, "simulate: c = {} m/s must be > 0", c);
  require_range<std::int64_t>("samples", nsamples, 2, std::int64_t{1} << 24);
  require_range<std::int64_t>("frames", frames, 1, 1 << 16);
  if (!(noise >= 0))
    fail(ErrorCategory::invalid_argument, "simulate: noise = {} must be >= 0", noise);
}

void add_speckle(UltrasoundSimConfig& config, const das::Vec3& lo, const das::Vec3& hi,
                 std::int64_t count, double sigma, std::uint32_t seed) {
  if (count < 0) fail(ErrorCategory::invalid_argument, "speckle count {} must be >= 0", count);
  if (config.amplitudes.empty()) config.amplitudes.assign(config.scatterers.size(), 1.0);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> g(0, sigma);
  for (std::int64_t i = 0; i < count; ++i) {
    das::Vec3 p;
    for (int a = 0; a < 3; ++a)
      p[a] = lo[a] + (hi[a] - lo[a]) * u(rng);
    config.scatterers.push_back(p);
    config.amplitudes.push_back(g(rng));
  }
}

io::UltrasoundData simulate_ultrasound(const UltrasoundSimConfig& s) {
  s.validate();
  io::UltrasoundData d;
  d.signal = s.signal;
  d.batch = s.frames;
  d.nrx = static_cast<std::int64_t>(s.probe.size());
  d.ntx = static_cast<std::int64_t>(s.transmits.size());
  d.nsamples = s.nsamples;
  d.fs = s.fs;
  d.fc = s.fc;
  d.c = s.c;
  d.t0 = s.t0;
  d.bandwidth = s.bandwidth;
  d.probe = s.probe;
  d.transmits = s.transmits;
  // Transmit delays of every scatterer, by the beamformer's own transmit model.
  das::DasConfig geo;
  geo.c = s.c;
  geo.probe = s.probe;
  geo.voxels = s.scatterers;
  geo.transmits = s.transmits;
  const auto ttx = das::transmit_delays(geo);
  const std::size_t ns = s.scatterers.size();
  const double sigma = std::sqrt(2 * std::log(2.0)) / (M_PI * s.bandwidth * s.fc);
  const double half = 4.5 * sigma;  // pulse support (amplitude < 4e-5 beyond)
  const std::int64_t B = d.batch, M = d.nrx, Q = d.ntx, K = d.nsamples;
  const bool iq = s.signal == das::Signal::iq;
  // One noiseless frame [rx][tx][sample], then copies with noise.
  std::vector<std::complex<double>> frame(static_cast<std::size_t>(M * Q * K));
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t q = 0; q < Q; ++q) {
      const auto& r = s.probe.positions[m];
      const das::ElementKind kind =
          s.probe.kinds.empty() ? das::ElementKind::point : s.probe.kinds[m];
      std::complex<double>* out = frame.data() + (m * Q + q) * K;
      for (std::size_t j = 0; j < ns; ++j) {
        const auto& p = s.scatterers[j];
        const double dx = kind == das::ElementKind::line_x ? 0 : p[0] - r[0];
        const double dy = kind == das::ElementKind::line_y ? 0 : p[1] - r[1];
        const double dz = p[2] - r[2];
        const double tau = ttx[q * ns + j] + std::sqrt(dx * dx + dy * dy + dz * dz) / s.c;
        const double a = s.amplitudes.empty() ? 1.0 : s.amplitudes[j];
        const auto k0 = std::max<std::int64_t>(
            0, static_cast<std::int64_t>(std::ceil((tau - half - s.t0) * s.fs)));
        const auto k1 = std::min<std::int64_t>(
            K - 1, static_cast<std::int64_t>(std::floor((tau + half - s.t0) * s.fs)));
        const double cyc = s.fc * tau;
        const std::complex<double> rot = std::polar(1.0, -2 * M_PI * (cyc - std::floor(cyc)));
        for (std::int64_t k = k0; k <= k1; ++k) {
          const double t = s.t0 + static_cast<double>(k) / s.fs - tau;
          const double env = a * std::exp(-t * t / (2 * sigma * sigma));
          if (iq)
            out[k] += env * rot;
          else
            out[k] += env * std::cos(2 * M_PI * s.fc * t);
        }
      }
    }
  double amax = 0;
  for (std::size_t j = 0; j < ns; ++j)
    amax = std::max(amax, std::abs(s.amplitudes.empty() ? 1.0 : s.amplitudes[j]));
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<double> g(0, s.noise * amax);
  const std::size_t per = frame.size();
  if (iq)
    d.iq.resize(per * B);
  else
    d.rf.resize(per * B);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < per; ++i) {
      if (iq) {
        const double nr = s.noise > 0 ? g(rng) : 0.0, ni = s.noise > 0 ? g(rng) : 0.0;
        d.iq[b * per + i] = {static_cast<float>(frame[i].real() + nr),
                             static_cast<float>(frame[i].imag() + ni)};
      } else {
        d.rf[b * per + i] = static_cast<float>(frame[i].real() + (s.noise > 0 ? g(rng) : 0.0));
      }
    }
  return d;
}

}  // namespace warpbeam::sim
