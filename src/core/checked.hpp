#pragma once
// Overflow-safe size arithmetic for numbers that come from a file's header or a user's option
// (channels x samples x antennas x ...): every product is checked in 64 bits before it sizes an
// allocation or an offset, and every size is compared with the file's length or a memory budget
// before anything is allocated (issue 18: an int product of N_SNAP x N_SNAPCH wrapped and the
// parser wrote past a heap block; headers declaring gigabytes were allocated before the file's
// length was looked at). Internal to the library (src/), used by the readers and the engines.
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "warpbeam/format.hpp"

namespace warpbeam::detail {

/// a * b for sizes (each >= 0); throws Error(category) naming `what` when either is negative or
/// the product does not fit in int64.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what,
                                ErrorCategory category = ErrorCategory::format) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    fail(category, "{}: {} x {} is not a valid size", what, a, b);
  return r;
}

/// The product of `factors` (each >= 0), checked as checked_mul() does.
inline std::int64_t checked_product(std::initializer_list<std::int64_t> factors,
                                    std::string_view what,
                                    ErrorCategory category = ErrorCategory::format) {
  std::int64_t r = 1;
  for (std::int64_t f : factors)
    r = checked_mul(r, f, what, category);
  return r;
}

/// a + b for sizes (each >= 0), checked.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what,
                                ErrorCategory category = ErrorCategory::format) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    fail(category, "{}: {} + {} is not a valid size", what, a, b);
  return r;
}

/// Throws Error(format) when a header declares `bytes` of data but the file holds only
/// `available` after the header: "{what} needs {bytes} bytes but the file has {available}".
inline void require_in_file(std::int64_t bytes, std::int64_t available, std::string_view what) {
  if (bytes > available)
    fail(ErrorCategory::format, "{} needs {} bytes but the file holds only {}", what, bytes,
         available);
}

/// Throws Error(invalid_argument) when `bytes` exceed `budget` bytes: "{what} needs X MiB, more
/// than the memory budget of Y MiB" (`hint` says which option raises it or how to ask less).
inline void require_budget(std::int64_t bytes, std::int64_t budget, std::string_view what,
                           std::string_view hint) {
  if (bytes > budget)
    fail(ErrorCategory::invalid_argument,
         "{} needs {:.1f} MiB, more than the budget of {:.1f} MiB{}", what,
         static_cast<double>(bytes) / (1 << 20), static_cast<double>(budget) / (1 << 20), hint);
}

}  // namespace warpbeam::detail
