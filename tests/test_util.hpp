#pragma once
// Shared test helpers: the real-data folder, skipping without a device, running the CLI.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"

namespace wbtest {

/// ../shared/data beside the project, or $WARPBEAM_DATA.
inline std::string data_dir() {
  if (const char* e = std::getenv("WARPBEAM_DATA"); e && *e) return e;
  return WARPBEAM_TEST_DATA_DEFAULT;
}

/// Full path of a real data file (e.g. "filterbank/burst_28.fil").
inline std::string data_file(const std::string& rel) {
  return data_dir() + "/" + rel;
}

/// A fresh empty folder under the system temp dir, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("warpbeam-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// Names of the files in the folder (to check that a failed run wrote nothing).
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(path))
      out.push_back(e.path().filename());
    return out;
  }
};

/// The result of running the CLI.
struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Runs `PREFIX warpbeam ARGS` through the shell (ARGS shell-quoted; PREFIX e.g. "ulimit -v N;
/// exec") and captures exit code, stdout and stderr.
inline CliResult run_cli_with_prefix(const std::string& prefix, const std::string& args) {
  TempDir t;
  const std::string out = t.file("stdout"), err = t.file("stderr");
  const std::string cmd =
      prefix + " '" + WARPBEAM_CLI_PATH + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int rc = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// Runs `warpbeam ARGS` (a shell-quoted string) and captures exit code, stdout and stderr.
inline CliResult run_cli(const std::string& args) {
  return run_cli_with_prefix("", args);
}

/// Uniform random floats in [lo, hi) with a fixed seed.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1,
                                        float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(rng);
  return v;
}

}  // namespace wbtest

/// Skips the test (with a message) when the real data folder is absent, e.g. in a user's clone.
#define WB_REQUIRE_DATA(rel)                                            \
  do {                                                                  \
    if (!std::filesystem::exists(wbtest::data_file(rel)))               \
      GTEST_SKIP() << "real data not found: " << wbtest::data_file(rel) \
                   << " (set WARPBEAM_DATA to the shared data folder)"; \
  } while (0)

/// Skips the test when no CUDA device is visible (CI); scripts/gpu-check fails on any such skip.
#define WB_REQUIRE_GPU()                                                           \
  do {                                                                             \
    if (!warpbeam::cuda_available())                                               \
      GTEST_SKIP() << (warpbeam::cuda_built() ? "no CUDA device visible"           \
                                              : "this build has no CUDA backend"); \
  } while (0)
