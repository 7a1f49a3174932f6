// `warpbeam simulate voltages`: channelised antenna voltages of an array (BEST-2 by default) with
// sky point sources, a dispersed pulsar and receiver noise, quantised to ci4, as GUPPI raw.
#include <fmt/format.h>

#include <sstream>

#include "beamform_cli.hpp"
#include "commands.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/sim/voltages.hpp"

namespace warpbeam::cli {

namespace {

struct SimOptions {
  std::string out;
  std::string array = "best2", site;
  double seconds = 0;
  std::int64_t nsamples = 8192, block_samples = 8192;
  int npol = 1, nchans = 1024;
  std::vector<std::string> sources, pulsars;
  bool no_sources = false;
  double noise = 1, quant_rms = 2, mjd = 60000.5;
  std::uint64_t seed = 1;
  std::string sample_type = "ci4";
};

// "FRAME A B FLUX" (degrees) -> a sky source.
sim::SkySource parse_source(const std::string& s) {
  std::stringstream ss(s);
  std::string frame, a, b;
  double flux = -1;
  if (!(ss >> frame >> a >> b >> flux))
    fail(ErrorCategory::invalid_argument, "--source '{}' is not 'FRAME A B FLUX'", s);
  sim::SkySource src;
  src.direction = beamform::parse_beam_list(frame + " " + a + " " + b).front();
  src.flux = flux;
  return src;
}

// "FRAME A B PEAK_FLUX PERIOD_S DM WIDTH_S" -> a pulsar.
sim::Pulsar parse_pulsar(const std::string& s) {
  std::stringstream ss(s);
  std::string frame, a, b;
  sim::Pulsar p;
  if (!(ss >> frame >> a >> b >> p.peak_flux >> p.period_s >> p.dm >> p.width_s))
    fail(ErrorCategory::invalid_argument,
         "--pulsar '{}' is not 'FRAME A B PEAK_FLUX PERIOD_S DM WIDTH_S'", s);
  ss >> p.t0_s;
  p.direction = beamform::parse_beam_list(frame + " " + a + " " + b).front();
  return p;
}

void run(const SimOptions& o) {
  io::check_outputs({o.out, o.out + ".json"});  // before the work: output_file.hpp's rule
  sim::VoltageSimConfig c;
  c.array = load_array(o.array, o.site);
  c.npol = o.npol;
  c.freqs_hz = beamform::best2_frequencies_hz(o.nchans);
  c.tsamp_s = o.nchans / 20e6;  // critically sampled channels of the 20 MHz band
  c.nsamples = o.seconds > 0 ? static_cast<std::int64_t>(o.seconds / c.tsamp_s) : o.nsamples;
  c.block_samples = std::min(o.block_samples, c.nsamples);
  c.nsamples = c.nsamples / c.block_samples * c.block_samples;
  c.mjd_start = o.mjd;
  c.noise_power = o.noise;
  c.quant_rms = o.quant_rms;
  c.seed = o.seed;
  c.sample_type = parse_sample_type(o.sample_type);
  if (o.sources.empty() && o.pulsars.empty() && !o.no_sources) {
    // The default sky: a bright source and a pulsar in different directions.
    c.sources.push_back(parse_source("azel 150 55 0.5"));
    c.pulsars.push_back(parse_pulsar("azel 200 70 4 0.1 50 0.002 0.02"));
  }
  for (const auto& s : o.sources)
    c.sources.push_back(parse_source(s));
  for (const auto& p : o.pulsars)
    c.pulsars.push_back(parse_pulsar(p));
  sim::simulate_voltages(c, o.out);
  fmt::print(
      "wrote {}: {} antennas x {} pols, {} channels, {} samples ({:.3f} s) in {} blocks, "
      "{} sources, {} pulsars, seed {}\n",
      o.out, c.array.nantennas(), c.npol, c.freqs_hz.size(), c.nsamples,
      static_cast<double>(c.nsamples) * c.tsamp_s, c.nsamples / c.block_samples, c.sources.size(),
      c.pulsars.size(), c.seed);
}

}  // namespace

void add_simulate_voltages_command(CLI::App& app) {
  auto* cmd =
      app.get_subcommand("simulate")
          ->add_subcommand("voltages",
                           "Simulate array voltages (BEST-2 by default) as GUPPI raw with NANTS");
  auto o = std::make_shared<SimOptions>();
  cmd->add_option("--out", o->out, "Output GUPPI raw file (a PATH.json side file too)")->required();
  cmd->add_option("--array", o->array, "best2, or a file of antenna positions 'E N U' (m)")
      ->capture_default_str();
  cmd->add_option("--site", o->site, "Observatory 'LON_DEG,LAT_DEG,HEIGHT_M' (default Medicina)");
  cmd->add_option("--nchans", o->nchans, "Channels over the 20 MHz band at 408 MHz")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--nsamples", o->nsamples, "Time samples per channel")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "Duration (overrides --nsamples)")
      ->check(CLI::Range(0.0, 1e5));
  cmd->add_option("--block-samples", o->block_samples, "Time samples per GUPPI block")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--npol", o->npol, "Polarisations (1 or 2)")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  cmd->add_option("--source", o->sources,
                  "Sky source 'FRAME A B FLUX' (azel/radec in degrees, lm; flux in units of the "
                  "receiver noise); repeatable");
  cmd->add_option("--pulsar", o->pulsars,
                  "Pulsar 'FRAME A B PEAK_FLUX PERIOD_S DM WIDTH_S [T0_S]'; repeatable");
  cmd->add_flag("--no-sources", o->no_sources, "Receiver noise only (no default sky)");
  cmd->add_option("--noise", o->noise, "Receiver noise power per antenna")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--quant-rms", o->quant_rms, "RMS per component after scaling (levels)")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  cmd->add_option("--mjd", o->mjd, "UTC MJD of the first sample")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("--sample-type", o->sample_type, "ci4 or ci8")
      ->check(CLI::IsMember({"ci4", "ci8"}))
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace warpbeam::cli
