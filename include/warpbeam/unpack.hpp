#pragma once
// Sample unpacking: packed 1/2/4/8/16-bit integer or 32-bit float samples -> float32.
//
// Bit order for sub-byte samples follows SIGPROC (and sigpyproc, heimdall): the first sample of a
// byte is in its lowest bits. Integer samples are unsigned unless `is_signed` (two's complement),
// as the SIGPROC header keyword `signed` says. Source: SIGPROC user guide, "filterbank" format.

#include <cstddef>
#include <cstdint>

#include "warpbeam/device.hpp"

namespace warpbeam {

/// True for the sample sizes warpbeam reads: 1, 2, 4, 8, 16 (integers) and 32 (float).
bool supported_nbits(int nbits);

/// Bytes holding `count` samples of `nbits` (rounded up to whole bytes).
std::size_t packed_bytes(int nbits, std::size_t count);

/// Unpacks `count` samples from `in` into `out` (host memory). Throws invalid_argument for an
/// unsupported nbits.
void unpack_samples(const std::uint8_t* in, int nbits, std::size_t count, float* out,
                    bool is_signed = false);

/// The CUDA twin of unpack_samples: `in` and `out` are device pointers; asynchronous on `stream`
/// (synchronous when null). Throws unsupported in a build without CUDA.
void unpack_samples_cuda(const std::uint8_t* in, int nbits, std::size_t count, float* out,
                         bool is_signed = false, const Stream* stream = nullptr);

}  // namespace warpbeam
