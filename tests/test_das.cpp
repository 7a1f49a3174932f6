// Delay-and-sum on the CPU: against a naive loop written here, against physics (a simulated point
// scatterer's position and -6 dB widths), against PyMUST's B-mode of real Verasonics data, and
// the I/O, CLI and bad-input paths.
#include <cmath>
#include <complex>
#include <numeric>

#include "test_util.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/io/ultrasound.hpp"
#include "warpbeam/sim/ultrasound.hpp"

#ifdef WB_TEST_MATIO
#include <matio.h>
#endif

using namespace warpbeam;
using namespace warpbeam::das;
using cf = std::complex<float>;

namespace {

constexpr double kPi = 3.14159265358979323846;

// The DAS sum of das.hpp, written out directly in double precision (an independent reference).
std::vector<std::complex<double>> naive_das(const DasConfig& c, const std::vector<double>& ttx,
                                            const std::vector<float>& rf,
                                            const std::vector<cf>& iq) {
  const auto nv = c.nvoxels(), M = c.nrx(), Q = c.ntx(), K = c.nsamples, B = c.batch;
  std::vector<std::complex<double>> out(static_cast<std::size_t>(B * nv));
  for (std::int64_t n = 0; n < nv; ++n) {
    const auto& p = c.voxels[n];
    for (std::int64_t q = 0; q < Q; ++q) {
      const double w_tx = c.tx_weights.empty() ? 1.0 : c.tx_weights[q * nv + n];
      for (std::int64_t m = 0; m < M; ++m) {
        const auto& r = c.probe.positions[m];
        const ElementKind kind = c.probe.kinds.empty() ? ElementKind::point : c.probe.kinds[m];
        const double dx = kind == ElementKind::line_x ? 0 : p[0] - r[0];
        const double dy = kind == ElementKind::line_y ? 0 : p[1] - r[1];
        const double dz = p[2] - r[2];
        const double tau = ttx[q * nv + n] + std::sqrt(dx * dx + dy * dy + dz * dz) / c.c;
        const double i = (tau - c.t0) * c.fs;
        if (i < 0 || i >= K - 1) continue;
        double w = w_tx;
        if (c.fnumber) {
          if (dz <= 0) continue;
          const double u = std::sqrt(dx * dx + dy * dy) / (dz / (2 * *c.fnumber));
          if (u > 1) continue;
          if (c.window == Window::hann) w *= 0.5 * (1 + std::cos(kPi * u));
          if (c.window == Window::tukey) {
            const double a = c.tukey_alpha;
            if (u > 1 - a) w *= 0.5 * (1 + std::cos(kPi * (u - 1 + a) / a));
          }
        }
        const auto k = static_cast<std::int64_t>(std::floor(i));
        const double f = i - k;
        const std::complex<double> rot =
            c.signal == Signal::iq ? std::polar(1.0, 2 * kPi * c.fc * tau) : 1.0;
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t base = ((b * M + m) * Q + q) * K + k;
          std::complex<double> s0, s1;
          if (c.signal == Signal::iq) {
            s0 = std::complex<double>(iq[base]);
            s1 = std::complex<double>(iq[base + 1]);
          } else {
            s0 = rf[base];
            s1 = rf[base + 1];
          }
          out[b * nv + n] += w * ((1 - f) * s0 + f * s1) * rot;
        }
      }
    }
  }
  return out;
}

// max |a - b| / max |b|.
double rel_error(const std::vector<cf>& a, const std::vector<std::complex<double>>& b) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(std::complex<double>(a[i]) - b[i]));
    ref = std::max(ref, std::abs(b[i]));
  }
  return ref > 0 ? err / ref : INFINITY;
}

std::vector<Vec3> random_voxels(std::size_t n, std::uint32_t seed, double half_width, double zmin,
                                double zmax, bool volume) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ux(-half_width, half_width), uz(zmin, zmax);
  std::vector<Vec3> v(n);
  for (auto& p : v)
    p = {ux(rng), volume ? ux(rng) : 0.0, uz(rng)};
  return v;
}

std::vector<cf> random_iq(std::size_t n, std::uint32_t seed) {
  const auto f = wbtest::random_floats(2 * n, seed);
  std::vector<cf> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = {f[2 * i], f[2 * i + 1]};
  return v;
}

DasConfig small_config(Signal type) {
  DasConfig c;
  c.signal = type;
  c.batch = 5;
  c.nsamples = 301;
  c.fs = 20e6;
  c.fc = 5e6;
  c.t0 = 2e-6;
  c.c = 1540;
  c.probe = linear_array(24, 0.3e-3);
  c.transmits = {Transmit::plane(0), Transmit::plane(0.2), Transmit::plane(-0.15)};
  c.voxels = random_voxels(157, 3, 4e-3, 3e-3, 9e-3, false);
  return c;
}

