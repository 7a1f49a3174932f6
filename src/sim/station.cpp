// Station simulator (model: include/warpbeam/sim/station.hpp).
#include "warpbeam/sim/station.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"

namespace warpbeam::sim {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kC = 299792458.0;

struct Emitter {
  double l, m, n;
  std::complex<double> a, b, d;  // Cholesky factor [[a, 0], [b, d]] of the coherency matrix
};

std::vector<Emitter> emitters(const StationSimConfig& c) {
  std::vector<Emitter> out;
  auto add = [&](double l, double m, double flux, double q, double u, double v) {
    Emitter e{l, m, std::sqrt(std::max(0.0, 1 - l * l - m * m)), 0, 0, 0};
    const double b11 = flux * (1 + q), b22 = flux * (1 - q);
    const std::complex<double> b21(flux * u, -flux * v);  // <e_y e_x*> = U - iV
    e.a = std::sqrt(b11);
    e.b = e.a.real() > 0 ? b21 / e.a : std::complex<double>(0);
    e.d = std::sqrt(std::max(0.0, b22 - std::norm(e.b)));
    if (e.a.real() == 0) e.d = std::sqrt(b22);
    out.push_back(e);
  };
  for (const auto& s : c.sources)
    add(s.l, s.m, s.flux, s.q, s.u, s.v);
  if (c.ndiffuse > 0) {
    std::mt19937_64 rng(c.seed ^ 0x9E3779B97F4A7C15ull);
    std::uniform_real_distribution<double> uni(0, 1);
    for (int k = 0; k < c.ndiffuse; ++k) {
      const double n = uni(rng);  // uniform in solid angle over the upper hemisphere
      const double phi = 2 * kPi * uni(rng), r = std::sqrt(std::max(0.0, 1 - n * n));
      add(r * std::cos(phi), r * std::sin(phi), c.diffuse_flux / c.ndiffuse, 0, 0, 0);
    }
  }
  return out;
}

// Expected power per polarisation per antenna (for the quantiser's scale).
double mean_power(const StationSimConfig& c) {
  double p = c.receiver_noise + c.diffuse_flux;
  for (const auto& s : c.sources)
    p += s.flux;
  return p;
}

template <class Sink>
void simulate(const StationSimConfig& c, Sink&& sink) {
  const auto em = emitters(c);
  const int nstand = static_cast<int>(c.stand_xyz_m.size());
  const int nchan = static_cast<int>(c.freqs_hz.size());
  const int nem = static_cast<int>(em.size());
  const double noise_amp = std::sqrt(c.receiver_noise);  // times CN(0, 1)
  const int nthreads = c.threads > 0 ? c.threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic) num_threads(nthreads)
  for (int ch = 0; ch < nchan; ++ch) {
    const double f = c.freqs_hz[ch];
    // Geometric and cable phases [emitter][stand][pol].
    std::vector<std::complex<float>> g(static_cast<std::size_t>(nem) * nstand * 2);
    for (int k = 0; k < nem; ++k)
      for (int s = 0; s < nstand; ++s) {
        const auto& x = c.stand_xyz_m[s];
        const double geo = 2 * kPi * f * (x[0] * em[k].l + x[1] * em[k].m + x[2] * em[k].n) / kC;
        for (int p = 0; p < 2; ++p) {
          const double cable = c.cable_delay_s.empty() ? 0.0 : c.cable_delay_s[s * 2 + p];
          g[(static_cast<std::size_t>(k) * nstand + s) * 2 + p] =
              std::complex<float>(std::polar(1.0, geo - 2 * kPi * f * cable));
        }
      }
    std::mt19937_64 rng(c.seed * 0x100000001B3ull + static_cast<std::uint64_t>(ch) * 7919 + 1);
    std::normal_distribution<double> gauss(0.0, std::sqrt(0.5));  // CN(0, 1): var 1/2 each part
    std::uniform_real_distribution<double> phase(-kPi, kPi);
    auto source_signal = [&] {
      return c.constant_power ? std::polar(1.0, phase(rng))
                              : std::complex<double>(gauss(rng), gauss(rng));
    };
    std::vector<std::complex<float>> ex(static_cast<std::size_t>(nem)), ey(ex.size());
    std::vector<std::complex<float>> v(static_cast<std::size_t>(nstand) * 2);
    for (std::int64_t t = 0; t < c.ntime; ++t) {
      for (int k = 0; k < nem; ++k) {
        const std::complex<double> z1 = source_signal(), z2 = source_signal();
        ex[k] = std::complex<float>(em[k].a * z1);
        ey[k] = std::complex<float>(em[k].b * z1 + em[k].d * z2);
      }
      for (int s = 0; s < nstand; ++s) {
        std::complex<float> vx(static_cast<float>(noise_amp * gauss(rng)),
                               static_cast<float>(noise_amp * gauss(rng)));
        std::complex<float> vy(static_cast<float>(noise_amp * gauss(rng)),
                               static_cast<float>(noise_amp * gauss(rng)));
        for (int k = 0; k < nem; ++k) {
          const std::complex<float>* gk = &g[(static_cast<std::size_t>(k) * nstand + s) * 2];
          vx += ex[k] * gk[0];
          vy += ey[k] * gk[1];
        }
        v[s * 2] = vx;
        v[s * 2 + 1] = vy;
      }
      sink(ch, t, v.data());
    }
  }
}

}  // namespace

