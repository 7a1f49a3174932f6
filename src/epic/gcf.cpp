// The gridding convolution function (GCF) and every table an EpicPlan precomputes: antenna
// placement, per-antenna per-channel kernel weights, the grid correction and the
// autocorrelation tables. Formulas: see include/warpbeam/epic.hpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "epic/block_fft.hpp"
#include "epic/tables.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::epic {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Cyclic Jacobi eigen-decomposition of a small dense symmetric matrix a[n][n] (destroyed); the
// eigenvector of the smallest eigenvalue is returned in `vec` and the eigenvalue returned.
double smallest_eigenpair(std::vector<double>& a, int n, std::vector<double>& vec) {
  std::vector<double> v(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i)
    v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q)
        off += a[p * n + q] * a[p * n + q];
    if (off < 1e-30) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p, q
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rows p, q
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (a[i * n + i] < a[best * n + best]) best = i;
  vec.resize(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k)
    vec[k] = v[k * n + best];
  return a[best * n + best];
}

// psi_0(c, .) as Legendre coefficients d_k of the normalised Legendre functions
// Pbar_k = sqrt(k + 1/2) P_k, k = 0, 2, 4, ... (only even k: psi_0 is even).
struct Prolate {
  double c = 0, chi = 0;
  std::vector<double> d;  // d[j] multiplies Pbar_{2j}

  explicit Prolate(double c_) : c(c_) {
    // The prolate operator in the normalised Legendre basis is symmetric tridiagonal (even
    // block): L_kk = k(k+1) + c^2 (2k^2+2k-1)/((2k+3)(2k-1)),
    // L_k,k+2 = c^2 (k+1)(k+2) / ((2k+3) sqrt((2k+1)(2k+5))).
    const int m = 24 + static_cast<int>(c);  // even terms; ample for c <= 15
    std::vector<double> a(static_cast<std::size_t>(m) * m, 0.0);
    for (int j = 0; j < m; ++j) {
      const double k = 2.0 * j;
      a[j * m + j] = k * (k + 1) + c * c * (2 * k * k + 2 * k - 1) / ((2 * k + 3) * (2 * k - 1));
      if (j + 1 < m) {
        const double off =
            c * c * (k + 1) * (k + 2) / ((2 * k + 3) * std::sqrt((2 * k + 1) * (2 * k + 5)));
        a[j * m + j + 1] = a[(j + 1) * m + j] = off;
      }
    }
    chi = smallest_eigenpair(a, m, d);
    const double at0 = raw(0);
    for (auto& x : d)
      x /= at0;  // psi(0) = 1 (fixes the sign too)
  }

  double raw(double eta) const {
    // Legendre recurrence: (k+1) P_{k+1} = (2k+1) eta P_k - k P_{k-1}.
    double p0 = 1, p1 = eta, sum = d[0] * std::sqrt(0.5) * p0;
    const int kmax = 2 * static_cast<int>(d.size()) - 2;
    for (int k = 1; k < kmax; ++k) {
      const double p2 = ((2 * k + 1) * eta * p1 - k * p0) / (k + 1);
      p0 = p1;
      p1 = p2;
      if ((k + 1) % 2 == 0) sum += d[(k + 1) / 2] * std::sqrt(k + 1.5) * p1;
    }
    return sum;
  }
};

const Prolate& prolate_for(double c) {
  static std::mutex mu;
  static std::map<double, std::unique_ptr<Prolate>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = cache[c];
  if (!p) p = std::make_unique<Prolate>(c);
  return *p;
}

// psi_0 tabulated on [0, 1] for fast evaluation (linear interpolation: error ~1e-8).
struct ProlateTable {
  static constexpr int kIntervals = 16384;
  std::vector<double> y;
  explicit ProlateTable(double c) : y(kIntervals + 1) {
    const Prolate& p = prolate_for(c);
    for (int i = 0; i <= kIntervals; ++i)
      y[i] = p.raw(static_cast<double>(i) / kIntervals);
  }
  double operator()(double eta) const {
    const double a = std::abs(eta);
    if (a > 1) return 0;
    const double x = a * kIntervals;
    const int i = std::min(static_cast<int>(x), kIntervals - 1);
    return y[i] + (x - i) * (y[i + 1] - y[i]);
  }
};

