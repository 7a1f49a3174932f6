#include "warpbeam/core.hpp"

#include <cstdlib>

#include <span>

#include <cstdio>
#include <utility>

#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/version.hpp"

namespace warpbeam {

std::string_view to_string(ErrorCategory c) {
  switch (c) {
    case ErrorCategory::invalid_argument:
      return "invalid argument";
    case ErrorCategory::format:
      return "format";
    case ErrorCategory::io:
      return "I/O";
    case ErrorCategory::cuda:
      return "CUDA";
    case ErrorCategory::unsupported:
      return "unsupported";
  }
  return "unknown";
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return 0;
}

namespace {
// Under mpirun every rank sees the same input and would print the same warning: rank 0 alone
// prints (the launcher's rank, so that it holds before MPI starts).
void default_warning(const std::string& message) {
  if (launcher_rank() == 0) fmt::print(stderr, "warpbeam: warning: {}\n", message);
}
WarningHandler g_warning_handler = nullptr;
}  // namespace

void warn(const std::string& message) {
  (g_warning_handler ? g_warning_handler : default_warning)(message);
}

WarningHandler set_warning_handler(WarningHandler h) {
  return std::exchange(g_warning_handler, h);
}

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::cpu:
      return "cpu";
    case Backend::cuda:
      return "cuda";
    case Backend::automatic:
      return "auto";
  }
  return "unknown";
}

Backend parse_backend(std::string_view s) {
  if (s == "cpu") return Backend::cpu;
  if (s == "cuda" || s == "gpu") return Backend::cuda;
  if (s == "auto" || s == "automatic") return Backend::automatic;
  fail(ErrorCategory::invalid_argument, "backend '{}' is not one of cpu, cuda, auto", s);
}

bool cuda_built() {
#ifdef WARPBEAM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() {
  return device_count() > 0;
}

Backend resolve_backend(Backend b) {
  if (b == Backend::automatic) return cuda_available() ? Backend::cuda : Backend::cpu;
  if (b == Backend::cuda && !cuda_built())
    fail(ErrorCategory::unsupported, "the CUDA backend was asked for, but this build has no CUDA");
  if (b == Backend::cuda && !cuda_available())
    fail(ErrorCategory::cuda, "the CUDA backend was asked for, but no CUDA device is visible");
  return b;
}

void fail(ErrorCategory category, const std::string& message) {
  throw Error(category, message);
}

namespace detail {
void check_view(const void* data, const std::int64_t* shape, const std::int64_t* expected,
                std::size_t rank, bool contiguous, Space space, Space expected_space,
                std::string_view what) {
  const std::span<const std::int64_t> got(shape, rank), want(expected, rank);
  std::int64_t n = 1;
  for (auto d : got)
    n *= d;
  if (data == nullptr && n != 0)
    fail(ErrorCategory::invalid_argument, "{}: null data pointer", what);
  if (!std::equal(got.begin(), got.end(), want.begin()))
    fail(ErrorCategory::invalid_argument, "{}: shape [{}] does not match the plan's [{}]", what,
         fmt::join(got, ", "), fmt::join(want, ", "));
  if (!contiguous)
    fail(ErrorCategory::invalid_argument, "{}: the plan needs a contiguous array", what);
  if (space != expected_space)
    fail(ErrorCategory::invalid_argument, "{}: the array is in {} memory, the plan needs {}", what,
         space == Space::host ? "host" : "device",
         expected_space == Space::host ? "host" : "device");
}
}  // namespace detail

std::string_view version() {
  return kVersion;
}
std::string_view git_commit() {
  return kGitCommit;
}

}  // namespace warpbeam
