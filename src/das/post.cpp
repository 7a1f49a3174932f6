// Pre- and post-processing around the beamformer: I/Q demodulation (rf2iq's chain), envelope,
// log compression, 8-bit B-mode levels and slices of volumes. Formulas and sources in das.hpp.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <complex>
#include <vector>

#ifdef WARPBEAM_HAVE_FFTW3F
#include <fftw3.h>
#endif

#include "warpbeam/das.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::das {

namespace {

constexpr int kOrder = 5;
using Coeffs = std::array<double, kOrder + 1>;

// Digital Butterworth low-pass of order kOrder, cut-off wn (fraction of Nyquist): the analog
// prototype poles exp(i pi (2k + N + 1) / 2N), pre-warped to 2 fs' tan(pi wn / 2) with fs' = 2,
// mapped by the bilinear transform z = (2 fs' + s) / (2 fs' - s); the N zeros fall at z = -1.
void butterworth(double wn, Coeffs& b, Coeffs& a) {
  const double fs2 = 4.0;  // 2 * fs' with fs' = 2 (normalised frequencies)
  const double warped = fs2 * std::tan(M_PI * wn / 2.0);
  std::array<std::complex<double>, kOrder> zp;
  std::complex<double> den = 1.0;
  for (int k = 0; k < kOrder; ++k) {
    const std::complex<double> p =
        warped * std::exp(std::complex<double>(0, M_PI * (2.0 * k + kOrder + 1) / (2.0 * kOrder)));
    zp[k] = (fs2 + p) / (fs2 - p);
    den *= (fs2 - p);
  }
  const double gain = std::pow(warped, kOrder) / den.real();
  // a = poly(zp) (real up to rounding), b = gain * poly(-1, ..., -1) = gain * binomial(N, k).
  std::array<std::complex<double>, kOrder + 1> poly{};
  poly[0] = 1.0;
  for (int k = 0; k < kOrder; ++k)
    for (int j = k + 1; j >= 1; --j)
      poly[j] -= zp[k] * poly[j - 1];
  double binom = 1;
  for (int j = 0; j <= kOrder; ++j) {
    a[j] = poly[j].real();
    b[j] = gain * binom;
    binom = binom * (kOrder - j) / (j + 1);
  }
}

// Steady-state initial conditions of the transposed direct form II filter for a unit step
// (scipy.signal.lfilter_zi): (I - A^T) zi = b[1:] - a[1:] b[0], A the companion matrix of a.
std::array<double, kOrder> step_state(const Coeffs& b, const Coeffs& a) {
  constexpr int n = kOrder;
  double m[n][n + 1] = {};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      // A^T of the companion matrix (first row -a[1:], ones below the diagonal).
      const double at = (j == 0 ? -a[i + 1] : 0.0) + (i + 1 == j ? 1.0 : 0.0);
      m[i][j] = (i == j ? 1.0 : 0.0) - at;
    }
    m[i][n] = b[i + 1] - a[i + 1] * b[0];
  }
  for (int c = 0; c < n; ++c) {  // Gaussian elimination with partial pivoting
    int piv = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
    for (int j = 0; j <= n; ++j)
      std::swap(m[c][j], m[piv][j]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int j = c; j <= n; ++j)
        m[r][j] -= f * m[c][j];
    }
  }
  std::array<double, n> zi{};
  for (int i = 0; i < n; ++i)
    zi[i] = m[i][n] / m[i][i];
  return zi;
}

// One pass of the filter over x (in place), starting from state zi * x[0].
void lfilter(const Coeffs& b, const Coeffs& a, const std::array<double, kOrder>& zi,
             std::vector<std::complex<double>>& x) {
  std::array<std::complex<double>, kOrder> z;
  for (int i = 0; i < kOrder; ++i)
    z[i] = zi[i] * x[0];
  for (auto& v : x) {
    const std::complex<double> in = v;
    const std::complex<double> y = b[0] * in + z[0];
    for (int i = 0; i < kOrder - 1; ++i)
      z[i] = b[i + 1] * in + z[i + 1] - a[i + 1] * y;
    z[kOrder - 1] = b[kOrder] * in - a[kOrder] * y;
    v = y;
  }
}

}  // namespace

