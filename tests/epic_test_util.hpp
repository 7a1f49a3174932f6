#pragma once
// Helpers shared by the EPIC tests (CPU and GPU): random stations and voltages, running a plan
// on host or device memory, and the float64 FX reference image.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "test_util.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/epic.hpp"
#include "warpbeam/io/lwa.hpp"

namespace wbepic {

using namespace warpbeam;
using namespace warpbeam::epic;

constexpr double kPi = 3.14159265358979323846;
using cd = std::complex<double>;

// A compact random station (an LWA-SV-like ellipse), seeded.
inline std::vector<std::array<double, 3>> random_station(int nstand, double radius,
                                                         std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1), z(-1.5, 1.5);
  std::vector<std::array<double, 3>> xyz;
  while (static_cast<int>(xyz.size()) < nstand) {
    const double x = u(rng), y = u(rng);
    if (x * x + y * y <= 1) xyz.push_back({0.8 * radius * x, radius * y, z(rng)});
  }
  return xyz;
}

inline std::vector<std::uint8_t> random_ci4(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-7, 7);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v)
    b = io::ci4_pack(d(rng), d(rng));
  return v;
}

inline std::vector<float> image(const EpicPlan& plan, const std::vector<std::uint8_t>& in) {
  const auto& c = plan.config();
  std::vector<float> out(static_cast<std::size_t>(c.nchan) * 4 * c.grid_size * c.grid_size);
  plan.execute(View<const std::uint8_t, 4>(in.data(), {c.nchan, c.ntime, c.nstand, 2}),
               View<float, 4>(out.data(), {c.nchan, 4, c.grid_size, c.grid_size}));
  return out;
}

// 2-D forward DFT (rows then columns) in float64, O(N^3).
inline std::vector<cd> dft2(const std::vector<cd>& g, int n) {
  std::vector<cd> w(static_cast<std::size_t>(n)), tmp(g.size()), out(g.size());
  for (int k = 0; k < n; ++k)
    w[k] = std::polar(1.0, -2 * kPi * k / n);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k) {
      cd s = 0;
      for (int j = 0; j < n; ++j)
        s += g[r * n + j] * w[(j * k) % n];
      tmp[r * n + k] = s;
    }
  for (int c = 0; c < n; ++c)
    for (int k = 0; k < n; ++k) {
      cd s = 0;
      for (int j = 0; j < n; ++j)
        s += tmp[j * n + c] * w[(j * k) % n];
      out[k * n + c] = s;
    }
  return out;
}

