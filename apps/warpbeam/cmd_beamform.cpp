// `warpbeam beamform IN --beams FILE|--grid SPEC --out DIR`: forms beams from a voltage file
// (GUPPI raw or LWA TBF/TBX) and writes one SIGPROC filterbank per beam (and pol unless summed),
// plus DIR/beamform.json (provenance, parameters, beams). For TBF/TBX the array comes from the
// station's SSMIF (stand positions, bad stands masked, cable delays removed).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <numbers>
#include <optional>

#include <nlohmann/json.hpp>

#include "beamform_cli.hpp"
#include "commands.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/host_array.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/io/voltages.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

namespace {

struct BeamformOptions {
  std::string in, beams_file, grid, out;
  std::string backend = "auto", algorithm = "auto";
  std::string array = "auto", site, ssmif;
  std::vector<int> mask;
  int integrate = 1;
  std::int64_t block = 0;
  bool sum_pols = false, no_cables = false, int8_weights = false;
};

void run(const BeamformOptions& o) {
  const auto pointings = load_pointings(o.beams_file, o.grid);
  auto reader = io::open_voltage_file(o.in);
  const bool lwa = reader->info().format.rfind("lwa-", 0) == 0;  // TBF or TBX
  if (o.block > 0) {
    if (!lwa)
      fail(ErrorCategory::invalid_argument,
           "--block is for formats without blocks (LWA TBF, TBX); {} has its own", o.in);
    reader = io::open_lwa_voltages(o.in, o.block);
  }
  const io::VoltageStreamInfo info = reader->info();
  // The array: "auto" is the station's SSMIF for TBF and TBX, BEST-2 otherwise.
  const std::string array_spec = o.array == "auto" ? (lwa ? "ssmif" : "best2") : o.array;
  beamform::ArrayGeometry array;
  std::optional<io::TbfStationModel> station;
  std::string ssmif_path;
  if (array_spec == "ssmif") {
    ssmif_path = find_ssmif(o.ssmif);
    const io::Ssmif ssmif = io::read_ssmif(ssmif_path);
    // TBX may record a subset of the stands (the first F-engine inputs).
    station = io::tbf_station_model(ssmif, info.nantennas, info.format == "lwa-tbx");
    constexpr double rad = std::numbers::pi / 180;
    array.site = {ssmif.lon_deg * rad, ssmif.lat_deg * rad, ssmif.elevation_m};
    array.enu_m = station->xyz_m;
    array.mask = station->ok;  // stands with a bad antenna are left out
    if (!o.site.empty()) array.site = load_array("best2", o.site).site;
  } else {
    array = load_array(array_spec, o.site);
  }
  if (array.nantennas() != info.nantennas)
    fail(ErrorCategory::invalid_argument,
         "{} has {} antennas but the array '{}' has {}: give the matching --array", o.in,
         info.nantennas, array_spec, array.nantennas());
  if (!o.mask.empty()) {
    if (array.mask.empty()) array.mask.assign(static_cast<std::size_t>(array.nantennas()), 1);
    for (int a : o.mask) {
      require_range("--mask antenna", a, 0, array.nantennas() - 1);
      array.mask[static_cast<std::size_t>(a)] = 0;
    }
  }
  std::vector<double> freqs(static_cast<std::size_t>(info.nchans));
  for (int c = 0; c < info.nchans; ++c)
    freqs[static_cast<std::size_t>(c)] = info.fch1_hz + c * info.foff_hz;
  const bool cables = station.has_value() && !o.no_cables;

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
  check_algorithm_backend(c.algorithm, parse_backend(o.backend));
  c.int8_weights = o.int8_weights;
  if (c.nsamples % c.integration != 0)
    fail(ErrorCategory::invalid_argument, "--integrate {} must divide the {} samples of a block",
         c.integration, c.nsamples);
  // The first block before the weights, the plan and the buffers, which are sized by the block:
  // a header declaring more than the file holds fails here, before anything is allocated.
  std::vector<std::uint8_t> block;
  double mjd = info.mjd_start;
  bool have_block = reader->read_block(block, &mjd);
  if (!have_block)
    fail(ErrorCategory::format, "{} holds no whole block of voltages: nothing to beamform", o.in);
  // Weights at `mjd`; with an SSMIF, each cable's delay tau is undone: a cable delays the signal
  // by tau (x e^{-2 pi i f tau}), so the weight of (stand, pol) is multiplied by e^{+2 pi i f tau}.
  auto make_weights = [&](double mjd) {
    auto w = beamform::compute_weights(array, pointings, freqs, c.npol, mjd);
    if (cables)
      for (int ch = 0; ch < c.nchans; ++ch)
        for (int p = 0; p < c.npol; ++p)
          for (int a = 0; a < c.nantennas; ++a) {
            const double f = freqs[static_cast<std::size_t>(ch)];
            const double phase = std::fmod(
                2 * std::numbers::pi * f * station->cable_delay_s(a, p, f), 2 * std::numbers::pi);
            const std::complex<float> g = std::polar(1.0f, static_cast<float>(phase));
            for (int b = 0; b < c.nbeams; ++b)
              w[((static_cast<std::size_t>(ch) * c.npol + p) * c.nbeams + b) * c.nantennas + a] *=
                  g;
          }
    return w;
  };
  // Weights at the start (also checks every beam is above the horizon before any output).
  auto weights = make_weights(info.mjd_start);
  const bool tracking = beamform::is_tracking(pointings);

  beamform::BeamformPlan plan(c, parse_backend(o.backend));
  const bool gpu = plan.backend() == Backend::cuda;
  const auto wview = [&] {
    return View<const std::complex<float>, 4>(weights.data(),
                                              {c.nchans, c.npol, c.nbeams, c.nantennas});
  };
  plan.set_weights(wview());

  OutputFolder folder(o.out);
  const int nop = c.nout_pols();
  std::vector<std::unique_ptr<io::FilterbankWriter>> writers;
  std::vector<std::string> names;
  for (int b = 0; b < c.nbeams; ++b)
    for (int p = 0; p < nop; ++p) {
      const auto& pt = pointings[static_cast<std::size_t>(b)];
      io::FilterbankHeader h = io::beam_header(info, c.integration, c.nbeams);
      h.source_name = pt.name.empty() ? fmt::format("beam{}", b) : pt.name;
      h.rawdatafile = std::filesystem::path(o.in).filename().string();
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

  const auto out_shape = c.output_shape();
  // On huge pages where the kernel allows, as NumPy allocates (warpbeam/host_array.hpp).
  HostArray<float> out(
      static_cast<std::size_t>(out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3]));
  DeviceArray<std::uint8_t> d_in;
  DeviceArray<float> d_out;
  if (gpu) {
    d_in = DeviceArray<std::uint8_t>(static_cast<std::size_t>(info.block_bytes()));
    d_out = DeviceArray<float>(out.size());
  }
  std::int64_t blocks = 0;
  for (; have_block; have_block = reader->read_block(block, &mjd)) {
    if (tracking && blocks > 0) {
      weights = make_weights(mjd);
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
                      {"array", array_spec},
                      {"ssmif", ssmif_path},
                      {"cable_delays_removed", cables},
                      {"files", names}};
  for (const auto& p : pointings)
    j["beams"].push_back(
        {{"name", p.name}, {"frame", beamform::to_string(p.frame)}, {"a", p.a}, {"b", p.b}});
  io::write_text_file((std::filesystem::path(o.out) / "beamform.json").string(), j.dump(2) + "\n");
  for (auto& w : writers)
    w->commit();
  folder.keep();
  fmt::print("{} beams x {} pols, {} blocks of {} samples ({} backend, {}) -> {}\n", c.nbeams, nop,
             blocks, c.nsamples, to_string(plan.backend()), beamform::to_string(plan.algorithm()),
             o.out);
}

}  // namespace

void add_beamform_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "beamform",
      "Form beams from a voltage file (GUPPI raw or LWA TBF/TBX); one filterbank per beam");
  auto o = std::make_shared<BeamformOptions>();
  cmd->add_option("IN", o->in, "Voltage file (GUPPI raw with NANTS, or LWA TBF or TBX)")
      ->required();
  cmd->add_option("--beams", o->beams_file,
                  "Beam list: 'azel AZ EL [NAME]', 'radec RA DEC [NAME]' or 'lm L M [NAME]' "
                  "per line (degrees; RA/Dec beams track)");
  cmd->add_option("--grid", o->grid,
                  "Beam grid FRAME:A0:A1:NA:B0:B1:NB, e.g. azel:170:190:5:60:70:3");
  cmd->add_option("--out", o->out, "Output folder (one filterbank per beam)")->required();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--algorithm", o->algorithm,
                  "auto, register-tiled, register-stream, tensor-core, cublas-fp16, tensor-int8 or "
                  "tensor-int8-stream")
      ->check(CLI::IsMember({"auto", "register-tiled", "register-stream", "tensor-core",
                             "cublas-fp16", "tensor-int8", "tensor-int8-stream"}))
      ->capture_default_str();
  cmd->add_flag("--int8-weights", o->int8_weights,
                "Let auto pick the int8-weight beamformer (tensor-int8-stream: ci4, <= 32 "
                "antennas, pols not summed): ~4x faster on B1, beam power within ~1 % instead of "
                "1e-5");
  cmd->add_option("--array", o->array,
                  "auto (ssmif for LWA TBF/TBX, else best2), best2, ssmif, or a file of antenna "
                  "positions 'E N U' (m)")
      ->capture_default_str();
  cmd->add_option("--ssmif", o->ssmif,
                  "LWA station file for --array ssmif (default: "
                  "$WARPBEAM_DATA/lwa/lwasv-ssmif.txt, else ../shared/data/lwa/lwasv-ssmif.txt)");
  cmd->add_flag("--no-cable-delays", o->no_cables, "With an SSMIF: keep the cable delays");
  cmd->add_option("--block", o->block, "LWA TBF/TBX: spectra per block (default min(all, 1024))")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  cmd->add_option("--site", o->site, "Observatory 'LON_DEG,LAT_DEG,HEIGHT_M' (default Medicina)");
  cmd->add_option("--mask", o->mask, "Antenna indices to leave out (sub-arraying)")->delimiter(',');
  cmd->add_option("--integrate", o->integrate, "Samples summed into one output sample")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_flag("--sum-pols", o->sum_pols, "Sum the power of the two polarisations");
  cmd->callback([o] { run(*o); });
}

}  // namespace warpbeam::cli
