// CUDA twin of unpack.cpp: one thread per output sample, same bit order and sign rules.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam {
namespace {

template <int NBITS>
__global__ void unpack_kernel(const std::uint8_t* __restrict__ in, std::size_t count,
                              float* __restrict__ out, bool is_signed) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  if constexpr (NBITS < 8) {
    constexpr int per_byte = 8 / NBITS;
    constexpr unsigned mask = (1u << NBITS) - 1u;
    constexpr int half = 1 << (NBITS - 1);
    const unsigned v = (in[i / per_byte] >> ((i % per_byte) * NBITS)) & mask;
    const int s = (is_signed && NBITS > 1 && v >= static_cast<unsigned>(half))
                      ? static_cast<int>(v) - 2 * half
                      : static_cast<int>(v);
    out[i] = static_cast<float>(s);
  } else if constexpr (NBITS == 8) {
    out[i] = is_signed ? static_cast<float>(static_cast<signed char>(in[i])) : in[i];
  } else if constexpr (NBITS == 16) {
    const unsigned short v = reinterpret_cast<const unsigned short*>(in)[i];
    out[i] = is_signed ? static_cast<float>(static_cast<short>(v)) : static_cast<float>(v);
  } else {
    out[i] = reinterpret_cast<const float*>(in)[i];
  }
}

template <int NBITS>
void launch(const std::uint8_t* in, std::size_t count, float* out, bool is_signed, cudaStream_t s) {
  constexpr int threads = 256;
  const std::size_t blocks = (count + threads - 1) / threads;
  unpack_kernel<NBITS><<<static_cast<unsigned>(blocks), threads, 0, s>>>(in, count, out, is_signed);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void unpack_samples_cuda(const std::uint8_t* in, int nbits, std::size_t count, float* out,
                         bool is_signed, const Stream* stream) {
  if (count == 0) return;
  cudaStream_t s = WB_STREAM(stream);
  switch (nbits) {
    case 1:
      launch<1>(in, count, out, is_signed, s);
      break;
    case 2:
      launch<2>(in, count, out, is_signed, s);
      break;
    case 4:
      launch<4>(in, count, out, is_signed, s);
      break;
    case 8:
      launch<8>(in, count, out, is_signed, s);
      break;
    case 16:
      launch<16>(in, count, out, is_signed, s);
      break;
    case 32:
      launch<32>(in, count, out, is_signed, s);
      break;
    default:
      fail(ErrorCategory::invalid_argument,
           "nbits = " + std::to_string(nbits) + " is not supported (1, 2, 4, 8, 16, 32)");
  }
  if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace warpbeam
