// Simulated filterbanks: Gaussian noise plus dispersed, smeared Gaussian pulses (the model and
// the injected S/N are defined in warpbeam/sim/filterbank.hpp).
#include "warpbeam/sim/filterbank.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::sim {

namespace {

constexpr double kFwhmToSigma = 0.42466090014400953;  // 1 / sqrt(8 ln 2)
constexpr double kReach = 8;                          // Gaussian sigmas a pulse is computed over
constexpr std::int64_t kWriteRows = 8192;             // time samples generated per gulp

double f_hi(const FilterbankSimConfig& c) {
  return std::max(c.fch1_mhz, c.fch1_mhz + (c.nchans - 1) * c.foff_mhz);
}

double delay(double dm, double f, double fref) {
  return dedisp::dispersion_delay_s(dm, f, fref);
}

double phi(double x) {
  return 0.5 * std::erfc(-x * std::numbers::sqrt2 * 0.5);
}

// SplitMix64 (Steele, Lea & Flood 2014): a counter-based generator, the same on every platform.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The key of the noise stream of `seed`.
std::uint64_t noise_key(std::uint64_t seed) {
  return splitmix64(seed ^ 0xD1B54A32D192ED03ull);
}

// The unit Gaussians of indices 2q (cosine) and 2q + 1 (sine): Box-Muller on two uniforms hashed
// from (key, q).
void gaussian_pair(std::uint64_t key, std::uint64_t q, double& even, double& odd) {
  const double u1 = (static_cast<double>(splitmix64(key + 2 * q) >> 11) + 0.5) * 0x1p-53;
  const double u2 = static_cast<double>(splitmix64(key + 2 * q + 1) >> 11) * 0x1p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  even = r * std::cos(a);
  odd = r * std::sin(a);
}

// Noise values mean + rms * g(i) for the indices i = first .. first + n - 1, where g(i) is the
// Gaussian of index i (even: the cosine of pair i / 2, odd: its sine), each pair computed once.
void fill_noise(std::uint64_t key, std::uint64_t first, int n, double mean, double rms,
                float* out) {
  int k = 0;
  double even = 0, odd = 0;
  if (first & 1) {  // the odd half of a pair that starts before this range
    gaussian_pair(key, first >> 1, even, odd);
    out[k++] = static_cast<float>(mean + rms * odd);
  }
  for (; k + 1 < n; k += 2) {
    gaussian_pair(key, (first + k) >> 1, even, odd);
    out[k] = static_cast<float>(mean + rms * even);
    out[k + 1] = static_cast<float>(mean + rms * odd);
  }
  if (k < n) {
    gaussian_pair(key, (first + k) >> 1, even, odd);
    out[k] = static_cast<float>(mean + rms * even);
  }
}

// Sub-channels per channel: arrival times at most a quarter of min(tsamp, sigma_g) apart.
int sub_channels(const FilterbankSimConfig& c, const Burst& b) {
  const double bw = std::abs(c.foff_mhz), fhi = f_hi(c);
  double smear = 0;
  for (int ch = 0; ch < c.nchans; ++ch) {
    const double f = c.fch1_mhz + ch * c.foff_mhz;
    smear = std::max(smear, delay(b.dm, f - bw / 2, fhi) - delay(b.dm, f + bw / 2, fhi));
  }
  const double step = 0.25 * std::min(c.tsamp_s, b.width_s * kFwhmToSigma);
  return static_cast<int>(std::clamp(std::ceil(smear / step), 1.0, 4096.0));
}

// Adds A/nsub * (integral of a unit Gaussian at mu over each sample) into out[j - j0].
void add_gaussian(double mu, double sigma, double tsamp, double weight, std::int64_t j0,
                  std::vector<double>& out) {
  const auto ja = static_cast<std::int64_t>(std::floor((mu - kReach * sigma) / tsamp));
  const auto jb = static_cast<std::int64_t>(std::floor((mu + kReach * sigma) / tsamp));
  double lo = phi((static_cast<double>(ja) * tsamp - mu) / sigma);
  for (std::int64_t j = ja; j <= jb; ++j) {
    const double hi = phi((static_cast<double>(j + 1) * tsamp - mu) / sigma);
    const std::int64_t k = j - j0;
    if (k >= 0 && k < static_cast<std::int64_t>(out.size())) out[k] += weight * (hi - lo);
    lo = hi;
  }
}

}  // namespace

