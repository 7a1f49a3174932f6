// Simulated antenna voltages (include/warpbeam/sim/voltages.hpp): sky sources, a dispersed
// pulsar, receiver noise; quantised and written as GUPPI raw with NANTS.
#include "warpbeam/sim/voltages.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include <nlohmann/json.hpp>

#include "warpbeam/format.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::sim {

namespace {

constexpr double kDispersion = 4.148808e3;  // s MHz^2 pc^-1 cm^3 (as dedisp.hpp)

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna) with Box-Muller normals: fast, and seeded per (block, channel)
// so that the output does not depend on the thread count.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& v : s_)
      v = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  /// A circular complex Gaussian of unit variance (each component variance 1/2).
  std::complex<double> cnormal() {
    const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-std::log(u1));
    return std::polar(r, 2 * std::numbers::pi * u2);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

int quantise(double v, int qmax) {
  const long r = std::lround(v);
  return static_cast<int>(std::clamp<long>(r, -qmax, qmax));
}

}  // namespace

void VoltageSimConfig::validate() const {
  array.validate(npol);
  require_range("npol", npol, 1, 2);
  if (freqs_hz.empty()) fail(ErrorCategory::invalid_argument, "no channel frequencies");
  if (!(tsamp_s > 0)) fail(ErrorCategory::invalid_argument, "tsamp = {} s must be > 0", tsamp_s);
  if (nsamples <= 0 || block_samples <= 0 || nsamples % block_samples != 0)
    fail(ErrorCategory::invalid_argument,
         "nsamples = {} must be a positive multiple of block_samples = {}", nsamples,
         block_samples);
  if (sample_type != SampleType::ci4 && sample_type != SampleType::ci8)
    fail(ErrorCategory::invalid_argument, "the simulator writes ci4 or ci8, not {}",
         to_string(sample_type));
  if (!(noise_power >= 0) || !(quant_rms > 0))
    fail(ErrorCategory::invalid_argument, "noise_power = {} must be >= 0 and quant_rms = {} > 0",
         noise_power, quant_rms);
  for (const auto& s : sources)
    if (!(s.flux >= 0)) fail(ErrorCategory::invalid_argument, "source flux {} < 0", s.flux);
  for (const auto& p : pulsars)
    if (!(p.period_s > 0) || !(p.width_s > 0) || !(p.dm >= 0) || !(p.peak_flux >= 0))
      fail(ErrorCategory::invalid_argument,
           "pulsar period {} s / width {} s must be > 0, DM {} and flux {} >= 0", p.period_s,
           p.width_s, p.dm, p.peak_flux);
}

void simulate_block(const VoltageSimConfig& c, std::int64_t t0, std::int64_t nt,
                    std::vector<std::uint8_t>& out) {
  const int na = c.array.nantennas(), np = c.npol;
  const int nc = static_cast<int>(c.freqs_hz.size());
  const int bpc = bytes_per_complex(c.sample_type);
  const int qmax = c.sample_type == SampleType::ci4 ? 7 : 127;
  out.assign(static_cast<std::size_t>(nc) * nt * na * np * bpc, 0);
  // Directions at the middle of the block (tracking sources move; the block is short).
  const double mjd = c.mjd_start + (static_cast<double>(t0) + nt / 2.0) * c.tsamp_s / 86400.0;
  struct Src {
    std::vector<double> tau;  // [antenna] geometric delay (s)
    double flux;
    const Pulsar* pulsar;
  };
  std::vector<Src> srcs;
  auto add = [&](const beamform::Pointing& p, double flux, const Pulsar* psr, int index) {
    const auto s = beamform::direction_enu(p, c.array.site, mjd, index);
    Src x{std::vector<double>(static_cast<std::size_t>(na)), flux, psr};
    for (int a = 0; a < na; ++a) {
      const auto& r = c.array.enu_m[static_cast<std::size_t>(a)];
      x.tau[static_cast<std::size_t>(a)] =
          (r[0] * s[0] + r[1] * s[1] + r[2] * s[2]) / beamform::kSpeedOfLight;
    }
    srcs.push_back(std::move(x));
  };
  for (std::size_t i = 0; i < c.sources.size(); ++i)
    add(c.sources[i].direction, c.sources[i].flux, nullptr, static_cast<int>(i));
  for (std::size_t i = 0; i < c.pulsars.size(); ++i)
    add(c.pulsars[i].direction, c.pulsars[i].peak_flux, &c.pulsars[i], static_cast<int>(i));
  double total = c.noise_power;
  for (const auto& s : c.sources)
    total += s.flux;
  const double scale = c.quant_rms / std::sqrt(std::max(total, 1e-30) / 2);
  const double f_hi = *std::max_element(c.freqs_hz.begin(), c.freqs_hz.end()) / 1e6;
  const double noise_amp = std::sqrt(c.noise_power);

#pragma omp parallel for schedule(dynamic)
  for (int ch = 0; ch < nc; ++ch) {
    std::uint64_t seed = c.seed ^ (0x632BE59BD9B4E019ull * static_cast<std::uint64_t>(t0 + 1)) ^
                         (0x85EBCA77C2B2AE63ull * static_cast<std::uint64_t>(ch + 1));
    Rng rng(splitmix64(seed));
    const double f = c.freqs_hz[static_cast<std::size_t>(ch)];
    // Phase of every source at every antenna: exp(+2 pi i f tau).
    std::vector<std::complex<double>> ph(srcs.size() * static_cast<std::size_t>(na));
    std::vector<double> delay(srcs.size(), 0.0);
    for (std::size_t s = 0; s < srcs.size(); ++s) {
      for (int a = 0; a < na; ++a)
        ph[s * na + a] =
            std::polar(1.0, 2 * std::numbers::pi * f * srcs[s].tau[static_cast<std::size_t>(a)]);
      if (srcs[s].pulsar)
        delay[s] = kDispersion * srcs[s].pulsar->dm * (1 / (f / 1e6 * f / 1e6) - 1 / (f_hi * f_hi));
    }
    std::vector<std::complex<double>> amp(srcs.size());
    for (std::int64_t t = 0; t < nt; ++t) {
      const double time = static_cast<double>(t0 + t) * c.tsamp_s;
      for (int p = 0; p < np; ++p) {
        for (std::size_t s = 0; s < srcs.size(); ++s) {
          double var = srcs[s].flux;
          if (const Pulsar* psr = srcs[s].pulsar) {
            double phase = std::fmod(time - psr->t0_s - delay[s], psr->period_s);
            if (phase < 0) phase += psr->period_s;
            if (phase > psr->period_s / 2) phase -= psr->period_s;
            var *= std::exp(-0.5 * (phase / psr->width_s) * (phase / psr->width_s));
          }
          amp[s] = std::sqrt(var) * rng.cnormal();
        }
        for (int a = 0; a < na; ++a) {
          std::complex<double> x = noise_amp * rng.cnormal();
          for (std::size_t s = 0; s < srcs.size(); ++s)
            x += amp[s] * ph[s * na + a];
          const int re = quantise(x.real() * scale, qmax), im = quantise(x.imag() * scale, qmax);
          std::uint8_t* dst =
              out.data() + ((static_cast<std::int64_t>(ch) * nt + t) * na + a) * np * bpc + p * bpc;
          if (bpc == 1) {
            dst[0] = static_cast<std::uint8_t>(((re & 0xF) << 4) | (im & 0xF));
          } else {
            dst[0] = static_cast<std::uint8_t>(static_cast<std::int8_t>(re));
            dst[1] = static_cast<std::uint8_t>(static_cast<std::int8_t>(im));
          }
        }
      }
    }
  }
}

