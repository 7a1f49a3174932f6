// `warpbeam beam-pattern`: the synthesised beam of the array (BEST-2 by default) pointed at one
// direction, over an (az, el) or (RA, Dec) grid around it, averaged over channels across the
// band, as a PNG (dB, inferno) and a FITS image (like Magro et al. 2013, figure 5).
//
// Response to a unit plane wave from direction s: R(s) = sum_a w_a exp(+2 pi i f r_a.s / c)
// (beamform::array_response), with the beamformer's own weights; pattern = mean over channels
// of |R|^2, normalised to its peak.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>

#include <nlohmann/json.hpp>

#include "beamform_cli.hpp"
#include "commands.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/image.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

namespace {

constexpr double kDeg = std::numbers::pi / 180;

struct PatternOptions {
  std::string out = "beam-pattern";
  std::string pointing = "azel 180 60";
  std::string frame = "azel";
  std::string array = "best2", site;
  double extent_deg = 40;
  int size = 256, nchans = 16;
  double mjd = 60000.5, floor_db = -40;
};

void run(const PatternOptions& o) {
  io::check_outputs({o.out + ".png", o.out + ".fits", o.out + ".json"}, {o.array});
  const beamform::ArrayGeometry array = load_array(o.array, o.site);
  const beamform::Pointing pt = beamform::parse_beam_list(o.pointing).front();
  if (o.frame == "radec" && pt.frame != beamform::Frame::radec)
    fail(ErrorCategory::invalid_argument, "--frame radec needs a 'radec RA DEC' pointing, got '{}'",
         o.pointing);
  // Channels spread over the BEST-2 band.
  const auto all = beamform::best2_frequencies_hz(1024);
  std::vector<double> freqs;
  for (int i = 0; i < o.nchans; ++i)
    freqs.push_back(all[static_cast<std::size_t>((1023 * i) / std::max(o.nchans - 1, 1))]);
  const auto w = beamform::compute_weights(array, {pt}, freqs, 1, o.mjd);
  const int na = array.nantennas(), n = o.size;
  // Grid centre in the map's frame.
  double ca, cb;
  if (o.frame == "radec") {
    ca = pt.a;
    cb = pt.b;
  } else {
    const auto az_el = beamform::enu_to_azel(beamform::direction_enu(pt, array.site, o.mjd));
    ca = az_el[0];
    cb = az_el[1];
  }
  const double step = o.extent_deg * kDeg / (n - 1);
  std::vector<float> img(static_cast<std::size_t>(n) * n, std::numeric_limits<float>::quiet_NaN());
  double peak = 0;
  std::vector<double> pw(img.size(), -1);
#pragma omp parallel for schedule(dynamic) reduction(max : peak)
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      // Row 0 = the top of the picture = the largest elevation / declination; x grows with
      // azimuth, or with RA to the left (east on the left, as on the sky).
      const double b = cb + (n / 2 - y) * step;
      const double a0 = (x - n / 2) * step / std::max(std::cos(b), 1e-3);
      beamform::Pointing q;
      q.frame = o.frame == "radec" ? beamform::Frame::radec : beamform::Frame::azel;
      q.a = o.frame == "radec" ? ca - a0 : ca + a0;
      q.b = b;
      if (std::abs(q.b) > std::numbers::pi / 2) continue;
      std::array<double, 3> s;
      try {
        s = beamform::direction_enu(q, array.site, o.mjd);
      } catch (const Error&) {
        continue;  // below the horizon: left blank (NaN)
      }
      double acc = 0;
      for (std::size_t c = 0; c < freqs.size(); ++c)
        acc += std::norm(beamform::array_response(array, w.data() + c * na, freqs[c], s));
      pw[static_cast<std::size_t>(y) * n + x] = acc / static_cast<double>(freqs.size());
      peak = std::max(peak, pw[static_cast<std::size_t>(y) * n + x]);
    }
  if (!(peak > 0)) fail(ErrorCategory::invalid_argument, "the whole map is below the horizon");
  for (std::size_t i = 0; i < img.size(); ++i)
    if (pw[i] >= 0) img[i] = static_cast<float>(10 * std::log10(std::max(pw[i] / peak, 1e-30)));
  const double deg = 180 / std::numbers::pi;
  const bool radec = o.frame == "radec";
  std::vector<io::FitsCard> cards = {
      {"CTYPE1", std::string(radec ? "RA---CAR" : "AZ---CAR"), "azimuth or RA (deg)"},
      {"CRVAL1", ca * deg, "map centre"},
      {"CDELT1", (radec ? -1 : 1) * step * deg, "deg per pixel at the centre row"},
      {"CRPIX1", static_cast<double>(n / 2 + 1), ""},
      {"CTYPE2", std::string(radec ? "DEC--CAR" : "EL---CAR"), "elevation or Dec (deg)"},
      {"CRVAL2", cb * deg, ""},
      {"CDELT2", -step * deg, "row 1 is the top"},
      {"CRPIX2", static_cast<double>(n / 2 + 1), ""},
      {"BUNIT", std::string("dB"), "power relative to the peak"},
      {"POINTING", o.pointing, "beam pointing"},
      {"MJD-OBS", o.mjd, "UTC"},
      {"NCHANAVG", static_cast<std::int64_t>(freqs.size()), "channels averaged"},
      {"NANTS", static_cast<std::int64_t>(na), ""},
      {"WBVERS", std::string(version()), "warpbeam version"},
      {"WBCOMMIT", std::string(git_commit()), "warpbeam commit"}};
  // PNG, FITS and JSON appear together or not at all: each is written under a temporary name
  // and renamed only when all three are written (StagedOutputs).
  const std::string fits = o.out + ".fits", png = o.out + ".png";
  StagedOutputs staged;
  if (io::png_supported())
    io::write_png(staged.temp(png), img.data(), n, n, static_cast<float>(o.floor_db), 0.f,
                  io::Colormap::inferno);
  if (io::fits_supported()) io::write_fits_image(staged.temp(fits), img.data(), {n, n}, cards);
  nlohmann::json j = {{"provenance", provenance()},
                      {"pointing", o.pointing},
                      {"frame", o.frame},
                      {"extent_deg", o.extent_deg},
                      {"size", n},
                      {"channels_hz", freqs},
                      {"mjd", o.mjd},
                      {"floor_db", o.floor_db}};
  io::write_text_file(staged.temp(o.out + ".json"), j.dump(2) + "\n");
  staged.commit();
  fmt::print("beam pattern of {} antennas at '{}' over {:.1f} deg ({} frame): {}{}{}\n", na,
             o.pointing, o.extent_deg, o.frame, io::fits_supported() ? fits + " " : "",
             io::png_supported() ? png + " " : "", o.out + ".json");
}

}  // namespace

