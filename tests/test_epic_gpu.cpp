// The CUDA EPIC paths against the CPU reference (random voltages, output poisoned first) and
// against the float64 FX image; the fused kernel's variants, cluster sizes and refusals.
#include <cstdio>
#include <memory>

#include "epic_test_util.hpp"
#include "warpbeam/sim/station.hpp"

using namespace wbepic;

namespace {

// The radius (m) of a random station whose aperture fits `cells` cells at 62 MHz with cell
// lambda/2: 2 r / (lambda / 2) <= cells - support - 2.
double radius_for(int cells, int support) {
  return (cells - support - 3) * (kSpeedOfLight / 62e6) / 4;
}

EpicConfig gpu_config(int n, int nstand, int nchan, std::int64_t ntime, int support, double radius,
                      std::uint32_t seed) {
  EpicConfig c;
  c.nchan = nchan;
  c.nstand = nstand;
  c.ntime = ntime;
  for (int i = 0; i < nchan; ++i)
    c.freqs_hz.push_back(62e6 - 25e3 * 41 * i);
  c.stand_xyz_m = random_station(nstand, radius, seed);
  c.grid_size = n;
  c.support = support;
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<double> ph(-kPi, kPi);
  for (int i = 0; i < nchan * nstand * 2; ++i)
    c.calibration.push_back(std::polar(1.0f, static_cast<float>(ph(rng))));
  return c;
}

// max|got - want| <= tol * max|want| per (channel, product); prints the first mismatch.
void expect_close_max(const std::vector<float>& got, const std::vector<float>& want, int nchan,
                      int n, double tol, const std::string& what) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  for (int c = 0; c < nchan; ++c)
    for (int k = 0; k < 4; ++k) {
      const float* g = &got[(c * 4 + k) * nn];
      const float* w = &want[(c * 4 + k) * nn];
      double maxw = 0, maxe = 0;
      std::size_t first = nn;
      for (std::size_t i = 0; i < nn; ++i)
        maxw = std::max(maxw, std::abs(double(w[i])));
      for (std::size_t i = 0; i < nn; ++i) {
        const double e = std::isnan(g[i]) ? INFINITY : std::abs(double(g[i]) - w[i]);
        if (e > tol * maxw && first == nn) first = i;
        maxe = std::max(maxe, e);
      }
      EXPECT_LE(maxe, tol * maxw) << what << " channel " << c << " product " << k << ": max error "
                                  << maxe << " of max " << maxw << "; first mismatch at pixel "
                                  << first << " got " << (first < nn ? g[first] : 0.f)
                                  << " expected " << (first < nn ? w[first] : 0.f);
    }
}

// Relative L2 per (channel, product); prints the worst and any NaN.
void expect_close_l2(const std::vector<float>& got, const std::vector<double>& want, int nchan,
                     int n, double tol, const std::string& what) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  double worst = 0;
  for (int c = 0; c < nchan; ++c)
    for (int k = 0; k < 4; ++k) {
      const float* g = &got[(c * 4 + k) * nn];
      const double* w = &want[(c * 4 + k) * nn];
      for (std::size_t i = 0; i < nn; ++i)
        ASSERT_FALSE(std::isnan(g[i])) << what << " NaN at channel " << c << " product " << k
                                       << " pixel " << i << " (never written?)";
      const double e = relative_l2(g, w, nn);
      worst = std::max(worst, e);
      EXPECT_LE(e, tol) << what << " channel " << c << " product " << k;
    }
  std::printf("%s: worst relative L2 %.3g (bound %.3g)\n", what.c_str(), worst, tol);
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

}  // namespace

// max|got - want| / max|want| over one output array.
double max_rel(const float* got, const double* want, std::size_t n) {
  double maxw = 0, maxe = 0;
  for (std::size_t i = 0; i < n; ++i) {
    maxw = std::max(maxw, std::abs(want[i]));
    maxe = std::max(maxe, std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]));
  }
  return maxe / maxw;
}

