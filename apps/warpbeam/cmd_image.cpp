// `warpbeam image IN`: EPIC all-sky images of LWA TBF or TBX voltages. Every --accumulate gulps of
// --gulp spectra become one FITS cube (x, y, frequency, Stokes) with a SIN-projection WCS about
// the zenith, and a PNG quick-look (Stokes I, channel average).
#include <algorithm>
#include <cmath>
#include <complex>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>

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
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/stream.hpp"
#include "warpbeam/stream/capture.hpp"
#include "warpbeam/stream/status.hpp"

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
  // --listen: a live TBF stream instead of IN.
  std::string listen, stream_channels = "2348:132", json, http;
  int stands = 256, ring_blocks = 8;
  int socket_buffer_mib = 256, capture_core = -1;
  double idle_timeout = 0, duration = 0, test_block_delay_ms = 0;
  bool capture_only = false;  // --listen: count and release blocks without imaging them
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

// What is imaged: the station's stands and channels, whether from a file or a stream.
struct ImageSource {
  std::string name;  // the file, or the stream's address
  int nstand = 0;
  std::vector<int> channels;  // channel numbers (frequency = number x channel_width_hz)
  double channel_width_hz = io::kLwaChannelWidthHz;  // fC: 25 kHz for TBF (and its stream)
  bool subset = false;  // TBX: the frames may hold fewer stands than the SSMIF describes
};

// The checks both paths make before anything is written (usage errors exit 2).
struct ImageChecks {
  Backend backend = Backend::automatic;
  std::vector<int> devices;
  epic::Algorithm algorithm = epic::Algorithm::automatic;
  std::string ssmif_path;
};

ImageChecks check_options(const ImageOptions& o) {
  ImageChecks k;
  if (o.stokes != "IQUV" && o.stokes != "I")
    fail(ErrorCategory::invalid_argument, "--stokes {} is not IQUV or I", o.stokes);
  if (!io::fits_supported())
    fail(ErrorCategory::unsupported, "this build has no cfitsio: `warpbeam image` writes FITS");
  k.backend = parse_backend(o.backend);
  // Several GPUs share the channels (warpbeam/dist/epic.hpp); the CPU images them in one block.
  k.devices = o.gpus.empty() ? std::vector<int>{} : dist::parse_gpu_list(o.gpus);
  if (resolve_backend(k.backend) == Backend::cpu && !k.devices.empty())
    fail(ErrorCategory::invalid_argument,
         "--gpus needs the CUDA backend (--backend cuda, or auto on a machine with a GPU)");
  if (resolve_backend(k.backend) == Backend::cuda && k.devices.empty())
    for (int d = 0; d < device_count(); ++d)
      k.devices.push_back(d);
  k.algorithm = epic::parse_algorithm(o.algorithm);
  k.ssmif_path = epic_common::find_ssmif(o.ssmif);
  if (k.ssmif_path.empty())
    fail(ErrorCategory::invalid_argument,
         "no station file: give --ssmif PATH (or set WARPBEAM_DATA to the shared data folder; "
         "../shared/data is tried otherwise)");
  return k;
}