std::vector<std::complex<float>> rf_to_iq(const float* rf, std::int64_t nlines,
                                          std::int64_t nsamples, double fs, double fc, double t0,
                                          double bandwidth) {
  if (nlines < 1 || nsamples < 2)
    fail(ErrorCategory::invalid_argument, "rf_to_iq: {} lines of {} samples (need >= 1 x 2)",
         nlines, nsamples);
  if (!(fs > 0) || !(fc > 0))
    fail(ErrorCategory::invalid_argument, "rf_to_iq: fs = {} Hz and fc = {} Hz must be > 0", fs,
         fc);
  const double wn = bandwidth > 0 ? bandwidth * fc / fs : std::min(2 * fc / fs, 0.5);
  if (!(wn > 0 && wn < 1))
    fail(ErrorCategory::invalid_argument,
         "rf_to_iq: normalised cut-off {} (bandwidth {} x fc {} Hz / fs {} Hz) is outside (0, 1)",
         wn, bandwidth, fc, fs);
  Coeffs b, a;
  butterworth(wn, b, a);
  const auto zi = step_state(b, a);
  const std::int64_t pad = std::min<std::int64_t>(3 * (kOrder + 1), nsamples - 1);
  // Down-mixing phasor exp(-2 pi i fc t), t = t0 + n / fs, reduced to a fraction of a cycle.
  std::vector<std::complex<double>> mix(static_cast<std::size_t>(nsamples));
  for (std::int64_t n = 0; n < nsamples; ++n) {
    const double cyc = fc * (t0 + static_cast<double>(n) / fs);
    const double frac = cyc - std::floor(cyc);
    mix[n] = std::polar(1.0, -2 * M_PI * frac);
  }
  std::vector<std::complex<float>> out(static_cast<std::size_t>(nlines * nsamples));
#pragma omp parallel
  {
    std::vector<std::complex<double>> ext(static_cast<std::size_t>(nsamples + 2 * pad));
#pragma omp for
    for (std::int64_t l = 0; l < nlines; ++l) {
      const float* x = rf + l * nsamples;
      std::complex<double>* e = ext.data() + pad;
      for (std::int64_t n = 0; n < nsamples; ++n)
        e[n] = static_cast<double>(x[n]) * mix[n];
      // Odd reflection about the end samples (scipy's filtfilt padtype 'odd').
      for (std::int64_t i = 1; i <= pad; ++i) {
        e[-i] = 2.0 * e[0] - e[i];
        e[nsamples - 1 + i] = 2.0 * e[nsamples - 1] - e[nsamples - 1 - i];
      }
      lfilter(b, a, zi, ext);
      std::reverse(ext.begin(), ext.end());
      lfilter(b, a, zi, ext);
      std::reverse(ext.begin(), ext.end());
      for (std::int64_t n = 0; n < nsamples; ++n)
        out[l * nsamples + n] = std::complex<float>(2.0 * e[n]);
    }
  }
  return out;
}

std::vector<float> envelope(const std::complex<float>* data, std::int64_t n) {
  std::vector<float> env(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    env[i] = std::abs(data[i]);
  return env;
}

std::vector<float> envelope_along_depth(const float* rf, std::int64_t batch, std::int64_t nz,
                                        std::int64_t ny, std::int64_t nx) {
  if (batch < 1 || nz < 2 || ny < 1 || nx < 1)
    fail(ErrorCategory::invalid_argument,
         "envelope along depth: shape [{}][{}][{}][{}] needs >= 1 frame, >= 2 depths, >= 1 x, y",
         batch, nz, ny, nx);
#ifdef WARPBEAM_HAVE_FFTW3F
  const std::int64_t cols = ny * nx, per = nz * cols;
  if (nz > INT32_MAX || cols > INT32_MAX)
    fail(ErrorCategory::invalid_argument, "envelope along depth: {} x {} is too large", nz, cols);
  auto* buf = static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * per));
  if (!buf)
    fail(ErrorCategory::io, "cannot allocate {} bytes for FFTW", sizeof(fftwf_complex) * per);
  // Every (y, x) column is a transform of length nz with stride `cols`; in place.
  int n = static_cast<int>(nz);
  const int stride = static_cast<int>(cols);
  fftwf_plan fwd = fftwf_plan_many_dft(1, &n, stride, buf, nullptr, stride, 1, buf, nullptr, stride,
                                       1, FFTW_FORWARD, FFTW_ESTIMATE);
  fftwf_plan inv = fftwf_plan_many_dft(1, &n, stride, buf, nullptr, stride, 1, buf, nullptr, stride,
                                       1, FFTW_BACKWARD, FFTW_ESTIMATE);
  std::vector<float> env(static_cast<std::size_t>(batch * per));
  if (!fwd || !inv) {
    fftwf_free(buf);
    fail(ErrorCategory::unsupported, "FFTW could not plan {} transforms of {} points", cols, nz);
  }
  // One-sided spectrum: DC (and Nyquist for even nz) kept, positive frequencies doubled,
  // negative ones zeroed; the 1/nz of the inverse transform folded in.
  std::vector<float> h(static_cast<std::size_t>(nz), 0.f);
  h[0] = 1.f;
  for (std::int64_t k = 1; k < (nz + 1) / 2; ++k)
    h[k] = 2.f;
  if (nz % 2 == 0) h[nz / 2] = 1.f;
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* x = rf + b * per;
    for (std::int64_t i = 0; i < per; ++i) {
      buf[i][0] = x[i];
      buf[i][1] = 0.f;
    }
    fftwf_execute(fwd);
    for (std::int64_t k = 0; k < nz; ++k) {
      const float g = h[k] / static_cast<float>(nz);
      for (std::int64_t c = 0; c < cols; ++c) {
        buf[k * cols + c][0] *= g;
        buf[k * cols + c][1] *= g;
      }
    }
    fftwf_execute(inv);
    float* e = env.data() + b * per;
    for (std::int64_t i = 0; i < per; ++i)
      e[i] = std::hypot(buf[i][0], buf[i][1]);
  }
  fftwf_destroy_plan(fwd);
  fftwf_destroy_plan(inv);
  fftwf_free(buf);
  return env;
