// `warpbeam image IN`: EPIC all-sky images of LWA TBF or TBX voltages. Every --accumulate gulps of
// --gulp spectra become one FITS cube (x, y, frequency, Stokes) with a SIN-projection WCS about
// the zenith, and a PNG quick-look (Stokes I, channel average).
#include <algorithm>
#include <cmath>
#include <complex>
#include <filesystem>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "commands.hpp"
#include "epic_common.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/dist/epic.hpp"
#include "warpbeam/dist/work.hpp"
#include "warpbeam/epic.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/image.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

namespace {

constexpr double kPi = 3.14159265358979323846;

struct ImageOptions {
  std::string in, out, ssmif, channels = "all", backend = "auto", algorithm = "auto";
  std::string stokes = "IQUV";
  std::string gpus;  // --gpus: devices sharing the channels (default: every visible one)
  int size = 128, support = 2, accumulate = 1, max_images = 0;
  std::int64_t gulp = 1000;
  double cell = 0, max_radius = 150;
  bool no_cables = false;
};

// "all", "A:B" (indices A .. B-1 of the file's channels) or "A" (one channel).
std::pair<int, int> parse_channels(const std::string& s, int nchan) {
  if (s == "all") return {0, nchan};
  int a = 0, b = 0;
  char extra = 0;
  if (std::sscanf(s.c_str(), "%d:%d%c", &a, &b, &extra) == 2) {
  } else if (std::sscanf(s.c_str(), "%d%c", &a, &extra) == 1) {
    b = a + 1;
  } else {
    fail(ErrorCategory::invalid_argument,
         "--channels '{}' is not 'all', 'A:B' (indices A .. B-1) or 'A'", s);
  }
  if (a < 0 || b <= a || b > nchan)
    fail(ErrorCategory::invalid_argument,
         "--channels {} selects [{}, {}): the file has channel indices 0 .. {}", s, a, b,
         nchan - 1);
  return {a, b};
}

void run_image(const ImageOptions& o) {
  // Options first (usage errors, exit 2), then the files (exit 1); nothing is written before
  // everything has been checked.
  if (o.stokes != "IQUV" && o.stokes != "I")
    fail(ErrorCategory::invalid_argument, "--stokes {} is not IQUV or I", o.stokes);
  if (!io::fits_supported())
    fail(ErrorCategory::unsupported, "this build has no cfitsio: `warpbeam image` writes FITS");
  const Backend backend = parse_backend(o.backend);
  // Several GPUs share the channels (warpbeam/dist/epic.hpp); the CPU images them in one block.
  std::vector<int> devices = o.gpus.empty() ? std::vector<int>{} : dist::parse_gpu_list(o.gpus);
  if (resolve_backend(backend) == Backend::cpu && !devices.empty())
    fail(ErrorCategory::invalid_argument,
         "--gpus needs the CUDA backend (--backend cuda, or auto on a machine with a GPU)");
  if (resolve_backend(backend) == Backend::cuda && devices.empty())
    for (int d = 0; d < device_count(); ++d)
      devices.push_back(d);
  const epic::Algorithm algorithm = epic::parse_algorithm(o.algorithm);
  const std::string ssmif_path = epic_common::find_ssmif(o.ssmif);
  if (ssmif_path.empty())
    fail(ErrorCategory::invalid_argument,
         "no station file: give --ssmif PATH (or set WARPBEAM_DATA to the shared data folder; "
         "../shared/data is tried otherwise)");

  const auto file = io::open_lwa_voltage_file(o.in);  // TBF or TBX
  const io::LwaVoltageFile& reader = *file;
  const io::TbfInfo& info = reader.info();
  const io::Ssmif ssmif = io::read_ssmif(ssmif_path);
  const io::TbfStationModel station =
      io::tbf_station_model(ssmif, info.nstand, info.format == "TBX");
  const auto [c0, c1] = parse_channels(o.channels, info.nchan());
  const int nchan = c1 - c0;
  for (int c = c0 + 1; c < c1; ++c)
    if (info.channels[c] != info.channels[c - 1] + 1)
      fail(ErrorCategory::unsupported,
           "channels {} and {} of '{}' are not adjacent: FITS needs a uniform frequency axis; "
           "select a contiguous range with --channels",
           info.channels[c - 1], info.channels[c], o.in);
  if (o.gulp > info.ntime)
    fail(ErrorCategory::invalid_argument,
         "'{}' holds {} spectra, fewer than one gulp (--gulp {}): use --gulp {} or less", o.in,
         info.ntime, o.gulp, info.ntime);
  const std::int64_t ngulps = info.ntime / o.gulp;
  std::int64_t nimages = ngulps / o.accumulate;
  if (nimages == 0)
    fail(ErrorCategory::invalid_argument,
         "'{}' holds {} gulps of {} spectra, fewer than --accumulate {}", o.in, ngulps, o.gulp,
         o.accumulate);
  if (o.max_images > 0) nimages = std::min<std::int64_t>(nimages, o.max_images);

  epic::EpicConfig cfg;
  cfg.nchan = nchan;
  cfg.nstand = info.nstand;
  cfg.ntime = o.gulp;
  for (int c = c0; c < c1; ++c)
    cfg.freqs_hz.push_back(info.frequency_hz(c));
  cfg.stand_xyz_m = station.xyz_m;
  cfg.stand_ok = station.ok;
  if (!o.no_cables) {
    // Undo each cable's delay: the cable delays the signal by tau, multiply by exp(+2 pi i f tau).
    cfg.calibration.resize(static_cast<std::size_t>(nchan) * info.nstand * 2);
    for (int c = 0; c < nchan; ++c)
      for (int s = 0; s < info.nstand; ++s)
        for (int p = 0; p < 2; ++p) {
          const double f = cfg.freqs_hz[c];
          cfg.calibration[(static_cast<std::size_t>(c) * info.nstand + s) * 2 + p] = std::polar(
              1.0f,
              static_cast<float>(std::fmod(2 * kPi * f * station.cable_delay_s(s, p, f), 2 * kPi)));
        }
  }
  cfg.grid_size = o.size;
  cfg.cell_m = o.cell;
  cfg.support = o.support;
  cfg.max_stand_radius_m = o.max_radius;
  cfg.algorithm = algorithm;
  const dist::MultiEpicPlan plan(cfg, backend, devices);
  const int nused = static_cast<int>(plan.used_stands().size());
  const int n = o.size;
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  fmt::print(stderr,
             "warpbeam image: {} spectra x {} channels ({:.4f} - {:.4f} MHz), {} of {} stands "
             "gridded ({} flagged, {} beyond {} m), {} x {} pixels, {} on {} ({} channel "
             "block(s))\n",
             info.ntime, nchan, cfg.freqs_hz.front() / 1e6, cfg.freqs_hz.back() / 1e6, nused,
             info.nstand,
             info.nstand - static_cast<int>(std::count(station.ok.begin(), station.ok.end(), 1)),
             plan.distant_stands().size(), o.max_radius, n, n, epic::to_string(plan.algorithm()),
             to_string(plan.backend()), plan.blocks());

  // Host buffers (each channel block copies its part to its device and back).
  const std::size_t in_bytes = static_cast<std::size_t>(nchan) * o.gulp * info.nstand * 2;
  std::vector<std::uint8_t> host_in(in_bytes);
  std::vector<float> host_out(static_cast<std::size_t>(nchan) * 4 * nn);
  std::vector<double> acc(host_out.size());
  OutputFolder folder(o.out);
  const epic::ImageGeometry geo = plan.geometry();
  const int nstokes = o.stokes == "I" ? 1 : 4;
  Progress progress("imaging", nimages * o.accumulate);

  for (std::int64_t img = 0; img < nimages; ++img) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const std::int64_t t_first = img * o.accumulate * o.gulp;
    for (int g = 0; g < o.accumulate; ++g) {
      reader.read(t_first + g * o.gulp, o.gulp, c0, nchan, host_in.data());
      plan.execute(View<const std::uint8_t, 4>(host_in.data(), {nchan, o.gulp, info.nstand, 2}),
                   View<float, 4>(host_out.data(), {nchan, 4, n, n}));
      for (std::size_t i = 0; i < acc.size(); ++i)
        acc[i] += host_out[i];
      progress.update(img * o.accumulate + g + 1);
    }
    // Correlated power per baseline per spectrum; Stokes; blank beyond the horizon.
    const double norm = 1.0 / (static_cast<double>(o.gulp) * o.accumulate * nused * (nused - 1.0));
    std::vector<float> products(acc.size()), stokes(acc.size());
    for (std::size_t i = 0; i < acc.size(); ++i)
      products[i] = static_cast<float>(acc[i] * norm);
    epic::to_stokes(products.data(), stokes.data(), nchan, n);
    std::vector<float> cube(static_cast<std::size_t>(nstokes) * nchan * nn);
    std::vector<double> mean_i(nn, 0.0);
    for (int k = 0; k < nstokes; ++k)
      for (int c = 0; c < nchan; ++c)
        for (int y = 0; y < n; ++y)
          for (int x = 0; x < n; ++x) {
            const double l = geo.l(x), m = geo.m(y);
            const std::size_t pix = static_cast<std::size_t>(y) * n + x;
            const float v = l * l + m * m > 1 ? NAN : stokes[(c * 4 + k) * nn + pix];
            cube[(static_cast<std::size_t>(k) * nchan + c) * nn + pix] = v;
            if (k == 0) mean_i[pix] += v / nchan;
          }

    const double t0 = info.unix_time(t_first);
    const double lst = epic_common::local_sidereal_deg(t0, ssmif.lon_deg);
    const double pix_deg = geo.pixel_rad() * 180 / kPi;
    const std::string base = fmt::format("{}/epic_{:05d}", o.out, img);
    std::vector<io::FitsCard> cards = {
        {"BUNIT", std::string("ci4**2"), "correlated power per baseline per spectrum"},
        {"BTYPE", std::string("Intensity"), ""},
        {"CTYPE1", std::string("RA---SIN"), "x: East (l), SIN about the zenith"},
        {"CRVAL1", lst, "[deg] RA of the zenith = local sidereal time"},
        {"CRPIX1", n / 2 + 1.0, "the zenith pixel (1-based)"},
        {"CDELT1", pix_deg, "[deg] l step (positive: East to +x)"},
        {"CUNIT1", std::string("deg"), ""},
        {"CTYPE2", std::string("DEC--SIN"), "y: North (m)"},
        {"CRVAL2", ssmif.lat_deg, "[deg] Dec of the zenith = station latitude"},
        {"CRPIX2", n / 2 + 1.0, ""},
        {"CDELT2", pix_deg, "[deg]"},
        {"CUNIT2", std::string("deg"), ""},
        {"CTYPE3", std::string("FREQ"), ""},
        {"CRVAL3", cfg.freqs_hz.front(), "[Hz] first channel centre"},
        {"CRPIX3", 1.0, ""},
        {"CDELT3", info.channel_width_hz, "[Hz]"},
        {"CUNIT3", std::string("Hz"), ""},
        {"CTYPE4", std::string("STOKES"), "I = (XX+YY)/2, Q, U = Re XY*, V = Im XY*"},
        {"CRVAL4", 1.0, ""},
        {"CRPIX4", 1.0, ""},
        {"CDELT4", 1.0, ""},
        {"RADESYS", std::string("ICRS"), "zenith of date (precession ignored)"},
        {"LONPOLE", 180.0, ""},
        {"SPECSYS", std::string("TOPOCENT"), ""},
        {"TIMESYS", std::string("UTC"), ""},
        {"DATE-OBS", epic_common::iso_utc(t0), "start of the first spectrum"},
        {"MJD-OBS", epic_common::julian_date(t0) - 2400000.5, ""},
        {"EXPTIME", static_cast<double>(o.gulp) * o.accumulate * info.spectrum_s(),
         "[s] spectra x 1/fC"},
        {"LST", lst / 15, "[h] local mean sidereal time at DATE-OBS"},
        {"TELESCOP", ssmif.station_id.empty() ? std::string("LWA") : "LWA-" + ssmif.station_id, ""},
        {"OBSGEO-B", ssmif.lat_deg, "[deg]"},
        {"OBSGEO-L", ssmif.lon_deg, "[deg]"},
        {"OBSGEO-H", ssmif.elevation_m, "[m]"},
        {"ORIGIN", std::string("warpbeam"), ""},
        {"WBVER", std::string(version()), "warpbeam version"},
        {"WBCOMMIT", std::string(git_commit()), ""},
        {"EPICALG", epic::to_string(plan.algorithm()), "EPIC algorithm"},
        {"EPICGRID", static_cast<std::int64_t>(n), "aperture grid / image size"},
        {"EPICCELL", geo.du, "[wavelengths] aperture cell"},
        {"EPICSUPP", static_cast<std::int64_t>(o.support), "GCF support (cells)"},
        {"NSTANDS", static_cast<std::int64_t>(nused), "stands gridded"},
        {"GULP", o.gulp, "spectra per gulp"},
        {"NACCUM", static_cast<std::int64_t>(o.accumulate), "gulps per image"},
        {"CABLECAL", !o.no_cables, "cable delays removed"},
        {"INFILE", std::filesystem::path(o.in).filename().string(), ""},
        {"SSMIF", std::filesystem::path(ssmif_path).filename().string(), ""},
        {"HISTORY", "warpbeam " + command_line(), ""},
        {"HISTORY", "provenance " + provenance().dump(), ""},
    };
    io::write_fits_image(base + ".fits", cube.data(), {nstokes, nchan, n, n}, cards);

    if (io::png_supported()) {
      // Quick-look: Stokes I, channel mean, as seen from the ground (North up, East left).
      std::vector<float> view(nn);
      std::vector<float> finite;
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) {
          const double v = mean_i[static_cast<std::size_t>(y) * n + x];
          view[static_cast<std::size_t>(y) * n + (n - 1 - x)] = static_cast<float>(v);
          if (std::isfinite(v)) finite.push_back(static_cast<float>(v));
        }
      std::sort(finite.begin(), finite.end());
      float lo = finite.empty() ? 0.f : finite[finite.size() / 100];
      float hi = finite.empty() ? 1.f : finite[finite.size() - 1 - finite.size() / 1000];
      if (!(hi > lo)) hi = lo + 1;
      io::write_png(base + ".png", view.data(), n, n, lo, hi, io::Colormap::inferno, true);
    }
    fmt::print("{}.fits\n", base);
  }
  folder.keep();
}

}  // namespace

