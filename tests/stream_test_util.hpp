#pragma once
// Live-stream tests: run a listening `warpbeam` in the background, wait for what it prints, stop
// it with a signal, and a FITS reader independent of cfitsio.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

extern char** environ;

namespace wbtest {

/// A `warpbeam ARGS` run in the background (through sh, so ARGS is shell-quoted as for run_cli);
/// stdout and stderr go to files. The destructor kills it if it still runs.
class Background {
 public:
  Background(const std::string& args, const std::string& out, const std::string& err)
      : out_(out), err_(err) {
    const std::string cmd =
        std::string("exec '") + WARPBEAM_CLI_PATH + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
      pid_ = -1;
  }
  ~Background() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool started() const { return pid_ > 0; }
  void signal(int sig) const { ::kill(pid_, sig); }
  /// Waits up to `timeout_s` for the process to end; its exit code, or -1 when it did not end
  /// (or was killed by a signal).
  int wait(double timeout_s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        done_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  /// Waits up to `timeout_s` for `pattern` to appear in stderr; the first match's group 1 (or
  /// the whole match), "" on time-out.
  std::string wait_for_err(const std::string& pattern, double timeout_s) const {
    const std::regex re(pattern);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < until) {
      const std::string e = slurp(err_);
      std::smatch m;
      if (std::regex_search(e, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {};
  }
  std::string err() const { return slurp(err_); }
  std::string out() const { return slurp(out_); }

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  bool done_ = false;
};

}  // namespace wbtest
