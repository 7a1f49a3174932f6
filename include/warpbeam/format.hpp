#pragma once
// fmt-based helpers for host code: formatted errors, warnings and range checks.
// Not for .cu files: nvcc cannot compile fmt's compile-time format checks (include core.hpp there).

#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "warpbeam/core.hpp"

namespace warpbeam {

/// Throws Error(category, fmt::format(...)).
template <class... Args>
[[noreturn]] void fail(ErrorCategory category, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(category, fmt::format(f, std::forward<Args>(args)...));
}

/// warn(fmt::format(...)).
template <class... Args>
void warnf(fmt::format_string<Args...> f, Args&&... args) {
  warn(fmt::format(f, std::forward<Args>(args)...));
}

/// Throws invalid_argument unless lo <= value <= hi, naming the field and the allowed range.
template <class T>
void require_range(std::string_view field, T value, T lo, T hi) {
  if (!(value >= lo && value <= hi))
    fail(ErrorCategory::invalid_argument, "{} = {} is outside the allowed range [{}, {}]", field,
         value, lo, hi);
}

}  // namespace warpbeam