// Images gulps: add() runs the plan on one gulp and accumulates; write() turns the accumulated
// gulps into one FITS cube and PNG quick-look. The file path and the stream path share it, so
// that a stream's images are the file's.
class Imager {
 public:
  Imager(const ImageOptions& o, const ImageChecks& k, const ImageSource& src, int c0, int c1)
      : o_(o), src_(src), ssmif_(io::read_ssmif(k.ssmif_path)), ssmif_path_(k.ssmif_path) {
    const io::TbfStationModel station = io::tbf_station_model(ssmif_, src.nstand, src.subset);
    nchan_ = c1 - c0;
    for (int c = c0 + 1; c < c1; ++c)
      if (src.channels[c] != src.channels[c - 1] + 1)
        fail(ErrorCategory::unsupported,
             "channels {} and {} of '{}' are not adjacent: FITS needs a uniform frequency axis; "
             "select a contiguous range with --channels",
             src.channels[c - 1], src.channels[c], src.name);
    epic::EpicConfig cfg;
    cfg.nchan = nchan_;
    cfg.nstand = src.nstand;
    cfg.ntime = o.gulp;
    for (int c = c0; c < c1; ++c)
      cfg.freqs_hz.push_back(src.channels[c] * src.channel_width_hz);
    cfg.stand_xyz_m = station.xyz_m;
    cfg.stand_ok = station.ok;
    if (!o.no_cables) {
      // Undo each cable's delay: the cable delays the signal by tau, multiply by exp(+2 pi i f
      // tau).
      cfg.calibration.resize(static_cast<std::size_t>(nchan_) * src.nstand * 2);
      for (int c = 0; c < nchan_; ++c)
        for (int s = 0; s < src.nstand; ++s)
          for (int p = 0; p < 2; ++p) {
            const double f = cfg.freqs_hz[c];
            cfg.calibration[(static_cast<std::size_t>(c) * src.nstand + s) * 2 + p] =
                std::polar(1.0f, static_cast<float>(std::fmod(
                                     2 * kPi * f * station.cable_delay_s(s, p, f), 2 * kPi)));
          }
    }
    cfg.grid_size = o.size;
    cfg.cell_m = o.cell;
    cfg.support = o.support;
    cfg.max_stand_radius_m = o.max_radius;
    cfg.algorithm = k.algorithm;
    freqs_ = cfg.freqs_hz;
    plan_ = std::make_unique<dist::MultiEpicPlan>(cfg, k.backend, k.devices);
    nused_ = static_cast<int>(plan_->used_stands().size());
    n_ = o.size;
    nn_ = static_cast<std::size_t>(n_) * n_;
    host_out_.resize(static_cast<std::size_t>(nchan_) * 4 * nn_);
    acc_.assign(host_out_.size(), 0.0);
    fmt::print(stderr,
               "warpbeam image: {} channels ({:.4f} - {:.4f} MHz), {} of {} stands gridded ({} "
               "flagged, {} beyond {} m), {} x {} pixels, {} on {} ({} channel block(s))\n",
               nchan_, freqs_.front() / 1e6, freqs_.back() / 1e6, nused_, src.nstand,
               src.nstand - static_cast<int>(std::count(station.ok.begin(), station.ok.end(), 1)),
               plan_->distant_stands().size(), o.max_radius, n_, n_,
               epic::to_string(plan_->algorithm()), to_string(plan_->backend()), plan_->blocks());
  }

  int nchan() const { return nchan_; }
  const io::Ssmif& ssmif() const { return ssmif_; }

  // One gulp, ci4 [nchan][gulp][nstand][2] (host memory).
  void add(const std::uint8_t* gulp) {
    plan_->execute(View<const std::uint8_t, 4>(gulp, {nchan_, o_.gulp, src_.nstand, 2}),
                   View<float, 4>(host_out_.data(), {nchan_, 4, n_, n_}));
    for (std::size_t i = 0; i < acc_.size(); ++i)
      acc_[i] += host_out_[i];
    ++gulps_;
  }
  int gulps() const { return gulps_; }

