// `warpbeam simulate filterbank OUT.fil`: Gaussian noise plus dispersed, smeared pulses (one by
// default; --burst for several), written as a SIGPROC filterbank with a JSON side file
// (OUT.fil.json) of the parameters.
#include <cstdio>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/sim/filterbank.hpp"

namespace warpbeam::cli {

void add_simulate_filterbank_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("simulate")
                  ->add_subcommand("filterbank",
                                   "A SIGPROC filterbank of Gaussian noise with dispersed pulses");
  auto path = std::make_shared<std::string>();
  auto c = std::make_shared<sim::FilterbankSimConfig>();
  auto b = std::make_shared<sim::Burst>();
  auto width_ms = std::make_shared<double>(1.0);
  auto tsamp_us = std::make_shared<double>(256.0);
  auto no_burst = std::make_shared<bool>(false);
  auto burst_specs = std::make_shared<std::vector<std::string>>();
  cmd->add_option("OUT", *path, "Output filterbank (.fil); parameters go to OUT.json")->required();
  cmd->add_option("--dm", b->dm, "DM of the pulse (pc cm^-3)")->capture_default_str();
  cmd->add_option("--snr", b->snr,
                  "Injected S/N: matched-filter S/N of the smeared pulse at its true DM")
      ->capture_default_str();
  cmd->add_option("--width", *width_ms, "Intrinsic FWHM of the Gaussian pulse (ms)")
      ->capture_default_str();
  cmd->add_option("--time", b->time_s, "Arrival at the top of the band (s from the start)")
      ->capture_default_str();
  cmd->add_flag("--no-burst", *no_burst, "Noise only");
  cmd->add_option("--burst", *burst_specs,
                  "A burst as DM,SNR,WIDTH_MS,TIME_S (repeat for several; replaces --dm --snr "
                  "--width --time)");
  cmd->add_option("--nchans", c->nchans, "Channels")->capture_default_str();
  cmd->add_option("--fch1", c->fch1_mhz, "Centre of channel 0 (MHz)")->capture_default_str();
  cmd->add_option("--foff", c->foff_mhz, "Channel step (MHz, either sign)")->capture_default_str();
  cmd->add_option("--tsamp", *tsamp_us, "Sampling time (us)")->capture_default_str();
  cmd->add_option("--nbits", c->nbits, "Bits per sample: 1, 2, 4, 8, 16 or 32 (float)")
      ->capture_default_str();
  cmd->add_option("--duration", c->duration_s, "Length (s)")->capture_default_str();
  cmd->add_option("--seed", c->seed, "Random seed")->capture_default_str();
  cmd->callback([=] {
    b->width_s = *width_ms * 1e-3;
    c->tsamp_s = *tsamp_us * 1e-6;
    if (!*no_burst) c->bursts = {*b};
    if (!burst_specs->empty()) {
      c->bursts.clear();
      for (const auto& spec : *burst_specs) {
        sim::Burst x;
        double width = 0;
        char extra = 0;
        if (std::sscanf(spec.c_str(), "%lf,%lf,%lf,%lf%c", &x.dm, &x.snr, &width, &x.time_s,
                        &extra) != 4)
          fail(ErrorCategory::invalid_argument,
               "--burst '{}': expected DM,SNR,WIDTH_MS,TIME_S (four numbers)", spec);
        x.width_s = width * 1e-3;
        c->bursts.push_back(x);
      }
    }
    io::check_outputs({*path, *path + ".json"});  // before the work: output_file.hpp's rule
    const auto j = sim::simulate_filterbank(*c, *path);
    fmt::print("wrote {} ({} channels, {} samples of {} us, {} bits) and {}.json\n", *path,
               c->nchans, c->nsamples(), *tsamp_us, c->nbits, *path);
    for (const auto& burst : j["bursts"])
      fmt::print("burst: DM {}, S/N {}, FWHM {} ms, arrival {} s at {} MHz, amplitude {:.4g}\n",
                 burst["dm"].get<double>(), burst["snr"].get<double>(),
                 burst["width_s"].get<double>() * 1e3, burst["time_s"].get<double>(),
                 std::max(c->fch1_mhz, c->fch1_mhz + (c->nchans - 1) * c->foff_mhz),
                 burst["amplitude"].get<double>());
  });
}

}  // namespace warpbeam::cli