#else
  (void)rf;
  fail(ErrorCategory::unsupported,
       "the envelope of beamformed RF (analytic signal along depth) needs FFTW3F, which this "
       "build lacks; beamform I/Q instead");
#endif
}

std::vector<float> log_compress(const std::vector<float>& env, double dynamic_range_db,
                                double reference) {
  if (!(dynamic_range_db > 0) || !std::isfinite(dynamic_range_db))
    fail(ErrorCategory::invalid_argument, "dynamic range = {} dB must be > 0", dynamic_range_db);
  double ref = reference;
  if (!(ref > 0))
    for (float v : env)
      ref = std::max(ref, static_cast<double>(v));
  std::vector<float> db(env.size());
  for (std::size_t i = 0; i < env.size(); ++i) {
    const double v = ref > 0 && env[i] > 0 ? 20 * std::log10(env[i] / ref) : -dynamic_range_db;
    db[i] = static_cast<float>(std::clamp(v, -dynamic_range_db, 0.0));
  }
  return db;
}

std::vector<float> bmode_levels(const std::vector<float>& env, double dynamic_range_db) {
  const auto db = log_compress(env, dynamic_range_db);
  std::vector<float> lv(db.size());
  for (std::size_t i = 0; i < db.size(); ++i)
    lv[i] = std::floor(static_cast<float>(
        std::clamp(255.0 * (db[i] + dynamic_range_db) / dynamic_range_db, 0.0, 255.0)));
  return lv;
}

std::vector<float> slice(const std::vector<float>& volume, const std::array<std::int64_t, 3>& shape,
                         SliceAxis axis, std::int64_t index, std::int64_t* rows,
                         std::int64_t* cols) {
  const auto [nz, ny, nx] = shape;
  if (static_cast<std::int64_t>(volume.size()) != nz * ny * nx)
    fail(ErrorCategory::invalid_argument, "slice: volume of {} values is not {} x {} x {}",
         volume.size(), nz, ny, nx);
  const std::int64_t n = axis == SliceAxis::x ? nx : axis == SliceAxis::y ? ny : nz;
  if (index < 0 || index >= n)
    fail(ErrorCategory::invalid_argument, "slice index {} is outside [0, {}]", index, n - 1);
  std::vector<float> img;
  if (axis == SliceAxis::z) {
    *rows = ny;
    *cols = nx;
    img.assign(volume.begin() + index * ny * nx, volume.begin() + (index + 1) * ny * nx);
  } else if (axis == SliceAxis::y) {
    *rows = nz;
    *cols = nx;
    for (std::int64_t z = 0; z < nz; ++z)
      for (std::int64_t x = 0; x < nx; ++x)
        img.push_back(volume[(z * ny + index) * nx + x]);
  } else {
    *rows = nz;
    *cols = ny;
    for (std::int64_t z = 0; z < nz; ++z)
      for (std::int64_t y = 0; y < ny; ++y)
        img.push_back(volume[(z * ny + y) * nx + index]);
  }
  return img;
}

}  // namespace warpbeam::das
