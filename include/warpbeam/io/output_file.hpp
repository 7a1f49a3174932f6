#pragma once
// Writes a product atomically: data go to a temporary file beside the target, which is renamed
// over the target by commit(). A failure (exception, early return) leaves no partial product.

#include <cstdio>
#include <string>

namespace warpbeam::io {

/// Registers a temporary file's path for removal when the process is interrupted (see
/// remove_temps_on_signals), for as long as the guard lives. `path` must outlive the guard and
/// must not change meanwhile. At most 256 paths are registered at once (more are not guarded).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  const char* path_ = nullptr;
};

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove every registered temporary file
/// (unlink: async-signal-safe) and then end the process with the signal's default action, so an
/// interrupted command leaves no "*.tmp.PID" behind. Called once by the CLI's main().
void remove_temps_on_signals();

class OutputFile {
 public:
  /// Opens "<path>.tmp.<pid>" for binary writing; throws Error(io) when it cannot.
  explicit OutputFile(std::string path);
  /// Removes the temporary file unless commit() succeeded.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::FILE* file() const { return fp_; }
  /// Writes `bytes` bytes; throws Error(io) on a short write (e.g. disk full).
  void write(const void* data, std::size_t bytes);
  /// Flushes, closes and renames to the final path; throws Error(io) on failure.
  void commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  TempFileGuard guard_{tmp_};  // after tmp_: removed if the process is interrupted
  std::FILE* fp_ = nullptr;
  bool committed_ = false;
};

/// Writes a whole text file atomically.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace warpbeam::io
