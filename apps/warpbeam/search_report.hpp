#pragma once
// What `warpbeam search`, `pipeline` and `demo` share: the search options that the CLI gives in
// other units, and the candidates table printed on stdout.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "warpbeam/search.hpp"

namespace warpbeam::cli {

/// The CLI's search options in the library's terms: --no-zero-dm, --zap-chans (a channel list,
/// search::parse_channel_list), --memory and --gpu-memory (MiB). Throws invalid_argument for a
/// bad channel list.
inline void apply_search_options(search::FileSearchConfig& c, bool no_zero_dm,
                                 const std::string& zap_chans, double memory_mib,
                                 double gpu_memory_mib) {
  c.zero_dm = !no_zero_dm;
  c.zap_channels = search::parse_channel_list(zap_chans);
  c.memory_bytes = static_cast<std::int64_t>(memory_mib * 1024 * 1024);
  c.device_memory_bytes = static_cast<std::int64_t>(gpu_memory_mib * 1024 * 1024);
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