// Full width (in samples) where profile stays above half of profile[peak].
double minus6db_width(const std::vector<double>& p, std::int64_t peak) {
  const double half = 0.5 * p[peak];
  std::int64_t lo = peak, hi = peak;
  while (lo > 0 && p[lo - 1] >= half)
    --lo;
  while (hi + 1 < static_cast<std::int64_t>(p.size()) && p[hi + 1] >= half)
    ++hi;
  if (lo == 0 || hi + 1 == static_cast<std::int64_t>(p.size())) return INFINITY;
  const double xl = lo - (p[lo] - half) / (p[lo] - p[lo - 1]);
  const double xh = hi + (p[hi] - half) / (p[hi] - p[hi + 1]);
  return xh - xl;
}

std::vector<cf> run_cpu(const DasConfig& c, const std::vector<float>& rf,
                        const std::vector<cf>& iq) {
  DasPlan plan(c, Backend::cpu);
  std::vector<cf> out(static_cast<std::size_t>(c.batch * c.nvoxels()));
  View<cf, 2> o(out.data(), plan.output_shape());
  if (c.signal == Signal::iq)
    plan.execute(View<const cf, 4>(iq.data(), plan.input_shape()), o);
  else
    plan.execute(View<const float, 4>(rf.data(), plan.input_shape()), o);
  return out;
}

}  // namespace

TEST(Das, IqMatchesNaiveLoopWithHannApertureAndTxWeights) {
  DasConfig c = small_config(Signal::iq);
  c.fnumber = 1.3;
  c.window = Window::hann;
  c.tx_weights = wbtest::random_floats(static_cast<std::size_t>(c.ntx() * c.nvoxels()), 4, 0.2, 1);
  const auto iq = random_iq(static_cast<std::size_t>(c.batch * c.nrx() * c.ntx() * c.nsamples), 7);
  const auto ref = naive_das(c, transmit_delays(c), {}, iq);
  const auto got = run_cpu(c, {}, iq);
  EXPECT_LE(rel_error(got, ref), 1e-5);
}

TEST(Das, RfMatchesNaiveLoopFullAperture) {
  DasConfig c = small_config(Signal::rf);
  const auto rf =
      wbtest::random_floats(static_cast<std::size_t>(c.batch * c.nrx() * c.ntx() * c.nsamples), 8);
  const auto ref = naive_das(c, transmit_delays(c), rf, {});
  const auto got = run_cpu(c, rf, {});
  EXPECT_LE(rel_error(got, ref), 1e-5);
  for (const auto& v : got)
    ASSERT_EQ(v.imag(), 0.f);
}

TEST(Das, RowColumnArrayDivergingWavesTukeyMatchNaiveLoop) {
  DasConfig c;
  c.signal = Signal::iq;
  c.batch = 3;
  c.nsamples = 257;
  c.fs = 12e6;
  c.fc = 3e6;
  c.probe = row_column_array(9, 0.4e-3);
  c.transmits = {Transmit::diverging({0, 0, -5e-3}), Transmit::diverging({1e-3, -1e-3, -8e-3})};
  c.voxels = random_voxels(211, 9, 3e-3, 4e-3, 12e-3, true);
  c.fnumber = 0.8;
  c.window = Window::tukey;
  c.tukey_alpha = 0.4;
  const auto iq = random_iq(static_cast<std::size_t>(c.batch * c.nrx() * c.ntx() * c.nsamples), 2);
  EXPECT_LE(rel_error(run_cpu(c, {}, iq), naive_das(c, transmit_delays(c), {}, iq)), 1e-5);
}

TEST(Das, TransmitDelaysFollowTheWaveModels) {
  DasConfig c;
  c.c = 1500;
  c.probe = linear_array(64, 0.3e-3);
  c.voxels = {{0, 0, 10e-3}, {2e-3, 0, 15e-3}, {-3e-3, 0, 20e-3}};
  const double a = 0.1;
  Transmit zero;
  zero.kind = Transmit::Kind::element_delays;
  zero.element_delays.assign(64, 0.0);
  c.transmits = {Transmit::plane(0), Transmit::plane(a), Transmit::diverging({0, 0, -10e-3}), zero};
  const auto d = transmit_delays(c);
  for (int n = 0; n < 3; ++n) {
    const auto& p = c.voxels[n];
    EXPECT_NEAR(d[0 * 3 + n], p[2] / c.c, 1e-15);
    EXPECT_NEAR(d[1 * 3 + n], (p[0] * std::sin(a) + p[2] * std::cos(a)) / c.c, 1e-15);
    EXPECT_NEAR(d[2 * 3 + n], (std::hypot(p[0], p[2] + 10e-3) - 10e-3) / c.c, 1e-15);
    // Zero delays on the aperture: the plane wave z / c, up to the element spacing.
    EXPECT_NEAR(d[3 * 3 + n], p[2] / c.c, 1e-9);
  }
}

