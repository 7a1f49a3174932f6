// The CPU EPIC imager against things independent of it: the prolate spheroidal function against
// published values; the FX equivalence (visibilities gridded with the cross-correlated kernels
// and transformed by a float64 DFT written here); simulated point sources at known directions
// and flux ratios; a source of known polarisation; and every bad configuration.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numeric>

#include "epic/block_fft.hpp"
#include "epic/tables.hpp"
#include "epic_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/epic.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/sim/station.hpp"

using namespace warpbeam;
using namespace warpbeam::epic;

namespace {

using namespace wbepic;

template <class F>
std::string error_of(F&& f, ErrorCategory want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.category()), static_cast<int>(want)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

// Peak near (x, y): the parabolic-interpolated position and the peak value of a [N][N] image.
struct Peak {
  double x, y, value;
};
Peak find_peak(const float* img, int n, double x0, double y0, int radius) {
  int bx = -1, by = -1;
  float best = -INFINITY;
  for (int y = static_cast<int>(y0) - radius; y <= static_cast<int>(y0) + radius; ++y)
    for (int x = static_cast<int>(x0) - radius; x <= static_cast<int>(x0) + radius; ++x)
      if (x > 0 && y > 0 && x < n - 1 && y < n - 1 && img[y * n + x] > best) {
        best = img[y * n + x];
        bx = x, by = y;
      }
  auto vertex = [](double a, double b, double c) {
    const double d = a - 2 * b + c;
    return d == 0 ? 0.0 : 0.5 * (a - c) / d;
  };
  const double dx = vertex(img[by * n + bx - 1], best, img[by * n + bx + 1]);
  const double dy = vertex(img[(by - 1) * n + bx], best, img[(by + 1) * n + bx]);
  return {bx + dx, by + dy, best};
}

}  // namespace

TEST(EpicGcf, ProlateSpheroidalMatchesPublishedValues) {
  // Reference: scipy.special.pro_cv(0, 0, c) and pro_ang1_cv(0, 0, c, cv, eta) (Zhang & Jin,
  // "Computation of Special Functions", 1996), normalised to psi(0) = 1.
  struct Case {
    double c, chi;
    double psi[4];  // at eta = 0.25, 0.5, 0.75, 0.99
  };
  const Case cases[] = {
      {0.5,
       0.08241480674252674,
       {0.9974265390464415, 0.9897301416460441, 0.9769824975091336, 0.9601022083644959}},
      {kPi,
       2.283575944805412,
       {0.9304457902686764, 0.7423614635995626, 0.4897187163332165, 0.24904321403525667}},
      {2 * kPi,
       5.494094019053934,
       {0.8402135577188036, 0.4823152778200839, 0.16404238860972276, 0.018647263774040874}},
      {4.5 * kPi,
       13.372540108505529,
       {0.6542280484208992, 0.16776185809198765, 0.011335925594032759, 2.0570931718981072e-05}},
  };
  const double etas[4] = {0.25, 0.5, 0.75, 0.99};
  for (const auto& k : cases) {
    double chi = 0;
    EXPECT_NEAR(prolate_spheroidal(k.c, 0, &chi), 1.0, 1e-12);
    EXPECT_NEAR(chi, k.chi, 1e-9 * k.chi) << "c = " << k.c;
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(prolate_spheroidal(k.c, etas[i]), k.psi[i], 1e-9)
          << "c " << k.c << " eta " << etas[i];
      EXPECT_DOUBLE_EQ(prolate_spheroidal(k.c, -etas[i]), prolate_spheroidal(k.c, etas[i]));
    }
    EXPECT_EQ(prolate_spheroidal(k.c, 1.01), 0.0);
  }
}

