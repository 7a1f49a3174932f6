// `warpbeam info FILE`: a filterbank's header (SIGPROC or PSRFITS, through open_filterbank) and
// derived figures, or what an LWA voltage file (TBF or TBX) holds.
#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/lwa.hpp"

namespace warpbeam::cli {

namespace {
constexpr double kDispersionConstant = 4.148808e3;  // s MHz^2 pc^-1 cm^3

// True when `path` starts with the LWA frames' sync word 0xDEC0DE5C (big-endian).
bool is_lwa_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char b[4] = {};
  const bool ok = std::fread(b, 1, 4, f) == 4;
  std::fclose(f);
  return ok && b[0] == 0xDE && b[1] == 0xC0 && b[2] == 0xDE && b[3] == 0x5C;
}

void run_lwa_info(const std::string& path) {
  const auto file = io::open_lwa_voltage_file(path);
  const io::TbfInfo& t = file->info();
  const double unix_s = t.unix_time(0);
  const auto whole = static_cast<std::time_t>(std::floor(unix_s));
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:", &utc);
  fmt::print("file            {}\n", path);
  fmt::print("format          LWA {} (channelised voltages, ci4, 2 pols)\n", t.format);
  fmt::print("nstand          {}\n", t.nstand);
  fmt::print("frame_bytes     {} ({} channels per frame)\n", t.frame_bytes, t.channels_per_frame);
  fmt::print("channels        {} ({} .. {}){}\n", t.nchan(), t.channels.front(), t.channels.back(),
             t.contiguous() ? "" : ", not contiguous");
  fmt::print("channel_width   {:.6f} kHz ({} ticks per spectrum){}\n", t.channel_width_hz / 1e3,
             t.ticks_per_spectrum,
             t.channel_width_assumed ? " (assumed: one spectrum shows no time-tag step)" : "");
  fmt::print("band            {:.6f} - {:.6f} MHz\n", t.frequency_hz(0) / 1e6,
             t.frequency_hz(t.nchan() - 1) / 1e6);
  fmt::print("spectra         {} ({:.6f} s)\n", t.ntime,
             static_cast<double>(t.ntime) * t.spectrum_s());
  fmt::print("time_tag        {} (ticks of 196 MHz since 1970)\n", t.time_tags.front());
  fmt::print("start           {}{:09.6f} UTC (MJD {:.9f})\n", date,
             utc.tm_sec + (unix_s - static_cast<double>(whole)), unix_s / 86400.0 + 40587.0);
  fmt::print("dropped         {} bytes (partial frame), {} frames (incomplete spectra)\n",
             t.dropped_bytes, t.dropped_frames);
}

void run_info(const std::string& path, double dm) {
  if (is_lwa_file(path)) {
    run_lwa_info(path);
    return;
  }
  const auto source = io::open_filterbank(path);
  const io::FilterbankHeader& h = source->header();
  const double fmin = h.fmin_mhz(), fmax = h.fmax_mhz();
  const double delay = kDispersionConstant * dm * (1 / (fmin * fmin) - 1 / (fmax * fmax));
  fmt::print("file            {}\n", path);
  fmt::print("format          {}\n", source->format());
  for (const auto& [key, text] : source->details())
    fmt::print("{:<15} {}\n", key, text);
  fmt::print("source_name     {}\n", h.source_name.empty() ? "-" : h.source_name);
  fmt::print("telescope_id    {}\nmachine_id      {}\ndata_type       {}\n", h.telescope_id,
             h.machine_id, h.data_type);
  fmt::print("nchans          {}\nnbits           {}{}\nnifs            {}\n", h.nchans, h.nbits,
             h.is_signed ? " (signed)" : "", h.nifs);
  fmt::print("fch1            {} MHz\nfoff            {} MHz\n", h.fch1, h.foff);
  fmt::print("tsamp           {} us\ntstart          {:.9f} MJD\n", h.tsamp * 1e6, h.tstart);
  fmt::print("src_raj         {}\nsrc_dej         {}\n", h.src_raj, h.src_dej);
  fmt::print("header_bytes    {}\nnsamples        {}\n", h.header_bytes, h.nsamples);
  fmt::print("duration        {:.6f} s\n", h.duration_s());
  fmt::print("band            {:.6f} - {:.6f} MHz ({:.6f} MHz)\n", fmin, fmax, h.bandwidth_mhz());
  fmt::print("data rate       {:.3f} MB/s\n",
             static_cast<double>(h.bytes_per_sample()) / h.tsamp / 1e6);
  // As a double: delay / tsamp can exceed int64 for a hostile header (llround was undefined).
  fmt::print("max delay       {:.6f} s ({:.0f} samples) at DM {}\n", delay,
             std::round(delay / h.tsamp), dm);
}
}  // namespace

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend,
                 "Where to run: cpu, cuda or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "info", "Print a filterbank's header and derived figures, or an LWA TBF/TBX file's layout");
  auto path = std::make_shared<std::string>();
  auto dm = std::make_shared<double>(1000.0);
  cmd->add_option("FILE", *path,
                  "SIGPROC (.fil) or PSRFITS search-mode (.fits, .sf) filterbank, or LWA TBF/TBX")
      ->required();
  cmd->add_option("--dm", *dm, "DM (pc cm^-3) for the max-delay figure")
      ->check(CLI::Range(0.0, 1e5))
      ->capture_default_str();
  cmd->callback([path, dm] { run_info(*path, *dm); });
}

}  // namespace warpbeam::cli
