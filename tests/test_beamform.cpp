// Beamformer, CPU path: against a naive loop written here, against the physics of a plane wave
// (the array factor computed here, independently of the library), weights from geometry and
// ERFA, conversion tables, parsing and bad inputs.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <numbers>

#include "beamform/executor.hpp"
#include "beamform/int8.hpp"
#include "beamform_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/sample_type.hpp"

using namespace warpbeam;
using namespace warpbeam::beamform;
using namespace bftest;

namespace {
constexpr double kPi = std::numbers::pi;
constexpr double kDeg = kPi / 180;

template <class F>
void expect_error(F&& f, ErrorCategory cat, const std::string& needle) {
  try {
    f();
    FAIL() << "no error (expected one mentioning '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), cat) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(BeamformConfig, ValidateNamesTheField) {
  BeamformConfig c = small_config(SampleType::ci4, 1);
  EXPECT_NO_THROW(c.validate());
  auto bad = c;
  bad.nantennas = 0;
  expect_error([&] { bad.validate(); }, ErrorCategory::invalid_argument, "nantennas");
  bad = c;
  bad.npol = 3;
  expect_error([&] { bad.validate(); }, ErrorCategory::invalid_argument, "npol");
  bad = c;
  bad.integration = 7;
  expect_error([&] { bad.validate(); }, ErrorCategory::invalid_argument, "integration");
  bad = c;
  bad.output = OutputKind::voltage;
  bad.integration = 2;
  expect_error([&] { bad.validate(); }, ErrorCategory::invalid_argument, "voltage");
  bad = c;
  bad.levels = {1, 2, 3};
  expect_error([&] { bad.validate(); }, ErrorCategory::invalid_argument, "levels");
  // The tensor-core, cuBLAS, register-stream and int8 kernels exist on CUDA only.
  for (auto a : {Algorithm::tensor_core, Algorithm::cublas_fp16, Algorithm::register_stream,
                 Algorithm::tensor_int8, Algorithm::tensor_int8_stream}) {
    bad = c;
    bad.algorithm = a;
    expect_error([&] { BeamformPlan(bad, Backend::cpu); }, ErrorCategory::unsupported, "CUDA");
  }
}

TEST(BeamformConfig, AlgorithmNamesAndTunings) {
  for (auto a : {Algorithm::automatic, Algorithm::register_tiled, Algorithm::register_stream,
                 Algorithm::tensor_core, Algorithm::cublas_fp16, Algorithm::tensor_int8,
                 Algorithm::tensor_int8_stream})
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  EXPECT_EQ(to_string(Algorithm::tensor_int8), "tensor-int8");
  EXPECT_EQ(to_string(Algorithm::tensor_int8_stream), "tensor-int8-stream");
  EXPECT_TRUE(uses_int8(Algorithm::tensor_int8));
  EXPECT_TRUE(uses_int8(Algorithm::tensor_int8_stream));
  EXPECT_FALSE(uses_fp16(Algorithm::tensor_int8_stream));
  EXPECT_FALSE(uses_int8(Algorithm::tensor_core));
  EXPECT_FALSE(uses_fp16(Algorithm::tensor_int8));
  expect_error([] { parse_algorithm("fastest"); }, ErrorCategory::invalid_argument, "fastest");
  EXPECT_TRUE(uses_fp16(Algorithm::cublas_fp16));
  EXPECT_TRUE(uses_fp16(Algorithm::tensor_core));
  EXPECT_FALSE(uses_fp16(Algorithm::register_stream));
  // Defaults, and the tunings that are not compiled.
  const CudaTuning s = beamform::detail::resolve_tuning(Algorithm::register_stream, {});
  EXPECT_EQ(s.beams_per_thread, 16);  // the B1 sweep winner
  EXPECT_EQ(s.samples_per_thread, 1);
  EXPECT_EQ(s.threads_per_block, 256);
  expect_error(
      [] {
        beamform::detail::resolve_tuning(Algorithm::register_stream, {32, 2, 0, 0, 0});
      },
      ErrorCategory::invalid_argument, "32x1");
  expect_error(
      [] {
        beamform::detail::resolve_tuning(Algorithm::register_stream, {16, 1, 128, 0, 0});
      },
      ErrorCategory::invalid_argument, "256");
  EXPECT_EQ(beamform::detail::resolve_tuning(Algorithm::cublas_fp16, {}).gemm_output_bits, 16);
  expect_error(
      [] {
        beamform::detail::resolve_tuning(Algorithm::cublas_fp16, {0, 0, 0, 8, 0});
      },
      ErrorCategory::invalid_argument, "gemm_output_bits");
  const CudaTuning t = beamform::detail::resolve_tuning(Algorithm::register_tiled, {});
  EXPECT_EQ(t.beams_per_thread, 16);
  expect_error(
      [] {
        beamform::detail::resolve_tuning(Algorithm::register_tiled, {32, 4, 256, 0, 0});
      },
      ErrorCategory::invalid_argument, "256 accumulator");
  EXPECT_EQ(beamform::detail::resolve_tuning(Algorithm::tensor_int8, {}).threads_per_block, 256);
  EXPECT_EQ(
      beamform::detail::resolve_tuning(Algorithm::tensor_int8, {0, 0, 128, 0, 0}).threads_per_block,
      128);
  expect_error(
      [] {
        beamform::detail::resolve_tuning(Algorithm::tensor_int8, {0, 0, 512, 0, 0});
      },
      ErrorCategory::invalid_argument, "tensor-int8 tuning.threads_per_block = 512");
}

TEST(BeamformConfig, ShapesAndFlops) {
  BeamformConfig c;
  c.nchans = 1024;
  c.nantennas = 32;
  c.npol = 1;
  c.nbeams = 32;
  c.nsamples = 8192;
  // DESIGN.md's B1: 68.7 GFLOP per buffer at 8 real flops per complex multiply-accumulate.
  EXPECT_NEAR(c.flops() / 1e9, 68.72, 0.01);
  EXPECT_EQ(c.row_bytes(), 32);
  c.npol = 2;
  c.sum_pols = true;
  c.integration = 4;
  EXPECT_EQ(c.nout_pols(), 1);
  EXPECT_EQ(c.nsamples_out(), 2048);
  EXPECT_EQ((c.output_shape()), (std::array<std::int64_t, 4>{32, 1, 2048, 1024}));
}

TEST(BeamformVoltages, ConversionTables) {
  // ci4 two's complement: 0x7F -> (7, -1), 0x80 -> (-8, 0), 0x9C -> (-7, -4).
  const auto t = conversion_table(SampleType::ci4, Encoding::twos_complement);
  EXPECT_EQ(t[2 * 0x7F], 7);
  EXPECT_EQ(t[2 * 0x7F + 1], -1);
  EXPECT_EQ(t[2 * 0x80], -8);
  EXPECT_EQ(t[2 * 0x80 + 1], 0);
  EXPECT_EQ(t[2 * 0x9C], -7);
  EXPECT_EQ(t[2 * 0x9C + 1], -4);
  const auto ob = conversion_table(SampleType::ci4, Encoding::offset_binary);
  EXPECT_EQ(ob[2 * 0x08], -8);     // high nibble 0 -> -8
  EXPECT_EQ(ob[2 * 0x08 + 1], 0);  // low nibble 8 -> 0
  EXPECT_EQ(code_value(0x0, 4, Encoding::offset_binary), -8);
  EXPECT_EQ(code_value(0xF, 4, Encoding::offset_binary), 7);
  EXPECT_EQ(code_value(0x9, 4, Encoding::sign_magnitude), -1);
  EXPECT_EQ(code_value(0x81, 8, Encoding::sign_magnitude), -1);
  EXPECT_EQ(code_value(0x81, 8, Encoding::twos_complement), -127);
  const auto c8 = conversion_table(SampleType::ci8, Encoding::twos_complement);
  EXPECT_EQ(c8[2 * 0xFF], -1);
  EXPECT_EQ(c8[2 * 0x7F], 127);
  std::vector<float> levels(16);
  for (int i = 0; i < 16; ++i)
    levels[static_cast<std::size_t>(i)] = 0.5f * i - 3.75f;  // a non-uniform-capable table
  const auto lv = conversion_table(SampleType::ci4, Encoding::twos_complement, levels);
  EXPECT_EQ(lv[2 * 0x3A], levels[3]);
  EXPECT_EQ(lv[2 * 0x3A + 1], levels[10]);
  EXPECT_THROW(conversion_table(SampleType::cf32, Encoding::twos_complement), Error);
}

TEST(BeamformVoltages, HalfConversionRoundTrips) {
  for (float v : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 1e-9f, 3.14159f}) {
    const float r = half_to_float(float_to_half(v));
    EXPECT_NEAR(r, v, std::abs(v) * 1e-3 + 6e-8) << v;
  }
  EXPECT_EQ(float_to_half(1.f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.f), 0xC000);
  EXPECT_EQ(float_to_half(65504.f), 0x7BFF);
  EXPECT_EQ(float_to_half(1e6f), 0x7C00);
  EXPECT_TRUE(std::isinf(half_to_float(0x7C00)));
}

// The CPU executor against the naive triple loop (beamform_test_util.hpp), every sample type,
// odd antenna and beam counts, a mask, dual pol with and without the pol sum, integration and
// voltage output.
TEST(BeamformCpu, MatchesNaiveLoop) {
  for (auto type : {SampleType::ci4, SampleType::ci8, SampleType::cf16, SampleType::cf32})
    for (int npol : {1, 2})
      for (int variant = 0; variant < 3; ++variant) {
        BeamformConfig c = small_config(type, npol);
        if (variant == 1) {
          c.integration = 4;
          c.sum_pols = npol == 2;
        } else if (variant == 2) {
          c.output = OutputKind::voltage;
        }
        const auto in = random_input(c, 11 + static_cast<int>(type) * 3 + npol);
        auto w = random_weights(c, 5, /*mask_every=*/4);
        BeamformPlan plan(c, Backend::cpu);
        plan.set_weights(weights_view(c, w));
        std::vector<float> out(static_cast<std::size_t>(output_floats(c)), NAN);
        plan.execute(input_view(c, in), output_view(c, out));
        const auto ref = naive_beamform(c, in, w);
        const auto r = compare(out, ref, c);
        EXPECT_LE(r.max_err, 1e-5 * r.max_ref)
            << to_string(type) << " npol " << npol << " variant " << variant << ": " << r.first;
        EXPECT_GT(r.max_ref, 0);
      }
}

TEST(BeamformCpu, CustomLevelsAndOffsetBinary) {
  for (int k = 0; k < 2; ++k) {
    BeamformConfig c = small_config(SampleType::ci4, 1);
    if (k == 0) {
      c.encoding = Encoding::offset_binary;
    } else {
      c.levels.resize(16);
      for (int i = 0; i < 16; ++i)
        c.levels[static_cast<std::size_t>(i)] = std::pow(1.3f, static_cast<float>(i)) - 4;
    }
    const auto in = random_input(c, 3);
    auto w = random_weights(c, 4, 0);
    BeamformPlan plan(c, Backend::cpu);
    plan.set_weights(weights_view(c, w));
    std::vector<float> out(static_cast<std::size_t>(output_floats(c)));
    plan.execute(input_view(c, in), output_view(c, out));
    const auto r = compare(out, naive_beamform(c, in, w), c);
    EXPECT_LE(r.max_err, 1e-5 * r.max_ref) << r.first;
  }
}

// The AVX2 executor (src/beamform/cpu.cpp) against the naive double-precision loop on the shapes
// where its blocking has edges: beams in passes of 16 with a remainder of one vector (37, 40) or
// a padded one (11), a single beam, channels in groups of 16 with a partial group, samples in
// blocks of 64 with a partial block and an odd tail (the kernel takes samples in pairs), an
// integration that does not divide the block (3, blocks of 66) or spans it (128), both pols with
// and without the pol sum, voltage output, 1 and 3 threads.
TEST(BeamformCpu, OptimisedPathMatchesNaiveLoopOnEdgeShapes) {
  struct Shape {
    int nchans, nant, nbeams;
    std::int64_t nsamples;
    int integration;
  };
  const Shape shapes[] = {{33, 7, 37, 73, 1},
                          {16, 5, 40, 130, 1},
                          {17, 3, 1, 64, 1},
                          {19, 6, 11, 201, 3},
                          {5, 4, 9, 256, 128}};
  int seed = 100;
  for (const Shape& sh : shapes)
    for (auto type : {SampleType::ci4, SampleType::ci8})
      for (int npol : {1, 2})
        for (int variant = 0; variant < 3; ++variant) {
          BeamformConfig c = small_config(type, npol, sh.nchans, sh.nant, sh.nbeams, sh.nsamples);
          c.integration = sh.integration;
          c.sum_pols = npol == 2 && variant == 1;
          if (variant == 2) {
            if (sh.integration != 1) continue;
            c.output = OutputKind::voltage;
          }
          c.threads = 1 + 2 * (seed % 2);
          const auto in = random_input(c, static_cast<std::uint32_t>(++seed));
          const auto w = random_weights(c, static_cast<std::uint32_t>(seed), 5);
          BeamformPlan plan(c, Backend::cpu);
          plan.set_weights(weights_view(c, w));
          std::vector<float> out(static_cast<std::size_t>(output_floats(c)), NAN);
          plan.execute(input_view(c, in), output_view(c, out));
          const auto r = compare(out, naive_beamform(c, in, w), c);
          EXPECT_LE(r.max_err, 1e-5 * r.max_ref)
              << to_string(type) << " " << sh.nchans << " ch, " << sh.nant << " ant, " << sh.nbeams
              << " beams, " << sh.nsamples << " samples, integration " << sh.integration
              << ", npol " << npol << " variant " << variant << ": " << r.first;
          EXPECT_GT(r.max_ref, 0);
        }
}

// Outputs above 32 MiB are written with non-temporal stores in whole cache lines, the channel
// groups shifted to the output's alignment. At every offset of the output in a line (and an
// offset that rules the non-temporal path out for voltages: 4 bytes), every output value equals
// the naive loop's and nothing around the output array is written.
TEST(BeamformCpu, LargeOutputsAtAnyAlignmentMatchNaiveLoop) {
  for (const OutputKind kind : {OutputKind::power, OutputKind::voltage}) {
    BeamformConfig c = small_config(SampleType::ci4, 1, 48, 3, 18, 0);
    c.output = kind;
    // > 32 MiB of output: 18 beams x 48 channels x nsamples floats (x2 for voltage).
    c.nsamples = kind == OutputKind::power ? 9800 : 4900;
    const auto in = random_input(c, 77);
    const auto w = random_weights(c, 78, 0);
    const auto ref = naive_beamform(c, in, w);
    BeamformPlan plan(c, Backend::cpu);
    plan.set_weights(weights_view(c, w));
    const std::size_t n = static_cast<std::size_t>(output_floats(c));
    ASSERT_GT(n * sizeof(float), std::size_t{32} << 20);
    // A 64-byte aligned buffer with 32 floats of margin on each side.
    std::vector<float> buf(n + 96, NAN);
    const std::size_t base =
        (64 - reinterpret_cast<std::uintptr_t>(buf.data()) % 64) % 64 / sizeof(float) + 32;
    for (std::size_t offset : {0, 1, 4, 15}) {
      std::fill(buf.begin(), buf.end(), NAN);
      float* o = buf.data() + base + offset;
      plan.execute(input_view(c, in), View<float, 4>(o, c.output_shape()));
      const std::vector<float> got(o, o + n);
      const auto r = compare(got, ref, c);
      EXPECT_LE(r.max_err, 1e-5 * r.max_ref) << (kind == OutputKind::power ? "power" : "voltage")
                                             << ", offset " << offset << ": " << r.first;
      for (std::size_t i = 0; i < base + offset; ++i)
        ASSERT_TRUE(std::isnan(buf[i])) << "written before the output, offset " << offset;
      for (std::size_t i = base + offset + n; i < buf.size(); ++i)
        ASSERT_TRUE(std::isnan(buf[i])) << "written after the output, offset " << offset;
    }
  }
}

TEST(BeamformCpu, RejectsWrongShapes) {
  BeamformConfig c = small_config(SampleType::ci8, 2);
  BeamformPlan plan(c, Backend::cpu);
  std::vector<std::uint8_t> in(static_cast<std::size_t>(c.nchans * c.nsamples * c.row_bytes()));
  std::vector<float> out(static_cast<std::size_t>(output_floats(c)));
  View<const std::uint8_t, 3> bad_in(in.data(), {c.nchans, c.nsamples - 1, c.row_bytes()});
  EXPECT_THROW(plan.execute(bad_in, output_view(c, out)), Error);
  View<float, 4> dev_out(out.data(), c.output_shape(), Space::device);
  EXPECT_THROW(plan.execute(input_view(c, in), dev_out), Error);
  std::vector<std::complex<float>> w(10);
  EXPECT_THROW(plan.set_weights(View<const std::complex<float>, 4>(w.data(), {1, 1, 1, 10})),
               Error);
}

// Physics: a plane wave from a known direction; the beams of a grid around it. The power of each
// beam must follow the array factor |sum_a exp(2 pi i f r_a.(s0 - s_b)/c)|^2 computed here, and
// the brightest beam is the one pointing at the source.
TEST(BeamformCpu, PlaneWaveFollowsArrayFactor) {
  const ArrayGeometry array = best2_geometry();
  const int na = array.nantennas();
  const int nchans = 4;
  const auto freqs = best2_frequencies_hz(1024);
  std::vector<double> f = {freqs[0], freqs[341], freqs[682], freqs[1023]};
  const double src_az = 200 * kDeg, src_el = 62 * kDeg;
  auto unit = [](double az, double el) {
    return std::array<double, 3>{std::sin(az) * std::cos(el), std::cos(az) * std::cos(el),
                                 std::sin(el)};
  };
  const auto s0 = unit(src_az, src_el);
  // 7 x 7 beams 1 degree apart around the source (the synthesised beam is a few degrees wide).
  std::vector<Pointing> beams;
  int src_beam = -1;
  for (int j = -3; j <= 3; ++j)
    for (int i = -3; i <= 3; ++i) {
      if (i == 0 && j == 0) src_beam = static_cast<int>(beams.size());
      beams.push_back({Frame::azel, src_az + i * 1.0 * kDeg / std::cos(src_el), src_el + j * kDeg});
    }
  BeamformConfig c;
  c.nchans = nchans;
  c.nantennas = na;
  c.npol = 1;
  c.nbeams = static_cast<int>(beams.size());
  c.nsamples = 256;
  c.sample_type = SampleType::cf32;
  c.integration = 256;
  // Signal: unit-amplitude random-phase samples s(t); antenna a sees s(t) exp(+2 pi i f tau_a).
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ph(0, 2 * kPi);
  std::vector<std::uint8_t> in(static_cast<std::size_t>(nchans * c.nsamples * c.row_bytes()));
  for (int ch = 0; ch < nchans; ++ch)
    for (std::int64_t t = 0; t < c.nsamples; ++t) {
      const std::complex<double> s = std::polar(1.0, ph(rng));
      for (int a = 0; a < na; ++a) {
        const auto& r = array.enu_m[static_cast<std::size_t>(a)];
        const double tau = (r[0] * s0[0] + r[1] * s0[1] + r[2] * s0[2]) / 299792458.0;
        const std::complex<float> x(
            s * std::polar(1.0, 2 * kPi * f[static_cast<std::size_t>(ch)] * tau));
        std::memcpy(in.data() + ((ch * c.nsamples + t) * na + a) * 8, &x, 8);
      }
    }
  const auto w = compute_weights(array, beams, f, 1);
  BeamformPlan plan(c, Backend::cpu);
  plan.set_weights(View<const std::complex<float>, 4>(w.data(), {nchans, 1, c.nbeams, na}));
  std::vector<float> out(static_cast<std::size_t>(output_floats(c)));
  plan.execute(input_view(c, in), output_view(c, out));
  for (int ch = 0; ch < nchans; ++ch) {
    int best = -1;
    float best_p = -1;
    for (int b = 0; b < c.nbeams; ++b) {
      const float pw = out[static_cast<std::size_t>(b * nchans + ch)];  // [beam][1][1][chan]
      const auto& bp = beams[static_cast<std::size_t>(b)];
      const auto sb = unit(bp.a, bp.b);
      std::complex<double> af = 0;
      for (int a = 0; a < na; ++a) {
        const auto& r = array.enu_m[static_cast<std::size_t>(a)];
        const double d = r[0] * (s0[0] - sb[0]) + r[1] * (s0[1] - sb[1]) + r[2] * (s0[2] - sb[2]);
        af += std::polar(1.0, 2 * kPi * f[static_cast<std::size_t>(ch)] * d / 299792458.0);
      }
      const double expected = std::norm(af) * static_cast<double>(c.nsamples);
      EXPECT_NEAR(pw, expected, 1e-4 * na * na * c.nsamples) << "beam " << b << " chan " << ch;
      if (pw > best_p) {
        best_p = pw;
        best = b;
      }
    }
    EXPECT_EQ(best, src_beam) << "chan " << ch;
    EXPECT_NEAR(best_p, static_cast<double>(na) * na * c.nsamples, 1e-3 * na * na * c.nsamples);
  }
}

TEST(BeamformWeights, GeometryGainsMaskAndHorizon) {
  ArrayGeometry g = best2_geometry();
  ASSERT_EQ(g.nantennas(), 32);
  EXPECT_NEAR(g.enu_m[31][1] - g.enu_m[0][1], 70.0, 1e-9);  // 8 cylinders 10 m apart
  const auto f = best2_frequencies_hz();
  ASSERT_EQ(f.size(), 1024u);
  EXPECT_NEAR(f[1] - f[0], 19531.25, 1e-6);
  EXPECT_NEAR((f[511] + f[512]) / 2, 408e6, 1e-3);
  // Zenith weights are the gains; masked antennas get zero.
  g.gains.assign(64, std::complex<float>(1, 0));
  g.gains[2 * 5 + 1] = std::complex<float>(0, 2);
  g.mask.assign(32, 1);
  g.mask[7] = 0;
  const auto w = compute_weights(g, {{Frame::azel, 0, kPi / 2}}, {408e6}, 2);
  EXPECT_NEAR(std::abs(w[0 * 32 + 0] - std::complex<float>(1, 0)), 0, 1e-6);
  EXPECT_NEAR(std::abs(w[1 * 32 + 5] - std::complex<float>(0, 2)), 0, 1e-6);  // pol 1, ant 5
  EXPECT_EQ(w[7], std::complex<float>(0, 0));
  EXPECT_EQ(w[32 + 7], std::complex<float>(0, 0));
  // Below the horizon: a clear error naming the beam.
  expect_error(
      [&] {
        compute_weights(g, {{Frame::azel, 0, 0.5}, {Frame::azel, 0, -0.1}}, f, 2);
      },
      ErrorCategory::invalid_argument, "beam 1");
  expect_error(
      [&] {
        compute_weights(g, {{Frame::direction_cosines, 0.8, 0.7}}, f, 2);
      },
      ErrorCategory::invalid_argument, "horizon");
  // Every antenna masked: refused, not formed as zero beams.
  g.mask.assign(32, 0);
  expect_error(
      [&] {
        compute_weights(g, {{Frame::azel, 0, 1}}, f, 2);
      },
      ErrorCategory::invalid_argument, "no antenna is left");
  g.mask.resize(3);
  expect_error(
      [&] {
        compute_weights(g, {{Frame::azel, 0, 1}}, f, 2);
      },
      ErrorCategory::invalid_argument, "mask");
}

TEST(BeamformWeights, PhaseSignSteersTowardsTheSource) {
  // Two antennas 1 m apart east-west; a source due east at elevation 0 + (az 90, el 30 deg).
  ArrayGeometry g;
  g.enu_m = {{0, 0, 0}, {1, 0, 0}};
  const double f = 150e6, el = 30 * kDeg;
  const auto w = compute_weights(g, {{Frame::azel, 90 * kDeg, el}}, {f}, 1);
  const double tau = std::cos(el) / 299792458.0;  // antenna 1 sees the wave earlier by tau
  EXPECT_NEAR(std::arg(w[1]), std::remainder(-2 * kPi * f * tau, 2 * kPi), 1e-5);
  const auto s = direction_enu({Frame::azel, 90 * kDeg, el}, g.site, 0);
  EXPECT_NEAR(std::abs(array_response(g, w.data(), f, s)), 2.0, 1e-6);
}

TEST(BeamformWeights, TrackingBeamAtTheZenith) {
  try {
    direction_enu({Frame::radec, 0, 0}, {}, 51544.5);
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::unsupported) GTEST_SKIP() << e.what();
  }
  // At J2000.0 (MJD 51544.5) ICRS coordinates are the mean coordinates of date up to nutation
  // and aberration (< 1 arcmin): a source at RA = local mean sidereal time, Dec = latitude is
  // at the zenith. GMST from the IAU 1982 linear approximation (Meeus eq. 12.4), computed here.
  const ArrayGeometry g = best2_geometry();
  for (double mjd : {51544.5, 51544.75}) {
    const double gmst_deg = 280.46061837 + 360.98564736629 * (mjd - 51544.5);
    const double lst = std::fmod(gmst_deg * kDeg + g.site.longitude_rad, 2 * kPi);
    const auto s = direction_enu({Frame::radec, lst, g.site.latitude_rad}, g.site, mjd);
    EXPECT_GT(std::asin(s[2]) / kDeg, 89.9) << "MJD " << mjd;
  }
  // A tracking beam's weights change with time; a fixed az/el beam's do not.
  const std::vector<Pointing> track = {{Frame::radec, 1.0, 0.6}};
  const double mjd = 51544.5 + 1.0 / 24 * 3;
  const auto s1 = direction_enu(track[0], g.site, mjd);
  ASSERT_GT(s1[2], 0) << "pick a time when the source is up";
  const auto w1 = compute_weights(g, track, {408e6}, 1, mjd);
  const auto w2 = compute_weights(g, track, {408e6}, 1, mjd + 60.0 / 86400);
  EXPECT_GT(std::abs(w1[31] - w2[31]), 1e-4);
  EXPECT_TRUE(is_tracking(track));
  // The source sets (Dec 34 deg is not circumpolar at latitude 44.5): 0.72 days later it is near
  // lower culmination, about 11 degrees below the horizon.
  expect_error([&] { compute_weights(g, track, {408e6}, 1, mjd + 0.72); },
               ErrorCategory::invalid_argument, "horizon");
}