TEST(EpicGcf, FootprintsAreNormalisedAndCentredOnTheAntennas) {
  for (int support : {1, 2, 3, 9}) {
    auto c = small_config(40, 64, 3, 1);
    c.support = support;
    c.stand_ok.assign(40, 1);
    c.stand_ok[7] = 0;
    const EpicPlan plan(c, Backend::cpu);
    EXPECT_EQ(plan.used_stands().size(), 39u);
    EXPECT_EQ(std::count(plan.used_stands().begin(), plan.used_stands().end(), 7), 0);
    const double du = c.cell_wavelengths();
    EXPECT_NEAR(du, 0.5, 1e-12);  // lambda_min / 2
    for (int ch = 0; ch < c.nchan; ++ch) {
      const auto ext = plan.aperture_cells(ch);
      EXPECT_LE(ext[0], 64);
      double min_x0 = 1e9, min_y0 = 1e9;
      for (int s : plan.used_stands()) {
        const Footprint f = plan.footprint(ch, s);
        ASSERT_EQ(static_cast<int>(f.wx.size()), support + 1);
        const double sx = std::accumulate(f.wx.begin(), f.wx.end(), 0.0);
        const double sy = std::accumulate(f.wy.begin(), f.wy.end(), 0.0);
        EXPECT_NEAR(sx * sy, 1.0, 1e-6);
        double cx = 0, cy = 0;
        for (int j = 0; j <= support; ++j) {
          EXPECT_GE(f.wx[j], 0.f);
          cx += (f.x0 + j) * f.wx[j];
          cy += (f.y0 + j) * f.wy[j];
        }
        // A cell-integrated symmetric kernel has its centroid at the antenna, to within the
        // sampling error of a short kernel.
        const double tol = support == 1 ? 0.15 : support == 2 ? 0.05 : 0.02;
        EXPECT_NEAR(cx / sx, f.u, tol) << "support " << support;
        EXPECT_NEAR(cy / sy, f.v, tol) << "support " << support;
        min_x0 = std::min<double>(min_x0, f.x0);
        min_y0 = std::min<double>(min_y0, f.y0);
      }
      EXPECT_EQ(min_x0, 0);
      EXPECT_EQ(min_y0, 0);
    }
    // Baseline lengths in cells scale as x f / (c du).
    const int s0 = plan.used_stands()[0], s1 = plan.used_stands()[1];
    for (int ch = 0; ch < c.nchan; ++ch) {
      const double want =
          (c.stand_xyz_m[s1][0] - c.stand_xyz_m[s0][0]) * c.freqs_hz[ch] / kSpeedOfLight / du;
      EXPECT_NEAR(plan.footprint(ch, s1).u - plan.footprint(ch, s0).u, want, 1e-9);
    }
  }
}

TEST(EpicGcf, GridCorrectionIsOneAtTheCentreAndGrowsOutwards) {
  auto c = small_config(30, 64, 1, 1);
  const EpicPlan plan(c, Backend::cpu);
  const auto g = plan.grid_correction();
  const int n = 64;
  EXPECT_NEAR(g[(n / 2) * n + n / 2], 1.0, 1e-6);
  EXPECT_GT(g[(n / 2) * n + n / 2 + 20], g[(n / 2) * n + n / 2 + 5]);
  EXPECT_GT(g[(n / 2 + 20) * n + n / 2], 1.0);
  for (float v : g)
    EXPECT_TRUE(v >= 0 && std::isfinite(v));
  // Below the horizon (l^2 + m^2 > 1) the correction is 0; just inside it, it is not.
  const ImageGeometry geo = plan.geometry();
  int below = 0;
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      const double r2 = geo.l(x) * geo.l(x) + geo.m(y) * geo.m(y);
      if (r2 > 1) {
        ++below;
        EXPECT_EQ(g[y * n + x], 0.f) << "pixel (" << x << ", " << y << ") is below the horizon";
      }
    }
  EXPECT_GT(below, n * n / 8);  // the corners of an image that spans l, m in [-1, 1)
  EXPECT_GT(g[(n / 2) * n + n / 2 + static_cast<int>(0.95 * n / 2)], 1.0f);
}

