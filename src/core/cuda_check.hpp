#pragma once
// Internal: the one checking macro every CUDA runtime call and kernel launch goes through.
#ifdef WARPBEAM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <string>

#include "warpbeam/core.hpp"

namespace warpbeam::detail {
[[noreturn]] inline void cuda_fail(cudaError_t e, const char* expr, const char* file, int line) {
  fail(ErrorCategory::cuda, std::string("CUDA error ") + std::to_string(static_cast<int>(e)) +
                                " (" + cudaGetErrorString(e) + ") in " + expr + " at " + file +
                                ":" + std::to_string(line));
}
}  // namespace warpbeam::detail

/// Checks a CUDA runtime call; throws warpbeam::Error(cuda) naming the call and the place.
#define WB_CUDA_CHECK(expr)                                                                        \
  do {                                                                                             \
    cudaError_t wb_err_ = (expr);                                                                  \
    if (wb_err_ != cudaSuccess) ::warpbeam::detail::cuda_fail(wb_err_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Checks the last kernel launch (configuration errors); call right after <<<...>>>.
#define WB_CUDA_CHECK_LAUNCH() WB_CUDA_CHECK(cudaGetLastError())

/// The cudaStream_t of an optional warpbeam::Stream (the legacy default stream when null).
#define WB_STREAM(s) ((s) ? static_cast<cudaStream_t>((s)->handle()) : cudaStream_t{nullptr})
#endif
