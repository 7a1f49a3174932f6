#include "warpbeam/io/output_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::io {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
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