TEST(EpicCpu, FxEquivalence) {
  // Random voltages plus a correlated source, so that the cross-correlation image has structure.
  for (int n : {32, 64}) {
    auto c = small_config(24, n, 3, 12);
    c.stand_xyz_m = random_station(24, n == 32 ? 12 : 28, 5);
    c.support = n == 32 ? 2 : 3;
    // A random complex calibration table, to check it is applied as the docs say.
    std::mt19937 rng(4);
    std::uniform_real_distribution<double> ph(-kPi, kPi), amp(0.5, 1.5);
    for (int i = 0; i < c.nchan * c.nstand * 2; ++i)
      c.calibration.push_back(
          std::polar(static_cast<float>(amp(rng)), static_cast<float>(ph(rng))));
    sim::StationSimConfig s;
    s.stand_xyz_m = c.stand_xyz_m;
    s.freqs_hz = c.freqs_hz;
    s.ntime = c.ntime;
    s.sources = {{0.3, -0.2, 4.0, 0.2, 0.1, -0.3}};
    s.receiver_noise = 1;
    s.seed = 21;
    auto in = sim::simulate_station(s).ci4;
    const EpicPlan plan(c, Backend::cpu);
    const auto got = image(plan, in);
    const auto want = fx_image(plan, in);
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    for (int ch = 0; ch < c.nchan; ++ch)
      for (int k = 0; k < 4; ++k) {
        const double e = relative_l2(&got[(ch * 4 + k) * nn], &want[(ch * 4 + k) * nn], nn);
        EXPECT_LE(e, 1e-4) << "N " << n << " channel " << ch << " product " << k;
      }
  }
}

TEST(EpicCpu, PointSourcesAppearWhereTheyShouldWithTheirFluxRatios) {
  EpicConfig c;
  c.nchan = 2;
  c.nstand = 200;
  c.ntime = 256;
  c.freqs_hz = {60.0e6, 61.5e6};
  c.stand_xyz_m = random_station(200, 50, 8);
  c.grid_size = 64;
  c.threads = 2;
  const EpicPlan plan(c, Backend::cpu);
  const ImageGeometry geo = plan.geometry();
  // Three sources at pixel centres (flux 3 : 2 : 1) and one off-grid, well apart.
  struct Src {
    double x, y, flux;
  };
  const Src srcs[] = {{40, 30, 3.0}, {20, 44, 2.0}, {28, 18, 1.0}, {45.3, 46.6, 1.5}};
  sim::StationSimConfig s;
  s.stand_xyz_m = c.stand_xyz_m;
  s.freqs_hz = c.freqs_hz;
  s.ntime = c.ntime;
  for (const auto& p : srcs)
    s.sources.push_back({geo.l(p.x), geo.m(p.y), p.flux});
  s.receiver_noise = 2;
  s.constant_power = true;  // no random fluctuation of the sources' own power
  s.seed = 77;
  const auto out = image(plan, sim::simulate_station(s).ci4);
  std::vector<float> stokes(out.size());
  to_stokes(out.data(), stokes.data(), c.nchan, 64);
  const std::size_t nn = 64 * 64;
  for (int ch = 0; ch < c.nchan; ++ch) {
    const float* img = &stokes[ch * 4 * nn];  // Stokes I
    Peak pk[4];
    for (int i = 0; i < 4; ++i) {
      pk[i] = find_peak(img, 64, srcs[i].x, srcs[i].y, 2);
      EXPECT_NEAR(pk[i].x, srcs[i].x, 0.5) << "source " << i << " channel " << ch;
      EXPECT_NEAR(pk[i].y, srcs[i].y, 0.5) << "source " << i << " channel " << ch;
    }
    // Pixel-centred sources: the grid-corrected peaks keep the flux ratios.
    EXPECT_NEAR(pk[1].value / pk[0].value, 2.0 / 3.0, 0.05) << "channel " << ch;
    EXPECT_NEAR(pk[2].value / pk[0].value, 1.0 / 3.0, 0.05) << "channel " << ch;
    // An empty patch of sky is far fainter than the weakest source.
    EXPECT_LT(std::abs(img[10 * 64 + 52]), 0.2 * pk[2].value);
  }
}