TEST(BeamformWeights, BeamListsAndGrids) {
  const auto b = parse_beam_list(
      "# comment\nazel 180 60 south\nradec 12:30:00 -10:30:00 vir\nlm 0.1 -0.2\n\n");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].frame, Frame::azel);
  EXPECT_NEAR(b[0].a, kPi, 1e-12);
  EXPECT_EQ(b[0].name, "south");
  EXPECT_EQ(b[1].frame, Frame::radec);
  EXPECT_NEAR(b[1].a / kDeg, 187.5, 1e-9);
  EXPECT_NEAR(b[1].b / kDeg, -10.5, 1e-9);
  EXPECT_EQ(b[2].frame, Frame::direction_cosines);
  EXPECT_NEAR(b[2].b, -0.2, 1e-12);
  expect_error([] { parse_beam_list("azel 10\n"); }, ErrorCategory::invalid_argument, "line 1");
  expect_error([] { parse_beam_list("galactic 10 20\n"); }, ErrorCategory::invalid_argument,
               "galactic");
  expect_error([] { parse_beam_list("azel ten 20\n"); }, ErrorCategory::invalid_argument, "ten");
  const auto g = parse_beam_grid("azel:170:190:5:70:80:3");
  ASSERT_EQ(g.size(), 15u);
  EXPECT_NEAR(g[1].a / kDeg, 175, 1e-9);
  EXPECT_NEAR(g[14].b / kDeg, 80, 1e-9);
  expect_error([] { parse_beam_grid("azel:1:2:0:3:4:1"); }, ErrorCategory::invalid_argument,
               "counts");
  expect_error([] { parse_beam_grid("azel:1:2"); }, ErrorCategory::invalid_argument, "--grid");
}