void FilterbankSimConfig::validate() const {
  require_range("--nchans", nchans, 1, 1 << 20);
  if (!(fch1_mhz > 0) || !std::isfinite(fch1_mhz))
    fail(ErrorCategory::invalid_argument, "--fch1 = {} MHz must be > 0", fch1_mhz);
  if (!(foff_mhz != 0) || !std::isfinite(foff_mhz))
    fail(ErrorCategory::invalid_argument, "--foff = {} MHz must be non-zero", foff_mhz);
  const double flow = std::min(fch1_mhz, fch1_mhz + (nchans - 1) * foff_mhz);
  if (!(flow - std::abs(foff_mhz) / 2 > 0))
    fail(ErrorCategory::invalid_argument, "the band reaches {} MHz: --fch1/--foff/--nchans",
         flow - std::abs(foff_mhz) / 2);
  if (!(tsamp_s > 0) || !(tsamp_s < 100))
    fail(ErrorCategory::invalid_argument, "--tsamp = {} s must be in (0, 100)", tsamp_s);
  if (!supported_nbits(nbits))
    fail(ErrorCategory::invalid_argument, "--nbits = {} is not one of 1, 2, 4, 8, 16, 32", nbits);
  if (!(duration_s > 0) || !std::isfinite(duration_s) || nsamples() < 1)
    fail(ErrorCategory::invalid_argument, "--duration = {} s must hold at least one sample",
         duration_s);
  if (static_cast<double>(nsamples()) * nchans > 1e13)
    fail(ErrorCategory::invalid_argument, "{} samples x {} channels is too large", nsamples(),
         nchans);
  if (noise_rms == 0 || !std::isfinite(noise_rms) || !std::isfinite(noise_mean))
    fail(ErrorCategory::invalid_argument, "noise rms = {} must be > 0", noise_rms);
  for (std::size_t i = 0; i < bursts.size(); ++i) {
    const Burst& b = bursts[i];
    if (!(b.dm >= 0) || !(b.dm <= 1e5))
      fail(ErrorCategory::invalid_argument, "--dm = {} must be in [0, 100000]", b.dm);
    if (!(b.snr >= 0) || !(b.snr <= 1e6))
      fail(ErrorCategory::invalid_argument, "--snr = {} must be in [0, 1e6]", b.snr);
    if (!(b.width_s > 0) || !(b.width_s <= duration_s))
      fail(ErrorCategory::invalid_argument, "--width = {} ms must be > 0 and within the file",
           b.width_s * 1e3);
    const double sigma = b.width_s * kFwhmToSigma;
    const double sweep = delay(b.dm, flow - std::abs(foff_mhz) / 2, f_hi(*this));
    if (!(b.time_s - kReach * sigma >= 0) || !(b.time_s + sweep + kReach * sigma <= duration_s))
      fail(ErrorCategory::invalid_argument,
           "burst {} (--time {} s, DM {}) does not fit in the file: it needs [{:.4f}, {:.4f}] s "
           "within --duration {} s",
           i, b.time_s, b.dm, b.time_s - kReach * sigma, b.time_s + sweep + kReach * sigma,
           duration_s);
  }
}

std::int64_t FilterbankSimConfig::nsamples() const {
  return std::llround(duration_s / tsamp_s);
}

double FilterbankSimConfig::mean() const {
  if (noise_mean >= 0 || nbits == 32) return noise_mean >= 0 ? noise_mean : 0.0;
  switch (nbits) {
    case 16:
      return 24576;
    case 8:
      return 96;
    case 4:
      return 6;
    case 2:
      return 1.5;
    default:
      return 0.5;
  }
}