TEST(EpicGpu, MultikernelMatchesCpuOnRandomVoltages) {
  WB_REQUIRE_GPU();
  struct Shape {
    int n, nstand, nchan;
    std::int64_t ntime;
    int support, batch;
  };
  // The last shape is a whole 1000-spectrum gulp in one batch: the products of XX* and YY* are
  // summed in fp32 blocks of 16 spectra and fp64 across (an fp32 sum over the gulp left ~2e-5).
  const Shape shapes[] = {{32, 24, 3, 13, 2, 0},
                          {48, 37, 2, 7, 3, 3},
                          {64, 101, 2, 21, 2, 8},
                          {128, 256, 1, 9, 1, 4},
                          {64, 100, 2, 1000, 2, 0}};
  for (const auto& s : shapes) {
    auto c = gpu_config(s.n, s.nstand, s.nchan, s.ntime, s.support,
                        radius_for(std::min(s.n, 64), s.support), 7 + s.n);
    c.multikernel.batch = s.batch;
    const auto in = random_ci4(static_cast<std::size_t>(c.nchan) * c.ntime * c.nstand * 2, s.n);
    const EpicPlan cpu(c, Backend::cpu);
    c.algorithm = Algorithm::multikernel;
    const EpicPlan gpu(c, Backend::cuda);
    ASSERT_EQ(gpu.algorithm(), Algorithm::multikernel);
    const auto got = image_gpu(gpu, in), want = image(cpu, in);
    const std::string what =
        "multikernel N " + std::to_string(s.n) + " ntime " + std::to_string(s.ntime);
    expect_close_max(got, want, c.nchan, c.grid_size, 1e-5, what);
    // Which path is closer to the float64 image (the FX image: the same cross-correlation image
    // by visibilities, every step in float64)? Both must be within the fp32 bound of it.
    const auto ref = fx_image(cpu, in);
    const std::size_t nn = static_cast<std::size_t>(s.n) * s.n;
    double worst_gpu = 0, worst_cpu = 0;
    for (int k = 0; k < c.nchan * 4; ++k) {
      worst_gpu = std::max(worst_gpu, max_rel(&got[k * nn], &ref[k * nn], nn));
      worst_cpu = std::max(worst_cpu, max_rel(&want[k * nn], &ref[k * nn], nn));
    }
    std::printf("%s: max error / max vs float64: multikernel %.2e, CPU %.2e\n", what.c_str(),
                worst_gpu, worst_cpu);
    EXPECT_LE(worst_gpu, 1e-5) << what << " against the float64 image";
    EXPECT_LE(worst_cpu, 1e-5) << what << " (CPU) against the float64 image";
  }
}

TEST(EpicGpu, FusedMatchesCpuOnRandomVoltages) {
  WB_REQUIRE_GPU();
  for (int n : {64, 128, 256}) {
    // 250 stands (not a multiple of 32), 9 spectra (odd: the last pass of two is half empty).
    auto c = gpu_config(n, 250, 3, 9, 2, radius_for(64, 2), 3 + n);
    const auto in = random_ci4(static_cast<std::size_t>(c.nchan) * c.ntime * c.nstand * 2, n + 1);
    const EpicPlan cpu(c, Backend::cpu);
    const auto want = to_double(image(cpu, in));
    auto variants = fused_variants(n);
    // The default variant with the gulp split over 2, 4 and 9 clusters per channel (parts of
    // 4-5, 2-3 and 1 spectra), and with the stage profile on.
    for (int split : {2, 4, 9, 0}) {
      FusedTuning t;
      t.time_split = split;
      t.profile = split == 0;
      variants.push_back(t);
    }
    int ran = 0;
    for (const auto& v : variants) {
      auto g = c;
      g.algorithm = Algorithm::fused;
      g.fused = v;
      const std::string what = "fused N " + std::to_string(n) + " xy_in_shared " +
                               std::to_string(v.xy_in_shared) + " spectra_per_pass " +
                               std::to_string(v.spectra_per_pass) + " time_split " +
                               std::to_string(v.time_split) + (v.profile ? " profiled" : "");
      std::unique_ptr<EpicPlan> gpu;
      try {
        gpu = std::make_unique<EpicPlan>(g, Backend::cuda);
      } catch (const Error& e) {
        // Only a shared-memory refusal is acceptable (variants built for 256 stands).
        EXPECT_EQ(static_cast<int>(e.category()), static_cast<int>(ErrorCategory::unsupported));
        EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
        std::printf("%s: refused: %s\n", what.c_str(), e.what());
        continue;
      }
      ASSERT_EQ(gpu->algorithm(), Algorithm::fused);
      expect_close_l2(image_gpu(*gpu, in), want, c.nchan, n, 0.015, what);
      const FusedProfile prof = gpu->fused_profile();
      EXPECT_EQ(prof.time_split, v.time_split > 0 ? v.time_split : prof.time_split);
      EXPECT_GE(prof.active_clusters, 1);
      if (v.profile) {
        EXPECT_GT(prof.row_cycles, 0);
        EXPECT_GT(prof.column_cycles, 0);
        EXPECT_GT(prof.batches, 0);
      }
      ++ran;
    }
    EXPECT_GE(ran, 5) << "N " << n;
  }
}

TEST(EpicGpu, FxEquivalence) {
  WB_REQUIRE_GPU();
  for (int n : {64, 128}) {
    auto c = gpu_config(n, 120, 2, 16, 2, radius_for(64, 2), 40 + n);
    sim::StationSimConfig s;
    s.stand_xyz_m = c.stand_xyz_m;
    s.freqs_hz = c.freqs_hz;
    s.ntime = c.ntime;
    s.sources = {{0.25, -0.3, 5.0, 0.2, -0.1, 0.3}, {-0.4, 0.1, 3.0}};
    s.ndiffuse = 16;
    s.diffuse_flux = 2;
    s.seed = 9;
    const auto in = sim::simulate_station(s).ci4;
    c.algorithm = Algorithm::multikernel;
    const EpicPlan mk(c, Backend::cuda);
    const auto want = fx_image(mk, in);
    expect_close_l2(image_gpu(mk, in), want, c.nchan, n, 1e-4,
                    "FX vs multikernel N " + std::to_string(n));
    c.algorithm = Algorithm::fused;
    const EpicPlan fu(c, Backend::cuda);
    expect_close_l2(image_gpu(fu, in), want, c.nchan, n, 0.015,
                    "FX vs fused N " + std::to_string(n));
  }
}