// ---- int8 weights (the tensor-int8 CUDA variant's arithmetic, emulated on the host) ----

namespace {
// BEST-2 weights for `nbeams` beams on a grid around the zenith at `nchans` channels spread over
// the band (the B1 benchmark's weights, fewer channels).
std::vector<std::complex<float>> best2_weights(int nchans, int nbeams, int npol) {
  std::vector<Pointing> p;
  for (int i = 0; i < nbeams; ++i)
    p.push_back({Frame::direction_cosines, (i % 8 - 3.5) * 0.05, (i / 8 - 1.5) * 0.1, {}});
  const auto all = best2_frequencies_hz();
  std::vector<double> f;
  for (int c = 0; c < nchans; ++c)
    f.push_back(all[static_cast<std::size_t>(c * 1023 / std::max(1, nchans - 1))]);
  return compute_weights(best2_geometry(), p, f, npol);
}
}  // namespace

// The quantisation rule of int8.hpp: one scale per (channel, beam) over both pols, the largest
// component maps to +-127, every component within half a step of its weight, zero beams stay 0.
TEST(BeamformInt8, QuantisationRule) {
  BeamformConfig c = small_config(SampleType::ci8, 2, 3, 7, 5, 64);
  auto w = random_weights(c, 9, 0);
  for (int p = 0; p < 2; ++p)  // beam 2 of channel 1 all zero
    for (int a = 0; a < c.nantennas; ++a)
      w[static_cast<std::size_t>(((1 * 2 + p) * c.nbeams + 2) * c.nantennas + a)] = 0;
  const auto q = beamform::detail::quantize_int8(c, w.data());
  const auto deq = beamform::detail::dequantize_int8(c, q);
  ASSERT_EQ(q.q.size(), w.size() * 2);
  ASSERT_EQ(q.scale.size(), static_cast<std::size_t>(c.nchans * c.nbeams));
  for (int ch = 0; ch < c.nchans; ++ch)
    for (int b = 0; b < c.nbeams; ++b) {
      const float s = q.scale[static_cast<std::size_t>(ch * c.nbeams + b)];
      EXPECT_EQ(q.scale2[static_cast<std::size_t>(ch * c.nbeams + b)], s * s);
      float m = 0;
      int qmax = 0;
      for (int p = 0; p < 2; ++p)
        for (int a = 0; a < c.nantennas; ++a) {
          const std::size_t i =
              static_cast<std::size_t>(((ch * 2 + p) * c.nbeams + b) * c.nantennas + a);
          m = std::max({m, std::abs(w[i].real()), std::abs(w[i].imag())});
          for (int k = 0; k < 2; ++k) {
            const int v = q.q[2 * i + static_cast<std::size_t>(k)];
            const float wk = k == 0 ? w[i].real() : w[i].imag();
            EXPECT_LE(std::abs(v), 127);
            qmax = std::max(qmax, std::abs(v));
            EXPECT_LE(std::abs(wk - s * v), 0.5f * s * (1 + 1e-5f)) << ch << " " << b << " " << a;
          }
          EXPECT_EQ(deq[i], std::complex<float>(s * q.q[2 * i], s * q.q[2 * i + 1]));
        }
      if (ch == 1 && b == 2) {
        EXPECT_EQ(s, 0.f);
        EXPECT_EQ(qmax, 0);
      } else {
        EXPECT_FLOAT_EQ(s, m / 127);
        EXPECT_EQ(qmax, 127);
      }
    }
}