double FilterbankSimConfig::rms() const {
  if (noise_rms > 0) return noise_rms;
  switch (nbits) {
    case 32:
      return 1;
    case 16:
      return 4096;
    case 8:
      return 16;
    case 4:
      return 2;
    case 2:
      return 1;
    default:
      return 0.5;
  }
}

io::FilterbankHeader FilterbankSimConfig::header() const {
  io::FilterbankHeader h;
  h.source_name = source_name;
  h.telescope_id = 0;
  h.machine_id = 0;
  h.data_type = 1;
  h.nchans = nchans;
  h.nbits = nbits;
  h.nifs = 1;
  h.fch1 = fch1_mhz;
  h.foff = foff_mhz;
  h.tstart = tstart_mjd;
  h.tsamp = tsamp_s;
  return h;
}

BurstSignal burst_signal(const FilterbankSimConfig& c, const Burst& b) {
  BurstSignal s;
  s.injected_snr = b.snr;
  s.nsub = sub_channels(c, b);
  const double sigma = b.width_s * kFwhmToSigma, bw = std::abs(c.foff_mhz), fhi = f_hi(c);
  const double w = 1.0 / s.nsub;
  const std::int64_t n = c.nsamples();
  auto sub_freq = [&](double fc, int m) { return fc - bw / 2 + (m + 0.5) * bw * w; };

  // The profile dedispersed at the true DM (exact centre delays), for the amplitude.
  double spread = 0;
  for (int ch = 0; ch < c.nchans; ++ch) {
    const double f = c.fch1_mhz + ch * c.foff_mhz;
    spread = std::max(spread, delay(b.dm, f - bw / 2, f + bw / 2));
  }
  const auto p0 =
      static_cast<std::int64_t>(std::floor((b.time_s - spread - kReach * sigma) / c.tsamp_s) - 1);
  const auto p1 =
      static_cast<std::int64_t>(std::floor((b.time_s + spread + kReach * sigma) / c.tsamp_s) + 1);
  // Channels in a fixed number of groups summed in group order, so that the result does not
  // depend on the thread count (thousands of channels x sub-channels: serial, this took seconds).
  const std::size_t plen = static_cast<std::size_t>(p1 - p0 + 1);
  constexpr int kGroups = 64;
  std::vector<std::vector<double>> part(kGroups);
#pragma omp parallel for schedule(dynamic)
  for (int g = 0; g < kGroups; ++g) {
    part[g].assign(plen, 0.0);
    for (int ch = g; ch < c.nchans; ch += kGroups) {
      const double f = c.fch1_mhz + ch * c.foff_mhz, dc = delay(b.dm, f, fhi);
      for (int m = 0; m < s.nsub; ++m)
        add_gaussian(b.time_s + delay(b.dm, sub_freq(f, m), fhi) - dc, sigma, c.tsamp_s, w, p0,
                     part[g]);
    }
  }
  std::vector<double> p(plen, 0.0);
  for (const auto& q : part)
    for (std::size_t i = 0; i < plen; ++i)
      p[i] += q[i];
  double norm2 = 0;
  for (double v : p)
    norm2 += v * v;
  s.profile_norm = std::sqrt(norm2);
  s.amplitude = b.snr * c.rms() * std::sqrt(static_cast<double>(c.nchans)) / s.profile_norm;

  // The dispersed signal, channel by channel.
  s.first.resize(static_cast<std::size_t>(c.nchans));
  s.values.resize(static_cast<std::size_t>(c.nchans));
#pragma omp parallel for schedule(dynamic)
  for (int ch = 0; ch < c.nchans; ++ch) {
    const double f = c.fch1_mhz + ch * c.foff_mhz;
    const double t_first = b.time_s + delay(b.dm, f + bw / 2, fhi) - kReach * sigma;
    const double t_last = b.time_s + delay(b.dm, f - bw / 2, fhi) + kReach * sigma;
    const auto j0 =
        std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(t_first / c.tsamp_s)) - 1);
    const auto j1 = std::min<std::int64_t>(
        n - 1, static_cast<std::int64_t>(std::floor(t_last / c.tsamp_s)) + 1);
    std::vector<double> v(static_cast<std::size_t>(std::max<std::int64_t>(0, j1 - j0 + 1)), 0.0);
    for (int m = 0; m < s.nsub; ++m)
      add_gaussian(b.time_s + delay(b.dm, sub_freq(f, m), fhi), sigma, c.tsamp_s, w * s.amplitude,
                   j0, v);
    s.first[ch] = j0;
    s.values[ch].assign(v.begin(), v.end());
  }
  return s;
}