void add_beam_pattern_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "beam-pattern", "The array's simulated beam pattern (BEST-2 by default) as PNG and FITS");
  auto o = std::make_shared<PatternOptions>();
  cmd->add_option("--out", o->out, "Output prefix (PREFIX.png, PREFIX.fits, PREFIX.json)")
      ->capture_default_str();
  cmd->add_option("--pointing", o->pointing, "Beam direction: 'azel AZ EL' or 'radec RA DEC'")
      ->capture_default_str();
  cmd->add_option("--frame", o->frame, "Map axes: azel or radec")
      ->check(CLI::IsMember({"azel", "radec"}))
      ->capture_default_str();
  cmd->add_option("--extent", o->extent_deg, "Map width and height (deg)")
      ->check(CLI::Range(0.01, 180.0))
      ->capture_default_str();
  cmd->add_option("--size", o->size, "Pixels per side")
      ->check(CLI::Range(8, 4096))
      ->capture_default_str();
  cmd->add_option("--nchans", o->nchans, "Channels across the band averaged")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--array", o->array, "best2, or a file of antenna positions 'E N U' (m)")
      ->capture_default_str();
  cmd->add_option("--site", o->site, "Observatory 'LON_DEG,LAT_DEG,HEIGHT_M'");
  cmd->add_option("--mjd", o->mjd, "UTC MJD (for RA/Dec)")->capture_default_str();
  cmd->add_option("--floor-db", o->floor_db, "Bottom of the PNG colour scale (dB)")
      ->check(CLI::Range(-200.0, -1.0))
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace warpbeam::cli