// The FX image of one gulp in float64: visibilities V_ij (i != j) of the calibrated voltages,
// each gridded with the cross-correlation of the two antennas' kernels (lag d = cell_i - cell_j,
// cyclic on the N x N grid), transformed, centred and grid-corrected. [nchan][4][N][N].
inline std::vector<double> fx_image(const EpicPlan& plan, const std::vector<std::uint8_t>& in) {
  const auto& c = plan.config();
  const int n = c.grid_size;
  const auto& used = plan.used_stands();
  const int nu = static_cast<int>(used.size());
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  const auto corr = plan.grid_correction();
  std::vector<double> out(static_cast<std::size_t>(c.nchan) * 4 * nn);
  for (int ch = 0; ch < c.nchan; ++ch) {
    const double f = c.freqs_hz[ch];
    // Calibrated voltages e[k][t][p].
    std::vector<cd> e(static_cast<std::size_t>(nu) * c.ntime * 2);
    for (int k = 0; k < nu; ++k) {
      const int s = used[k];
      for (int p = 0; p < 2; ++p) {
        cd g = c.calibration.empty()
                   ? cd(1)
                   : cd(c.calibration[(static_cast<std::size_t>(ch) * c.nstand + s) * 2 + p]);
        if (c.phase_to_zenith)
          g *= std::polar(1.0, -2 * kPi * c.stand_xyz_m[s][2] * f / kSpeedOfLight);
        for (std::int64_t t = 0; t < c.ntime; ++t) {
          const std::uint8_t b =
              in[((static_cast<std::size_t>(ch) * c.ntime + t) * c.nstand + s) * 2 + p];
          e[(k * c.ntime + t) * 2 + p] = cd(io::ci4_real(b), io::ci4_imag(b)) * g;
        }
      }
    }
    std::vector<Footprint> fp;
    for (int s : used)
      fp.push_back(plan.footprint(ch, s));
    std::vector<cd> grid[3];  // XX, YY, XY
    for (auto& g : grid)
      g.assign(nn, 0);
    for (int i = 0; i < nu; ++i)
      for (int j = 0; j < nu; ++j) {
        if (i == j) continue;
        cd v[3] = {0, 0, 0};
        for (std::int64_t t = 0; t < c.ntime; ++t) {
          const cd xi = e[(i * c.ntime + t) * 2], yi = e[(i * c.ntime + t) * 2 + 1];
          const cd xj = e[(j * c.ntime + t) * 2], yj = e[(j * c.ntime + t) * 2 + 1];
          v[0] += xi * std::conj(xj);
          v[1] += yi * std::conj(yj);
          v[2] += xi * std::conj(yj);
        }
        // K_ij[d] = sum_c W_i[c] W_j[c - d]: every pair of cells (ci, cj), lag ci - cj.
        const auto &a = fp[i], &b = fp[j];
        const int taps = static_cast<int>(a.wx.size());
        for (int ay = 0; ay < taps; ++ay)
          for (int ax = 0; ax < taps; ++ax)
            for (int by = 0; by < taps; ++by)
              for (int bx = 0; bx < taps; ++bx) {
                const double w = double(a.wy[ay]) * a.wx[ax] * b.wy[by] * b.wx[bx];
                const int dx = ((a.x0 + ax - b.x0 - bx) % n + n) % n;
                const int dy = ((a.y0 + ay - b.y0 - by) % n + n) % n;
                for (int k = 0; k < 3; ++k)
                  grid[k][static_cast<std::size_t>(dy) * n + dx] += w * v[k];
              }
      }
    for (int k = 0; k < 3; ++k) {
      const auto img = dft2(grid[k], n);
      for (int q = 0; q < n; ++q)
        for (int p = 0; p < n; ++p) {
          const std::size_t dst = static_cast<std::size_t>((q + n / 2) % n) * n + (p + n / 2) % n;
          const double g = corr[ch * nn + dst];
          const cd v = img[static_cast<std::size_t>(q) * n + p] * g;
          if (k < 2) {
            out[(ch * 4 + k) * nn + dst] = v.real();
          } else {
            out[(ch * 4 + 2) * nn + dst] = v.real();
            out[(ch * 4 + 3) * nn + dst] = v.imag();
          }
        }
    }
  }
  return out;
}

inline double relative_l2(const float* got, const double* want, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

inline EpicConfig small_config(int nstand, int n, int nchan, std::int64_t ntime) {
  EpicConfig c;
  c.nchan = nchan;
  c.nstand = nstand;
  c.ntime = ntime;
  for (int i = 0; i < nchan; ++i)
    c.freqs_hz.push_back(60e6 + 25e3 * 37 * i);
  c.stand_xyz_m = random_station(nstand, 30, 11);
  c.grid_size = n;
  c.threads = 2;
  return c;
}

/// Runs a CUDA plan: input copied to the device, output poisoned (0xFF bytes: NaN) first.
inline std::vector<float> image_gpu(const EpicPlan& plan, const std::vector<std::uint8_t>& in) {
  const auto& c = plan.config();
  const std::size_t nout = static_cast<std::size_t>(c.nchan) * 4 * c.grid_size * c.grid_size;
  DeviceArray<std::uint8_t> d_in(in.size());
  DeviceArray<float> d_out(nout);
  copy_bytes(d_in.data(), in.data(), in.size());
  device_memset(d_out.data(), 0xFF, d_out.bytes());
  plan.execute(
      View<const std::uint8_t, 4>(d_in.data(), {c.nchan, c.ntime, c.nstand, 2}, Space::device),
      View<float, 4>(d_out.data(), {c.nchan, 4, c.grid_size, c.grid_size}, Space::device));
  std::vector<float> out(nout);
  copy_bytes(out.data(), d_out.data(), d_out.bytes());
  return out;
}

}  // namespace wbepic
