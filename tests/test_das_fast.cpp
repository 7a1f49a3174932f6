// CPU checks of two host-side pieces of the fp16 CUDA kernels: the float delay path
// (src/das/fast_delay.hpp) against the double-precision reference's decisions and weights, and
// the voxel tiles of the tensor-core window kernel (src/das/tiles.cpp).
#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <random>
#include <set>

#include "das/executor.hpp"
#include "das/fast_delay.hpp"
#include "test_util.hpp"
#include "warpbeam/das.hpp"

using namespace warpbeam;
using namespace warpbeam::das;
using namespace warpbeam::das::detail;

namespace {

// The interpolation weight of sample s for a pair (k, f, c): (1 - f) c at k, f c at k + 1.
std::complex<double> weight_at(int s, int k, float f, float cr, float ci) {
  const std::complex<double> c(cr, ci);
  if (s == k) return (1.0 - f) * c;
  if (s == k + 1) return static_cast<double>(f) * c;
  return 0.0;
}

struct Counts {
  int decided = 0, asked = 0, valid = 0;
};

// Every pair: where the float path decides, it decides as the double path, and its weights
// (spread over the samples) agree within 2e-3 of |c|; returns how often it decided.
Counts compare_pairs(const DasConfig& c) {
  const DelayParams P = make_delay_params(c);
  const auto el = make_elements(c);
  const auto tau = transmit_delays(c);
  double cmax = 0;
  for (const auto& v : c.voxels)
    for (double x : v)
      cmax = std::max(cmax, std::abs(x));
  for (const auto& v : c.probe.positions)
    for (double x : v)
      cmax = std::max(cmax, std::abs(x));
  const FastParams F = make_fast_params(P, cmax);
  Counts n;
  for (std::int64_t v = 0; v < c.nvoxels(); ++v)
    for (std::int64_t q = 0; q < c.ntx(); ++q)
      for (std::size_t m = 0; m < el.size(); ++m) {
        const auto& p = c.voxels[v];
        const double t = tau[q * c.nvoxels() + v];
        const Coeff ref = host_coefficients(P, p[0], p[1], p[2], t, 1.f, el[m]);
        const FastElement fe{static_cast<float>(el[m].x), static_cast<float>(el[m].y),
                             static_cast<float>(el[m].z), static_cast<float>(el[m].wx),
                             static_cast<float>(el[m].wy)};
        FastCoeff got;
        if (!fast_coefficients(F, make_fast_voxel(P, p[0], p[1], p[2], t), 1.f, fe, &got)) {
          ++n.asked;
          continue;
        }
        ++n.decided;
        EXPECT_EQ(got.k >= 0, ref.k >= 0)
            << "voxel " << v << " rx " << m << ": float k " << got.k << ", double k " << ref.k;
        if (got.k < 0 || ref.k < 0) continue;
        ++n.valid;
        double err = 0;
        for (int s = std::min(got.k, ref.k); s <= std::max(got.k, ref.k) + 1; ++s)
          err = std::max(err, std::abs(weight_at(s, got.k, got.f, got.cr, got.ci) -
                                       weight_at(s, ref.k, ref.f, ref.cr, ref.ci)));
        EXPECT_LE(err, 2e-3 * std::hypot(ref.cr, ref.ci) + 1e-7)
            << "voxel " << v << " rx " << m << ": k " << got.k << "/" << ref.k << " f " << got.f
            << "/" << ref.f;
      }
  return n;
}

}  // namespace

TEST(DasFast, FloatDelaysDecideAsTheDoublePathOnRandomPairs) {
  DasConfig c = reference_config("U1");
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> ux(-14e-3, 14e-3), uz(-1e-3, 40e-3);
  c.voxels.resize(3000);
  for (auto& p : c.voxels)
    p = {ux(rng), 0.0, uz(rng)};  // some behind the array, some beyond the last sample
  c.transmits = {Transmit::plane(0.2), Transmit::diverging({1e-3, 0, -8e-3})};
  c.window = Window::hann;
  const Counts n = compare_pairs(c);
  std::printf("random pairs: %d decided in float (%d with a term), %d asked for double\n",
              n.decided, n.valid, n.asked);
  EXPECT_GT(n.valid, 50000);
  EXPECT_LT(n.asked, n.decided / 1000 + 1);  // the double fallback stays rare
}

