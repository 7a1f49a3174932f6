// StopOnSignals: SIGINT/SIGTERM/SIGHUP end a live run cleanly; a second one ends the process.
// SIGPIPE (stderr piped to a reader that left, e.g. `| head -1`) ends it cleanly too, and never
// escalates: every later write to the pipe raises it again (a new user's trial of 2026-12-04:
// the default action killed the run and left an empty candidates.cand that refused the next).
#include <csignal>

#include "warpbeam/format.hpp"
#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

namespace {

volatile std::sig_atomic_t g_signal = 0;
std::atomic<bool> g_installed{false};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
constexpr int kCount = 4;
struct sigaction g_previous[kCount];

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGPIPE) {
    if (g_signal == 0) g_signal = sig;
    return;
  }
  if (g_signal != 0) {
    // Second signal: the previous behaviour (remove temporary files, end with the signal).
    for (int i = 0; i < kCount; ++i)
      if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

}  // namespace

StopOnSignals::StopOnSignals() {
  if (g_installed.exchange(true))
    fail(ErrorCategory::invalid_argument, "StopOnSignals: one at a time");
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR and the loop looks at the flag
  for (int i = 0; i < kCount; ++i)
    sigaction(kSignals[i], &sa, &g_previous[i]);
}

StopOnSignals::~StopOnSignals() {
  for (int i = 0; i < kCount; ++i)
    sigaction(kSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

bool StopOnSignals::requested() {
  return g_signal != 0;
}

int StopOnSignals::signal() {
  return g_signal;
}

}  // namespace warpbeam::stream
