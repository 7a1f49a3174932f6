#pragma once
// The one rule for every product warpbeam writes (search --output/--json, das --out, the files of
// an --out folder, simulate, beam-pattern, bench --json):
//
//  - Before any work, check_outputs() checks every output path: its folder exists and can be
//    written; it is not a folder, a device, a FIFO or a socket; it is not the same file (device and
//    inode) as any input, nor as another output.
//  - A product is written to a temporary file in the folder of its final file and renamed over it
//    only when complete, and only over a regular file or nothing. A symbolic link is followed:
//    its target is replaced (the link stays a link), as an editor saving through a link does.
//  - Devices and FIFOs are refused, not written to: a product is whole or absent, and a reader at
//    the other end of a pipe or a device would see a partial product after a failure (and
//    `--output /dev/full` once replaced the device node by a regular file). Omit the option to
//    write nothing.
//  - A failure removes only what the command created: its temporary files, never a file that was
//    there before (StagedOutputs restores what a half-done commit replaced).
//
// Errors: Error(io) naming the path and the reason.

#include <cstdio>
#include <deque>
#include <string>
#include <vector>

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

/// The file a product written to `path` ends up in: `path`, or the final target of the symbolic
/// link(s) it names (which need not exist yet). Throws Error(io) when the product cannot be
/// written there: `path` is empty, a folder, a device, a FIFO or a socket; its folder does not
/// exist or cannot be written; the links loop.
std::string output_target(const std::string& path);

/// Checks every non-empty path of `outputs` with output_target() and refuses (Error(io)) an output
/// that is the same file as one of `inputs` (compared by device and inode, so "./a.fil", "a.fil"
/// and a link to it are the same) or as another output. Call it before the work starts.
void check_outputs(const std::vector<std::string>& outputs,
                   const std::vector<std::string>& inputs = {});

/// A product that a library writes by name (cfitsio, HDF5, matio): write to temp(), then commit()
/// renames it over the final file (output_target(path)). Without commit() the destructor removes
/// the temporary file. Throws Error(io) as output_target() does.
class OutputPath {
 public:
  explicit OutputPath(const std::string& path);
  ~OutputPath();
  OutputPath(const OutputPath&) = delete;
  OutputPath& operator=(const OutputPath&) = delete;

  /// The temporary file, "<target>.tmp.<pid>" in the target's folder.
  const std::string& temp() const { return tmp_; }
  /// The path as given.
  const std::string& path() const { return path_; }
  /// Where the product goes (the symbolic link's target when `path` is a link).
  const std::string& target() const { return target_; }
  /// Renames temp() over target(); throws Error(io) when the target has meanwhile become
  /// something other than a regular file, or the rename fails.
  void commit();

 private:
  std::string path_, target_, tmp_;
  TempFileGuard guard_{tmp_};  // after tmp_: removed if the process is interrupted
  bool committed_ = false;
};

/// A product written through a stdio stream (see OutputPath for the rule).
class OutputFile {
 public:
  /// Opens the temporary file for binary writing; throws Error(io) when it cannot.
  explicit OutputFile(const std::string& path);
  /// Removes the temporary file unless commit() succeeded.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::FILE* file() const { return fp_; }
  /// Writes `bytes` bytes; throws Error(io) on a short write (e.g. disk full).
  void write(const void* data, std::size_t bytes);
  /// Flushes, closes and renames to the final path; throws Error(io) on failure.
  void commit();
  const std::string& path() const { return out_.path(); }
  const std::string& temp_path() const { return out_.temp(); }

 private:
  OutputPath out_;
  std::FILE* fp_ = nullptr;
};

/// Writes a whole text file atomically.
void write_text_file(const std::string& path, const std::string& text);

/// Products that must appear together or not at all (search's .cand and JSON; beam-pattern's PNG,
/// FITS and JSON): each is written to temp(final), a temporary name in its target's folder, and
/// commit() renames them all. When a rename fails, the products already renamed are undone: a file
/// that existed before is restored (it was kept as a hard link until the end), a new one removed.
/// Whatever was not committed is removed by the destructor. Throws Error(io).
class StagedOutputs {
 public:
  StagedOutputs() = default;
  ~StagedOutputs();
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  /// The temporary path to write `final_path` to (checked with output_target()).
  const std::string& temp(const std::string& final_path);
  /// Renames every temporary file over its target, all or none.
  void commit();

 private:
  struct Staged {
    std::string target, tmp, backup;
    TempFileGuard guard{tmp};
    Staged(std::string t, std::string p) : target(std::move(t)), tmp(std::move(p)) {}
  };
  std::deque<Staged> files_;  // a deque: the guards hold pointers into the strings
};

}  // namespace warpbeam::io