// Voxels placed on the decision boundaries: exactly on the f-number aperture edge of an element
// (lateral distance = depth / 2F, to 1e-12 relative) and at a delay of exactly sample 0 or the
// last sample. The float path must ask for double there (or decide as it would).
TEST(DasFast, FloatDelaysDeferToDoubleOnTheBoundaries) {
  DasConfig c;
  c.signal = Signal::iq;
  c.batch = 1;
  c.nsamples = 300;
  c.fs = 20e6;
  c.fc = 5e6;
  c.c = 1540;
  c.probe = linear_array(24, 0.3e-3);
  c.transmits = {Transmit::plane(0)};
  c.fnumber = 1.5;
  c.window = Window::boxcar;
  c.t0 = 10e-6;
  const double first_z = c.t0 * c.c / 2;                             // sample 0 below element x=0
  const double last_z = (c.t0 + (c.nsamples - 1) / c.fs) * c.c / 2;  // the last sample
  for (std::size_t m = 0; m < c.probe.size(); m += 3) {
    const double xm = c.probe.positions[m][0];
    for (double z : {4e-3, 7.3e-3, 11e-3})
      for (double eps : {-1e-12, 0.0, 1e-12}) {
        const double rho = z / (2 * *c.fnumber) * (1 + eps);
        c.voxels.push_back({xm + rho, 0, z});
        c.voxels.push_back({xm - rho, 0, z});
      }
    for (double eps : {-1e-12, 0.0, 1e-12}) {
      c.voxels.push_back({xm, 0, first_z * (1 + eps)});
      c.voxels.push_back({xm, 0, last_z * (1 + eps)});
    }
  }
  const Counts n = compare_pairs(c);
  std::printf("boundary pairs: %d decided in float, %d asked for double\n", n.decided, n.asked);
  EXPECT_GT(n.asked, 20);  // the constructed boundary pairs are deferred
}

TEST(DasFast, TilesCoverEveryVoxelOnceAndAreCompactOnGrids) {
  struct Case {
    const char* name;
    std::vector<Vec3> voxels;
    int max_extent;  // largest lattice extent of a tile along any axis (0: not a grid)
  };
  std::vector<Case> cases;
  cases.push_back({"U1 251x251", reference_config("U1").voxels, 8});
  cases.push_back({"U2 64^3", reference_config("U2").voxels, 4});
  cases.push_back(
      {"odd 3-D 11x5x9", parse_grid("0:1e-3:1e-4,0:4e-4:1e-4,5e-3:9e-3:5e-4").voxels(), 8});
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Vec3> scattered(777);
  for (auto& p : scattered)
    p = {u(rng), u(rng), u(rng)};
  cases.push_back({"scattered", scattered, 0});
  auto dup = parse_grid("0:1e-3:1e-4,5e-3:6e-3:1e-4").voxels();
  dup.insert(dup.end(), dup.begin(), dup.begin() + 40);  // repeated voxels
  cases.push_back({"grid with repeats", dup, 0});
  for (const auto& cs : cases) {
    const auto slots = tile_order(cs.voxels, 16);
    ASSERT_EQ(slots.size() % 16, 0u) << cs.name;
    std::vector<int> seen(cs.voxels.size(), 0);
    for (std::size_t t = 0; t < slots.size(); t += 16) {
      EXPECT_GE(slots[t], 0) << cs.name << ": tile " << t / 16 << " starts with a hole";
      for (int i = 0; i < 16; ++i)
        if (slots[t + i] >= 0) ++seen[slots[t + i]];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; })) << cs.name;
    EXPECT_LE(slots.size(), cs.voxels.size() * 2 + 16) << cs.name;
    if (cs.max_extent == 0) continue;
    // Lattice extent of each tile along each axis.
    std::array<std::map<double, int>, 3> rank;
    for (const auto& p : cs.voxels)
      for (int a = 0; a < 3; ++a)
        rank[a][p[a]] = 0;
    for (int a = 0; a < 3; ++a) {
      int r = 0;
      for (auto& kv : rank[a])
        kv.second = r++;
    }
    int worst = 0;
    for (std::size_t t = 0; t < slots.size(); t += 16)
      for (int a = 0; a < 3; ++a) {
        int lo = 1 << 30, hi = -1;
        for (int i = 0; i < 16; ++i)
          if (slots[t + i] >= 0) {
            const int r = rank[a][cs.voxels[slots[t + i]][a]];
            lo = std::min(lo, r);
            hi = std::max(hi, r);
          }
        worst = std::max(worst, hi - lo + 1);
      }
    EXPECT_LE(worst, cs.max_extent) << cs.name;
  }
  EXPECT_THROW(tile_order(cases[0].voxels, 12), Error);
}
