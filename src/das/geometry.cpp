// Probe geometries, regular grids and transmit delays (UFF conventions, see das.hpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "warpbeam/das.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::das {

Probe linear_array(int n, double pitch, double element_width) {
  if (n < 1) fail(ErrorCategory::invalid_argument, "a linear array needs >= 1 element, not {}", n);
  if (!(pitch > 0)) fail(ErrorCategory::invalid_argument, "pitch = {} m must be > 0", pitch);
  Probe p;
  p.pitch = pitch;
  p.element_width = element_width > 0 ? element_width : pitch;
  for (int i = 0; i < n; ++i)
    p.positions.push_back({(i - (n - 1) / 2.0) * pitch, 0.0, 0.0});
  return p;
}

Probe matrix_array(int nx, int ny, double pitch_x, double pitch_y) {
  if (nx < 1 || ny < 1)
    fail(ErrorCategory::invalid_argument, "a matrix array needs >= 1 x 1 elements, not {} x {}", nx,
         ny);
  if (!(pitch_x > 0) || !(pitch_y > 0))
    fail(ErrorCategory::invalid_argument, "matrix pitch ({}, {}) m must be > 0", pitch_x, pitch_y);
  Probe p;
  p.pitch = pitch_x;
  p.element_width = pitch_x;
  for (int iy = 0; iy < ny; ++iy)
    for (int ix = 0; ix < nx; ++ix)
      p.positions.push_back(
          {(ix - (nx - 1) / 2.0) * pitch_x, (iy - (ny - 1) / 2.0) * pitch_y, 0.0});
  return p;
}

Probe row_column_array(int n, double pitch) {
  if (n < 1) fail(ErrorCategory::invalid_argument, "a row-column array needs n >= 1, not {}", n);
  if (!(pitch > 0)) fail(ErrorCategory::invalid_argument, "pitch = {} m must be > 0", pitch);
  Probe p;
  p.pitch = pitch;
  p.element_width = pitch;
  for (int i = 0; i < n; ++i) {  // rows: long along x, at y_i
    p.positions.push_back({0.0, (i - (n - 1) / 2.0) * pitch, 0.0});
    p.kinds.push_back(ElementKind::line_x);
  }
  for (int i = 0; i < n; ++i) {  // columns: long along y, at x_i
    p.positions.push_back({(i - (n - 1) / 2.0) * pitch, 0.0, 0.0});
    p.kinds.push_back(ElementKind::line_y);
  }
  return p;
}

Transmit Transmit::plane(double azimuth, double elevation) {
  Transmit t;
  t.kind = Kind::plane_wave;
  t.azimuth = azimuth;
  t.elevation = elevation;
  return t;
}

Transmit Transmit::diverging(const Vec3& source) {
  Transmit t;
  t.kind = Kind::diverging_wave;
  t.source = source;
  return t;
}

std::int64_t Axis::size() const {
  if (!(step > 0) || !std::isfinite(start) || !std::isfinite(stop) || stop < start) return 0;
  // In double first: (stop - start) / step can exceed int64 (a cast would be undefined).
  const double n = std::floor((stop - start) / step + 1e-9) + 1;
  return n < kMaxAxisPoints ? static_cast<std::int64_t>(n) : kMaxAxisPoints;
}

std::int64_t Grid::size() const {
  // Each axis is at most kMaxAxisPoints (2^31): the product of three fits in double exactly
  // enough to compare, and is saturated rather than overflowed.
  const double n =
      static_cast<double>(z.size()) * static_cast<double>(y.size()) * static_cast<double>(x.size());
  return n < 9e18 ? static_cast<std::int64_t>(n) : std::numeric_limits<std::int64_t>::max();
}

std::vector<Vec3> Grid::voxels() const {
  std::vector<Vec3> v;
  v.reserve(static_cast<std::size_t>(size()));
  for (std::int64_t iz = 0; iz < z.size(); ++iz)
    for (std::int64_t iy = 0; iy < y.size(); ++iy)
      for (std::int64_t ix = 0; ix < x.size(); ++ix)
        v.push_back({x.at(ix), y.at(iy), z.at(iz)});
  return v;
}

namespace {
double parse_number(std::string_view s, std::string_view what) {
  // std::from_chars for double is in libstdc++ 11+.
  double v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty())
    fail(ErrorCategory::invalid_argument, "grid: '{}' in {} is not a number", s, what);
  return v;
}