// The 1-D cell weights of an antenna at position `u` (cells): cells x0 .. x0 + S, each the
// 5-point midpoint average of psi over the cell, normalised to unit sum. (The 2-D kernel is the
// product of the x and y weights: the 5 x 5 product rule of the separable psi(x) psi(y).)
int cell_weights(const ProlateTable& psi, int support, double u, float* w) {
  const double half = 0.5 * support;
  const int x0 = static_cast<int>(std::floor(u - half + 0.5));
  double sum = 0;
  std::vector<double> tmp(static_cast<std::size_t>(support) + 1);
  for (int j = 0; j <= support; ++j) {
    double acc = 0;
    for (int q = 0; q < 5; ++q) {
      const double t = (x0 + j) - 0.5 + (q + 0.5) / 5.0;
      acc += psi((t - u) / half);
    }
    tmp[j] = acc / 5.0;
    sum += tmp[j];
  }
  for (int j = 0; j <= support; ++j)
    w[j] = static_cast<float>(tmp[j] / sum);
  return x0;
}

}  // namespace

double prolate_spheroidal(double c, double eta, double* chi) {
  if (!(c > 0) || c > 100)
    fail(ErrorCategory::invalid_argument, "prolate c = {} is outside (0, 100]", c);
  const Prolate& p = prolate_for(c);
  if (chi) *chi = p.chi;
  if (std::abs(eta) > 1) return 0;
  return p.raw(eta);
}