// The emulation against the integer definition computed here in double with the dequantised
// weights: the same numbers up to the emulation's two final fp32 roundings.
TEST(BeamformInt8, EmulationComputesTheQuantisedBeams) {
  for (auto type : {SampleType::ci4, SampleType::ci8})
    for (int variant = 0; variant < 3; ++variant) {
      BeamformConfig c = small_config(type, 2, 11, 13, 9, 64);
      c.sum_pols = variant > 0;
      c.integration = variant == 2 ? 8 : 1;
      if (variant == 1) c.encoding = Encoding::offset_binary;
      const auto in = random_input(c, 31 + variant);
      const auto w = random_weights(c, 32 + variant, 4);
      const auto q = beamform::detail::quantize_int8(c, w.data());
      std::vector<float> out(static_cast<std::size_t>(output_floats(c)), NAN);
      beamform::detail::emulate_int8(c, q, in.data(), out.data());
      const auto ref = naive_beamform(c, in, beamform::detail::dequantize_int8(c, q));
      const auto r = compare(out, ref, c, 1e-6);
      EXPECT_LE(r.max_err, 1e-6 * r.max_ref)
          << to_string(type) << " variant " << variant << ": " << r.first;
      EXPECT_GT(r.max_ref, 0);
    }
}

// The error of int8 weights on beam power, against float64 with the unquantised weights (the
// bound docs/PERFORMANCE.md states, "int8 weights"): the B1 case (BEST-2 beams, ci4, 1 pol) and a
// B2-like case (random unit phasors, ci8, both pols summed, integrated), random weights of random
// magnitude with masked antennas. Per output array (beam, pol): max |P_int8 - P_f64| <= 1e-2 max
// P_f64 (measured over input seeds 41-60: B1 0.44-0.74 %, B2-like 0.30-0.46 %, random weights
// 0.56-0.73 %).
TEST(BeamformInt8, PowerErrorOfInt8WeightsIsBounded) {
  struct Case {
    const char* name;
    BeamformConfig c;
    std::vector<std::complex<float>> w;
  };
  std::vector<Case> cases;
  {
    BeamformConfig c = small_config(SampleType::ci4, 1, 16, 32, 32, 256);
    cases.push_back({"B1 (BEST-2, ci4)", c, best2_weights(16, 32, 1)});
  }
  {
    BeamformConfig c = small_config(SampleType::ci8, 2, 6, 256, 40, 64);
    c.sum_pols = true;
    c.integration = 4;
    std::vector<std::complex<float>> w(static_cast<std::size_t>(c.nchans) * 2 * c.nbeams * 256);
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> ph(0, 2 * kPi);
    for (auto& x : w)
      x = std::polar(1.0f, static_cast<float>(ph(rng)));
    cases.push_back({"B2-like (unit phasors, ci8, 2 pols summed, x4)", c, w});
  }
  {
    // Random weights of random magnitudes with masked antennas (the GPU tests' weights).
    BeamformConfig c = small_config(SampleType::ci4, 1, 9, 70, 45, 200);
    cases.push_back({"random weights, masked (ci4)", c, random_weights(c, 42, 3)});
  }
  for (const Case& k : cases) {
    const auto in = random_input(k.c, 41);
    const auto q = beamform::detail::quantize_int8(k.c, k.w.data());
    std::vector<float> out(static_cast<std::size_t>(output_floats(k.c)), NAN);
    beamform::detail::emulate_int8(k.c, q, in.data(), out.data());
    const auto ref = naive_beamform(k.c, in, k.w);
    const auto r = compare(out, ref, k.c, 1e-2);
    std::printf("  int8 weights, %s: max |P_int8 - P_f64| / max P_f64 = %.3g\n", k.name,
                r.max_err / r.max_ref);
    EXPECT_LE(r.max_err, 1e-2 * r.max_ref) << k.name << ": " << r.first;
    EXPECT_GT(r.max_ref, 0);
    // Not exact: the bound is the quantisation's, not fp32 rounding's.
    EXPECT_GT(r.max_err, 1e-5 * r.max_ref) << k.name;
  }
}

