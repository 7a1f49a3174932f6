#include "warpbeam/progress.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace warpbeam {

Progress::Progress(std::string label, std::int64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() {
  finish();
}

void Progress::update(std::int64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done < total_) return;
  last_ = now;
  drawn_ = true;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const double eta = frac > 0 ? secs * (1 - frac) / frac : 0;
  fmt::print(stderr, "\r{}: {:5.1f}%  {:.1f} s elapsed, ~{:.0f} s left   ", label_, 100 * frac,
             secs, eta);
  std::fflush(stderr);
}

void Progress::finish() {
  if (enabled_ && drawn_) {
    update(total_);
    fmt::print(stderr, "\n");
    drawn_ = false;
  }
  enabled_ = false;
}

}  // namespace warpbeam