nlohmann::json simulate_filterbank(const FilterbankSimConfig& c, const std::string& path) {
  c.validate();
  std::vector<BurstSignal> signals;
  nlohmann::json bursts = nlohmann::json::array();
  for (const auto& b : c.bursts) {
    signals.push_back(burst_signal(c, b));
    const auto& s = signals.back();
    bursts.push_back({{"dm", b.dm},
                      {"snr", b.snr},
                      {"width_s", b.width_s},
                      {"time_s", b.time_s},
                      {"amplitude", s.amplitude},
                      {"nsub", s.nsub},
                      {"profile_norm", s.profile_norm}});
  }
  const io::FilterbankHeader h = c.header();
  const std::int64_t n = c.nsamples();
  const double mean = c.mean(), rms = c.rms();
  {
    // Per block of rows: noise (one counter-based stream, so any thread count gives the same
    // file), the bursts, then quantisation, all but the bursts in parallel over rows; memory is
    // one block of floats and its packed bytes.
    io::FilterbankWriter writer(path, h);
    const std::uint64_t key = noise_key(c.seed);
    const auto row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
    std::vector<float> rows(static_cast<std::size_t>(kWriteRows * c.nchans));
    std::vector<std::uint8_t> packed(static_cast<std::size_t>(kWriteRows * row_bytes));
    for (std::int64_t t0 = 0; t0 < n; t0 += kWriteRows) {
      const std::int64_t nt = std::min(kWriteRows, n - t0);
#pragma omp parallel for schedule(static)
      for (std::int64_t j = 0; j < nt; ++j)
        fill_noise(key, static_cast<std::uint64_t>((t0 + j) * c.nchans), c.nchans, mean, rms,
                   rows.data() + j * c.nchans);
      for (const auto& s : signals)
        for (int ch = 0; ch < c.nchans; ++ch) {
          const auto& v = s.values[ch];
          const std::int64_t a = std::max(t0, s.first[ch]);
          const std::int64_t z =
              std::min(t0 + nt, s.first[ch] + static_cast<std::int64_t>(v.size()));
          for (std::int64_t t = a; t < z; ++t)
            rows[(t - t0) * c.nchans + ch] += v[t - s.first[ch]];
        }
#pragma omp parallel for schedule(static)
      for (std::int64_t j = 0; j < nt; ++j)
        io::pack_samples(rows.data() + j * c.nchans, c.nbits, static_cast<std::size_t>(c.nchans),
                         packed.data() + j * row_bytes, h.is_signed);
      writer.write_raw(packed.data(), static_cast<std::size_t>(nt * row_bytes));
    }
    writer.commit();
  }
  nlohmann::json j = {{"format", "warpbeam-simulation"},
                      {"file", path},
                      {"seed", c.seed},
                      {"nchans", c.nchans},
                      {"fch1_mhz", c.fch1_mhz},
                      {"foff_mhz", c.foff_mhz},
                      {"tsamp_s", c.tsamp_s},
                      {"nbits", c.nbits},
                      {"duration_s", c.duration_s},
                      {"nsamples", n},
                      {"noise_mean", mean},
                      {"noise_rms", rms},
                      {"snr_definition",
                       "matched-filter S/N of the smeared pulse dedispersed at its true DM with "
                       "exact delays: sqrt(sum p^2) / (noise_rms sqrt(nchans))"},
                      {"bursts", bursts},
                      {"header", io::to_json(h)},
                      {"provenance", provenance()}};
  io::write_text_file(path + ".json", j.dump(2) + "\n");
  return j;
}

}  // namespace warpbeam::sim