// What the int8 kernel cannot form exactly is refused, naming the reason.
TEST(BeamformInt8, RefusesWhatItCannotFormExactly) {
  using beamform::detail::check_int8_config;
  BeamformConfig c = small_config(SampleType::ci4, 1);
  EXPECT_NO_THROW(check_int8_config(c));
  auto bad = c;
  bad.sample_type = SampleType::cf32;
  expect_error([&] { check_int8_config(bad); }, ErrorCategory::unsupported, "ci4 or ci8");
  bad = c;
  bad.levels.assign(16, 0.5f);
  expect_error([&] { check_int8_config(bad); }, ErrorCategory::unsupported, "integer");
  bad = c;
  bad.levels.resize(16);
  for (int i = 0; i < 16; ++i)
    bad.levels[static_cast<std::size_t>(i)] = static_cast<float>(2 * i - 15);  // odd integers
  EXPECT_NO_THROW(check_int8_config(bad));
  bad = c;
  bad.output = OutputKind::voltage;
  expect_error([&] { check_int8_config(bad); }, ErrorCategory::unsupported, "power only");
  bad = c;
  bad.integration = 3;
  bad.nsamples = 72;
  expect_error([&] { check_int8_config(bad); }, ErrorCategory::unsupported, "power of two");
  bad = small_config(SampleType::ci8, 2, 1, 60000, 1, 64);
  bad.sum_pols = true;
  bad.integration = 64;
  expect_error([&] { check_int8_config(bad); }, ErrorCategory::unsupported, "overflow");
}

