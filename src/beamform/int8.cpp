// The int8 arithmetic of the tensor-int8 beamformer on the host (see int8.hpp).
#include "beamform/int8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "warpbeam/format.hpp"

namespace warpbeam::beamform::detail {

Int8Weights quantize_int8(const BeamformConfig& c, const std::complex<float>* w) {
  Int8Weights r;
  const std::size_t na = static_cast<std::size_t>(c.nantennas), nb = c.nbeams, np = c.npol;
  r.q.resize(static_cast<std::size_t>(c.nchans) * np * nb * na * 2);
  r.scale.resize(static_cast<std::size_t>(c.nchans) * nb);
  r.scale2.resize(r.scale.size());
  for (std::size_t ch = 0; ch < static_cast<std::size_t>(c.nchans); ++ch)
    for (std::size_t b = 0; b < nb; ++b) {
      auto at = [&](std::size_t p, std::size_t a) { return ((ch * np + p) * nb + b) * na + a; };
      float m = 0;
      for (std::size_t p = 0; p < np; ++p)
        for (std::size_t a = 0; a < na; ++a)
          m = std::max({m, std::fabs(w[at(p, a)].real()), std::fabs(w[at(p, a)].imag())});
      const float s = m / 127.f;
      r.scale[ch * nb + b] = s;
      r.scale2[ch * nb + b] = s * s;
      for (std::size_t p = 0; p < np; ++p)
        for (std::size_t a = 0; a < na; ++a) {
          // Round half to even (nearbyint in the default mode); |w| <= 127 s up to rounding, so
          // the clamp only catches the last ulp.
          auto quant = [&](float v) {
            if (s == 0) return std::int8_t{0};
            const float r8 = std::nearbyint(v / s);
            return static_cast<std::int8_t>(std::clamp(r8, -127.f, 127.f));
          };
          r.q[2 * at(p, a)] = quant(w[at(p, a)].real());
          r.q[2 * at(p, a) + 1] = quant(w[at(p, a)].imag());
        }
    }
  return r;
}

std::vector<std::complex<float>> dequantize_int8(const BeamformConfig& c, const Int8Weights& q) {
  const std::size_t na = static_cast<std::size_t>(c.nantennas), nb = c.nbeams, np = c.npol;
  std::vector<std::complex<float>> w(q.q.size() / 2);
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::size_t ch = i / (np * nb * na), b = (i / na) % nb;
    const float s = q.scale[ch * nb + b];
    w[i] = {s * q.q[2 * i], s * q.q[2 * i + 1]};
  }
  return w;
}

std::vector<std::int8_t> int8_table(const BeamformConfig& c) {
  if (c.sample_type != SampleType::ci4 && c.sample_type != SampleType::ci8)
    fail(ErrorCategory::unsupported,
         "the tensor-int8 beamformer takes ci4 or ci8 voltages (exact in int8), not {}",
         to_string(c.sample_type));
  const std::vector<float> t = conversion_table(c.sample_type, c.encoding, c.levels);
  std::vector<std::int8_t> r(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (c.sample_type == SampleType::ci8 && i % 2 == 1) continue;  // ci8: only .re is used
    const float v = t[i];
    if (!(v == std::nearbyint(v) && v >= -128 && v <= 127))
      fail(ErrorCategory::unsupported,
           "the tensor-int8 beamformer needs integer voltage levels in [-128, 127]; code {} is {}",
           i / 2, v);
    r[i] = static_cast<std::int8_t>(v);
  }
  return r;
}

void check_int8_config(const BeamformConfig& c) {
  const std::vector<std::int8_t> t = int8_table(c);
  if (c.output != OutputKind::power)
    fail(ErrorCategory::unsupported,
         "the tensor-int8 beamformer forms power only; cublas-fp16 or register-stream form "
         "voltages");
  if (64 % c.integration != 0)
    fail(ErrorCategory::unsupported,
         "the tensor-int8 beamformer integrates over a power of two up to 64, not {}",
         c.integration);
  int xmax = 0;
  for (std::int8_t v : t)
    xmax = std::max(xmax, std::abs(static_cast<int>(v)));
  // |Re V|, |Im V| <= 2 nantennas 127 xmax; the kernel's int32 accumulators and the 64-bit sums
  // of |V|^2 over the output's pols and samples must not overflow.
  const long double vmax = 2.0L * c.nantennas * 127 * xmax;
  const long double terms = static_cast<long double>(c.sum_pols ? c.npol : 1) * c.integration;
  if (vmax > 2147483647.0L || 2 * vmax * vmax * terms > 9223372036854775807.0L)
    fail(ErrorCategory::unsupported,
         "the tensor-int8 beamformer's integer sums could overflow for {} antennas x {} summed "
         "samples",
         c.nantennas, static_cast<double>(terms));
}

