// `warpbeam simulate station`: an LWA-SV-like station (the real stand layout and cables from an
// SSMIF file) observing point sources plus diffuse emission, quantised to ci4 and written as TBF
// frames (so that `warpbeam image` and the beamformer read it like real data), with a JSON side
// file of the parameters, the seed and the provenance.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "epic_common.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/sim/station.hpp"

namespace warpbeam::cli {

namespace {

struct StationOptions {
  std::string out, ssmif;
  std::vector<std::string> sources;
  int nchan = epic_common::kChannels, first_chan = epic_common::kFirstChannel;
  std::int64_t ntime = 1000;
  long long time_tag = epic_common::kDefaultTimeTag;
  int ndiffuse = 32;
  double diffuse_flux = 10, noise = 20, rms = 2;
  bool no_cables = false;
  std::uint64_t seed = 1;
};

// "l,m,flux" or "l,m,flux,q,u,v".
sim::StationSource parse_source(const std::string& s) {
  sim::StationSource src;
  double v[6] = {0, 0, 1, 0, 0, 0};
  int n = 0;
  std::size_t at = 0;
  while (at <= s.size() && n < 7) {
    const std::size_t comma = s.find(',', at);
    const std::string tok =
        s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != tok.size() || n >= 6)
      fail(ErrorCategory::invalid_argument,
           "--source '{}' is not l,m,flux or l,m,flux,q,u,v (numbers)", s);
    v[n++] = x;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (n != 3 && n != 6)
    fail(ErrorCategory::invalid_argument, "--source '{}' needs 3 or 6 numbers: l,m,flux[,q,u,v]",
         s);
  src.l = v[0], src.m = v[1], src.flux = v[2], src.q = v[3], src.u = v[4], src.v = v[5];
  return src;
}

void run_station(const StationOptions& o) {
  io::check_outputs({o.out, o.out + ".json"});  // before the work: output_file.hpp's rule
  if (o.nchan % io::kTbfChannelsPerFrame)
    fail(ErrorCategory::invalid_argument, "--nchan {} is not a multiple of {} (TBF frames)",
         o.nchan, io::kTbfChannelsPerFrame);
  sim::StationSimConfig c;
  for (const auto& s : o.sources)
    c.sources.push_back(parse_source(s));
  if (o.sources.empty())  // a default sky: two bright sources and a polarised one
    c.sources = {{0.20, 0.30, 10.0}, {-0.35, 0.10, 6.0}, {0.05, -0.45, 4.0, 0.3, -0.2, 0.1}};
  const std::string ssmif_path = epic_common::find_ssmif(o.ssmif);
  if (ssmif_path.empty())
    fail(ErrorCategory::invalid_argument,
         "no station file: give --ssmif PATH (or set WARPBEAM_DATA to the shared data folder; "
         "../shared/data is tried otherwise)");
  const io::Ssmif ssmif = io::read_ssmif(ssmif_path);
  const io::TbfStationModel station = io::tbf_station_model(ssmif, ssmif.nstand());
  c.stand_xyz_m = station.xyz_m;
  for (int k = 0; k < o.nchan; ++k)
    c.freqs_hz.push_back((o.first_chan + k) * io::kLwaChannelWidthHz);
  const double fmid = c.freqs_hz[c.freqs_hz.size() / 2];
  if (!o.no_cables)
    for (int s = 0; s < station.nstand(); ++s)
      for (int p = 0; p < 2; ++p)
        c.cable_delay_s.push_back(station.cable_delay_s(s, p, fmid));
  c.ntime = o.ntime;
  c.ndiffuse = o.ndiffuse;
  c.diffuse_flux = o.diffuse_flux;
  c.receiver_noise = o.noise;
  c.rms = o.rms;
  c.seed = o.seed;
  c.validate();
  const std::size_t bytes =
      c.freqs_hz.size() * static_cast<std::size_t>(o.ntime) * c.stand_xyz_m.size() * 2;
  if (bytes > (std::size_t{8} << 30))
    fail(ErrorCategory::invalid_argument, "{} spectra x {} channels would need {:.1f} GiB", o.ntime,
         o.nchan, static_cast<double>(bytes) / (1 << 30));
  const sim::StationSimOutput sim = sim::simulate_station(c);
  io::write_tbf(o.out, sim.ci4.data(), o.nchan, o.ntime, station.nstand(), o.first_chan,
                o.time_tag);

  nlohmann::json j = {{"product", "warpbeam simulate station"},
                      {"format", "LWA TBF frames (docs/FORMATS.md)"},
                      {"ssmif", ssmif_path},
                      {"nstand", station.nstand()},
                      {"first_chan", o.first_chan},
                      {"nchan", o.nchan},
                      {"ntime", o.ntime},
                      {"time_tag", o.time_tag},
                      {"seed", o.seed},
                      {"ndiffuse", o.ndiffuse},
                      {"diffuse_flux", o.diffuse_flux},
                      {"receiver_noise", o.noise},
                      {"rms_levels", o.rms},
                      {"cable_delays", !o.no_cables},
                      {"ci4_scale", sim.scale},
                      {"clipped_components", sim.clipped},
                      {"provenance", provenance()}};
  for (const auto& s : c.sources)
    j["sources"].push_back(
        {{"l", s.l}, {"m", s.m}, {"flux", s.flux}, {"q", s.q}, {"u", s.u}, {"v", s.v}});
  io::write_text_file(o.out + ".json", j.dump(2) + "\n");
  fmt::print("{}: {} spectra x {} channels x {} stands ({:.1f} MB), {} components clipped\n", o.out,
             o.ntime, o.nchan, station.nstand(), static_cast<double>(bytes) / 1e6, sim.clipped);
}

}  // namespace

void add_simulate_station_command(CLI::App& app) {
  auto o = std::make_shared<StationOptions>();
  auto* cmd = app.get_subcommand("simulate")
                  ->add_subcommand(
                      "station",
                      "LWA-SV-like station voltages (TBF) of point sources and diffuse emission");
  cmd->add_option("--out", o->out, "Output TBF file (a .json side file is written beside it)")
      ->required();
  cmd->add_option("--ssmif", o->ssmif,
                  "Station file (default: $WARPBEAM_DATA/lwa/lwasv-ssmif.txt, else "
                  "../shared/data/lwa/lwasv-ssmif.txt)");
  cmd->add_option("--source", o->sources,
                  "A point source l,m,flux[,q,u,v] (repeatable; default: a 3-source sky)");
  cmd->add_option("--nchan", o->nchan, "Channels (a multiple of 12)")
      ->check(CLI::Range(12, 4096))
      ->capture_default_str();
  cmd->add_option("--first-chan", o->first_chan, "First channel number (x 25 kHz)")
      ->check(CLI::Range(1, 8000))
      ->capture_default_str();
  cmd->add_option("--ntime", o->ntime, "Spectra (40 us each; 1000 = one 40 ms gulp)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--time-tag", o->time_tag, "Time tag of the first spectrum (196 MHz ticks)")
      ->check(CLI::Range(0ll, 1ll << 62))
      ->capture_default_str();
  cmd->add_option("--diffuse", o->ndiffuse, "Weak sources standing in for diffuse emission")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--diffuse-flux", o->diffuse_flux, "Their total flux")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--noise", o->noise, "Receiver noise power per antenna")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--rms", o->rms, "rms of each ci4 component (levels)")
      ->check(CLI::Range(0.1, 7.0))
      ->capture_default_str();
  cmd->add_flag("--no-cable-delays", o->no_cables, "Do not apply the SSMIF cable delays");
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->callback([o] { run_station(*o); });
}

}  // namespace warpbeam::cli
