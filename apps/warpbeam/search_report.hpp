#pragma once
// The candidates table `warpbeam search` and `warpbeam demo` print on stdout.
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "warpbeam/search.hpp"

namespace warpbeam::cli {

/// Prints the first `top` candidates (all when top <= 0) as an aligned table.
inline void print_candidates(const std::vector<search::Candidate>& cands, double tsamp_s, int top) {
  const std::size_t n =
      top > 0 ? std::min(cands.size(), static_cast<std::size_t>(top)) : cands.size();
  if (n == 0) {
    fmt::print("no candidates\n");
    return;
  }
  fmt::print("{:>4} {:>8} {:>12} {:>10} {:>10} {:>8} {:>10} {:>7} {:>8}\n", "rank", "snr", "time_s",
             "sample", "dm", "dm_trial", "width_ms", "filter", "members");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& c = cands[i];
    fmt::print("{:>4} {:>8.2f} {:>12.6f} {:>10} {:>10.3f} {:>8} {:>10.3f} {:>7} {:>8}\n", i + 1,
               c.snr, c.time_s, c.sample, c.dm, c.dm_trial, c.width() * tsamp_s * 1e3, c.filter,
               c.members);
  }
  if (n < cands.size()) fmt::print("({} more)\n", cands.size() - n);
}

}  // namespace warpbeam::cli