// tensor-int8 runs its GEMM kernel only when WARPBEAM_INT8_GEMM=1 asks for it, and then for
// integration 1 without the pol sum; any other value of that variable is refused.
TEST(BeamformInt8, GemmKernelRuleAndItsOverride) {
  using beamform::detail::uses_int8_gemm;
  BeamformConfig c = small_config(SampleType::ci8, 2);
  ::unsetenv("WARPBEAM_INT8_GEMM");
  EXPECT_FALSE(uses_int8_gemm(c));
  ::setenv("WARPBEAM_INT8_GEMM", "1", 1);
  EXPECT_TRUE(uses_int8_gemm(c));
  c.sum_pols = true;
  EXPECT_FALSE(uses_int8_gemm(c));
  c.sum_pols = false;
  c.integration = 4;
  c.nsamples = 64;
  EXPECT_FALSE(uses_int8_gemm(c));
  c.integration = 1;
  ::setenv("WARPBEAM_INT8_GEMM", "0", 1);
  EXPECT_FALSE(uses_int8_gemm(c));
  ::setenv("WARPBEAM_INT8_GEMM", "1", 1);
  EXPECT_TRUE(uses_int8_gemm(c));
  ::setenv("WARPBEAM_INT8_GEMM", "yes", 1);
  expect_error([&] { uses_int8_gemm(c); }, ErrorCategory::invalid_argument,
               "WARPBEAM_INT8_GEMM = 'yes': expected 0 or 1");
  ::unsetenv("WARPBEAM_INT8_GEMM");
}