  // Writes image `img` of the gulps added since the last write (its first spectrum at Unix time
  // t0) with extra header cards; returns the FITS path.
  std::string write(std::int64_t img, double t0, const std::vector<io::FitsCard>& extra) {
    const epic::ImageGeometry geo = plan_->geometry();
    const int n = n_;
    const std::size_t nn = nn_;
    const int nstokes = o_.stokes == "I" ? 1 : 4;
    // Correlated power per baseline per spectrum; Stokes; blank beyond the horizon.
    const double norm = 1.0 / (static_cast<double>(o_.gulp) * gulps_ * nused_ * (nused_ - 1.0));
    std::vector<float> products(acc_.size()), stokes(acc_.size());
    for (std::size_t i = 0; i < acc_.size(); ++i)
      products[i] = static_cast<float>(acc_[i] * norm);
    epic::to_stokes(products.data(), stokes.data(), nchan_, n);
    std::vector<float> cube(static_cast<std::size_t>(nstokes) * nchan_ * nn);
    std::vector<double> mean_i(nn, 0.0);
    for (int k = 0; k < nstokes; ++k)
      for (int c = 0; c < nchan_; ++c)
        for (int y = 0; y < n; ++y)
          for (int x = 0; x < n; ++x) {
            const double l = geo.l(x), m = geo.m(y);
            const std::size_t pix = static_cast<std::size_t>(y) * n + x;
            const float v = l * l + m * m > 1 ? NAN : stokes[(c * 4 + k) * nn + pix];
            cube[(static_cast<std::size_t>(k) * nchan_ + c) * nn + pix] = v;
            if (k == 0) mean_i[pix] += v / nchan_;
          }

    const double lst = epic_common::local_sidereal_deg(t0, ssmif_.lon_deg);
    const double pix_deg = geo.pixel_rad() * 180 / kPi;
    const std::string base = fmt::format("{}/epic_{:05d}", o_.out, img);
    std::vector<io::FitsCard> cards = {
        {"BUNIT", std::string("ci4**2"), "correlated power per baseline per spectrum"},
        {"BTYPE", std::string("Intensity"), ""},
        {"CTYPE1", std::string("RA---SIN"), "x: East (l), SIN about the zenith"},
        {"CRVAL1", lst, "[deg] RA of the zenith = local sidereal time"},
        {"CRPIX1", n / 2 + 1.0, "the zenith pixel (1-based)"},
        {"CDELT1", pix_deg, "[deg] l step (positive: East to +x)"},
        {"CUNIT1", std::string("deg"), ""},
        {"CTYPE2", std::string("DEC--SIN"), "y: North (m)"},
        {"CRVAL2", ssmif_.lat_deg, "[deg] Dec of the zenith = station latitude"},
        {"CRPIX2", n / 2 + 1.0, ""},
        {"CDELT2", pix_deg, "[deg]"},
        {"CUNIT2", std::string("deg"), ""},
        {"CTYPE3", std::string("FREQ"), ""},
        {"CRVAL3", freqs_.front(), "[Hz] first channel centre"},
        {"CRPIX3", 1.0, ""},
        {"CDELT3", src_.channel_width_hz, "[Hz]"},
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
        {"EXPTIME", static_cast<double>(o_.gulp) * gulps_ / src_.channel_width_hz,
         "[s] spectra x 1/fC"},
        {"LST", lst / 15, "[h] local mean sidereal time at DATE-OBS"},
        {"TELESCOP", ssmif_.station_id.empty() ? std::string("LWA") : "LWA-" + ssmif_.station_id,
         ""},
        {"OBSGEO-B", ssmif_.lat_deg, "[deg]"},
        {"OBSGEO-L", ssmif_.lon_deg, "[deg]"},
        {"OBSGEO-H", ssmif_.elevation_m, "[m]"},
        {"ORIGIN", std::string("warpbeam"), ""},
        {"WBVER", std::string(version()), "warpbeam version"},
        {"WBCOMMIT", std::string(git_commit()), ""},
        {"EPICALG", epic::to_string(plan_->algorithm()), "EPIC algorithm"},
        {"EPICGRID", static_cast<std::int64_t>(n), "aperture grid / image size"},
        {"EPICCELL", geo.du, "[wavelengths] aperture cell"},
        {"EPICSUPP", static_cast<std::int64_t>(o_.support), "GCF support (cells)"},
        {"NSTANDS", static_cast<std::int64_t>(nused_), "stands gridded"},
        {"GULP", o_.gulp, "spectra per gulp"},
        {"NACCUM", static_cast<std::int64_t>(gulps_), "gulps per image"},
        {"CABLECAL", !o_.no_cables, "cable delays removed"},
    };
    cards.insert(cards.end(), extra.begin(), extra.end());
    cards.push_back({"SSMIF", std::filesystem::path(ssmif_path_).filename().string(), ""});
    cards.push_back({"HISTORY", "warpbeam " + command_line(), ""});
    cards.push_back({"HISTORY", "provenance " + provenance().dump(), ""});
    io::write_fits_image(base + ".fits", cube.data(), {nstokes, nchan_, n, n}, cards);

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
    std::fill(acc_.begin(), acc_.end(), 0.0);
    gulps_ = 0;
    return base + ".fits";
  }

 private:
  const ImageOptions& o_;
  ImageSource src_;
  io::Ssmif ssmif_;
  std::string ssmif_path_;
  std::vector<double> freqs_;
  std::unique_ptr<dist::MultiEpicPlan> plan_;
  int nchan_ = 0, nused_ = 0, n_ = 0, gulps_ = 0;
  std::size_t nn_ = 0;
  std::vector<float> host_out_;
  std::vector<double> acc_;
};