namespace detail {

PlanTables build_tables(const EpicConfig& cfg) {
  PlanTables t;
  t.n = cfg.grid_size;
  t.support = cfg.support;
  t.nchan = cfg.nchan;
  t.nstand = cfg.nstand;
  t.ntime = cfg.ntime;
  t.du = cfg.cell_wavelengths();
  const int n = t.n, taps = t.taps();

  // Stands: usable ones, then the radius cut about their centroid.
  std::vector<int> ok;
  for (int s = 0; s < cfg.nstand; ++s)
    if (cfg.stand_ok.empty() || cfg.stand_ok[s]) ok.push_back(s);
  double cx = 0, cy = 0;
  for (int s : ok) {
    cx += cfg.stand_xyz_m[s][0];
    cy += cfg.stand_xyz_m[s][1];
  }
  if (!ok.empty()) {
    cx /= static_cast<double>(ok.size());
    cy /= static_cast<double>(ok.size());
  }
  for (int s : ok) {
    const double r = std::hypot(cfg.stand_xyz_m[s][0] - cx, cfg.stand_xyz_m[s][1] - cy);
    (r <= cfg.max_stand_radius_m ? t.used : t.distant).push_back(s);
  }
  if (t.used.size() < 2)
    fail(ErrorCategory::invalid_argument,
         "only {} stand(s) are usable within max_stand_radius_m = {} m: EPIC needs at least 2",
         t.used.size(), cfg.max_stand_radius_m);
  const int nu = t.nused();

  // Footprints per channel. Positions in cells: x / (lambda du); the channel's shift moves the
  // lowest footprint cell to 0 in both axes.
  const ProlateTable psi(kPi * cfg.support / 2);
  t.x0.resize(static_cast<std::size_t>(cfg.nchan) * nu);
  t.y0.resize(t.x0.size());
  t.u.resize(t.x0.size());
  t.v.resize(t.x0.size());
  t.wx.resize(t.x0.size() * taps);
  t.wy.resize(t.x0.size() * taps);
  t.rows.resize(static_cast<std::size_t>(cfg.nchan));
  t.cols.resize(static_cast<std::size_t>(cfg.nchan));
  for (int c = 0; c < cfg.nchan; ++c) {
    const double cells_per_m = cfg.freqs_hz[c] / kSpeedOfLight / t.du;
    int minx = 1 << 30, miny = 1 << 30, maxx = -(1 << 30), maxy = -(1 << 30);
    for (int k = 0; k < nu; ++k) {
      const std::size_t a = t.ant(c, k);
      const auto& p = cfg.stand_xyz_m[t.used[k]];
      t.u[a] = p[0] * cells_per_m;
      t.v[a] = p[1] * cells_per_m;
      t.x0[a] = cell_weights(psi, cfg.support, t.u[a], &t.wx[a * taps]);
      t.y0[a] = cell_weights(psi, cfg.support, t.v[a], &t.wy[a * taps]);
      minx = std::min(minx, t.x0[a]);
      miny = std::min(miny, t.y0[a]);
      maxx = std::max(maxx, t.x0[a] + cfg.support);
      maxy = std::max(maxy, t.y0[a] + cfg.support);
    }
    for (int k = 0; k < nu; ++k) {
      const std::size_t a = t.ant(c, k);
      t.x0[a] -= minx;
      t.y0[a] -= miny;
      t.u[a] -= minx;
      t.v[a] -= miny;
    }
    t.cols[c] = maxx - minx + 1;
    t.rows[c] = maxy - miny + 1;
    if (t.cols[c] > n || t.rows[c] > n)
      fail(ErrorCategory::invalid_argument,
           "at {:.4f} MHz the aperture spans {} x {} cells of {:.3f} m, more than the {} x {} "
           "grid: use a larger grid_size, or lower max_stand_radius_m",
           cfg.freqs_hz[c] / 1e6, t.cols[c], t.rows[c], 1 / cells_per_m, n, n);
  }

  // Calibration with the zenith phase; stands not gridded get 0.
  t.cal.assign(static_cast<std::size_t>(cfg.nchan) * cfg.nstand * 2, {0.f, 0.f});
  std::vector<std::uint8_t> gridded(static_cast<std::size_t>(cfg.nstand), 0);
  for (int s : t.used)
    gridded[s] = 1;
  for (int c = 0; c < cfg.nchan; ++c)
    for (int s = 0; s < cfg.nstand; ++s) {
      if (!gridded[s]) continue;
      const double ph = cfg.phase_to_zenith
                            ? -2 * kPi * cfg.stand_xyz_m[s][2] * cfg.freqs_hz[c] / kSpeedOfLight
                            : 0.0;
      const std::complex<double> z = std::polar(1.0, ph);
      for (int p = 0; p < 2; ++p) {
        const std::size_t i = (static_cast<std::size_t>(c) * cfg.nstand + s) * 2 + p;
        const std::complex<double> g = cfg.calibration.empty()
                                           ? std::complex<double>(1)
                                           : std::complex<double>(cfg.calibration[i]);
        t.cal[i] = std::complex<float>(g * z);
      }
    }

  // Autocorrelation tables |DFT of the 1-D weights|^2 and the grid correction 1/|T|^2.
  t.ax.resize(static_cast<std::size_t>(cfg.nchan) * nu * n);
  t.ay.resize(t.ax.size());
  t.corr.resize(static_cast<std::size_t>(cfg.nchan) * n * n);
  std::vector<std::complex<double>> tw(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p)
    tw[p] = std::polar(1.0, -2 * kPi * p / n);
  const int nthreads = cfg.threads > 0 ? cfg.threads : omp_get_max_threads();
#pragma omp parallel num_threads(nthreads)
  {
    std::vector<std::complex<double>> tx(static_cast<std::size_t>(nu) * n), ty(tx.size());
    std::vector<std::complex<double>> mean(static_cast<std::size_t>(n) * n);
#pragma omp for schedule(dynamic)
    for (int c = 0; c < cfg.nchan; ++c) {
      for (int k = 0; k < nu; ++k) {
        const std::size_t a = t.ant(c, k);
        for (int p = 0; p < n; ++p) {
          const int ps = p < n / 2 ? p : p - n;  // signed frequency index
          std::complex<double> fx = 0, fy = 0;
          for (int j = 0; j < taps; ++j) {
            fx += static_cast<double>(t.wx[a * taps + j]) * tw[(j * p) % n];
            fy += static_cast<double>(t.wy[a * taps + j]) * tw[(j * p) % n];
          }
          t.ax[a * n + p] = static_cast<float>(std::norm(fx));
          t.ay[a * n + p] = static_cast<float>(std::norm(fy));
          // T_i relative to the antenna's exact position: multiply by exp(+2 pi i (u - x0) ps/N).
          tx[static_cast<std::size_t>(k) * n + p] =
              fx * std::polar(1.0, 2 * kPi * (t.u[a] - t.x0[a]) * ps / n);
          ty[static_cast<std::size_t>(k) * n + p] =
              fy * std::polar(1.0, 2 * kPi * (t.v[a] - t.y0[a]) * ps / n);
        }
      }
      std::fill(mean.begin(), mean.end(), std::complex<double>(0));
      for (int k = 0; k < nu; ++k) {
        const std::complex<double>* rx = &tx[static_cast<std::size_t>(k) * n];
        for (int q = 0; q < n; ++q) {
          const std::complex<double> yq = ty[static_cast<std::size_t>(k) * n + q];
          std::complex<double>* row = &mean[static_cast<std::size_t>(q) * n];
          for (int p = 0; p < n; ++p)
            row[p] += yq * rx[p];
        }
      }
      // Pixels below the horizon (l^2 + m^2 > 1) hold no sky, only the kernel's aliasing and
      // rounding noise, which 1/|T|^2 (up to 1e6 there) would amplify until any two fp32 paths
      // disagree by 1e-5 of the image's maximum: they are set to 0, as are pixels with
      // |T|^2 < 1e-6. FFT order: (q, p) is the signed frequency (qs, ps), l = ps / (N du).
      for (int q = 0; q < n; ++q)
        for (int p = 0; p < n; ++p) {
          const std::size_t i = static_cast<std::size_t>(q) * n + p;
          const double l = (p < n / 2 ? p : p - n) / (n * t.du);
          const double m = (q < n / 2 ? q : q - n) / (n * t.du);
          const double m2 = std::norm(mean[i] / static_cast<double>(nu));
          t.corr[static_cast<std::size_t>(c) * n * n + i] =
              m2 < 1e-6 || l * l + m * m > 1 ? 0.f : static_cast<float>(1 / m2);
        }
    }
  }
  return t;
}

GatherTable build_gather_table(const PlanTables& t, int window) {
  const int taps = t.taps(), nu = t.nused();
  const std::size_t ncell = static_cast<std::size_t>(window) * window;
  GatherTable g;
  g.window = window;
  g.offsets.assign(static_cast<std::size_t>(t.nchan) * (ncell + 1), 0);
  g.base.assign(static_cast<std::size_t>(t.nchan) + 1, 0);
  for (int c = 0; c < t.nchan; ++c) {
    std::uint32_t* off = &g.offsets[c * (ncell + 1)];
    auto cell_of = [&](std::size_t a, int iy, int ix) {
      const int y = t.y0[a] + iy, x = t.x0[a] + ix;
      if (y < 0 || x < 0 || y >= window || x >= window)
        fail(ErrorCategory::invalid_argument,
             "a footprint at cell ({}, {}) leaves the {} x {} window", x, y, window, window);
      return static_cast<std::size_t>(y) * window + x;
    };
    for (int k = 0; k < nu; ++k)
      for (int iy = 0; iy < taps; ++iy)
        for (int ix = 0; ix < taps; ++ix)
          ++off[cell_of(t.ant(c, k), iy, ix) + 1];
    for (std::size_t i = 0; i < ncell; ++i)
      off[i + 1] += off[i];
    g.base[c + 1] = g.base[c] + off[ncell];
    g.stand.resize(g.base[c + 1]);
    g.weight.resize(g.base[c + 1]);
    std::vector<std::uint32_t> fill(off, off + ncell);
    for (int k = 0; k < nu; ++k) {
      const std::size_t a = t.ant(c, k);
      for (int iy = 0; iy < taps; ++iy)
        for (int ix = 0; ix < taps; ++ix) {
          const std::size_t e = g.base[c] + fill[cell_of(a, iy, ix)]++;
          g.stand[e] = static_cast<std::uint32_t>(t.used[k]);
          g.weight[e] = t.wy[a * taps + iy] * t.wx[a * taps + ix];
        }
    }
  }
  return g;
}

void finalize_channel(const PlanTables& t, int chan, const double* acc, const double* autos,
                      float* out) {
  const int n = t.n, nu = t.nused();
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  const float* corr = &t.corr[static_cast<std::size_t>(chan) * nn];
  std::vector<double> ayk(static_cast<std::size_t>(nu) * 4);
  std::vector<double> row(static_cast<std::size_t>(n) * 4);
  for (int q = 0; q < n; ++q) {
    // auto_k(q, p) = sum_i (A_ik ay_i(q)) ax_i(p): first fold ay into the antenna weights.
    for (int k = 0; k < nu; ++k) {
      const double y = t.ay[t.ant(chan, k) * n + q];
      for (int j = 0; j < 4; ++j)
        ayk[k * 4 + j] = autos[k * 4 + j] * y;
    }
    std::fill(row.begin(), row.end(), 0.0);
    for (int k = 0; k < nu; ++k) {
      const float* ax = &t.ax[t.ant(chan, k) * n];
      const double* a = &ayk[k * 4];
      for (int p = 0; p < n; ++p)
        for (int j = 0; j < 4; ++j)
          row[p * 4 + j] += a[j] * ax[p];
    }
    const int y = (q + n / 2) % n;
    for (int p = 0; p < n; ++p) {
      const int x = (p + n / 2) % n;
      const std::size_t src = static_cast<std::size_t>(q) * n + p;
      for (int j = 0; j < 4; ++j)
        out[j * nn + static_cast<std::size_t>(y) * n + x] =
            static_cast<float>((acc[j * nn + src] - row[p * 4 + j]) * corr[src]);
    }
  }
}

FusedGather build_fused_gather(const PlanTables& t, int window, int cluster, int q_threads,
                               int pin) {
  const GatherTable g = build_gather_table(t, window);
  const int rows_per_rank = (window + cluster - 1) / cluster;
  FusedGather f;
  f.cells = rows_per_rank * q_threads * pin;
  const std::size_t nlist = static_cast<std::size_t>(t.nchan) * cluster;
  f.offsets.assign(nlist * (f.cells + 1), 0);
  std::vector<std::vector<std::uint32_t>> lists(nlist);
  const std::size_t ncell = static_cast<std::size_t>(window) * window;
  for (int c = 0; c < t.nchan; ++c) {
    const std::uint32_t* off = &g.offsets[c * (ncell + 1)];
    for (int rank = 0; rank < cluster; ++rank) {
      const std::size_t li = static_cast<std::size_t>(c) * cluster + rank;
      auto& list = lists[li];
      std::uint16_t* o = &f.offsets[li * (f.cells + 1)];
      int cell = 0;
      for (int i = 0; i < rows_per_rank; ++i)
        for (int q = 0; q < q_threads; ++q)
          for (int p = 0; p < pin; ++p, ++cell) {
            o[cell] = static_cast<std::uint16_t>(list.size());
            const int row = rank + cluster * i, col = q + q_threads * p;
            if (row >= window || col >= window) continue;
            const std::size_t gc = static_cast<std::size_t>(row) * window + col;
            for (std::uint32_t e = g.base[c] + off[gc]; e < g.base[c] + off[gc + 1]; ++e)
              list.push_back((g.stand[e] << 16) | fft::half_bits(g.weight[e]));
            if (list.size() > 65535)
              fail(ErrorCategory::unsupported,
                   "the fused imager's gather list of channel {} block {} exceeds 65535 entries "
                   "(too many stands or too wide a kernel support)",
                   c, rank);
          }
      o[f.cells] = static_cast<std::uint16_t>(list.size());
      f.max_entries = std::max(f.max_entries, static_cast<int>(list.size()));
    }
  }
  f.entries.assign(nlist * static_cast<std::size_t>(std::max(f.max_entries, 1)), 0);
  for (std::size_t li = 0; li < nlist; ++li)
    std::copy(lists[li].begin(), lists[li].end(),
              f.entries.begin() + static_cast<std::ptrdiff_t>(li * std::max(f.max_entries, 1)));
  return f;
}

}  // namespace detail
}  // namespace warpbeam::epic
