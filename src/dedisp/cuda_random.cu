// random_device_bytes(): reproducible test and benchmark data made on the GPU (no host copy of a
// gigabyte). A counter-based hash (SplitMix64's finaliser, Steele et al. 2014) of the seed and
// the index of each 8-byte word: the same bytes for the same seed on every device and launch.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "warpbeam/dedisp.hpp"

namespace warpbeam::dedisp {
namespace {

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void random_bytes_kernel(std::uint8_t* __restrict__ out, std::size_t bytes,
                                    std::uint64_t seed) {
  const std::size_t w = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t first = w * 8;
  if (first >= bytes) return;
  const std::uint64_t h = splitmix64(seed * 0xD1B54A32D192ED03ull + w);
#pragma unroll
  for (int b = 0; b < 8; ++b)
    if (first + b < bytes) out[first + b] = static_cast<std::uint8_t>(h >> (8 * b));
}

}  // namespace

void random_device_bytes(std::uint8_t* device_ptr, std::size_t bytes, std::uint64_t seed,
                         const Stream* stream) {
  if (bytes == 0) return;
  constexpr int threads = 256;
  const std::size_t words = (bytes + 7) / 8;
  const std::size_t blocks = (words + threads - 1) / threads;
  if (blocks > 0x7FFFFFFFu)
    fail(ErrorCategory::invalid_argument, "random_device_bytes: too many bytes");
  cudaStream_t s = WB_STREAM(stream);
  random_bytes_kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(device_ptr, bytes, seed);
  WB_CUDA_CHECK_LAUNCH();
  if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace warpbeam::dedisp