void run_image(const ImageOptions& o) {
  // Options first (usage errors, exit 2), then the files (exit 1); nothing is written before
  // everything has been checked.
  const ImageChecks k = check_options(o);
  const auto file = io::open_lwa_voltage_file(o.in);  // TBF or TBX
  const io::LwaVoltageFile& reader = *file;
  const io::TbfInfo& info = reader.info();
  const ImageSource src{o.in, info.nstand, info.channels, info.channel_width_hz,
                        info.format == "TBX"};
  const auto [c0, c1] = parse_channels(o.channels, info.nchan());
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
  Imager imager(o, k, src, c0, c1);
  fmt::print(stderr, "warpbeam image: {} spectra of '{}', {} image(s)\n", info.ntime, o.in,
             nimages);
  const int nchan = imager.nchan();
  std::vector<std::uint8_t> host_in(static_cast<std::size_t>(nchan) * o.gulp * info.nstand * 2);
  OutputFolder folder(o.out);
  Progress progress("imaging", nimages * o.accumulate);
  const std::vector<io::FitsCard> extra = {
      {"INFILE", std::filesystem::path(o.in).filename().string(), ""}};
  for (std::int64_t img = 0; img < nimages; ++img) {
    const std::int64_t t_first = img * o.accumulate * o.gulp;
    for (int g = 0; g < o.accumulate; ++g) {
      reader.read(t_first + g * o.gulp, o.gulp, c0, nchan, host_in.data());
      imager.add(host_in.data());
      progress.update(img * o.accumulate + g + 1);
    }
    fmt::print("{}\n", imager.write(img, info.unix_time(t_first), extra));
  }
  folder.keep();
}

// "FIRST:COUNT": the stream's channel numbers.
std::pair<int, int> parse_stream_channels(const std::string& s) {
  int a = 0, n = 0;
  char extra = 0;
  if (std::sscanf(s.c_str(), "%d:%d%c", &a, &n, &extra) != 2 || a < 0 || n <= 0 ||
      n % io::kTbfChannelsPerFrame != 0 || a + n > 32767)
    fail(ErrorCategory::invalid_argument,
         "--stream-channels '{}' is not FIRST:COUNT (channel numbers FIRST .. FIRST+COUNT-1, "
         "COUNT a multiple of {})",
         s, io::kTbfChannelsPerFrame);
  return {a, n};
}