TEST(Das, BadConfigsAreRejected) {
  DasConfig c = small_config(Signal::iq);
  auto expect_invalid = [](DasConfig cfg, const char* what) {
    try {
      DasPlan p(cfg, Backend::cpu);
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument) << what << ": " << e.what();
    }
  };
  auto z = c;
  z.voxels.clear();
  expect_invalid(z, "zero voxels");
  auto f = c;
  f.fnumber = 0.0;
  expect_invalid(f, "f-number 0");
  f.fnumber = -1.0;
  expect_invalid(f, "f-number -1");
  auto w = c;
  w.tx_weights.assign(5, 1.f);
  expect_invalid(w, "tx weights size");
  auto t = c;
  t.tx_delays.assign(c.voxels.size() * 2, 0.0);
  expect_invalid(t, "both transmit models and a table");
  auto iq = c;
  iq.fc = 0;
  expect_invalid(iq, "IQ without fc");
  auto split = c;
  split.tuning.rx_split = 3;
  expect_invalid(split, "rx_split 3");
  split.tuning.rx_split = 4;
  split.tuning.threads_per_block = 64;
  expect_invalid(split, "rx_split 4 with 2 warps per block");
  auto algo = c;
  algo.algorithm = Algorithm::tensor_core;
  expect_invalid(algo, "a CUDA variant on the cpu");
  EXPECT_THROW(parse_grid("0:-1e-3:1e-4,1e-3:2e-3:1e-4"), Error);
  EXPECT_THROW(parse_grid("0:1e-3:0,1e-3:2e-3:1e-4"), Error);
  EXPECT_THROW(parse_grid("0:1e-3"), Error);
  // A view of the wrong shape.
  DasPlan plan(c, Backend::cpu);
  std::vector<cf> in(10), out(10);
  EXPECT_THROW(
      plan.execute(View<const cf, 4>(in.data(), {1, 2, 1, 5}), View<cf, 2>(out.data(), {1, 10})),
      Error);
}

TEST(Das, GridParsingAndOrder) {
  const Grid g = parse_grid("-12.5e-3:12.5e-3:1e-4,10e-3:35e-3:1e-4");
  EXPECT_EQ(g.shape(), (std::array<std::int64_t, 3>{251, 1, 251}));
  const auto v = g.voxels();
  EXPECT_NEAR(v[1][0] - v[0][0], 1e-4, 1e-12);  // x fastest
  EXPECT_NEAR(v[251][2] - v[0][2], 1e-4, 1e-12);
  EXPECT_NEAR(v.back()[0], 12.5e-3, 1e-9);
  const Grid g3 = parse_grid("-1e-3:1e-3:1e-3,-2e-3:2e-3:1e-3,5e-3:6e-3:5e-4");
  EXPECT_EQ(g3.shape(), (std::array<std::int64_t, 3>{3, 5, 3}));
}

TEST(Das, RfToIqRecoversToneEnvelopeAndButterworthResponse) {
  // A tone at fc + df through the zero-phase 5th-order Butterworth: |IQ| = A |H(df)|^2 with
  // |H(f)|^2 = 1 / (1 + (tan(pi f / fs) / tan(pi Wn / 2))^10) (bilinear-transform Butterworth).
  const double fs = 20e6, fc = 5e6, bw = 0.4, wn = bw * fc / fs;
  const std::int64_t n = 4000;
  for (double df : {0.0, 0.5e6, 1.0e6, 1.5e6}) {
    std::vector<float> rf(n);
    for (std::int64_t k = 0; k < n; ++k)
      rf[k] = static_cast<float>(0.7 * std::cos(2 * kPi * (fc + df) * (3e-6 + k / fs) + 0.3));
    const auto iq = rf_to_iq(rf.data(), 1, n, fs, fc, 3e-6, bw);
    const double h2 = 1.0 / (1.0 + std::pow(std::tan(kPi * df / fs) / std::tan(kPi * wn / 2), 10));
    for (std::int64_t k = 1000; k < 3000; k += 97)
      EXPECT_NEAR(std::abs(iq[k]), 0.7 * h2, 2e-3) << "df " << df << " k " << k;
    if (df == 0) {  // phase of a tone at fc: the cosine's phase 0.3 rad
      EXPECT_NEAR(std::arg(iq[2000]), 0.3, 1e-3);
    }
  }
  EXPECT_THROW(rf_to_iq(nullptr, 1, 10, 20e6, 5e6, 0, 9.0), Error);
}