Axis parse_axis(std::string_view s, const char* name) {
  Axis a;
  std::vector<std::string_view> parts;
  std::size_t pos = 0;
  while (true) {
    const auto c = s.find(':', pos);
    parts.push_back(s.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  if (parts.size() != 3)
    fail(ErrorCategory::invalid_argument, "grid: axis {} '{}' must be start:stop:step", name, s);
  a.start = parse_number(parts[0], name);
  a.stop = parse_number(parts[1], name);
  a.step = parse_number(parts[2], name);
  if (!(a.step > 0))
    fail(ErrorCategory::invalid_argument, "grid: axis {} step = {} must be > 0", name, a.step);
  if (a.stop < a.start)
    fail(ErrorCategory::invalid_argument, "grid: axis {} stop {} < start {} (zero voxels)", name,
         a.stop, a.start);
  if (!std::isfinite(a.start) || !std::isfinite(a.stop) || !std::isfinite(a.step))
    fail(ErrorCategory::invalid_argument, "grid: axis {} '{}' must be finite numbers", name, s);
  if (a.size() >= kMaxGridVoxels)
    fail(ErrorCategory::invalid_argument,
         "grid: axis {} '{}' has {:.3g} points: a coarser step, please (at most {})", name, s,
         std::floor((a.stop - a.start) / a.step) + 1, kMaxGridVoxels - 1);
  return a;
}
}  // namespace

Grid parse_grid(std::string_view spec) {
  std::vector<std::string_view> axes;
  std::size_t pos = 0;
  while (true) {
    const auto c = spec.find(',', pos);
    axes.push_back(
        spec.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  Grid g;
  if (axes.size() == 2) {
    g.x = parse_axis(axes[0], "x");
    g.z = parse_axis(axes[1], "z");
  } else if (axes.size() == 3) {
    g.x = parse_axis(axes[0], "x");
    g.y = parse_axis(axes[1], "y");
    g.z = parse_axis(axes[2], "z");
  } else {
    fail(ErrorCategory::invalid_argument,
         "grid '{}' must be x0:x1:dx,z0:z1:dz or x0:x1:dx,y0:y1:dy,z0:z1:dz (m)", spec);
  }
  if (g.size() == 0) fail(ErrorCategory::invalid_argument, "grid '{}' has zero voxels", spec);
  if (g.size() >= kMaxGridVoxels)
    fail(ErrorCategory::invalid_argument, "grid '{}' has {} x {} x {} voxels: at most {} in all",
         spec, g.x.size(), g.y.size(), g.z.size(), kMaxGridVoxels - 1);
  return g;
}

DasConfig reference_config(std::string_view name) {
  DasConfig c;
  c.signal = Signal::iq;
  c.transmits = {Transmit::plane(0)};
  if (name == "U1") {
    // PWI_disk.mat's acquisition (../shared/data/README.md) on bmode_PWI_disk.mat's grid.
    c.batch = 32;
    c.nsamples = 334;
    c.fs = 6.6666666666666667e6;
    c.fc = 5e6;
    c.c = 1480;
    c.t0 = 9.95e-6;
    c.probe = linear_array(128, 0.298e-3, 0.262e-3);
    c.voxels = parse_grid("-12.5e-3:12.5e-3:1e-4,10e-3:35e-3:1e-4").voxels();
    c.fnumber = 1.0;
  } else if (name == "U2") {
    // 32 x 32 matrix at 3 MHz, pitch 0.3 mm; IQ at 6 MHz (512 samples: 0..66 mm round trip);
    // 64^3 voxels over x, y in [-9.6, 9.6] mm and z in [10, 50] mm.
    c.batch = 128;
    c.nsamples = 512;
    c.fs = 6e6;
    c.fc = 3e6;
    c.c = 1540;
    c.t0 = 0;
    c.probe = matrix_array(32, 32, 0.3e-3, 0.3e-3);
    Grid g;
    g.x = {-9.6e-3, 9.6e-3, 19.2e-3 / 63};
    g.y = g.x;
    g.z = {10e-3, 50e-3, 40e-3 / 63};
    c.voxels = g.voxels();
  } else {
    fail(ErrorCategory::invalid_argument, "reference configuration '{}' is not U1 or U2", name);
  }
  return c;
}

std::vector<double> transmit_delays(const DasConfig& c) {
  const std::int64_t nv = c.nvoxels(), ntx = c.ntx();
  if (!c.tx_delays.empty()) return c.tx_delays;
  std::vector<double> d(static_cast<std::size_t>(ntx * nv));
  for (std::int64_t q = 0; q < ntx; ++q) {
    const Transmit& t = c.transmits[q];
    double* row = d.data() + q * nv;
    switch (t.kind) {
      case Transmit::Kind::plane_wave: {
        const double ux = std::sin(t.azimuth) * std::cos(t.elevation);
        const double uy = std::sin(t.elevation);
        const double uz = std::cos(t.azimuth) * std::cos(t.elevation);
        for (std::int64_t n = 0; n < nv; ++n) {
          const auto& p = c.voxels[n];
          row[n] = (p[0] * ux + p[1] * uy + p[2] * uz) / c.c + t.delay;
        }
        break;
      }
      case Transmit::Kind::diverging_wave: {
        const auto& s = t.source;
        const double ds = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
        for (std::int64_t n = 0; n < nv; ++n) {
          const auto& p = c.voxels[n];
          const double r = std::sqrt((p[0] - s[0]) * (p[0] - s[0]) + (p[1] - s[1]) * (p[1] - s[1]) +
                                     (p[2] - s[2]) * (p[2] - s[2]));
          row[n] = (r - ds) / c.c + t.delay;
        }
        break;
      }
      case Transmit::Kind::element_delays: {
        const auto& pos = t.element_positions.empty() ? c.probe.positions : t.element_positions;
        for (std::int64_t n = 0; n < nv; ++n) {
          const auto& p = c.voxels[n];
          double best = std::numeric_limits<double>::infinity();
          for (std::size_t e = 0; e < pos.size(); ++e) {
            if (std::isnan(t.element_delays[e])) continue;
            const double r = std::sqrt((p[0] - pos[e][0]) * (p[0] - pos[e][0]) +
                                       (p[1] - pos[e][1]) * (p[1] - pos[e][1]) +
                                       (p[2] - pos[e][2]) * (p[2] - pos[e][2]));
            best = std::min(best, t.element_delays[e] + r / c.c);
          }
          row[n] = best + t.delay;
        }
        break;
      }
    }
  }
  return d;
}

}  // namespace warpbeam::das