// `warpbeam image --listen udp://HOST:PORT`: images a live TBF stream, one FITS cube and PNG per
// --accumulate gulps, as from a file. Each block of the ring is one gulp; an image holds the
// gulps of its span that arrived (NGULPS; the products of a gap are missing, not faked).
void run_image_listen(const ImageOptions& o) {
  const ImageChecks k = check_options(o);
  stream::TbfStreamConfig sc;
  sc.listen = stream::parse_endpoint(o.listen, "udp", "--listen", true);
  const auto [first, count] = parse_stream_channels(o.stream_channels);
  sc.first_chan = first;
  sc.nchan = count;
  sc.nstand = o.stands;
  sc.spectra_per_block = o.gulp;
  sc.ring_blocks = o.ring_blocks;
  sc.idle_timeout_s = o.idle_timeout;
  sc.socket_buffer_mib = o.socket_buffer_mib;
  sc.capture_core = o.capture_core;
  sc.validate();
  std::optional<stream::Endpoint> http;
  if (!o.http.empty()) {
    http = stream::parse_http_address(o.http);
    if (!stream::http_supported())
      fail(ErrorCategory::unsupported, "this build has no cpp-httplib: --http is unavailable");
    if (!http->is_loopback())
      fail(ErrorCategory::invalid_argument,
           "--http {}: the status page has no access control: serve it on 127.0.0.1", o.http);
  }
  ImageSource src{sc.listen.to_string(), sc.nstand, {}};
  for (int c = 0; c < sc.nchan; ++c)
    src.channels.push_back(sc.first_chan + c);
  const auto [c0, c1] = parse_channels(o.channels, sc.nchan);
  io::check_outputs({o.json}, {k.ssmif_path});  // before the work: output_file.hpp's rule
  Imager imager(o, k, src, c0, c1);
  OutputFolder folder(o.out);

  stream::StreamCounters counters;
  stream::StopOnSignals signals;
  stream::TbfCapture capture(sc, counters);
  const stream::StatusLine line(counters, "warpbeam image");
  stream::StatusBoard board("warpbeam image --listen " + sc.listen.to_string());
  std::unique_ptr<stream::StatusServer> server;
  if (http) server = std::make_unique<stream::StatusServer>(*http, counters, &line, board);
  fmt::print(stderr, "warpbeam image: listening on {} ({} blocks of {} MiB{}){}\n",
             stream::Endpoint{sc.listen.scheme, sc.listen.host, capture.port()}.to_string(),
             sc.ring_blocks, sc.block_bytes() >> 20, capture.ring().pinned() ? ", page-locked" : "",
             server ? fmt::format("; status page {}/",
                                  stream::Endpoint{"http", http->host, server->port()}.to_string())
                    : "");

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::size_t offset = static_cast<std::size_t>(c0) * o.gulp * sc.nstand * 2;
  nlohmann::json products = nlohmann::json::array();
  std::int64_t current = -1, lost_in_image = 0;
  std::string reason = "end of stream";
  auto write_image = [&](bool partial) {
    const double t0 =
        static_cast<double>(capture.first_time_tag() +
                            current * o.accumulate * o.gulp * io::kTbfTicksPerSpectrum) /
        io::kLwaClockHz;
    const int gulps = imager.gulps();
    const std::vector<io::FitsCard> extra = {
        {"STREAM", sc.listen.to_string(), "live TBF stream"},
        {"NGULPS", static_cast<std::int64_t>(gulps), "gulps of the span that arrived"},
        {"NMISSING", static_cast<std::int64_t>(o.accumulate - gulps),
         "gulps of the span missing (dropped, lost or not yet received)"},
        {"NLOST", lost_in_image, "packets lost (zero-filled) in its gulps"},
        {"PARTIAL", partial, "the run ended inside this image's span"}};
    const std::string path = imager.write(current, t0, extra);
    folder.keep();  // a live run keeps what it has written, whatever happens later
    ++counters.images;
    products.push_back({{"fits", path},
                        {"image", current},
                        {"gulps", gulps},
                        {"lost_packets", lost_in_image},
                        {"partial", partial}});
    board.set_image(
        path.substr(0, path.size() - 5) + ".png",
        fmt::format("epic_{:05d}: {} gulp(s), {} packet(s) lost", current, gulps, lost_in_image));
    fmt::print("{}\n", path);
    std::fflush(stdout);
    lost_in_image = 0;
  };
  for (;;) {
    if (stream::StopOnSignals::requested()) {
      reason = fmt::format("signal {}", stream::StopOnSignals::signal());
      break;
    }
    if (o.duration > 0 && Clock::now() - start >= std::chrono::duration<double>(o.duration)) {
      reason = "--duration";
      break;
    }
    bool closed = false;
    stream::Block* b = capture.ring().next(std::chrono::milliseconds(100), &closed);
    if (!b) {
      if (closed) break;
      continue;
    }
    const std::int64_t img = b->info.sequence / o.accumulate;
    if (img != current && imager.gulps() > 0) write_image(false);
    if (o.max_images > 0 && img >= o.max_images) {
      capture.ring().release(b);
      reason = "--max-images";
      break;
    }
    current = img;
    if (o.capture_only) {  // measuring the capture path alone
      ++counters.blocks_processed;
      counters.bytes_processed += static_cast<std::int64_t>(b->bytes);
      lost_in_image += b->info.lost_packets();
      capture.ring().release(b);
      continue;
    }
    imager.add(b->data + offset);
    lost_in_image += b->info.lost_packets();
    if (o.test_block_delay_ms > 0)  // tests: an engine slower than the sender, on purpose
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.test_block_delay_ms));
    ++counters.blocks_processed;
    counters.bytes_processed += static_cast<std::int64_t>(b->bytes);
    capture.ring().release(b);
    counters.ring_filled = static_cast<std::int64_t>(capture.ring().filled());
    if (imager.gulps() == o.accumulate) write_image(false);
  }
  if (imager.gulps() > 0) write_image(true);
  capture.stop();
  // The blocks handed over after the loop ended (a signal or --duration) were not imaged.
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print(stderr,
             "warpbeam image: {} ({:.1f} s): {} image(s), {} block(s) processed, {} dropped "
             "(ring full), {} packet(s) lost, {} late, {} duplicate, {} invalid\n",
             reason, seconds, counters.images.load(), counters.blocks_processed.load(),
             counters.dropped_blocks.load(), counters.lost_packets.load(), counters.late.load(),
             counters.duplicates.load(), counters.invalid.load());
  if (!o.json.empty()) {
    nlohmann::json c = counters.to_json();
    const nlohmann::json record = {
        {"provenance", provenance()},
        {"stream", sc.listen.to_string()},
        {"port", capture.port()},
        {"ended_by", reason},
        {"seconds", seconds},
        {"first_time_tag", capture.first_time_tag()},
        {"lost_packets", c["lost_packets"]},
        {"dropped_blocks", c["dropped_blocks"]},
        {"rates",
         {{"in_bytes_per_s", seconds > 0 ? counters.bytes.load() / seconds : 0.0},
          {"processed_bytes_per_s",
           seconds > 0 ? counters.bytes_processed.load() / seconds : 0.0}}},
        {"counters", c},
        {"parameters",
         {{"gulp", o.gulp},
          {"accumulate", o.accumulate},
          {"stream_channels", o.stream_channels},
          {"channels", o.channels},
          {"stands", o.stands},
          {"ring_blocks", o.ring_blocks},
          {"socket_buffer_mib", o.socket_buffer_mib},
          {"capture_core", o.capture_core},
          {"idle_timeout_s", o.idle_timeout},
          {"size", o.size}}},
        {"products", products}};
    io::write_text_file(o.json, record.dump(2) + "\n");
  }
  folder.keep();
}

}  // namespace

