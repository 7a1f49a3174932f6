#pragma once
// Beamformer test helpers: small odd shapes, random (never zero) inputs of every sample type,
// random weights with a mask, the naive reference loop, per-output comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "warpbeam/beamform.hpp"
#include "warpbeam/sample_type.hpp"

namespace bftest {

using namespace warpbeam;
using namespace warpbeam::beamform;

/// Odd sizes everywhere: 13 channels (a partial 8- and 16-channel tile), 19 antennas (a partial
/// 16-antenna group, rows not 4-byte aligned for ci4/ci8), 11 beams, 72 samples.
inline BeamformConfig small_config(SampleType type, int npol, int nchans = 13, int nant = 19,
                                   int nbeams = 11, std::int64_t nsamples = 72) {
  BeamformConfig c;
  c.nchans = nchans;
  c.nantennas = nant;
  c.npol = npol;
  c.nbeams = nbeams;
  c.nsamples = nsamples;
  c.sample_type = type;
  return c;
}

inline std::int64_t output_floats(const BeamformConfig& c) {
  std::int64_t n = 1;
  for (auto d : c.output_shape())
    n *= d;
  return n;
}

/// Random input bytes: every byte random for ci4/ci8; halves/floats uniform in [-4, 4).
inline std::vector<std::uint8_t> random_input(const BeamformConfig& c, std::uint32_t seed) {
  const std::size_t n = static_cast<std::size_t>(c.nchans * c.nsamples * c.row_bytes());
  std::vector<std::uint8_t> in(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  if (c.sample_type == SampleType::ci4 || c.sample_type == SampleType::ci8) {
    for (auto& b : in)
      b = static_cast<std::uint8_t>(rng());
  } else if (c.sample_type == SampleType::cf16) {
    for (std::size_t i = 0; i < n / 2; ++i) {
      const std::uint16_t h = float_to_half(u(rng));
      std::memcpy(in.data() + 2 * i, &h, 2);
    }
  } else {
    for (std::size_t i = 0; i < n / 4; ++i) {
      const float f = u(rng);
      std::memcpy(in.data() + 4 * i, &f, 4);
    }
  }
  return in;
}

/// Random weights [chan][pol][beam][ant] with |w| <= 1; antennas a % mask_every == 1 masked (0).
inline std::vector<std::complex<float>> random_weights(const BeamformConfig& c, std::uint32_t seed,
                                                       int mask_every) {
  std::vector<std::complex<float>> w(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams *
                                     c.nantennas);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.7f, 0.7f);
  for (std::size_t i = 0; i < w.size(); ++i) {
    const int a = static_cast<int>(i % static_cast<std::size_t>(c.nantennas));
    w[i] = (mask_every > 0 && a % mask_every == 1) ? std::complex<float>(0, 0)
                                                   : std::complex<float>(u(rng), u(rng));
  }
  return w;
}

inline View<const std::complex<float>, 4> weights_view(const BeamformConfig& c,
                                                       const std::vector<std::complex<float>>& w) {
  return View<const std::complex<float>, 4>(w.data(), {c.nchans, c.npol, c.nbeams, c.nantennas});
}
inline View<const std::uint8_t, 3> input_view(const BeamformConfig& c,
                                              const std::vector<std::uint8_t>& in) {
  return View<const std::uint8_t, 3>(in.data(), c.input_shape());
}
inline View<float, 4> output_view(const BeamformConfig& c, std::vector<float>& out) {
  return View<float, 4>(out.data(), c.output_shape());
}

/// The sample at (chan, t, ant, pol), decoded by hand (bit operations, not the library table).
inline std::complex<double> sample_at(const BeamformConfig& c, const std::vector<std::uint8_t>& in,
                                      int ch, std::int64_t t, int a, int p) {
  const int bpc = bytes_per_complex(c.sample_type);
  const std::uint8_t* s =
      in.data() + (ch * c.nsamples + t) * c.row_bytes() + (a * c.npol + p) * bpc;
  auto value = [&](unsigned code, int bits) -> double {
    if (!c.levels.empty()) return c.levels[code];
    const int half = 1 << (bits - 1);
    switch (c.encoding) {
      case Encoding::twos_complement:
        return code >= static_cast<unsigned>(half) ? static_cast<int>(code) - 2 * half
                                                   : static_cast<int>(code);
      case Encoding::offset_binary:
        return static_cast<int>(code) - half;
      case Encoding::sign_magnitude:
        return (code & static_cast<unsigned>(half)) ? -static_cast<double>(code & (half - 1u))
                                                    : static_cast<double>(code);
    }
    return 0;
  };
  switch (c.sample_type) {
    case SampleType::ci4:
      return {value(s[0] >> 4, 4), value(s[0] & 15u, 4)};
    case SampleType::ci8:
      return {value(s[0], 8), value(s[1], 8)};
    case SampleType::cf16: {
      std::uint16_t h[2];
      std::memcpy(h, s, 4);
      return {half_to_float(h[0]), half_to_float(h[1])};
    }
    case SampleType::cf32: {
      float f[2];
      std::memcpy(f, s, 8);
      return {f[0], f[1]};
    }
  }
  return 0;
}

/// The definition, in double precision: v = sum_a w x; power summed/integrated as configured.
inline std::vector<float> naive_beamform(const BeamformConfig& c,
                                         const std::vector<std::uint8_t>& in,
                                         const std::vector<std::complex<float>>& w) {
  std::vector<double> out(static_cast<std::size_t>(output_floats(c)), 0.0);
  const auto shape = c.output_shape();
  for (int ch = 0; ch < c.nchans; ++ch)
    for (int p = 0; p < c.npol; ++p)
      for (int b = 0; b < c.nbeams; ++b)
        for (std::int64_t t = 0; t < c.nsamples; ++t) {
          std::complex<double> v = 0;
          for (int a = 0; a < c.nantennas; ++a)
            v += std::complex<double>(
                     w[((static_cast<std::size_t>(ch) * c.npol + p) * c.nbeams + b) * c.nantennas +
                       a]) *
                 sample_at(c, in, ch, t, a, p);
          if (c.output == OutputKind::voltage) {
            const std::size_t i =
                static_cast<std::size_t>(((b * shape[1] + p) * shape[2] + t) * shape[3] + 2 * ch);
            out[i] = v.real();
            out[i + 1] = v.imag();
          } else {
            const int op = c.sum_pols ? 0 : p;
            out[static_cast<std::size_t>(
                ((b * shape[1] + op) * shape[2] + t / c.integration) * shape[3] + ch)] +=
                std::norm(v);
          }
        }
  return std::vector<float>(out.begin(), out.end());
}

struct Comparison {
  double max_err = 0, max_ref = 0;
  std::string first;  // the first output array (beam, pol) over tolerance: index, got, expected
};

/// Compares per output array ([beam][pol] of [time][chan]) with tolerance tol * max|ref| of that
/// array; returns the worst ratio's max_err / max_ref (scaled into the whole) and the first
/// mismatch. NaN (the poison) counts as an infinite error.
inline Comparison compare(const std::vector<float>& got, const std::vector<float>& ref,
                          const BeamformConfig& c, double tol = 1e-5) {
  const auto shape = c.output_shape();
  const std::int64_t per = shape[2] * shape[3];
  Comparison r;
  double worst = 0;
  for (std::int64_t o = 0; o < shape[0] * shape[1]; ++o) {
    double mref = 0, merr = 0;
    std::int64_t bad = -1;
    for (std::int64_t i = o * per; i < (o + 1) * per; ++i)
      mref = std::max(mref, static_cast<double>(std::abs(ref[static_cast<std::size_t>(i)])));
    for (std::int64_t i = o * per; i < (o + 1) * per; ++i) {
      const float g = got[static_cast<std::size_t>(i)], e = ref[static_cast<std::size_t>(i)];
      const double err = std::isfinite(g) ? std::abs(static_cast<double>(g) - e) : INFINITY;
      if (err > merr) merr = err;
      if (bad < 0 && err > tol * mref) bad = i;
    }
    if (bad >= 0 && r.first.empty()) {
      std::ostringstream s;
      s << "beam " << o / shape[1] << " pol " << o % shape[1] << ": first mismatch at index " << bad
        << " (time " << (bad % per) / shape[3] << ", col " << bad % shape[3] << "): got "
        << got[static_cast<std::size_t>(bad)] << ", expected " << ref[static_cast<std::size_t>(bad)]
        << "; max error " << merr << " of max " << mref;
      r.first = s.str();
    }
    const double ratio = mref > 0 ? merr / mref : (merr > 0 ? INFINITY : 0);
    if (ratio >= worst) {
      worst = ratio;
      r.max_err = merr;
      r.max_ref = mref;
    }
    if (mref == 0 && r.max_ref == 0) r.max_ref = 0;
  }
  if (r.max_ref == 0 && worst == 0) {
    // all-zero reference arrays: report the global maximum so the caller's > 0 check fails
    for (float v : ref)
      r.max_ref = std::max(r.max_ref, static_cast<double>(std::abs(v)));
  }
  return r;
}

}  // namespace bftest