TEST(Das, BmodeLevelsAndSlices) {
  const std::vector<float> env = {1.f, 0.5f, 0.01f, 0.f};
  const auto db = log_compress(env, 30);
  EXPECT_FLOAT_EQ(db[0], 0.f);
  EXPECT_NEAR(db[1], -6.0206, 1e-3);
  EXPECT_FLOAT_EQ(db[2], -30.f);
  EXPECT_FLOAT_EQ(db[3], -30.f);
  const auto lv = bmode_levels(env, 30);
  EXPECT_FLOAT_EQ(lv[0], 255.f);
  EXPECT_FLOAT_EQ(lv[1], std::floor(255 * (30 - 6.0206) / 30));
  EXPECT_THROW(log_compress(env, 0), Error);
  std::vector<float> vol(2 * 3 * 4);
  std::iota(vol.begin(), vol.end(), 0.f);
  std::int64_t r = 0, c = 0;
  const auto sy = slice(vol, {2, 3, 4}, SliceAxis::y, 1, &r, &c);
  EXPECT_EQ(r, 2);
  EXPECT_EQ(c, 4);
  EXPECT_EQ(sy[4], vol[(1 * 3 + 1) * 4 + 0]);
  const auto sx = slice(vol, {2, 3, 4}, SliceAxis::x, 2, &r, &c);
  EXPECT_EQ(r, 2);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(sx[3 + 1], vol[(1 * 3 + 1) * 4 + 2]);
  EXPECT_THROW(slice(vol, {2, 3, 4}, SliceAxis::z, 2, &r, &c), Error);
}

// Physics: a point scatterer imaged with one plane wave and a boxcar receive aperture of
// f-number F. Lateral -6 dB width of the receive sinc: 1.2067 lambda F; axial -6 dB width of the
// Gaussian pulse envelope over the two-way path: 2 ln 2 c / (pi B). I/Q: envelope |I/Q|; RF: the
// RF itself beamformed, envelope from its analytic signal along depth (dz = 5 um < lambda / 4).
void check_point_spread(Signal type, double fs) {
  sim::UltrasoundSimConfig s;
  s.probe = linear_array(128, 0.15e-3);
  s.transmits = {Transmit::plane(0)};
  const Vec3 target{1.0e-3, 0, 20e-3};
  s.scatterers = {target};
  s.signal = type;
  s.fc = 5e6;
  s.bandwidth = 0.6;
  s.fs = fs;
  s.c = 1540;
  s.t0 = 20e-6;
  s.nsamples = static_cast<std::int64_t>(400 * fs / 20e6);
  const auto data = sim::simulate_ultrasound(s);

  DasConfig c;
  c.signal = type;
  c.batch = 1;
  c.nsamples = s.nsamples;
  c.fs = s.fs;
  c.fc = s.fc;
  c.t0 = s.t0;
  c.c = s.c;
  c.probe = s.probe;
  c.transmits = s.transmits;
  c.fnumber = 2.0;
  const Grid g = parse_grid("-1e-3:3e-3:1e-5,19.6e-3:20.4e-3:5e-6");
  c.voxels = g.voxels();
  const auto out = run_cpu(c, data.rf, data.iq);
  const auto nx = g.x.size(), nz = g.z.size();
  std::vector<float> env;
  if (type == Signal::iq) {
    env = envelope(out.data(), static_cast<std::int64_t>(out.size()));
  } else {
    std::vector<float> re(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      re[i] = out[i].real();
      EXPECT_EQ(out[i].imag(), 0.f);
    }
    env = envelope_along_depth(re.data(), 1, nz, 1, nx);
  }
  const auto peak = std::max_element(env.begin(), env.end()) - env.begin();
  const auto iz = peak / nx, ix = peak % nx;
  const double lambda = s.c / s.fc;
  EXPECT_LE(std::abs(g.x.at(ix) - target[0]), lambda / 4);
  EXPECT_LE(std::abs(g.z.at(iz) - target[2]), lambda / 4);
  // -6 dB width along a line through the peak (linear interpolation of the crossings).
  std::vector<double> row(nx), col(nz);
  for (std::int64_t i = 0; i < nx; ++i)
    row[i] = env[iz * nx + i];
  for (std::int64_t i = 0; i < nz; ++i)
    col[i] = env[i * nx + ix];
  const double lateral = minus6db_width(row, ix) * g.x.step;
  const double axial = minus6db_width(col, iz) * g.z.step;
  const double lateral_theory = 1.2067 * lambda * 2.0;
  const double axial_theory = 2 * std::log(2.0) * s.c / (kPi * s.bandwidth * s.fc);
  std::printf(
      "PSF (%s): peak at (%.4f, %.4f) mm, -6 dB lateral %.4f mm (theory %.4f), axial %.4f mm "
      "(theory %.4f)\n",
      type == Signal::iq ? "I/Q" : "RF", g.x.at(ix) * 1e3, g.z.at(iz) * 1e3, lateral * 1e3,
      lateral_theory * 1e3, axial * 1e3, axial_theory * 1e3);
  EXPECT_NEAR(lateral / lateral_theory, 1.0, 0.10) << lateral << " vs " << lateral_theory;
  EXPECT_NEAR(axial / axial_theory, 1.0, 0.10) << axial << " vs " << axial_theory;
}

TEST(Das, PointSpreadFunctionMatchesTheory) {
  check_point_spread(Signal::iq, 20e6);
}

