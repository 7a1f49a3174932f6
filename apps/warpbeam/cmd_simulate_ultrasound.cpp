// `warpbeam simulate ultrasound`: channel data of point scatterers and speckle for a linear,
// 32 x 32 matrix or row-column probe, plane or diverging waves, RF or IQ, written as .mat or UFF.
#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/ultrasound.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/sim/ultrasound.hpp"

namespace warpbeam::cli {

namespace {

struct SimOptions {
  std::string probe = "linear", wave = "plane", angles = "0", sources = "0,0,-10e-3",
              points = "0,0,20e-3", out;
  int elements = 128;
  double pitch = 0.3e-3, fc = 5e6, fs = 20e6, bandwidth = 0.6, c = 1540, t0 = 0, noise = 0;
  std::int64_t samples = 2048, frames = 1, speckle = 0;
  bool iq = false;
  std::uint32_t seed = 1;
};

// "a,b,c" -> numbers.
std::vector<double> numbers(const std::string& s, const char* what) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      v.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail(ErrorCategory::invalid_argument, "{}: '{}' is not a number", what, item);
    }
  }
  return v;
}

// "x,y,z;x,y,z" -> points.
std::vector<das::Vec3> points(const std::string& s, const char* what) {
  std::vector<das::Vec3> p;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    const auto v = numbers(item, what);
    if (v.size() != 3) fail(ErrorCategory::invalid_argument, "{}: '{}' is not x,y,z", what, item);
    p.push_back({v[0], v[1], v[2]});
  }
  if (p.empty()) fail(ErrorCategory::invalid_argument, "{}: no points", what);
  return p;
}

void run_simulate(const SimOptions& o) {
  io::check_outputs({o.out});  // before the work: output_file.hpp's rule
  const std::string ext = std::filesystem::path(o.out).extension().string();
  if (ext != ".mat" && ext != ".uff")
    fail(ErrorCategory::invalid_argument, "--out {}: expected .mat or .uff", o.out);
  sim::UltrasoundSimConfig s;
  if (o.probe == "linear")
    s.probe = das::linear_array(o.elements, o.pitch);
  else if (o.probe == "matrix")
    s.probe = das::matrix_array(o.elements, o.elements, o.pitch, o.pitch);
  else if (o.probe == "rca")
    s.probe = das::row_column_array(o.elements, o.pitch);
  else
    fail(ErrorCategory::invalid_argument, "--probe '{}' is not linear, matrix or rca", o.probe);
  if (o.wave == "plane") {
    for (double a : numbers(o.angles, "--angles")) {
      if (!(std::abs(a) < 90))
        fail(ErrorCategory::invalid_argument, "--angles: {} deg is outside (-90, 90)", a);
      s.transmits.push_back(das::Transmit::plane(a * M_PI / 180));
    }
  } else if (o.wave == "diverging") {
    for (const auto& p : points(o.sources, "--sources"))
      s.transmits.push_back(das::Transmit::diverging(p));
  } else {
    fail(ErrorCategory::invalid_argument, "--wave '{}' is not plane or diverging", o.wave);
  }
  s.scatterers = points(o.points, "--points");
  s.signal = o.iq ? das::Signal::iq : das::Signal::rf;
  s.fc = o.fc;
  s.fs = o.fs;
  s.bandwidth = o.bandwidth;
  s.c = o.c;
  s.t0 = o.t0;
  s.nsamples = o.samples;
  s.frames = o.frames;
  s.noise = o.noise;
  s.seed = o.seed;
  if (o.speckle > 0) {
    // Speckle fills the insonified box: the aperture laterally, 5 mm to the last sample's depth.
    double hx = 0, hy = 0;
    for (const auto& p : s.probe.positions) {
      hx = std::max(hx, std::abs(p[0]));
      hy = std::max(hy, std::abs(p[1]));
    }
    const double zmax = o.c * (o.t0 + static_cast<double>(o.samples) / o.fs) / 2;
    sim::add_speckle(s, {-hx, -hy, 5e-3}, {hx, hy, std::max(zmax, 6e-3)}, o.speckle, 0.3,
                     o.seed + 1);
  }
  const io::UltrasoundData d = sim::simulate_ultrasound(s);
  nlohmann::json prov = provenance();
  prov["simulation"] = {{"probe", o.probe},   {"elements", o.elements},   {"pitch", o.pitch},
                        {"wave", o.wave},     {"angles_deg", o.angles},   {"sources", o.sources},
                        {"points", o.points}, {"speckle", o.speckle},     {"fc", o.fc},
                        {"fs", o.fs},         {"bandwidth", o.bandwidth}, {"c", o.c},
                        {"t0", o.t0},         {"samples", o.samples},     {"frames", o.frames},
                        {"iq", o.iq},         {"noise", o.noise},         {"seed", o.seed}};
  if (ext == ".mat")
    io::write_mat(o.out, d, prov);
  else
    io::write_uff(o.out, d, prov);
  fmt::print("simulate ultrasound: {} frames x {} rx x {} tx x {} samples ({}) -> {}\n", d.batch,
             d.nrx, d.ntx, d.nsamples, o.iq ? "IQ" : "RF", o.out);
}

}  // namespace

void add_simulate_ultrasound_command(CLI::App& app) {
  auto* sim = app.get_subcommand("simulate");
  auto* cmd = sim->add_subcommand("ultrasound",
                                  "Channel data of point scatterers and speckle (.mat or UFF)");
  auto o = std::make_shared<SimOptions>();
  cmd->add_option("--out", o->out, "Output: .mat (Verasonics/PyMUST style) or .uff")->required();
  cmd->add_option("--probe", o->probe, "linear, matrix (N x N) or rca (row-column, N + N)")
      ->capture_default_str();
  cmd->add_option("--elements", o->elements, "Elements (per side for matrix and rca)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--pitch", o->pitch, "Element pitch (m)")->capture_default_str();
  cmd->add_option("--wave", o->wave, "plane or diverging")->capture_default_str();
  cmd->add_option("--angles", o->angles, "Plane-wave steering angles (deg), comma separated")
      ->capture_default_str();
  cmd->add_option("--sources", o->sources, "Diverging-wave virtual sources x,y,z;... (m)")
      ->capture_default_str();
  cmd->add_option("--points", o->points, "Point scatterers x,y,z;... (m)")->capture_default_str();
  cmd->add_option("--speckle", o->speckle, "Number of random speckle scatterers")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{10000000}))
      ->capture_default_str();
  cmd->add_option("--fc", o->fc, "Centre frequency (Hz)")->capture_default_str();
  cmd->add_option("--fs", o->fs, "Sampling frequency (Hz)")->capture_default_str();
  cmd->add_option("--bandwidth", o->bandwidth, "Fractional -6 dB bandwidth")->capture_default_str();
  cmd->add_option("--c", o->c, "Sound speed (m/s)")->capture_default_str();
  cmd->add_option("--t0", o->t0, "Time of the first sample (s)")->capture_default_str();
  cmd->add_option("--samples", o->samples, "Samples per channel")->capture_default_str();
  cmd->add_option("--frames", o->frames, "Frames (differ by noise)")->capture_default_str();
  cmd->add_flag("--iq", o->iq, "Write baseband I/Q instead of RF");
  cmd->add_option("--noise", o->noise, "Noise standard deviation (relative)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed (speckle, noise)")->capture_default_str();
  cmd->callback([o] { run_simulate(*o); });
}

}  // namespace warpbeam::cli
