// `warpbeam beamform IN --beams FILE|--grid SPEC --out DIR`: forms beams from a voltage file
// (GUPPI raw) and writes one SIGPROC filterbank per beam (and pol unless summed), plus
// DIR/beamform.json (provenance, parameters, beams).
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <numbers>

#include <nlohmann/json.hpp>

#include "beamform_cli.hpp"
#include "commands.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/io/voltages.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

namespace {

struct BeamformOptions {
  std::string in, beams_file, grid, out;
  std::string backend = "auto", algorithm = "auto";
  std::string array = "best2", site;
  std::vector<int> mask;
  int integrate = 1;
  bool sum_pols = false;
};

std::vector<beamform::Pointing> load_pointings(const BeamformOptions& o) {
  if (!o.beams_file.empty() && !o.grid.empty())
    fail(ErrorCategory::invalid_argument, "give either --beams or --grid, not both");
  if (!o.beams_file.empty()) {
    std::ifstream f(o.beams_file);
    if (!f) fail(ErrorCategory::io, "cannot open the beam list '{}'", o.beams_file);
    std::stringstream ss;
    ss << f.rdbuf();
    return beamform::parse_beam_list(ss.str());
  }
  if (!o.grid.empty()) return beamform::parse_beam_grid(o.grid);
  fail(ErrorCategory::invalid_argument, "give the beams with --beams FILE or --grid SPEC");
}

void run(const BeamformOptions& o) {
  const auto pointings = load_pointings(o);
  auto reader = io::open_voltage_file(o.in);
  const io::VoltageStreamInfo info = reader->info();
  beamform::ArrayGeometry array = load_array(o.array, o.site);
  if (array.nantennas() != info.nantennas)
    fail(ErrorCategory::invalid_argument,
         "{} has {} antennas (NANTS) but the array '{}' has {}: give the matching --array", o.in,
         info.nantennas, o.array, array.nantennas());
  if (!o.mask.empty()) {
    array.mask.assign(static_cast<std::size_t>(array.nantennas()), 1);
    for (int a : o.mask) {
      require_range("--mask antenna", a, 0, array.nantennas() - 1);
      array.mask[static_cast<std::size_t>(a)] = 0;
    }
  }
  std::vector<double> freqs(static_cast<std::size_t>(info.nchans));
  for (int c = 0; c < info.nchans; ++c)
    freqs[static_cast<std::size_t>(c)] = info.fch1_hz + c * info.foff_hz;

  beamform::BeamformConfig c;
  c.nchans = info.nchans;
  c.nantennas = info.nantennas;
  c.npol = info.npol;
  c.nbeams = static_cast<int>(pointings.size());
  c.nsamples = info.block_samples;
  c.sample_type = info.sample_type;
  c.integration = o.integrate;
  c.sum_pols = o.sum_pols;
  c.algorithm = beamform::parse_algorithm(o.algorithm);
  if (c.nsamples % c.integration != 0)
    fail(ErrorCategory::invalid_argument, "--integrate {} must divide the {} samples of a block",
         c.integration, c.nsamples);
  // Weights at the start (also checks every beam is above the horizon before any output).
  auto weights = beamform::compute_weights(array, pointings, freqs, c.npol, info.mjd_start);
  const bool tracking = beamform::is_tracking(pointings);

  beamform::BeamformPlan plan(c, parse_backend(o.backend));
  const bool gpu = plan.backend() == Backend::cuda;
  const auto wview = [&] {
    return View<const std::complex<float>, 4>(weights.data(),
                                              {c.nchans, c.npol, c.nbeams, c.nantennas});
  };
  plan.set_weights(wview());

  std::filesystem::create_directories(o.out);
  const int nop = c.nout_pols();
  std::vector<std::unique_ptr<io::FilterbankWriter>> writers;
  std::vector<std::string> names;
  for (int b = 0; b < c.nbeams; ++b)
    for (int p = 0; p < nop; ++p) {
      const auto& pt = pointings[static_cast<std::size_t>(b)];
      io::FilterbankHeader h;
      h.source_name = pt.name.empty() ? fmt::format("beam{}", b) : pt.name;
      h.rawdatafile = std::filesystem::path(o.in).filename().string();
      h.nchans = c.nchans;
      h.nbits = 32;
      h.fch1 = info.fch1_hz / 1e6;
      h.foff = info.foff_hz / 1e6;
      h.tsamp = info.tsamp_s * c.integration;
      h.tstart = info.mjd_start;
      h.nbeams = c.nbeams;
      h.ibeam = b;
      constexpr double deg = 180 / std::numbers::pi;
      if (pt.frame == beamform::Frame::radec) {
        h.src_raj = sigproc_angle(pt.a * deg, true);
        h.src_dej = sigproc_angle(pt.b * deg, false);
      } else {
        const auto az_el =
            beamform::enu_to_azel(beamform::direction_enu(pt, array.site, info.mjd_start, b));
        h.az_start = az_el[0] * deg;
        h.za_start = 90 - az_el[1] * deg;
      }
      const std::string name =
          nop == 1 ? fmt::format("beam{:04d}.fil", b) : fmt::format("beam{:04d}_pol{}.fil", b, p);
      names.push_back(name);
      writers.push_back(std::make_unique<io::FilterbankWriter>(
          (std::filesystem::path(o.out) / name).string(), h));
    }

  std::vector<std::uint8_t> block;
  const auto out_shape = c.output_shape();
  std::vector<float> out(
      static_cast<std::size_t>(out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3]));
  DeviceArray<std::uint8_t> d_in;
  DeviceArray<float> d_out;
  if (gpu) {
    d_in = DeviceArray<std::uint8_t>(static_cast<std::size_t>(info.block_bytes()));
    d_out = DeviceArray<float>(out.size());
  }
  std::int64_t blocks = 0;
  double mjd = info.mjd_start;
  while (reader->read_block(block, &mjd)) {
    if (tracking && blocks > 0) {
      weights = beamform::compute_weights(array, pointings, freqs, c.npol, mjd);
      plan.set_weights(wview());
    }
    if (gpu) {
      copy_bytes(d_in.data(), block.data(), block.size());
      plan.execute(View<const std::uint8_t, 3>(d_in.data(), c.input_shape(), Space::device),
                   View<float, 4>(d_out.data(), out_shape, Space::device));
      copy_bytes(out.data(), d_out.data(), d_out.bytes());
    } else {
      plan.execute(View<const std::uint8_t, 3>(block.data(), c.input_shape()),
                   View<float, 4>(out.data(), out_shape));
    }
    const std::int64_t per = out_shape[2] * out_shape[3];
    for (std::size_t i = 0; i < writers.size(); ++i)
      writers[i]->write(out.data() + static_cast<std::int64_t>(i) * per, out_shape[2]);
    ++blocks;
  }
  if (blocks == 0)
    fail(ErrorCategory::format, "{} holds no whole block of voltages: nothing to beamform", o.in);

