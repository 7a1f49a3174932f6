#pragma once
// Internal, CUDA: pieces both beamformer kernels share (sample decoding, the weight transpose).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace warpbeam::beamform::detail {

/// Sample types as template arguments (the order of warpbeam::SampleType).
enum : int { kCi4 = 0, kCi8 = 1, kCf16 = 2, kCf32 = 3 };

template <int D>
constexpr int kBytesPerComplex = D == kCi4    ? 1
                                 : D == kCi8  ? 2
                                 : D == kCf16 ? 4
                                              : 8;

/// Decodes the complex sample at `p` (naturally aligned) through the conversion table `tab`
/// (256 (re, im) pairs, shared memory; unused for cf16/cf32).
template <int D>
__device__ __forceinline__ float2 decode_sample(const std::uint8_t* __restrict__ p,
                                                const float2* tab) {
  if constexpr (D == kCi4) {
    return tab[*p];
  } else if constexpr (D == kCi8) {
    const unsigned short v = *reinterpret_cast<const unsigned short*>(p);
    return make_float2(tab[v & 0xFFu].x, tab[v >> 8].x);
  } else if constexpr (D == kCf16) {
    return __half22float2(*reinterpret_cast<const __half2*>(p));
  } else {
    return *reinterpret_cast<const float2*>(p);
  }
}

/// Decodes element k (0 <= k < 4 / bytes_per_complex) of a 32-bit word holding packed ci4, ci8 or
/// cf16 samples (little-endian: element 0 in the lowest bytes).
template <int D>
__device__ __forceinline__ float2 decode_word_element(unsigned word, int k, const float2* tab) {
  if constexpr (D == kCi4) {
    return tab[(word >> (8 * k)) & 0xFFu];
  } else if constexpr (D == kCi8) {
    const unsigned v = word >> (16 * k);
    return make_float2(tab[v & 0xFFu].x, tab[(v >> 8) & 0xFFu].x);
  } else {
    __half2 h;
    *reinterpret_cast<unsigned*>(&h) = word;
    return __half22float2(h);
  }
}

}  // namespace warpbeam::beamform::detail
