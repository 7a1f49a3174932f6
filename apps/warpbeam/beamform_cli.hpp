#pragma once
// Helpers shared by the beamformer's subcommands (simulate voltages, beamform, beam-pattern,
// bench beamform): the array geometry from an option, angle formatting.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"

namespace warpbeam::cli {

/// --algorithm against the backend the run will use, before any input is read or any stream
/// awaited (a new user's trial of 2026-12-03, findings 4 and 5: the live pipeline found the
/// conflict only when the stream's description came). The CPU beamformer is the register-tiled
/// one: another algorithm with --backend cpu is a command line that cannot work
/// (invalid_argument, exit 2); with --backend auto on a machine without a visible GPU, it is
/// something this machine does not support (unsupported, exit 1), as --backend cuda there.
inline void check_algorithm_backend(beamform::Algorithm a, Backend backend) {
  if (!beamform::cuda_only(a)) return;
  if (backend == Backend::cpu)
    fail(ErrorCategory::invalid_argument,
         "--algorithm {} needs the CUDA backend (with --backend cpu the beams are formed by "
         "register-tiled)",
         beamform::to_string(a));
  if (resolve_backend(backend) == Backend::cpu)
    fail(ErrorCategory::unsupported,
         "--algorithm {} needs the CUDA backend, and no CUDA device is visible",
         beamform::to_string(a));
}

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

/// The beams of `--beams FILE` or `--grid SPEC` (exactly one of them); throws invalid_argument
/// for neither or both, Error(io) for a beam list that cannot be read.
inline std::vector<beamform::Pointing> load_pointings(const std::string& beams_file,
                                                      const std::string& grid) {
  if (!beams_file.empty() && !grid.empty())
    fail(ErrorCategory::invalid_argument, "give either --beams or --grid, not both");
  if (!beams_file.empty()) {
    std::ifstream f(beams_file);
    if (!f) fail(ErrorCategory::io, "cannot open the beam list '{}'", beams_file);
    std::stringstream ss;
    ss << f.rdbuf();
    return beamform::parse_beam_list(ss.str());
  }
  if (!grid.empty()) return beamform::parse_beam_grid(grid);
  fail(ErrorCategory::invalid_argument, "give the beams with --beams FILE or --grid SPEC");
}

/// The LWA station file: `given`, else default_data_file("lwa/lwasv-ssmif.txt").
/// Throws invalid_argument when there is neither.
inline std::string find_ssmif(const std::string& given) {
  if (!given.empty()) return given;
  if (auto p = default_data_file("lwa/lwasv-ssmif.txt"); !p.empty()) return p;
  fail(ErrorCategory::invalid_argument,
       "no station file: give --ssmif PATH (or set WARPBEAM_DATA to the shared data folder; "
       "../shared/data is tried otherwise)");
}

/// Products that must appear together or not at all: io::StagedOutputs.
using io::StagedOutputs;

/// SIGPROC's packed sexagesimal angle: hhmmss.s (hours) or ddmmss.s (degrees).
inline double sigproc_angle(double value, bool hours) {
  const double v = hours ? value / 15.0 : value;
  const double a = std::abs(v);
  const double d = std::floor(a), m = std::floor((a - d) * 60), s = ((a - d) * 60 - m) * 60;
  return std::copysign(d * 10000 + m * 100 + s, v);
}

}  // namespace warpbeam::cli
