#pragma once
// Internal: the one checking macro every CUDA runtime call and kernel launch goes through.
#ifdef WARPBEAM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "warpbeam/core.hpp"

namespace warpbeam::detail {
[[noreturn]] inline void cuda_fail(cudaError_t e, const char* expr, const char* file, int line) {
  fail(ErrorCategory::cuda, std::string("CUDA error ") + std::to_string(static_cast<int>(e)) +
                                " (" + cudaGetErrorString(e) + ") in " + expr + " at " + file +
                                ":" + std::to_string(line));
}

/// Lets `kernel` launch with up to `bytes` of dynamic shared memory on the current device
/// (cudaFuncAttributeMaxDynamicSharedMemorySize). The limit belongs to the function on each device
/// and is shared by every host thread, so lowering it for one launch can make another thread's
/// concurrent, larger launch of the same kernel fail (error 701, "too many resources requested",
/// seen with two search workers sharing one GPU). It is therefore only ever raised, under a lock.
void allow_dynamic_smem(const void* kernel, std::size_t bytes);
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
