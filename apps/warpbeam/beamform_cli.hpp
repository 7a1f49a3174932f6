#pragma once
// Helpers shared by the beamformer's subcommands (simulate voltages, beamform, beam-pattern,
// bench beamform): the array geometry from an option, angle formatting.
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>

#include "warpbeam/beamform.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::cli {

/// "best2" or a text file of antenna positions, one "EAST NORTH UP" (m) per line ('#' comments);
/// `site` "LON_DEG,LAT_DEG,HEIGHT_M" overrides the observatory (default: Medicina, BEST-2's).
inline beamform::ArrayGeometry load_array(const std::string& spec, const std::string& site) {
  beamform::ArrayGeometry g = beamform::best2_geometry();
  if (spec != "best2") {
    std::ifstream f(spec);
    if (!f) fail(ErrorCategory::io, "cannot open the antenna position file '{}'", spec);
    g.enu_m.clear();
    std::string line;
    int lineno = 0;
    while (std::getline(f, line)) {
      ++lineno;
      if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
      std::stringstream ss(line);
      std::array<double, 3> r{};
      if (!(ss >> r[0])) continue;
      if (!(ss >> r[1] >> r[2]))
        fail(ErrorCategory::format, "{} line {}: expected 'EAST NORTH UP' in metres", spec, lineno);
      g.enu_m.push_back(r);
    }
    if (g.enu_m.empty()) fail(ErrorCategory::format, "{} lists no antennas", spec);
  }
  if (!site.empty()) {
    double lon, lat, h;
    char c1, c2;
    std::stringstream ss(site);
    if (!(ss >> lon >> c1 >> lat >> c2 >> h) || c1 != ',' || c2 != ',' || std::abs(lat) > 90)
      fail(ErrorCategory::invalid_argument, "--site '{}' is not 'LON_DEG,LAT_DEG,HEIGHT_M'", site);
    g.site = {lon * std::numbers::pi / 180, lat * std::numbers::pi / 180, h};
  }
  return g;
}

/// SIGPROC's packed sexagesimal angle: hhmmss.s (hours) or ddmmss.s (degrees).
inline double sigproc_angle(double value, bool hours) {
  const double v = hours ? value / 15.0 : value;
  const double a = std::abs(v);
  const double d = std::floor(a), m = std::floor((a - d) * 60), s = ((a - d) * 60 - m) * 60;
  return std::copysign(d * 10000 + m * 100 + s, v);
}

}  // namespace warpbeam::cli