// RF beamformed directly needs several samples per period for its linear interpolation: 8 here.
TEST(Das, PointSpreadFunctionMatchesTheoryWhenBeamformingRf) {
  check_point_spread(Signal::rf, 40e6);
}

// The analytic signal along depth: a tone with a whole number of periods has a flat envelope;
// random columns (odd and even lengths) match the analytic signal written as a direct DFT.
TEST(Das, EnvelopeAlongDepthIsTheAnalyticSignal) {
  const std::int64_t nz = 64, ny = 2, nx = 3;
  std::vector<float> tone(static_cast<std::size_t>(nz * ny * nx));
  for (std::int64_t z = 0; z < nz; ++z)
    for (std::int64_t c = 0; c < ny * nx; ++c)
      tone[z * ny * nx + c] = static_cast<float>((1.0 + c) * std::cos(2 * kPi * 5 * z / nz + c));
  const auto et = envelope_along_depth(tone.data(), 1, nz, ny, nx);
  for (std::int64_t z = 0; z < nz; ++z)
    for (std::int64_t c = 0; c < ny * nx; ++c)
      EXPECT_NEAR(et[z * ny * nx + c], 1.0 + c, 1e-4 * (1.0 + c)) << z << " " << c;
  for (std::int64_t n : {37, 50}) {
    const std::int64_t B = 2, cols = 5;
    const auto x = wbtest::random_floats(static_cast<std::size_t>(B * n * cols), 9);
    const auto e = envelope_along_depth(x.data(), B, n, 1, cols);
    double err = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t c = 0; c < cols; ++c) {
        // X_k = sum_t x_t e^{-2 pi i k t / n}; analytic z_t = (1/n) sum_k h_k X_k e^{2 pi i k t/n}
        std::vector<std::complex<double>> X(static_cast<std::size_t>(n));
        for (std::int64_t k = 0; k < n; ++k)
          for (std::int64_t t = 0; t < n; ++t)
            X[k] += static_cast<double>(x[(b * n + t) * cols + c]) *
                    std::polar(1.0, -2 * kPi * k * t / n);
        for (std::int64_t t = 0; t < n; ++t) {
          std::complex<double> z = X[0];
          for (std::int64_t k = 1; 2 * k < n; ++k)
            z += 2.0 * X[k] * std::polar(1.0, 2 * kPi * k * t / n);
          if (n % 2 == 0) z += X[n / 2] * std::polar(1.0, kPi * t);
          err = std::max(err, std::abs(std::abs(z) / n - e[(b * n + t) * cols + c]));
        }
      }
    EXPECT_LT(err, 1e-5) << "n = " << n;
  }
  EXPECT_THROW(envelope_along_depth(tone.data(), 1, 1, ny, nx), Error);
  EXPECT_THROW(envelope_along_depth(tone.data(), 0, nz, ny, nx), Error);
}

// Real data: PyMUST's rotating-disk example. rf2iq's chain (down-mixing, zero-phase Butterworth
// of the recorded 15 % bandwidth), DAS of the IQ data with a receive f-number of 1.2 on the grid
// of bmode_PWI_disk.mat, 30 dB B-mode; Pearson correlation with PyMUST's image on every frame.
TEST(Das, RealPwiDiskBmodeCorrelatesWithPyMust) {
  WB_REQUIRE_DATA("ultrasound/PWI_disk.mat");
  WB_REQUIRE_DATA("ultrasound/bmode_PWI_disk.mat");
  if (!io::mat_supported()) GTEST_SKIP() << "no matio in this build";
  const auto d = io::read_mat(wbtest::data_file("ultrasound/PWI_disk.mat"));
  ASSERT_EQ(d.nsamples, 334);
  ASSERT_EQ(d.nrx, 128);
  ASSERT_EQ(d.ntx, 1);
  ASSERT_EQ(d.batch, 32);
  EXPECT_NEAR(d.fs, 6.6667e6, 1e2);
  EXPECT_NEAR(d.bandwidth, 0.15, 1e-12);
  const auto iq = rf_to_iq(d.rf.data(), d.batch * d.nrx, d.nsamples, d.fs, d.fc, d.t0, d.bandwidth);
  DasConfig c;
  c.signal = Signal::iq;
  c.batch = d.batch;
  c.nsamples = d.nsamples;
  c.fs = d.fs;
  c.fc = d.fc;
  c.t0 = d.t0;
  c.c = d.c;
  c.probe = d.probe;
  c.transmits = d.transmits;
  c.fnumber = 1.2;
  const Grid g = parse_grid("-12.5e-3:12.5e-3:1e-4,10e-3:35e-3:1e-4");
  c.voxels = g.voxels();
  const auto out = run_cpu(c, {}, iq);
  const auto lv = bmode_levels(envelope(out.data(), static_cast<std::int64_t>(out.size())), 30);
  std::vector<std::size_t> dims;
  const auto ref =
      io::read_mat_array(wbtest::data_file("ultrasound/bmode_PWI_disk.mat"), "I", &dims);
  ASSERT_EQ(dims, (std::vector<std::size_t>{251, 251, 32}));
  const std::int64_t nz = 251, nx = 251;
  double rmin = 1, rmax = -1;
  for (std::int64_t f = 0; f < 32; ++f) {
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    const double n = static_cast<double>(nz * nx);
    for (std::int64_t iz = 0; iz < nz; ++iz)
      for (std::int64_t ix = 0; ix < nx; ++ix) {
        const double a = lv[f * nz * nx + iz * nx + ix];
        const double b = ref[iz + nz * (ix + nx * f)];  // MATLAB [z][x][frame], column-major
        sa += a;
        sb += b;
        saa += a * a;
        sbb += b * b;
        sab += a * b;
      }
    const double r = (sab - sa * sb / n) / std::sqrt((saa - sa * sa / n) * (sbb - sb * sb / n));
    EXPECT_GE(r, 0.85) << "frame " << f;
    rmin = std::min(rmin, r);
    rmax = std::max(rmax, r);
  }
  std::printf("PWI_disk: Pearson r with PyMUST's B-mode over 32 frames: %.4f .. %.4f\n", rmin,
              rmax);
}