// The streaming int8 variant (cuda_tensor_int8_stream.cu) accepts B1 and what its kernel handles
// (ci4, <= 32 antennas, one pol or pols kept apart, integration dividing 32, any encoding with
// integer levels) and refuses the rest before any kernel runs: invalid_argument naming the
// reason for its own limits, tensor-int8's errors (unsupported) for what int8 cannot form.
TEST(BeamformInt8, StreamVariantChecksItsLimits) {
  using beamform::detail::check_int8_stream_config;
  BeamformConfig b1 = small_config(SampleType::ci4, 1, 1024, 32, 32, 8192);
  b1.algorithm = Algorithm::tensor_int8_stream;
  EXPECT_NO_THROW(check_int8_stream_config(b1));
  for (int n : {2, 4, 8, 16, 32}) {
    BeamformConfig c = b1;
    c.integration = n;
    EXPECT_NO_THROW(check_int8_stream_config(c)) << n;
  }
  {
    BeamformConfig c = small_config(SampleType::ci4, 2, 5, 1, 300, 64);  // pols kept apart
    c.encoding = Encoding::offset_binary;
    EXPECT_NO_THROW(check_int8_stream_config(c));
  }
  auto refused = [&](BeamformConfig c, ErrorCategory cat, const char* what) {
    expect_error([&] { check_int8_stream_config(c); }, cat, what);
  };
  BeamformConfig c = b1;
  c.sample_type = SampleType::ci8;
  refused(c, ErrorCategory::invalid_argument, "ci4 voltages, not ci8");
  c = b1;
  c.nantennas = 33;
  refused(c, ErrorCategory::invalid_argument, "at most 32 antennas, not 33");
  c = small_config(SampleType::ci4, 2, 8, 32, 32, 64);
  c.sum_pols = true;
  refused(c, ErrorCategory::invalid_argument, "sum_pols");
  c = b1;
  c.integration = 64;
  refused(c, ErrorCategory::invalid_argument, "not 64");
  c = b1;
  c.integration = 3;  // 8192 is no multiple of 3, but the kernel's limit is named first
  refused(c, ErrorCategory::unsupported, "power of two");
  c = b1;
  c.sample_type = SampleType::cf16;
  refused(c, ErrorCategory::unsupported, "ci4 or ci8");
  c = b1;
  c.output = OutputKind::voltage;
  refused(c, ErrorCategory::unsupported, "power only");
}

