// Beamformer weights from geometry: pointing -> direction (ERFA for ICRS -> observed), phases
// per antenna and channel, gains and mask; beam lists and grids; the BEST-2 array.
#ifdef WARPBEAM_HAVE_ERFA
#include <erfa.h>
#endif

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "warpbeam/beamform.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::beamform {

namespace {
constexpr double kDeg = std::numbers::pi / 180.0;
}

std::string_view to_string(Frame f) {
  switch (f) {
    case Frame::direction_cosines:
      return "lm";
    case Frame::azel:
      return "azel";
    case Frame::radec:
      return "radec";
  }
  return "?";
}

void ArrayGeometry::validate(int npol) const {
  if (enu_m.empty()) fail(ErrorCategory::invalid_argument, "the array has no antennas");
  for (std::size_t a = 0; a < enu_m.size(); ++a)
    for (double x : enu_m[a])
      if (!std::isfinite(x))
        fail(ErrorCategory::invalid_argument, "antenna {} has a non-finite position", a);
  if (!gains.empty() && gains.size() != enu_m.size() * static_cast<std::size_t>(npol))
    fail(ErrorCategory::invalid_argument, "{} gains for {} antennas x {} pols", gains.size(),
         enu_m.size(), npol);
  if (!mask.empty() && mask.size() != enu_m.size())
    fail(ErrorCategory::invalid_argument, "antenna mask has {} entries for {} antennas",
         mask.size(), enu_m.size());
  // Every beam of a fully masked array is zero: refused rather than formed (a new user's trial of
  // 2026-12-04: `--mask 0,...,31` wrote all-zero filterbanks and exited 0).
  if (!mask.empty() && std::none_of(mask.begin(), mask.end(), [](std::uint8_t m) { return m; }))
    fail(ErrorCategory::invalid_argument,
         "every one of the {} antennas is masked: no antenna is left to form beams", enu_m.size());
  if (!std::isfinite(site.latitude_rad) || std::abs(site.latitude_rad) > std::numbers::pi / 2)
    fail(ErrorCategory::invalid_argument, "site latitude {} rad is outside [-pi/2, pi/2]",
         site.latitude_rad);
}

ArrayGeometry best2_geometry() {
  ArrayGeometry g;
  g.site = {11.6469 * kDeg, 44.5206 * kDeg, 25.0};
  constexpr int ncols = 4, nrows = 8;  // 4 receivers per cylinder (east), 8 cylinders (north)
  constexpr double dx = 23.5 / 4, dy = 10.0;
  for (int r = 0; r < nrows; ++r)
    for (int c = 0; c < ncols; ++c)
      g.enu_m.push_back({(c - (ncols - 1) / 2.0) * dx, (r - (nrows - 1) / 2.0) * dy, 0.0});
  return g;
}

std::vector<double> best2_frequencies_hz(int nchans) {
  require_range("nchans", nchans, 1, 1 << 20);
  std::vector<double> f(static_cast<std::size_t>(nchans));
  const double bw = 20e6, flo = 408e6 - bw / 2;
  for (int i = 0; i < nchans; ++i)
    f[static_cast<std::size_t>(i)] = flo + (i + 0.5) * bw / nchans;
  return f;
}

bool is_tracking(const std::vector<Pointing>& pointings) {
  for (const auto& p : pointings)
    if (p.frame == Frame::radec) return true;
  return false;
}

std::array<double, 2> enu_to_azel(const std::array<double, 3>& s) {
  double az = std::atan2(s[0], s[1]);
  if (az < 0) az += 2 * std::numbers::pi;
  return {az, std::atan2(s[2], std::hypot(s[0], s[1]))};
}

