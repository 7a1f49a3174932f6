#pragma once
// Helpers of the multi-worker tests: the CLI found beside the test binary (the GPU machine runs a
// build made elsewhere, so the configure-time path may not exist there) and a runner for it.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_util.hpp"

namespace wbdist {

/// `warpbeam`: $WARPBEAM_CLI, else BUILD/bin/warpbeam beside this BUILD/tests binary, else the
/// path known at configure time.
inline std::string cli_path() {
  if (const char* e = std::getenv("WARPBEAM_CLI"); e && *e) return e;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto p = exe.parent_path().parent_path() / "bin" / "warpbeam";
    if (std::filesystem::exists(p)) return p.string();
  }
  return WARPBEAM_CLI_PATH;
}

/// Runs `PREFIX 'warpbeam' ARGS` (PREFIX: e.g. an mpirun command line, or empty) and captures
/// exit code, stdout and stderr.
inline wbtest::CliResult run(const std::string& prefix, const std::string& args) {
  wbtest::TempDir t;
  const std::string out = t.file("stdout"), err = t.file("stderr");
  const std::string cmd =
      prefix + " '" + cli_path() + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int rc = std::system(cmd.c_str());
  wbtest::CliResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = wbtest::slurp(out);
  r.err = wbtest::slurp(err);
  return r;
}

}  // namespace wbdist