void check_int8_stream_config(const BeamformConfig& c) {
  check_int8_config(c);
  if (c.sample_type != SampleType::ci4)
    fail(ErrorCategory::invalid_argument,
         "the tensor-int8-stream beamformer takes ci4 voltages, not {} (tensor-int8 takes ci8)",
         to_string(c.sample_type));
  if (c.nantennas > 32)
    fail(ErrorCategory::invalid_argument,
         "the tensor-int8-stream beamformer takes at most 32 antennas, not {} (tensor-int8 takes "
         "any number)",
         c.nantennas);
  if (c.npol == 2 && c.sum_pols)
    fail(ErrorCategory::invalid_argument,
         "the tensor-int8-stream beamformer forms each pol separately: sum_pols is not supported "
         "(tensor-int8 sums them)");
  if (32 % c.integration != 0)
    fail(ErrorCategory::invalid_argument,
         "the tensor-int8-stream beamformer integrates over 1, 2, 4, 8, 16 or 32 samples, not {}",
         c.integration);
}

bool uses_int8_gemm(const BeamformConfig& c) {
  if (const char* v = std::getenv("WARPBEAM_INT8_GEMM")) {
    const std::string s(v);
    if (s != "0" && s != "1")
      fail(ErrorCategory::invalid_argument, "WARPBEAM_INT8_GEMM = '{}': expected 0 or 1", s);
    return s == "1" && c.integration == 1 && !(c.sum_pols && c.npol == 2);
  }
  return false;  // opt-in until its current form has passed the GPU tests (docs/PERFORMANCE.md)
}

bool fits_int8_stream(const BeamformConfig& c) {
  try {
    check_int8_stream_config(c);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void emulate_int8(const BeamformConfig& c, const Int8Weights& w, const std::uint8_t* in,
                  float* out) {
  const std::vector<std::int8_t> tab = int8_table(c);
  const std::int64_t na = c.nantennas, nb = c.nbeams, np = c.npol, row = c.row_bytes();
  const std::int64_t nto = c.nsamples_out(), n = c.integration;
  const int nop = c.nout_pols();
  const bool ci4 = c.sample_type == SampleType::ci4;
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t ch = 0; ch < c.nchans; ++ch) {
    std::vector<int> xr(static_cast<std::size_t>(na * np)), xi(xr.size());
    for (std::int64_t b = 0; b < nb; ++b)
      for (int op = 0; op < nop; ++op)
        for (std::int64_t to = 0; to < nto; ++to) {
          std::uint64_t psum = 0;
          for (std::int64_t t = to * n; t < (to + 1) * n; ++t) {
            const std::uint8_t* r = in + (ch * c.nsamples + t) * row;
            for (std::int64_t e = 0; e < na * np; ++e) {
              if (ci4) {
                xr[e] = tab[2 * r[e]];
                xi[e] = tab[2 * r[e] + 1];
              } else {
                xr[e] = tab[2 * r[2 * e]];
                xi[e] = tab[2 * r[2 * e + 1]];
              }
            }
            for (std::int64_t p = 0; p < np; ++p) {
              if (!(c.sum_pols || p == op)) continue;
              const std::int8_t* q = w.q.data() + ((ch * np + p) * nb + b) * na * 2;
              std::int64_t vr = 0, vi = 0;
              for (std::int64_t a = 0; a < na; ++a) {
                const int x_r = xr[a * np + p], x_i = xi[a * np + p];
                vr += q[2 * a] * x_r - q[2 * a + 1] * x_i;
                vi += q[2 * a + 1] * x_r + q[2 * a] * x_i;
              }
              psum += static_cast<std::uint64_t>(vr * vr) + static_cast<std::uint64_t>(vi * vi);
            }
          }
          // The kernel: float(P) rounded to nearest, times fl(s^2) (no contraction possible).
          const float pf = static_cast<float>(static_cast<std::int64_t>(psum));
          out[((b * nop + op) * nto + to) * c.nchans + ch] = pf * w.scale2[ch * nb + b];
        }
  }
}

}  // namespace warpbeam::beamform::detail