std::array<double, 3> direction_enu(const Pointing& p, const Observatory& site, double mjd_utc,
                                    int index) {
  double az = 0, el = 0;
  switch (p.frame) {
    case Frame::direction_cosines: {
      const double n2 = 1 - p.a * p.a - p.b * p.b;
      if (!(n2 >= 0))
        fail(ErrorCategory::invalid_argument,
             "beam {}: direction cosines (l, m) = ({}, {}) are outside the unit circle (below the "
             "horizon)",
             index, p.a, p.b);
      return {p.a, p.b, std::sqrt(n2)};
    }
    case Frame::azel:
      az = p.a;
      el = p.b;
      break;
    case Frame::radec: {
#ifndef WARPBEAM_HAVE_ERFA
      fail(ErrorCategory::unsupported, "beam {}: (RA, Dec) beams need ERFA (liberfa-dev)", index);
#else
      double aob, zob, hob, dob, rob, eo;
      // ICRS -> observed with no refraction (phpa = 0), DUT1 = 0, no polar motion.
      const int st = eraAtco13(p.a, p.b, 0, 0, 0, 0, 2400000.5, mjd_utc, 0.0, site.longitude_rad,
                               site.latitude_rad, site.height_m, 0, 0, 0, 0, 0, 0, &aob, &zob, &hob,
                               &dob, &rob, &eo);
      if (st < 0)
        fail(ErrorCategory::invalid_argument, "beam {}: MJD {} is not a usable UTC date", index,
             mjd_utc);
      az = aob;
      el = std::numbers::pi / 2 - zob;
      break;
#endif
    }
  }
  if (!std::isfinite(az) || !std::isfinite(el) || el < 0)
    fail(ErrorCategory::invalid_argument,
         "beam {}{}: elevation {:.3f} deg is below the horizon (az {:.3f} deg, MJD {:.6f})", index,
         p.name.empty() ? "" : " (" + p.name + ")", el / kDeg, az / kDeg, mjd_utc);
  return {std::sin(az) * std::cos(el), std::cos(az) * std::cos(el), std::sin(el)};
}

std::vector<std::complex<float>> compute_weights(const ArrayGeometry& array,
                                                 const std::vector<Pointing>& pointings,
                                                 const std::vector<double>& freqs_hz, int npol,
                                                 double mjd_utc) {
  require_range("npol", npol, 1, 2);
  array.validate(npol);
  if (pointings.empty()) fail(ErrorCategory::invalid_argument, "no beams to form");
  if (freqs_hz.empty()) fail(ErrorCategory::invalid_argument, "no channel frequencies");
  for (double f : freqs_hz)
    if (!(f > 0) || !std::isfinite(f))
      fail(ErrorCategory::invalid_argument, "channel frequency {} Hz must be > 0", f);
  const std::size_t na = array.enu_m.size(), nb = pointings.size(), nc = freqs_hz.size();
  // Geometric delay (s) of every antenna for every beam: tau = r . s / c.
  std::vector<double> tau(nb * na);
  for (std::size_t b = 0; b < nb; ++b) {
    const auto s = direction_enu(pointings[b], array.site, mjd_utc, static_cast<int>(b));
    for (std::size_t a = 0; a < na; ++a) {
      const auto& r = array.enu_m[a];
      tau[b * na + a] = (r[0] * s[0] + r[1] * s[1] + r[2] * s[2]) / kSpeedOfLight;
    }
  }
  std::vector<std::complex<float>> w(nc * static_cast<std::size_t>(npol) * nb * na);
  for (std::size_t c = 0; c < nc; ++c)
    for (int p = 0; p < npol; ++p)
      for (std::size_t b = 0; b < nb; ++b)
        for (std::size_t a = 0; a < na; ++a) {
          std::complex<double> v =
              std::polar(1.0, -2 * std::numbers::pi * freqs_hz[c] * tau[b * na + a]);
          if (!array.gains.empty())
            v *= std::complex<double>(array.gains[a * static_cast<std::size_t>(npol) + p]);
          if (!array.mask.empty() && !array.mask[a]) v = 0;
          w[((c * npol + p) * nb + b) * na + a] = std::complex<float>(v);
        }
  return w;
}

std::complex<double> array_response(const ArrayGeometry& array, const std::complex<float>* w,
                                    double f_hz, const std::array<double, 3>& s) {
  std::complex<double> sum = 0;
  for (std::size_t a = 0; a < array.enu_m.size(); ++a) {
    const auto& r = array.enu_m[a];
    const double tau = (r[0] * s[0] + r[1] * s[1] + r[2] * s[2]) / kSpeedOfLight;
    sum += std::complex<double>(w[a]) * std::polar(1.0, 2 * std::numbers::pi * f_hz * tau);
  }
  return sum;
}

