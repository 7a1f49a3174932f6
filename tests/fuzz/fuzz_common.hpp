#pragma once
// Shared by the libFuzzer targets (docs/FUZZING.md): the input becomes a file (the readers
// open paths), warnings are silenced, and only warpbeam::Error counts as a clean rejection. Any
// other exception (std::bad_alloc, std::length_error, ...) escapes and libFuzzer reports it: a
// reader must refuse a bad file with an Error, never by running out of memory.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "warpbeam/core.hpp"

namespace wbfuzz {

/// A per-process file (in /dev/shm when it exists) holding `data`; `ext` selects the reader where
/// the extension does (".mat", ".uff").
inline const std::string& write_input(const std::uint8_t* data, std::size_t size, const char* ext) {
  static const std::string path = (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                  std::string("/warpbeam-fuzz-") + std::to_string(getpid()) + ext;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

/// Silences warpbeam's warnings for the whole run (the fuzzer makes millions of them).
inline void quiet() {
  static const bool once = [] {
    warpbeam::set_warning_handler([](const std::string&) {});
    return true;
  }();
  (void)once;
}

/// Runs `f`, treating warpbeam::Error as the expected rejection of a bad input.
template <class F>
void run(F&& f) {
  quiet();
  try {
    f();
  } catch (const warpbeam::Error&) {
  }
}

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace wbfuzz