void add_image_command(CLI::App& app) {
  auto o = std::make_shared<ImageOptions>();
  auto* cmd =
      app.add_subcommand("image", "EPIC all-sky images (FITS + PNG) of LWA TBF or TBX voltages");
  cmd->add_option("IN", o->in, "TBF or TBX file (real or from `warpbeam simulate station`)");
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
  cmd->add_option("--listen", o->listen,
                  "Image a live TBF stream (one frame per datagram) received on udp://HOST:PORT "
                  "instead of IN");
  cmd->add_option("--stream-channels", o->stream_channels,
                  "--listen: the stream's channel numbers FIRST:COUNT")
      ->capture_default_str();
  cmd->add_option("--stands", o->stands, "--listen: stands per frame")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--ring-blocks", o->ring_blocks,
                  "--listen: blocks (gulps) of the ring between capture and imager")
      ->check(CLI::Range(3, 1 << 16))
      ->capture_default_str();
  add_capture_options(*cmd, o->socket_buffer_mib, o->capture_core);
  cmd->add_option("--idle-timeout", o->idle_timeout,
                  "--listen: end after this many seconds without a packet, counted from the first "
                  "packet: a listener waits for its stream to start (0: never; TBF has no end "
                  "marker)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--duration", o->duration, "--listen: end after this many seconds (0: never)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--json", o->json,
                  "--listen: write the run's record (lost packets, dropped blocks, rates, "
                  "products) here");
  cmd->add_option("--http", o->http,
                  "--listen: serve /metrics (Prometheus) and a live page at 127.0.0.1:PORT");
  cmd->add_flag("--capture-only", o->capture_only,
                "--listen: receive and count, image nothing (measures the capture path alone)");
  // Tests only: slows the imager down on purpose (an engine slower than the stream).
  cmd->add_option("--test-block-delay-ms", o->test_block_delay_ms)
      ->check(CLI::Range(0.0, 1e6))
      ->group("");
  cmd->callback([o] {
    if (o->listen.empty() == o->in.empty())
      fail(ErrorCategory::invalid_argument,
           "give either IN (a TBF or TBX file) or --listen udp://...");
    if (o->listen.empty()) {
      for (const char* opt : {"--json", "--http"})
        if (!(opt[2] == 'j' ? o->json : o->http).empty())
          fail(ErrorCategory::invalid_argument, "{} is for --listen", opt);
      run_image(*o);
    } else {
      run_image_listen(*o);
    }
  });
}

}  // namespace warpbeam::cli
