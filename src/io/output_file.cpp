#include "warpbeam/io/output_file.hpp"

#include <sys/stat.h>
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

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  fail(ErrorCategory::io, "cannot write '{}': {}", path, why);
}

// What a non-regular file is, for the message.
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device file";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Refuses an existing target that is not a regular file (the rule in output_file.hpp).
void require_regular(const std::string& path, const std::string& target, mode_t m) {
  if (S_ISREG(m)) return;
  if (S_ISDIR(m)) refuse(path, fmt::format("'{}' is a folder: give a file name", target));
  refuse(path, fmt::format("'{}' is {}: products are written to a temporary file and renamed, "
                           "which a device or pipe cannot take; give a regular file (or omit the "
                           "option to write nothing)",
                           target, kind_of(m)));
}

std::string pid_suffix() {
  return std::to_string(::getpid());
}

// The bytes a temporary name adds to a product's name: ".part.PID" (StagedOutputs), then
// ".tmp.PID" (OutputPath), with a PID of at most 7 digits (Linux's pid_max is at most 2^22).
constexpr std::size_t kPartSuffix = 6 + 7, kTmpSuffix = 5 + 7;

// output_target(), leaving `reserve` bytes of the file system's name limit for temporary names.
std::string target_of(const std::string& path, std::size_t reserve) {
  namespace fs = std::filesystem;
  if (path.empty()) fail(ErrorCategory::io, "cannot write a product to an empty path");
  fs::path p = path;
  for (int links = 0;; ++links) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOTDIR) {  // a file where a folder of the path should be: name it
        struct stat as {};
        for (fs::path a = p.parent_path(); !a.empty() && a != a.root_path(); a = a.parent_path())
          if (::stat(a.c_str(), &as) == 0) {
            if (!S_ISDIR(as.st_mode))
              refuse(path, fmt::format("'{}' is a file, not a folder", a.string()));
            break;
          }
      }
      if (err != ENOENT) refuse(path, std::strerror(err));
      if (!p.has_filename()) refuse(path, "the path names a folder: give a file name");
      break;  // a new file
    }
    if (!S_ISLNK(st.st_mode)) {
      require_regular(path, p.string(), st.st_mode);
      break;
    }
    if (links == 40) refuse(path, "too many levels of symbolic links");
    std::error_code ec;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) refuse(path, ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;  // relative to the link's folder
  }
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0)
    refuse(path, fmt::format("the folder '{}' does not exist", dir.string()));
  if (!S_ISDIR(ds.st_mode)) refuse(path, fmt::format("'{}' is a file, not a folder", dir.string()));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    refuse(path, fmt::format("the folder '{}' cannot be written: {}", dir.string(),
                             std::strerror(errno)));
  // The temporary file's name ("NAME.part.PID.tmp.PID") must fit the file system's limit too.
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && p.filename().string().size() + reserve > static_cast<std::size_t>(name_max))
    refuse(path, fmt::format("the file name is too long (at most {} bytes here, to leave room "
                             "for its temporary file's suffix)",
                             static_cast<std::size_t>(name_max) - reserve));
  return p.string();
}

}  // namespace

std::string output_target(const std::string& path) {
  return target_of(path, kPartSuffix + kTmpSuffix);
}

void check_outputs(const std::vector<std::string>& outputs,
                   const std::vector<std::string>& inputs) {
  struct Known {
    dev_t dev;
    ino_t ino;
    std::string name;
  };
  std::vector<Known> ins;
  for (const auto& in : inputs) {
    struct stat st {};
    if (!in.empty() && ::stat(in.c_str(), &st) == 0) ins.push_back({st.st_dev, st.st_ino, in});
  }
  std::vector<std::pair<std::string, std::string>> seen;  // (canonical target, path given)
  for (const auto& out : outputs) {
    if (out.empty()) continue;
    const std::string target = output_target(out);
    struct stat st {};
    if (::stat(target.c_str(), &st) == 0)
      for (const auto& k : ins)
        if (k.dev == st.st_dev && k.ino == st.st_ino)
          refuse(out, fmt::format("it is the input '{}': the product would destroy it", k.name));
    std::error_code ec;
    std::string canon = std::filesystem::weakly_canonical(target, ec).string();
    if (ec) canon = target;
    for (const auto& [c, given] : seen)
      if (c == canon)
        refuse(out, fmt::format("'{}' is the same file: two products cannot share one", given));
    seen.emplace_back(canon, out);
  }
}