TEST(EpicCpu, PolarisedSourceGivesTheRightStokes) {
  EpicConfig c;
  c.nchan = 1;
  c.nstand = 160;
  c.ntime = 400;
  c.freqs_hz = {61e6};
  c.stand_xyz_m = random_station(160, 45, 12);
  c.grid_size = 64;
  c.threads = 2;
  const EpicPlan plan(c, Backend::cpu);
  const ImageGeometry geo = plan.geometry();
  sim::StationSimConfig s;
  s.stand_xyz_m = c.stand_xyz_m;
  s.freqs_hz = c.freqs_hz;
  s.ntime = c.ntime;
  // Source A: q, u, v = 0.3, -0.2, 0.4; source B: unpolarised but for u = +0.5, v = -0.3.
  s.sources = {{geo.l(38), geo.m(25), 3.0, 0.3, -0.2, 0.4},
               {geo.l(22), geo.m(40), 2.0, 0, 0.5, -0.3}};
  s.receiver_noise = 1;
  s.seed = 5;
  const auto out = image(plan, sim::simulate_station(s).ci4);
  std::vector<float> st(out.size());
  to_stokes(out.data(), st.data(), 1, 64);
  const std::size_t nn = 64 * 64;
  auto at = [&](int k, int x, int y) { return st[k * nn + y * 64 + x]; };
  const double ia = at(0, 38, 25), ib = at(0, 22, 40);
  EXPECT_NEAR(at(1, 38, 25) / ia, 0.3, 0.04);
  EXPECT_NEAR(at(2, 38, 25) / ia, -0.2, 0.04);
  EXPECT_NEAR(at(3, 38, 25) / ia, 0.4, 0.04);
  EXPECT_NEAR(at(1, 22, 40) / ib, 0.0, 0.04);
  EXPECT_NEAR(at(2, 22, 40) / ib, 0.5, 0.04);
  EXPECT_NEAR(at(3, 22, 40) / ib, -0.3, 0.04);
  EXPECT_NEAR(ib / ia, 2.0 / 3.0, 0.06);
}