void StationSimConfig::validate() const {
  if (stand_xyz_m.empty() || stand_xyz_m.size() > 4096)
    fail(ErrorCategory::invalid_argument, "the station has {} stands (1 .. 4096)",
         stand_xyz_m.size());
  if (freqs_hz.empty() || freqs_hz.size() > 65536)
    fail(ErrorCategory::invalid_argument, "{} channels (1 .. 65536)", freqs_hz.size());
  for (double f : freqs_hz)
    if (!(f > 0) || !std::isfinite(f))
      fail(ErrorCategory::invalid_argument, "channel frequency {} Hz must be > 0", f);
  require_range<std::int64_t>("ntime", ntime, 1, std::int64_t{1} << 30);
  for (const auto& s : sources) {
    if (!(s.l * s.l + s.m * s.m <= 1))
      fail(ErrorCategory::invalid_argument, "source at (l, m) = ({}, {}) is below the horizon", s.l,
           s.m);
    if (!(s.flux >= 0) || !std::isfinite(s.flux))
      fail(ErrorCategory::invalid_argument, "source flux {} must be >= 0", s.flux);
    if (!(s.q * s.q + s.u * s.u + s.v * s.v <= 1 + 1e-12))
      fail(ErrorCategory::invalid_argument,
           "source polarisation (q, u, v) = ({}, {}, {}) exceeds 100 %", s.q, s.u, s.v);
  }
  require_range("ndiffuse", ndiffuse, 0, 100000);
  if (!(diffuse_flux >= 0) || !(receiver_noise >= 0))
    fail(ErrorCategory::invalid_argument, "diffuse_flux and receiver_noise must be >= 0");
  if (!cable_delay_s.empty() && cable_delay_s.size() != stand_xyz_m.size() * 2)
    fail(ErrorCategory::invalid_argument, "cable_delay_s has {} entries for {} stands",
         cable_delay_s.size(), stand_xyz_m.size());
  if (!(rms > 0) || rms > 7)
    fail(ErrorCategory::invalid_argument, "rms = {} levels must be in (0, 7]", rms);
  if (!(mean_power(*this) > 0))
    fail(ErrorCategory::invalid_argument, "the simulated sky and receivers have no power");
  require_range("threads", threads, 0, 4096);
}

StationSimOutput simulate_station(const StationSimConfig& c) {
  c.validate();
  const std::size_t nstand = c.stand_xyz_m.size();
  StationSimOutput out;
  out.scale = c.rms / std::sqrt(mean_power(c) / 2);
  out.ci4.resize(c.freqs_hz.size() * static_cast<std::size_t>(c.ntime) * nstand * 2);
  std::int64_t clipped = 0;
  const float scale = static_cast<float>(out.scale);
  simulate(c, [&](int ch, std::int64_t t, const std::complex<float>* v) {
    std::uint8_t* o = &out.ci4[(static_cast<std::size_t>(ch) * c.ntime + t) * nstand * 2];
    std::int64_t clip = 0;
    auto q = [&](float x) {
      const long r = std::lround(x * scale);
      if (r > 7 || r < -7) ++clip;
      return static_cast<int>(std::clamp(r, -7l, 7l));
    };
    for (std::size_t i = 0; i < nstand * 2; ++i)
      o[i] = io::ci4_pack(q(v[i].real()), q(v[i].imag()));
    if (clip) {
#pragma omp atomic
      clipped += clip;
    }
  });
  out.clipped = clipped;
  return out;
}

std::vector<std::complex<float>> simulate_station_voltages(const StationSimConfig& c) {
  c.validate();
  const std::size_t nstand = c.stand_xyz_m.size();
  std::vector<std::complex<float>> out(c.freqs_hz.size() * static_cast<std::size_t>(c.ntime) *
                                       nstand * 2);
  simulate(c, [&](int ch, std::int64_t t, const std::complex<float>* v) {
    std::copy(v, v + nstand * 2, &out[(static_cast<std::size_t>(ch) * c.ntime + t) * nstand * 2]);
  });
  return out;
}

}  // namespace warpbeam::sim