void simulate_voltages(const VoltageSimConfig& c, const std::string& path) {
  c.validate();
  const int nc = static_cast<int>(c.freqs_hz.size());
  const double foff = nc > 1 ? (c.freqs_hz[1] - c.freqs_hz[0]) : 1.0 / c.tsamp_s;
  io::GuppiWriterConfig g;
  g.nchans = nc;
  g.nantennas = c.array.nantennas();
  g.npol = c.npol;
  g.sample_type = c.sample_type;
  g.obsfreq_mhz = (c.freqs_hz.front() + c.freqs_hz.back()) / 2 / 1e6;
  g.chan_bw_mhz = foff / 1e6;
  g.tbin_s = c.tsamp_s;
  g.mjd_start = c.mjd_start;
  g.block_samples = c.block_samples;
  g.source_name = c.source_name;
  g.telescope = "SIMULATED";
  g.extra_cards = {{"SIM_SEED", fmt::format("{}", c.seed)},
                   {"SIM_NSRC", fmt::format("{}", c.sources.size())},
                   {"SIM_NPSR", fmt::format("{}", c.pulsars.size())},
                   {"WB_VERS", io::guppi_string(std::string(version()))},
                   {"WB_COMMI", io::guppi_string(std::string(git_commit()))}};
  for (std::size_t i = 0; i < c.pulsars.size() && i < 9; ++i) {
    const auto& p = c.pulsars[i];
    g.extra_cards.emplace_back(fmt::format("PSR{}_DM", i), fmt::format("{}", p.dm));
    g.extra_cards.emplace_back(fmt::format("PSR{}_P", i), fmt::format("{}", p.period_s));
  }
  io::GuppiWriter w(path, g);
  std::vector<std::uint8_t> block;
  Progress progress("simulate voltages", c.nsamples);
  for (std::int64_t t0 = 0; t0 < c.nsamples; t0 += c.block_samples) {
    simulate_block(c, t0, c.block_samples, block);
    w.write_block(block.data());
    progress.update(t0 + c.block_samples);
  }
  // Side file: provenance and every parameter.
  nlohmann::json j = {{"provenance", provenance()},
                      {"file", path},
                      {"format", "GUPPI raw with NANTS (docs/FORMATS.md)"},
                      {"seed", c.seed},
                      {"nchans", nc},
                      {"nantennas", c.array.nantennas()},
                      {"npol", c.npol},
                      {"tsamp_s", c.tsamp_s},
                      {"nsamples", c.nsamples},
                      {"block_samples", c.block_samples},
                      {"mjd_start", c.mjd_start},
                      {"fch1_hz", c.freqs_hz.front()},
                      {"foff_hz", foff},
                      {"noise_power", c.noise_power},
                      {"quant_rms", c.quant_rms},
                      {"sample_type", to_string(c.sample_type)}};
  auto dir = [](const beamform::Pointing& p) {
    return nlohmann::json{{"frame", beamform::to_string(p.frame)}, {"a", p.a}, {"b", p.b}};
  };
  for (const auto& s : c.sources)
    j["sources"].push_back({{"direction", dir(s.direction)}, {"flux", s.flux}});
  for (const auto& p : c.pulsars)
    j["pulsars"].push_back({{"direction", dir(p.direction)},
                            {"peak_flux", p.peak_flux},
                            {"period_s", p.period_s},
                            {"dm", p.dm},
                            {"width_s", p.width_s},
                            {"t0_s", p.t0_s}});
  j["antennas_enu_m"] = c.array.enu_m;
  io::write_text_file(path + ".json", j.dump(2) + "\n");
  w.commit();
}

}  // namespace warpbeam::sim