  nlohmann::json j = {{"provenance", provenance()},
                      {"input", o.in},
                      {"backend", to_string(plan.backend())},
                      {"algorithm", beamform::to_string(plan.algorithm())},
                      {"blocks", blocks},
                      {"samples_per_block", c.nsamples},
                      {"integration", c.integration},
                      {"sum_pols", c.sum_pols},
                      {"nchans", c.nchans},
                      {"nantennas", c.nantennas},
                      {"npol", c.npol},
                      {"tracking", tracking},
                      {"masked_antennas", o.mask},
                      {"files", names}};
  for (const auto& p : pointings)
    j["beams"].push_back(
        {{"name", p.name}, {"frame", beamform::to_string(p.frame)}, {"a", p.a}, {"b", p.b}});
  io::write_text_file((std::filesystem::path(o.out) / "beamform.json").string(), j.dump(2) + "\n");
  for (auto& w : writers)
    w->commit();
  fmt::print("{} beams x {} pols, {} blocks of {} samples ({} backend, {}) -> {}\n", c.nbeams, nop,
             blocks, c.nsamples, to_string(plan.backend()), beamform::to_string(plan.algorithm()),
             o.out);
}

}  // namespace

void add_beamform_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "beamform", "Form beams from a voltage file (GUPPI raw); one filterbank per beam");
  auto o = std::make_shared<BeamformOptions>();
  cmd->add_option("IN", o->in, "Voltage file (GUPPI raw with NANTS)")->required();
  cmd->add_option("--beams", o->beams_file,
                  "Beam list: 'azel AZ EL [NAME]', 'radec RA DEC [NAME]' or 'lm L M [NAME]' "
                  "per line (degrees; RA/Dec beams track)");
  cmd->add_option("--grid", o->grid,
                  "Beam grid FRAME:A0:A1:NA:B0:B1:NB, e.g. azel:170:190:5:60:70:3");
  cmd->add_option("--out", o->out, "Output folder (one filterbank per beam)")->required();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--algorithm", o->algorithm, "auto, register-tiled or tensor-core")
      ->check(CLI::IsMember({"auto", "register-tiled", "tensor-core"}))
      ->capture_default_str();
  cmd->add_option("--array", o->array, "best2, or a file of antenna positions 'E N U' (m)")
      ->capture_default_str();
  cmd->add_option("--site", o->site, "Observatory 'LON_DEG,LAT_DEG,HEIGHT_M' (default Medicina)");
  cmd->add_option("--mask", o->mask, "Antenna indices to leave out (sub-arraying)")->delimiter(',');
  cmd->add_option("--integrate", o->integrate, "Samples summed into one output sample")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_flag("--sum-pols", o->sum_pols, "Sum the power of the two polarisations");
  cmd->callback([o] { run(*o); });
}

}  // namespace warpbeam::cli