namespace {

// Degrees, or sexagesimal "a:b:c" (hours for RA when `hours`).
double parse_angle_deg(const std::string& s, bool hours, const std::string& where) {
  try {
    if (s.find(':') == std::string::npos) {
      std::size_t pos = 0;
      const double v = std::stod(s, &pos);
      if (pos != s.size()) throw std::invalid_argument(s);
      return v;
    }
    std::stringstream ss(s);
    std::string part;
    double parts[3] = {0, 0, 0};
    int n = 0;
    bool neg = !s.empty() && s[0] == '-';
    while (std::getline(ss, part, ':') && n < 3)
      parts[n++] = std::abs(std::stod(part));
    const double v = parts[0] + parts[1] / 60 + parts[2] / 3600;
    return (neg ? -v : v) * (hours ? 15.0 : 1.0);
  } catch (const std::exception&) {
    fail(ErrorCategory::invalid_argument, "{}: '{}' is not an angle", where, s);
  }
}

Pointing make_pointing(const std::string& frame, double a, double b, const std::string& where) {
  if (!std::isfinite(a) || !std::isfinite(b))
    fail(ErrorCategory::invalid_argument, "{}: the angles {} and {} must be finite", where, a, b);
  // The second coordinate is a latitude (elevation, declination): |b| <= 90 degrees; direction
  // cosines lie on the unit disc.
  if ((frame == "azel" || frame == "radec") && std::abs(b) > 90)
    fail(ErrorCategory::invalid_argument, "{}: {} {} degrees is outside [-90, 90]", where,
         frame == "azel" ? "elevation" : "declination", b);
  if (frame == "lm" && a * a + b * b > 1)
    fail(ErrorCategory::invalid_argument,
         "{}: direction cosines l = {}, m = {} are outside the unit circle", where, a, b);
  Pointing p;
  if (frame == "azel") {
    p = {Frame::azel, a * kDeg, b * kDeg, {}};
  } else if (frame == "radec") {
    p = {Frame::radec, a * kDeg, b * kDeg, {}};
  } else if (frame == "lm") {
    p = {Frame::direction_cosines, a, b, {}};
  } else {
    fail(ErrorCategory::invalid_argument, "{}: frame '{}' is not azel, radec or lm", where, frame);
  }
  return p;
}

}  // namespace

std::vector<Pointing> parse_beam_list(const std::string& text) {
  std::vector<Pointing> out;
  std::stringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::stringstream ls(line);
    std::string frame, a, b, name;
    if (!(ls >> frame)) continue;
    const std::string where = fmt::format("beam list line {}", lineno);
    if (!(ls >> a >> b))
      fail(ErrorCategory::invalid_argument, "{}: expected 'FRAME A B [NAME]'", where);
    ls >> name;
    const bool radec = frame == "radec";
    Pointing p =
        make_pointing(frame, parse_angle_deg(a, radec && a.find(':') != std::string::npos, where),
                      parse_angle_deg(b, false, where), where);
    p.name = name.empty() ? fmt::format("beam{}", out.size()) : name;
    out.push_back(p);
  }
  if (out.empty()) fail(ErrorCategory::invalid_argument, "the beam list has no beams");
  return out;
}

std::vector<Pointing> parse_beam_grid(const std::string& spec) {
  std::vector<std::string> f;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ':');)
    f.push_back(part);
  if (f.size() != 7)
    fail(ErrorCategory::invalid_argument,
         "--grid '{}' is not FRAME:A0:A1:NA:B0:B1:NB (e.g. azel:170:190:5:70:80:3)", spec);
  double v[6];
  for (int i = 0; i < 6; ++i)
    v[i] = parse_angle_deg(f[static_cast<std::size_t>(i + 1)], false, "--grid");
  // Checked as doubles before the conversion (1e10 beams overflowed int: undefined behaviour).
  if (!(v[2] >= 1 && v[2] <= 65536 && v[5] >= 1 && v[5] <= 65536) || v[2] != std::floor(v[2]) ||
      v[5] != std::floor(v[5]) || v[2] * v[5] > 65536)
    fail(ErrorCategory::invalid_argument,
         "--grid counts {} x {} must be whole numbers >= 1, at most 65536 beams in all", v[2],
         v[5]);
  const int na = static_cast<int>(v[2]), nb = static_cast<int>(v[5]);
  std::vector<Pointing> out;
  for (int j = 0; j < nb; ++j)
    for (int i = 0; i < na; ++i) {
      const double a = na == 1 ? v[0] : v[0] + (v[1] - v[0]) * i / (na - 1);
      const double b = nb == 1 ? v[3] : v[3] + (v[4] - v[3]) * j / (nb - 1);
      Pointing p = make_pointing(f[0], a, b, "--grid");
      p.name = fmt::format("beam{}", out.size());
      out.push_back(p);
    }
  return out;
}

}  // namespace warpbeam::beamform