TEST(Das, UffRoundTripOfASimulatedMatrixProbe) {
  if (!io::uff_supported()) GTEST_SKIP() << "no HDF5 in this build";
  sim::UltrasoundSimConfig s;
  s.probe = matrix_array(6, 5, 0.3e-3, 0.35e-3);
  s.transmits = {Transmit::diverging({0, 0, -4e-3}), Transmit::plane(0.1, -0.05)};
  s.transmits[1].delay = 1e-7;
  s.scatterers = {{0.5e-3, -0.2e-3, 8e-3}, {-1e-3, 0.4e-3, 10e-3}};
  s.amplitudes = {1.0, -0.5};
  s.signal = Signal::iq;
  s.fs = 10e6;
  s.fc = 3e6;
  s.nsamples = 160;
  s.frames = 2;
  s.noise = 0.01;
  const auto d = sim::simulate_ultrasound(s);
  wbtest::TempDir t;
  io::write_uff(t.file("a.uff"), d, {{"test", 1}});
  const auto r = io::read_uff(t.file("a.uff"));
  EXPECT_EQ(r.signal, Signal::iq);
  EXPECT_EQ(r.batch, 2);
  EXPECT_EQ(r.nrx, 30);
  EXPECT_EQ(r.ntx, 2);
  EXPECT_EQ(r.nsamples, 160);
  EXPECT_DOUBLE_EQ(r.fs, d.fs);
  EXPECT_DOUBLE_EQ(r.fc, d.fc);
  ASSERT_EQ(r.iq.size(), d.iq.size());
  for (std::size_t i = 0; i < d.iq.size(); ++i)
    ASSERT_EQ(r.iq[i], d.iq[i]) << i;
  for (std::size_t m = 0; m < 30; ++m)
    for (int a = 0; a < 3; ++a)
      EXPECT_DOUBLE_EQ(r.probe.positions[m][a], d.probe.positions[m][a]);
  ASSERT_EQ(r.transmits.size(), 2u);
  EXPECT_EQ(r.transmits[0].kind, Transmit::Kind::diverging_wave);
  for (int a = 0; a < 3; ++a)
    EXPECT_NEAR(r.transmits[0].source[a], d.transmits[0].source[a], 1e-15);
  EXPECT_EQ(r.transmits[1].kind, Transmit::Kind::plane_wave);
  EXPECT_DOUBLE_EQ(r.transmits[1].azimuth, 0.1);
  EXPECT_DOUBLE_EQ(r.transmits[1].elevation, -0.05);
  EXPECT_DOUBLE_EQ(r.transmits[1].delay, 1e-7);
  EXPECT_THROW(io::read_uff(t.file("missing.uff")), Error);
}