// The automatic choice's test (fits_int8_stream) says yes exactly where the checks accept, and
// the CPU backend ignores int8_weights (there is no int8 CPU kernel: the exact fp32 one runs).
TEST(BeamformInt8, AutomaticChoiceOfInt8WeightsFollowsTheStreamVariantsLimits) {
  using beamform::detail::check_int8_stream_config;
  using beamform::detail::fits_int8_stream;
  const BeamformConfig b1 = small_config(SampleType::ci4, 1, 1024, 32, 32, 8192);
  std::vector<BeamformConfig> cases(9, b1);
  cases[1].integration = 16;
  cases[2].sample_type = SampleType::ci8;
  cases[3].nantennas = 33;
  cases[4].integration = 64;
  cases[5].output = OutputKind::voltage;
  cases[6].sample_type = SampleType::cf16;
  cases[7] = small_config(SampleType::ci4, 2, 8, 32, 32, 64);
  cases[7].sum_pols = true;
  cases[8] = small_config(SampleType::ci4, 2, 8, 32, 32, 64);
  int fits = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    bool accepted = true;
    try {
      check_int8_stream_config(cases[i]);
    } catch (const Error&) {
      accepted = false;
    }
    EXPECT_EQ(fits_int8_stream(cases[i]), accepted) << "case " << i;
    fits += accepted;
  }
  EXPECT_EQ(fits, 3);  // b1, b1 integrated x16, two pols kept apart
  BeamformConfig c = b1;
  c.nsamples = 64;
  c.int8_weights = true;
  EXPECT_EQ(BeamformPlan(c, Backend::cpu).algorithm(), Algorithm::register_tiled);
}
