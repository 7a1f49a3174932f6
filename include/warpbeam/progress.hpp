#pragma once
// Progress on stderr for long work, shown only when stderr is a terminal (never in logs or pipes).

#include <chrono>
#include <cstdint>
#include <string>

namespace warpbeam {

class Progress {
 public:
  /// `label` names the work; `total` is the number of units (e.g. samples) it will do.
  Progress(std::string label, std::int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Reports that `done` units of `total` are finished (redrawn at most ~10 times a second).
  void update(std::int64_t done);
  /// Finishes the line (called by the destructor too).
  void finish();
  /// Force on or off (tests); by default on when stderr is a terminal.
  void set_enabled(bool on) { enabled_ = on; }

 private:
  std::string label_;
  std::int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace warpbeam
