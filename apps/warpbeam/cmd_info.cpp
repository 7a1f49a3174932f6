// `warpbeam info FILE`: the SIGPROC header and derived figures.
#include <cmath>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/sigproc.hpp"

namespace warpbeam::cli {

namespace {
constexpr double kDispersionConstant = 4.148808e3;  // s MHz^2 pc^-1 cm^3

void run_info(const std::string& path, double dm) {
  const io::FilterbankHeader h = io::read_filterbank_header(path);
  const double fmin = h.fmin_mhz(), fmax = h.fmax_mhz();
  const double delay = kDispersionConstant * dm * (1 / (fmin * fmin) - 1 / (fmax * fmax));
  fmt::print("file            {}\n", path);
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
  auto* cmd = app.add_subcommand("info", "Print a filterbank's header and derived figures");
  auto path = std::make_shared<std::string>();
  auto dm = std::make_shared<double>(1000.0);
  cmd->add_option("FILE", *path, "SIGPROC filterbank file")->required();
  cmd->add_option("--dm", *dm, "DM (pc cm^-3) for the max-delay figure")
      ->check(CLI::Range(0.0, 1e5))
      ->capture_default_str();
  cmd->callback([path, dm] { run_info(*path, *dm); });
}

}  // namespace warpbeam::cli
