#pragma once
// What `warpbeam search`, `pipeline` and `demo` share: the search options that the CLI gives in
// other units, the library's field names as the CLI's flags, and the candidates table printed
// on stdout.
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "warpbeam/dist/comm.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::cli {

/// The CLI's search options in the library's terms: --no-zero-dm, --zap-chans (a channel list,
/// search::ChannelMask::parse), --memory and --gpu-memory (MiB). Throws invalid_argument for a
/// bad channel list.
inline void apply_search_options(search::FileSearchConfig& c, search::RunOptions& run,
                                 bool no_zero_dm, const std::string& zap_chans, double memory_mib,
                                 double gpu_memory_mib) {
  c.zero_dm = !no_zero_dm;
  c.zap = search::ChannelMask::parse(zap_chans);
  run.memory_bytes = static_cast<std::int64_t>(memory_mib * 1024 * 1024);
  run.device_memory_bytes = static_cast<std::int64_t>(gpu_memory_mib * 1024 * 1024);
}

/// A library field and the flag that sets it.
struct FlagName {
  const char* field;
  const char* flag;
};

/// The fields of search::FileSearchConfig and RunOptions (and ChannelMask's parser) that
/// `warpbeam search` and `pipeline` set, by flag.
inline constexpr FlagName kSearchFlags[] = {{"dm_min", "--dm-min"},
                                            {"dm_max", "--dm-max"},
                                            {"dm_tolerance", "--dm-tol"},
                                            {"pulse_width_us", "--pulse-width"},
                                            {"boxcar_max", "--boxcar-max"},
                                            {"snr_min", "--snr-min"},
                                            {"baseline_s", "--baseline"},
                                            {"zap_sigma", "--zap-sigma"},
                                            {"zap", "--zap-chans"},
                                            {"channel list", "--zap-chans"},
                                            {"gulp", "--gulp"},
                                            {"memory_bytes", "--memory"},
                                            {"device_memory_bytes", "--gpu-memory"},
                                            {"threads", "--threads"},
                                            {"device", "--device"},
                                            {"gpu_streams", "--gpu-streams"},
                                            {"read_threads", "--read-threads"},
                                            {"dedisp_min_snr", "--dedisp-min-snr"},
                                            {"subband_dm_step", "--subband-dm-step"},
                                            {"subbands", "--subbands"},
                                            {"dedisp", "--dedisp"}};
/// ... and those of pipeline::PipelineConfig.
inline constexpr FlagName kPipelineFlags[] = {
    {"integration", "--integrate"}, {"devices", "--gpus"}, {"split", "--split"}};

/// `message` with the library's field names written as the CLI's flags. The library names a
/// field as its C++ name: a name with an underscore is replaced wherever it stands as a word;
/// a plain word (gulp, device, zap ...) only where it names the field: before " =", ":", " '",
/// " is" or " are" (e.g. "gulp = 3 is outside ...", "zap: channel 300 is outside 0-255").
template <std::size_t N>
std::string with_flag_names(std::string message, const FlagName (&names)[N]) {
  auto word = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  };
  for (const FlagName& n : names) {
    const std::string field = n.field;
    const bool plain = field.find('_') == std::string::npos;
    for (std::size_t at = message.find(field); at != std::string::npos;
         at = message.find(field, at + 1)) {
      const std::size_t end = at + field.size();
      if ((at > 0 && word(message[at - 1])) || (end < message.size() && word(message[end])))
        continue;
      if (plain) {
        const std::string rest = message.substr(end, 4);
        if (!(rest.rfind(" =", 0) == 0 || rest.rfind(":", 0) == 0 || rest.rfind(" '", 0) == 0 ||
              rest.rfind(" is", 0) == 0 || rest.rfind(" are", 0) == 0))
          continue;
      }
      message.replace(at, field.size(), n.flag);
    }
  }
  return message;
}

/// Runs `body`; a warpbeam::Error from it is thrown again, of the same type and category, with
/// the fields it names written as flags (`names`), so that the library speaks of its fields
/// and the CLI of its flags.
template <std::size_t N, class F>
void naming_flags(const FlagName (&names)[N], F&& body) {
  try {
    body();
  } catch (const dist::AgreedError& e) {
    throw dist::AgreedError(e.category(), with_flag_names(e.what(), names));
  } catch (const Error& e) {
    throw Error(e.category(), with_flag_names(e.what(), names));
  }
}

/// Prints the first `top` candidates (all when top <= 0) as an aligned table; widths in ms use the
/// sampling time of each candidate's beam, tsamp_s[beam] (several files need not share one; a
/// single entry serves every beam), and a beam column is shown for more than one entry.
inline void print_candidates(const std::vector<search::Candidate>& cands,
                             const std::vector<double>& tsamp_s, int top) {
  const std::size_t n =
      top > 0 ? std::min(cands.size(), static_cast<std::size_t>(top)) : cands.size();
  if (n == 0) {
    fmt::print("no candidates\n");
    return;
  }
  const bool beams = tsamp_s.size() > 1;
  fmt::print("{:>4} {:>8} {:>12} {:>10} {:>10} {:>8} {:>10} {:>7} {:>8}{}\n", "rank", "snr",
             "time_s", "sample", "dm", "dm_trial", "width_ms", "filter", "members",
             beams ? "     beam" : "");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& c = cands[i];
    const auto b = static_cast<std::size_t>(c.beam);
    const double tsamp = tsamp_s.empty() ? 0 : tsamp_s[b < tsamp_s.size() ? b : 0];
    fmt::print("{:>4} {:>8.2f} {:>12.6f} {:>10} {:>10.3f} {:>8} {:>10.3f} {:>7} {:>8}{}\n", i + 1,
               c.snr, c.time_s, c.sample, c.dm, c.dm_trial, c.width() * tsamp * 1e3, c.filter,
               c.members, beams ? fmt::format(" {:>8}", c.beam) : "");
  }
  if (n < cands.size()) fmt::print("({} more)\n", cands.size() - n);
}

inline void print_candidates(const std::vector<search::Candidate>& cands, double tsamp_s, int top) {
  print_candidates(cands, std::vector<double>{tsamp_s}, top);
}

}  // namespace warpbeam::cli