TEST(EpicCpu, BadConfigurationsGiveClearErrors) {
  const auto good = small_config(20, 64, 2, 4);
  auto expect_bad = [&](auto change, const char* what, ErrorCategory cat) {
    auto c = good;
    change(c);
    const std::string msg = error_of([&] { EpicPlan p(c, Backend::cpu); }, cat);
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  const auto ia = ErrorCategory::invalid_argument;
  expect_bad([](EpicConfig& c) { c.grid_size = 100 + 1; }, "grid_size", ia);
  expect_bad([](EpicConfig& c) { c.grid_size = 8; }, "grid_size", ia);
  expect_bad([](EpicConfig& c) { c.support = 10; }, "support", ia);
  expect_bad([](EpicConfig& c) { c.cell_m = 3.0; }, "alias", ia);
  expect_bad([](EpicConfig& c) { c.freqs_hz.pop_back(); }, "freqs_hz", ia);
  expect_bad([](EpicConfig& c) { c.freqs_hz[0] = -1; }, "freqs_hz", ia);
  expect_bad([](EpicConfig& c) { c.stand_ok.assign(3, 1); }, "stand_ok", ia);
  expect_bad([](EpicConfig& c) { c.calibration.assign(5, 1.f); }, "calibration", ia);
  expect_bad([](EpicConfig& c) { c.stand_ok.assign(20, 0); }, "at least 2", ia);
  expect_bad([](EpicConfig& c) { c.ntime = 0; }, "ntime", ia);
  expect_bad(
      [](EpicConfig& c) {
        c.grid_size = 16;
        c.stand_xyz_m = random_station(20, 80, 3);
      },
      "aperture spans", ia);
  // A CUDA-only algorithm asked of the CPU is a usage error (exit 2), as in the other engines.
  expect_bad([](EpicConfig& c) { c.algorithm = Algorithm::fused; }, "CUDA", ia);
  // A plan checks the shape and memory space of its arguments.
  const EpicPlan plan(good, Backend::cpu);
  std::vector<std::uint8_t> in(2 * 4 * 20 * 2);
  std::vector<float> out(2 * 4 * 64 * 64);
  error_of(
      [&] {
        plan.execute(View<const std::uint8_t, 4>(in.data(), {2, 3, 20, 2}),
                     View<float, 4>(out.data(), {2, 4, 64, 64}));
      },
      ia);
  error_of(
      [&] {
        plan.execute(View<const std::uint8_t, 4>(in.data(), {2, 4, 20, 2}),
                     View<float, 4>(out.data(), {2, 4, 64, 64}, Space::device));
      },
      ia);
  EXPECT_THROW(parse_algorithm("fast"), Error);
  EXPECT_EQ(parse_algorithm("fused"), Algorithm::fused);
}

TEST(EpicCpu, DistantStandsAreLeftOutOfTheGrid) {
  auto c = small_config(30, 64, 1, 2);
  c.stand_xyz_m.push_back({-293.335, 9.514, 10.244});  // LWA-SV's outrigger
  c.nstand = 31;
  const EpicPlan plan(c, Backend::cpu);
  ASSERT_EQ(plan.distant_stands().size(), 1u);
  EXPECT_EQ(plan.distant_stands()[0], 30);
  EXPECT_EQ(plan.used_stands().size(), 30u);
}

TEST(EpicCpu, RealStationLayoutFitsTheFusedAperture) {
  WB_REQUIRE_DATA("lwa/lwasv-ssmif.txt");
  const auto ssmif = io::read_ssmif(wbtest::data_file("lwa/lwasv-ssmif.txt"));
  EpicConfig c;
  c.nchan = 2;
  c.nstand = ssmif.nstand();
  c.ntime = 1;
  c.freqs_hz = {58.7e6, 58.7e6 + 131 * 25e3};  // E1's band edges
  c.stand_xyz_m = ssmif.stand_xyz_m;
  c.grid_size = 128;
  const EpicPlan plan(c, Backend::cpu);
  EXPECT_EQ(plan.distant_stands(), std::vector<int>{255});  // stand 256, the outrigger
  for (int ch = 0; ch < 2; ++ch) {
    const auto ext = plan.aperture_cells(ch);
    EXPECT_LE(ext[0], 64) << "rows";
    EXPECT_LE(ext[1], 64) << "columns";
    EXPECT_GE(ext[0], 40);
  }
}

TEST(EpicGcf, GatherTablesReproduceTheScatteredGrid) {
  // The CUDA paths grid by gathering (per cell, the footprints touching it); the CPU path
  // scatters each footprint. Both must give the same aperture, also with the fused kernel's
  // fp16 weights (within fp16 rounding).
  auto c = small_config(60, 64, 2, 1);
  c.support = 3;
  c.validate();
  const auto t = epic::detail::build_tables(c);
  std::mt19937 rng(3);
  std::normal_distribution<double> g;
  std::vector<cd> v(static_cast<std::size_t>(c.nstand));
  for (auto& x : v)
    x = {g(rng), g(rng)};
  for (int window : {64, 48}) {
    const auto gt = epic::detail::build_gather_table(t, window);
    for (int ch = 0; ch < c.nchan; ++ch) {
      std::vector<cd> scatter(static_cast<std::size_t>(window) * window, 0);
      for (int k = 0; k < t.nused(); ++k) {
        const std::size_t a = t.ant(ch, k);
        for (int iy = 0; iy < t.taps(); ++iy)
          for (int ix = 0; ix < t.taps(); ++ix)
            scatter[static_cast<std::size_t>(t.y0[a] + iy) * window + t.x0[a] + ix] +=
                double(t.wy[a * t.taps() + iy]) * t.wx[a * t.taps() + ix] * v[t.used[k]];
      }
      double maxv = 0, err32 = 0, err16 = 0;
      for (int cell = 0; cell < window * window; ++cell) {
        cd sum32 = 0, sum16 = 0;
        const std::uint32_t* off =
            &gt.offsets[static_cast<std::size_t>(ch) * (window * window + 1)];
        for (std::uint32_t e = gt.base[ch] + off[cell]; e < gt.base[ch] + off[cell + 1]; ++e) {
          sum32 += double(gt.weight[e]) * v[gt.stand[e]];
          // The fused kernel's packed weight: fp16 bits, decoded here by their definition.
          const std::uint16_t h = epic::fft::half_bits(gt.weight[e]);
          const int ex = (h >> 10) & 0x1F;
          const double w16 = ex ? std::ldexp(1.0 + (h & 0x3FF) / 1024.0, ex - 15)
                                : std::ldexp((h & 0x3FF) / 1024.0, -14);
          sum16 += w16 * v[gt.stand[e]];
        }
        maxv = std::max(maxv, std::abs(scatter[cell]));
        err32 = std::max(err32, std::abs(sum32 - scatter[cell]));
        err16 = std::max(err16, std::abs(sum16 - scatter[cell]));
      }
      EXPECT_LT(err32, 1e-6 * maxv) << "window " << window << " channel " << ch;  // fp32 wy * wx
      EXPECT_LT(err16, 2e-3 * maxv) << "window " << window << " channel " << ch;
      EXPECT_GT(maxv, 0);
    }
  }
  // A window smaller than the aperture is refused.
  EXPECT_THROW(epic::detail::build_gather_table(t, 8), Error);
}

TEST(EpicGcf, FusedGatherListsHoldEveryCellOfTheirBlock) {
  // The fused kernel's per-block lists (block `rank` of a cluster of C: rows rank + C i; thread
  // q: columns q + Q p) must hold each cell's entries of the plain gather table, once.
  auto c = small_config(60, 64, 2, 1);
  c.support = 3;
  c.validate();
  const auto t = epic::detail::build_tables(c);
  const int window = 64;
  const auto gt = epic::detail::build_gather_table(t, window);
  struct Shape {
    int cluster, q, pin;
  };
  for (const Shape sh : {Shape{1, 4, 16}, Shape{2, 8, 8}, Shape{8, 16, 4}}) {
    const auto f = epic::detail::build_fused_gather(t, window, sh.cluster, sh.q, sh.pin);
    const int rows_per_rank = (window + sh.cluster - 1) / sh.cluster;
    ASSERT_EQ(f.cells, rows_per_rank * sh.q * sh.pin);
    const std::size_t stride = static_cast<std::size_t>(std::max(f.max_entries, 1));
    for (int ch = 0; ch < c.nchan; ++ch) {
      std::size_t total = 0;
      int longest = 0;
      for (int rank = 0; rank < sh.cluster; ++rank) {
        const std::size_t li = static_cast<std::size_t>(ch) * sh.cluster + rank;
        const std::uint16_t* off = &f.offsets[li * (f.cells + 1)];
        const std::uint32_t* ent = &f.entries[li * stride];
        longest = std::max<int>(longest, off[f.cells]);
        for (int i = 0; i < rows_per_rank; ++i)
          for (int q = 0; q < sh.q; ++q)
            for (int p = 0; p < sh.pin; ++p) {
              const int cell = (i * sh.q + q) * sh.pin + p;
              ASSERT_LE(off[cell], off[cell + 1]);
              const int row = rank + sh.cluster * i, col = q + sh.q * p;
              const std::uint32_t* go =
                  &gt.offsets[static_cast<std::size_t>(ch) * (window * window + 1)];
              const std::uint32_t e0 = gt.base[ch] + go[row * window + col];
              const std::uint32_t e1 = gt.base[ch] + go[row * window + col + 1];
              ASSERT_EQ(off[cell + 1] - off[cell], e1 - e0)
                  << "C " << sh.cluster << " channel " << ch << " cell (" << row << ", " << col
                  << ")";
              for (std::uint32_t k = 0; k < e1 - e0; ++k) {
                const std::uint32_t en = ent[off[cell] + k];
                EXPECT_EQ(en >> 16, gt.stand[e0 + k]);
                EXPECT_EQ(en & 0xFFFFu, epic::fft::half_bits(gt.weight[e0 + k]));
              }
              total += e1 - e0;
            }
      }
      EXPECT_EQ(total, gt.base[ch + 1] - gt.base[ch]) << "every entry in exactly one block";
      EXPECT_LE(longest, f.max_entries);
    }
  }
}
