#include "warpbeam/io/output_file.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::io {

namespace {

// The registered paths (null: a free slot). Plain atomics, so that the signal handler may read
// them without a lock.
constexpr std::size_t kTempSlots = 256;
std::atomic<const char*> temp_slots[kTempSlots];

extern "C" void remove_temps_and_reraise(int sig) {
  for (auto& slot : temp_slots)
    if (const char* p = slot.load()) ::unlink(p);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

TempFileGuard::TempFileGuard(const std::string& path) {
  for (auto& slot : temp_slots) {
    const char* expected = nullptr;
    if (slot.compare_exchange_strong(expected, path.c_str())) {
      path_ = path.c_str();
      return;
    }
  }
}

TempFileGuard::~TempFileGuard() {
  if (!path_) return;
  for (auto& slot : temp_slots) {
    const char* expected = path_;
    if (slot.compare_exchange_strong(expected, nullptr)) return;
  }
}

void remove_temps_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    std::signal(sig, remove_temps_and_reraise);
}

OutputFile::OutputFile(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fp_ = std::fopen(tmp_.c_str(), "wb");
  if (!fp_) fail(ErrorCategory::io, "cannot write '{}': {}", path_, std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fp_) std::fclose(fp_);
  if (!committed_) std::remove(tmp_.c_str());
}

void OutputFile::write(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, fp_) != bytes)
    fail(ErrorCategory::io, "short write to '{}': {}", path_, std::strerror(errno));
}

void OutputFile::commit() {
  const bool ok = std::fflush(fp_) == 0;
  const bool closed = std::fclose(fp_) == 0;
  fp_ = nullptr;
  if (!ok || !closed)
    fail(ErrorCategory::io, "cannot finish '{}': {}", path_, std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) fail(ErrorCategory::io, "cannot rename '{}' to '{}': {}", tmp_, path_, ec.message());
  committed_ = true;
}

void write_text_file(const std::string& path, const std::string& text) {
  OutputFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace warpbeam::io