TEST(Das, MatRoundTripKeepsTheTransmitTiming) {
  if (!io::mat_supported()) GTEST_SKIP() << "no matio in this build";
  sim::UltrasoundSimConfig s;
  s.probe = linear_array(48, 0.2e-3);
  s.transmits = {Transmit::plane(-0.2), Transmit::plane(0.0), Transmit::plane(0.25)};
  s.scatterers = {{0.3e-3, 0, 6e-3}};
  s.signal = Signal::rf;
  s.fs = 25e6;
  s.fc = 5e6;
  s.nsamples = 300;
  s.frames = 2;
  const auto d = sim::simulate_ultrasound(s);
  wbtest::TempDir t;
  io::write_mat(t.file("a.mat"), d, {{"test", 1}});
  const auto r = io::read_mat(t.file("a.mat"));
  ASSERT_EQ(r.rf.size(), d.rf.size());
  for (std::size_t i = 0; i < d.rf.size(); ++i)
    ASSERT_EQ(r.rf[i], d.rf[i]);
  ASSERT_EQ(r.ntx, 3);
  ASSERT_EQ(r.batch, 2);
  // The element-delay transmits read back reproduce the plane waves' tau_tx.
  DasConfig a;
  a.c = d.c;
  a.probe = d.probe;
  a.voxels = {{0.3e-3, 0, 6e-3}, {-1e-3, 0, 8e-3}};
  a.transmits = d.transmits;
  DasConfig b = a;
  b.transmits = r.transmits;
  const auto ta = transmit_delays(a), tb = transmit_delays(b);
  for (std::size_t i = 0; i < ta.size(); ++i)
    EXPECT_NEAR(ta[i], tb[i], 2e-9) << i;  // min over discrete elements: << 1/fs
}