OutputPath::OutputPath(const std::string& path)
    : path_(path), target_(target_of(path, kTmpSuffix)), tmp_(target_ + ".tmp." + pid_suffix()) {
  std::remove(tmp_.c_str());  // a stale temporary of this name (a killed run of the same pid)
}

OutputPath::~OutputPath() {
  if (!committed_) std::remove(tmp_.c_str());
}

void OutputPath::commit() {
  struct stat st {};
  if (::lstat(target_.c_str(), &st) == 0) require_regular(path_, target_, st.st_mode);
  if (::rename(tmp_.c_str(), target_.c_str()) != 0)
    refuse(path_,
           fmt::format("cannot rename '{}' to '{}': {}", tmp_, target_, std::strerror(errno)));
  committed_ = true;
}

OutputFile::OutputFile(const std::string& path) : out_(path) {
  fp_ = std::fopen(out_.temp().c_str(), "wb");
  if (!fp_) refuse(path, std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fp_) std::fclose(fp_);
}

void OutputFile::write(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, fp_) != bytes)
    fail(ErrorCategory::io, "short write to '{}': {}", path(), std::strerror(errno));
}

void OutputFile::commit() {
  const bool ok = std::fflush(fp_) == 0;
  const bool closed = std::fclose(fp_) == 0;
  fp_ = nullptr;
  if (!ok || !closed)
    fail(ErrorCategory::io, "cannot finish '{}': {}", path(), std::strerror(errno));
  out_.commit();
}

void write_text_file(const std::string& path, const std::string& text) {
  OutputFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

StagedOutputs::~StagedOutputs() {
  for (const auto& f : files_)
    std::remove(f.tmp.c_str());
}

const std::string& StagedOutputs::temp(const std::string& final_path) {
  std::string target = target_of(final_path, kPartSuffix + kTmpSuffix);
  for (const auto& f : files_)
    if (f.target == target) refuse(final_path, "it is already one of this command's products");
  std::string tmp = target + ".part." + pid_suffix();
  return files_.emplace_back(std::move(target), std::move(tmp)).tmp;
}

void StagedOutputs::commit() {
  struct Done {
    Staged* f;
    bool existed;
  };
  std::vector<Done> done;
  auto undo = [&] {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      if (!it->f->backup.empty())
        ::rename(it->f->backup.c_str(), it->f->target.c_str());  // the file that was there
      else if (!it->existed)
        std::remove(it->f->target.c_str());  // ours: it did not exist before
      // (an existing file that could not be kept as a link stays replaced: never removed)
    }
  };
  for (auto& f : files_) {
    struct stat st {};
    const bool existed = ::lstat(f.target.c_str(), &st) == 0;
    if (existed && !S_ISREG(st.st_mode)) {
      undo();
      require_regular(f.target, f.target, st.st_mode);
    }
    if (existed) {  // keep the old file as a hard link until every product is in place
      f.backup = f.target + ".old." + pid_suffix();
      std::remove(f.backup.c_str());
      if (::link(f.target.c_str(), f.backup.c_str()) != 0) f.backup.clear();
    }
    if (::rename(f.tmp.c_str(), f.target.c_str()) != 0) {
      const int err = errno;
      if (!f.backup.empty()) std::remove(f.backup.c_str());
      f.backup.clear();
      undo();
      refuse(f.target, std::strerror(err));
    }
    done.push_back({&f, existed});
  }
  for (auto& f : files_)
    if (!f.backup.empty()) std::remove(f.backup.c_str());
  files_.clear();
}

}  // namespace warpbeam::io
