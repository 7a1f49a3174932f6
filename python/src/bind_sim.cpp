// Simulators for tests and tutorials: filterbanks with dispersed bursts, ultrasound channel
// data, LWA-style station voltages.
#include <fmt/format.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nlohmann/json.hpp>

#include "arrays.hpp"
#include "bindings.hpp"
#include "header.hpp"
#include "owned.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/sim/filterbank.hpp"
#include "warpbeam/sim/station.hpp"
#include "warpbeam/sim/ultrasound.hpp"

namespace wbpy {

namespace {

std::vector<std::array<double, 3>> rows3(const InArray& a, const char* name) {
  const auto v = view_of<const double, 2>(a, {-1, 3}, name);
  if (v.space != Space::host) throw nb::value_error(fmt::format("{}: host array", name).c_str());
  std::vector<std::array<double, 3>> r(static_cast<std::size_t>(v.shape[0]));
  for (std::size_t i = 0; i < r.size(); ++i)
    r[i] = {v.data[3 * i], v.data[3 * i + 1], v.data[3 * i + 2]};
  return r;
}

}  // namespace

void bind_sim(nb::module_& m) {
  m.def(
      "simulate_filterbank",
      [](const std::string& path, int nchans, double fch1, double foff, double tsamp, int nbits,
         double duration, std::uint64_t seed, double tstart, double noise_mean, double noise_rms,
         const std::string& source_name, std::vector<std::array<double, 4>> bursts) {
        warpbeam::sim::FilterbankSimConfig c;
        c.nchans = nchans;
        c.fch1_mhz = fch1;
        c.foff_mhz = foff;
        c.tsamp_s = tsamp;
        c.nbits = nbits;
        c.duration_s = duration;
        c.seed = seed;
        c.tstart_mjd = tstart;
        c.noise_mean = noise_mean;
        c.noise_rms = noise_rms;
        c.source_name = source_name;
        for (const auto& b : bursts)
          c.bursts.push_back({b[0], b[1], b[2], b[3]});
        c.validate();
        nlohmann::json j;
        {
          nb::gil_scoped_release g;
          j = warpbeam::sim::simulate_filterbank(c, path);
        }
        return json_to_python(j.dump());
      },
      nb::arg("path"), nb::arg("nchans"), nb::arg("fch1"), nb::arg("foff"), nb::arg("tsamp"),
      nb::arg("nbits"), nb::arg("duration"), nb::arg("seed"), nb::arg("tstart"),
      nb::arg("noise_mean"), nb::arg("noise_rms"), nb::arg("source_name"), nb::arg("bursts"));

  m.def(
      "simulate_ultrasound",
      [](const InArray& elements, std::vector<warpbeam::das::Transmit> transmits,
         const InArray& scatterers, std::vector<double> amplitudes, const std::string& sample_type,
         double fc, double bandwidth, double fs, double c, double t0, std::int64_t nsamples,
         std::int64_t frames, double noise, std::uint32_t seed) {
        namespace das = warpbeam::das;
        warpbeam::sim::UltrasoundSimConfig s;
        s.probe.positions = rows3(elements, "elements");
        s.transmits = std::move(transmits);
        s.scatterers = rows3(scatterers, "scatterers");
        s.amplitudes = std::move(amplitudes);
        if (sample_type != "rf" && sample_type != "iq")
          throw nb::value_error(
              fmt::format("sample_type '{}': expected 'rf' or 'iq'", sample_type).c_str());
        s.signal = sample_type == "rf" ? das::Signal::rf : das::Signal::iq;
        s.fc = fc;
        s.bandwidth = bandwidth;
        s.fs = fs;
        s.c = c;
        s.t0 = t0;
        s.nsamples = nsamples;
        s.frames = frames;
        s.noise = noise;
        s.seed = seed;
        s.validate();
        warpbeam::io::UltrasoundData d;
        {
          nb::gil_scoped_release g;
          d = warpbeam::sim::simulate_ultrasound(s);
        }
        return ultrasound_to_dict(std::move(d));
      },
      nb::arg("elements"), nb::arg("transmits"), nb::arg("scatterers"), nb::arg("amplitudes"),
      nb::arg("sample_type"), nb::arg("fc"), nb::arg("bandwidth"), nb::arg("fs"), nb::arg("c"),
      nb::arg("t0"), nb::arg("nsamples"), nb::arg("frames"), nb::arg("noise"), nb::arg("seed"));

  m.def(
      "simulate_station",
      [](const InArray& positions, std::vector<double> freqs_hz, std::int64_t ntime,
         std::vector<std::array<double, 6>> sources, int ndiffuse, double diffuse_flux,
         double receiver_noise, double rms, bool constant_power, std::uint64_t seed, int threads) {
        warpbeam::sim::StationSimConfig s;
        s.stand_xyz_m = rows3(positions, "positions");
        s.freqs_hz = std::move(freqs_hz);
        s.ntime = ntime;
        for (const auto& x : sources)
          s.sources.push_back({x[0], x[1], x[2], x[3], x[4], x[5]});
        s.ndiffuse = ndiffuse;
        s.diffuse_flux = diffuse_flux;
        s.receiver_noise = receiver_noise;
        s.rms = rms;
        s.constant_power = constant_power;
        s.seed = seed;
        s.threads = threads;
        s.validate();
        warpbeam::sim::StationSimOutput o;
        {
          nb::gil_scoped_release g;
          o = warpbeam::sim::simulate_station(s);
        }
        const std::size_t nchan = s.freqs_hz.size(), nst = s.stand_xyz_m.size();
        return nb::make_tuple(
            to_numpy(std::move(o.ci4), {nchan, std::size_t(ntime), nst, std::size_t(2)}), o.scale,
            o.clipped);
      },
      nb::arg("positions"), nb::arg("freqs_hz"), nb::arg("ntime"), nb::arg("sources"),
      nb::arg("ndiffuse"), nb::arg("diffuse_flux"), nb::arg("receiver_noise"), nb::arg("rms"),
      nb::arg("constant_power"), nb::arg("seed"), nb::arg("threads"));
}

}  // namespace wbpy