#ifdef WB_TEST_MATIO
namespace {
// Writes a .mat with the given variables (double matrices) and, if with_param, a param struct.
void write_test_mat(const std::string& path, bool with_rf, bool with_param, std::size_t txdelay_len,
                    double nelements) {
  mat_t* mat = Mat_CreateVer(path.c_str(), nullptr, MAT_FT_MAT5);
  std::vector<double> rf(50 * 8 * 2, 1.0);
  if (with_rf) {
    std::size_t dims[3] = {50, 8, 2};
    matvar_t* v = Mat_VarCreate("RF", MAT_C_DOUBLE, MAT_T_DOUBLE, 3, dims, rf.data(), 0);
    Mat_VarWrite(mat, v, MAT_COMPRESSION_NONE);
    Mat_VarFree(v);
  }
  if (with_param) {
    const char* fields[] = {"fs", "fc", "pitch", "TXdelay", "Nelements"};
    std::size_t one[2] = {1, 1};
    matvar_t* p = Mat_VarCreateStruct("param", 2, one, fields, 5);
    const double fs = 20e6, fc = 5e6, pitch = 3e-4;
    auto scalar = [&](const double* v) {
      return Mat_VarCreate(nullptr, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, one, const_cast<double*>(v), 0);
    };
    Mat_VarSetStructFieldByName(p, "fs", 0, scalar(&fs));
    Mat_VarSetStructFieldByName(p, "fc", 0, scalar(&fc));
    Mat_VarSetStructFieldByName(p, "pitch", 0, scalar(&pitch));
    Mat_VarSetStructFieldByName(p, "Nelements", 0, scalar(&nelements));
    std::vector<double> txd(txdelay_len, 0.0);
    std::size_t tdims[2] = {1, txdelay_len};
    Mat_VarSetStructFieldByName(
        p, "TXdelay", 0,
        Mat_VarCreate(nullptr, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, tdims, txd.data(), 0));
    Mat_VarWrite(mat, p, MAT_COMPRESSION_NONE);
    Mat_VarFree(p);
  }
  Mat_Close(mat);
}

void expect_format_error(const std::string& path, const std::string& words) {
  try {
    io::read_mat(path);
    ADD_FAILURE() << path << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::format) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Das, BadMatFilesGiveClearErrors) {
  wbtest::TempDir t;
  write_test_mat(t.file("ok.mat"), true, true, 8, 8);
  EXPECT_EQ(io::read_mat(t.file("ok.mat")).batch, 2);
  write_test_mat(t.file("norf.mat"), false, true, 8, 8);
  expect_format_error(t.file("norf.mat"), "no RF or IQ");
  write_test_mat(t.file("noparam.mat"), true, false, 8, 8);
  expect_format_error(t.file("noparam.mat"), "no param");
  write_test_mat(t.file("txd.mat"), true, true, 5, 8);
  expect_format_error(t.file("txd.mat"), "TXdelay");
  write_test_mat(t.file("nel.mat"), true, true, 8, 16);
  expect_format_error(t.file("nel.mat"), "Nelements");
  // The CLI: exit 1, one clear line, and no output file.
  for (const char* f : {"norf.mat", "noparam.mat", "txd.mat"}) {
    const auto r =
        wbtest::run_cli("das '" + t.file(f) + "' --grid -2e-3:2e-3:1e-4,1e-3:5e-3:1e-4 --out '" +
                        t.file("out.png") + "'");
    EXPECT_EQ(r.exit_code, 1) << f << ": " << r.err;
    EXPECT_NE(r.err.find("warpbeam: error:"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(t.file("out.png")));
  }
}
#endif

TEST(Das, CliSimulateBeamformAndBadOptions) {
  if (!io::mat_supported()) GTEST_SKIP() << "no matio in this build";
  wbtest::TempDir t;
  auto r = wbtest::run_cli(
      "simulate ultrasound --probe linear --elements 64 --pitch 0.2e-3 "
      "--points 0,0,10e-3 --speckle 200 --samples 800 --frames 2 --fs 20e6 "
      "--angles -5,0,5 --out '" +
      t.file("sim.mat") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = wbtest::run_cli("das '" + t.file("sim.mat") +
                      "' --grid -3e-3:3e-3:5e-5,7e-3:13e-3:5e-5 --fnumber 1.5 --window hann "
                      "--out '" +
                      t.file("b.png") + "' --npy '" + t.file("env.npy") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(t.file("b.png")));
  EXPECT_TRUE(std::filesystem::exists(t.file("env.npy")));
  // The RF beamformed directly (dz = 20 um < lambda / 4 = 77 um), envelope along depth.
  r = wbtest::run_cli("das '" + t.file("sim.mat") +
                      "' --beamform rf --grid -3e-3:3e-3:5e-5,7e-3:13e-3:2e-5 --fnumber 1.5 "
                      "--out '" +
                      t.file("rf.npy") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(t.file("rf.npy")), 128u + 2 * 301 * 121 * 4);
  EXPECT_EQ(r.err.find("lambda"), std::string::npos) << r.err;
  // A depth step that undersamples the two-way carrier: beamformed, with a warning.
  r = wbtest::run_cli("das '" + t.file("sim.mat") +
                      "' --beamform rf --grid -3e-3:3e-3:1e-4,7e-3:13e-3:1e-4 --out '" +
                      t.file("rf_coarse.npy") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("lambda / 4"), std::string::npos) << r.err;
  // Bad option values: exit 2, no output.
  for (const std::string bad :
       {"--fnumber 0", "--fnumber -1", "--grid 1e-3:0:1e-4,7e-3:13e-3:5e-5",
        "--grid 0:1e-3:0,7e-3:13e-3:5e-5", "--dynamic-range 0", "--beamform envelope"}) {
    std::string args = "das '" + t.file("sim.mat") + "' --out '" + t.file("bad.png") + "' ";
    if (bad.rfind("--grid", 0) != 0) args += "--grid -3e-3:3e-3:1e-4,7e-3:13e-3:1e-4 ";
    r = wbtest::run_cli(args + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(t.file("bad.png"))) << bad;
  }
  // A second product in a folder that does not exist: found before beamforming (exit 1), and
  // the first product is not written either.
  r = wbtest::run_cli("das '" + t.file("sim.mat") +
                      "' --grid -3e-3:3e-3:1e-4,7e-3:13e-3:1e-4 --out '" + t.file("bad.png") +
                      "' --npy '" + t.file("nodir/env.npy") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("nodir"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(t.file("bad.png")));
  if (io::uff_supported()) {  // a matrix probe, diverging waves, IQ in UFF, a volume out
    r = wbtest::run_cli(
        "simulate ultrasound --probe matrix --elements 8 --pitch 0.3e-3 --wave "
        "diverging --sources '0,0,-5e-3;1e-3,0,-5e-3' --points 0,0,6e-3 --iq "
        "--fs 10e6 --samples 200 --out '" +
        t.file("vol.uff") + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = wbtest::run_cli("das '" + t.file("vol.uff") +
                        "' --grid -1e-3:1e-3:2e-4,-1e-3:1e-3:2e-4,5e-3:7e-3:1e-4 --out '" +
                        t.file("vol.h5") + "' --npy '" + t.file("vol.npy") + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(std::filesystem::exists(t.file("vol.h5")));
    EXPECT_EQ(std::filesystem::file_size(t.file("vol.npy")), 128u + 11 * 11 * 21 * 4);
    r = wbtest::run_cli("das '" + t.file("vol.uff") +
                        "' --grid -1e-3:1e-3:2e-4,-1e-3:1e-3:2e-4,5e-3:7e-3:1e-4 --slice x:5 "
                        "--out '" +
                        t.file("vol.png") + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(std::filesystem::exists(t.file("vol.png")));
    // I/Q data cannot be beamformed as RF: a usage error, no output.
    r = wbtest::run_cli("das '" + t.file("vol.uff") +
                        "' --beamform rf --grid -1e-3:1e-3:2e-4,-1e-3:1e-3:2e-4,5e-3:7e-3:1e-5 "
                        "--out '" +
                        t.file("volrf.npy") + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("I/Q"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(t.file("volrf.npy")));
  }
  r = wbtest::run_cli("das '" + t.file("missing.mat") +
                      "' --grid -3e-3:3e-3:1e-4,7e-3:13e-3:1e-4 --out '" + t.file("bad.png") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // bench das --rx-split: only 1, 2, 4 or 8, refused before any work or record.
  for (const char* bad : {"3", "0", "-4", "four"}) {
    r = wbtest::run_cli(std::string("bench das --config U1 --algorithm tcw --storage fp16 ") +
                        "--rx-split " + bad + " --json '" + t.file("split.json") + "'");
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--rx-split"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(t.file("split.json"))) << bad;
  }
}