void add_image_command(CLI::App& app) {
  auto o = std::make_shared<ImageOptions>();
  auto* cmd =
      app.add_subcommand("image", "EPIC all-sky images (FITS + PNG) of LWA TBF or TBX voltages");
  cmd->add_option("IN", o->in, "TBF or TBX file (real or from `warpbeam simulate station`)")
      ->required();
  cmd->add_option("--out", o->out, "Output folder (FITS cubes and PNG quick-looks)")->required();
  cmd->add_option("--ssmif", o->ssmif,
                  "Station file (default: $WARPBEAM_DATA/lwa/lwasv-ssmif.txt, else "
                  "../shared/data/lwa/lwasv-ssmif.txt)");
  cmd->add_option("--size", o->size, "Image and aperture grid size (pixels)")
      ->capture_default_str();
  cmd->add_option("--channels", o->channels,
                  "Channel indices of the file: all, A:B (A .. B-1) or A")
      ->capture_default_str();
  cmd->add_option("--gulp", o->gulp, "Spectra per gulp (1/fC each: 40 us for TBF)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--accumulate", o->accumulate, "Gulps summed into each image")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-images", o->max_images, "Stop after this many images (0: all)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--support", o->support, "GCF support (cells)")
      ->check(CLI::Range(1, 9))
      ->capture_default_str();
  cmd->add_option("--cell", o->cell, "Aperture cell (m) at the highest frequency (0: lambda/2)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--max-radius", o->max_radius,
                  "Leave out stands farther than this (m) from the array centre")
      ->check(CLI::Range(1.0, 1e5))
      ->capture_default_str();
  cmd->add_option("--stokes", o->stokes, "Planes written: IQUV or I")->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm, "auto, reference, multikernel or fused")
      ->capture_default_str();
  cmd->add_flag("--no-cable-delays", o->no_cables, "Do not remove the SSMIF cable delays");
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--gpus", o->gpus,
                  "CUDA devices sharing the channels, e.g. 0,1 (default: every visible one)");
  cmd->callback([o] { run_image(*o); });
}

}  // namespace warpbeam::cli