TEST(EpicGpu, FusedKeepsPolarisation) {
  WB_REQUIRE_GPU();
  auto c = gpu_config(128, 200, 1, 300, 2, radius_for(64, 2), 99);
  c.calibration.clear();
  c.algorithm = Algorithm::fused;
  const EpicPlan plan(c, Backend::cuda);
  const ImageGeometry geo = plan.geometry();
  sim::StationSimConfig s;
  s.stand_xyz_m = c.stand_xyz_m;
  s.freqs_hz = c.freqs_hz;
  s.ntime = c.ntime;
  s.sources = {{geo.l(80), geo.m(50), 3.0, 0.3, -0.2, 0.4}};
  s.seed = 3;
  const auto out = image_gpu(plan, sim::simulate_station(s).ci4);
  std::vector<float> st(out.size());
  to_stokes(out.data(), st.data(), 1, 128);
  const std::size_t nn = 128 * 128, at = 50 * 128 + 80;
  const double i = st[at];
  EXPECT_NEAR(st[nn + at] / i, 0.3, 0.04);
  EXPECT_NEAR(st[2 * nn + at] / i, -0.2, 0.04);
  EXPECT_NEAR(st[3 * nn + at] / i, 0.4, 0.04);
}

TEST(EpicGpu, FullStationShapesRunOnClusters) {
  WB_REQUIRE_GPU();
  // The real LWA-SV layout when the data folder is there, else an LWA-SV-sized random one (so
  // that the test never skips on the GPU machine).
  std::vector<std::array<double, 3>> xyz = random_station(256, 50, 17);
  if (std::filesystem::exists(wbtest::data_file("lwa/lwasv-ssmif.txt")))
    xyz = io::read_ssmif(wbtest::data_file("lwa/lwasv-ssmif.txt")).stand_xyz_m;
  for (int n : {128, 256}) {
    // E1/E3's 132 channels from 58.7 MHz (132 clusters of 2 or 8 blocks), a short gulp.
    EpicConfig c;
    c.nchan = 132;
    c.nstand = 256;
    c.ntime = 24;
    for (int i = 0; i < 132; ++i)
      c.freqs_hz.push_back(58.7e6 + 25e3 * i);
    c.stand_xyz_m = xyz;
    c.grid_size = n;
    const auto in = random_ci4(static_cast<std::size_t>(132) * c.ntime * 256 * 2, n);
    c.algorithm = Algorithm::multikernel;
    const EpicPlan mk(c, Backend::cuda);
    c.algorithm = Algorithm::fused;
    const EpicPlan fu(c, Backend::cuda);
    const FusedProfile prof = fu.fused_profile();
    expect_close_l2(image_gpu(fu, in), to_double(image_gpu(mk, in)), 132, n, 0.015,
                    "fused vs multikernel, 132 channels, N " + std::to_string(n) + " (" +
                        std::to_string(prof.active_clusters) + " clusters resident, " +
                        std::to_string(prof.time_split) + " per channel)");
  }
}

TEST(EpicGpu, UnsupportedShapesAreRefused) {
  WB_REQUIRE_GPU();
  auto c = gpu_config(96, 50, 1, 4, 2, radius_for(64, 2), 5);
  c.algorithm = Algorithm::fused;
  try {
    EpicPlan p(c, Backend::cuda);
    ADD_FAILURE() << "a 96-pixel fused plan was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.category()), static_cast<int>(ErrorCategory::unsupported));
    EXPECT_NE(std::string(e.what()).find("64, 128 and 256"), std::string::npos) << e.what();
  }
  c.algorithm = Algorithm::automatic;
  EXPECT_EQ(EpicPlan(c, Backend::cuda).algorithm(), Algorithm::multikernel);
  // An aperture wider than the fused kernel's 64 cells.
  auto wide = gpu_config(256, 50, 1, 4, 2, 1.6 * radius_for(64, 2), 6);
  EXPECT_EQ(EpicPlan(wide, Backend::cuda).algorithm(), Algorithm::multikernel);
  wide.algorithm = Algorithm::fused;
  try {
    EpicPlan p(wide, Backend::cuda);
    ADD_FAILURE() << "an aperture of more than 64 cells was accepted by the fused path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aperture spans"), std::string::npos) << e.what();
  }
  c.grid_size = 128;
  EXPECT_EQ(EpicPlan(c, Backend::cuda).algorithm(), Algorithm::fused);
}
