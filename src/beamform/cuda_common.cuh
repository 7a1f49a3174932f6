#pragma once
// Internal, CUDA: pieces both beamformer kernels share (sample decoding, the weight transpose).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "warpbeam/beamform.hpp"

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

/// The shape of one execute() that every beamformer kernel reads; each kernel's Params adds its
/// own launch fields to it.
struct ShapeParams {
  int nchans, nant, npol, nbeams;
  std::int64_t nsamples, row_bytes;
  int integration, nout_pols;
};

inline ShapeParams shape_params(const BeamformConfig& c) {
  return {c.nchans,   c.nantennas,   c.npol,        c.nbeams,
          c.nsamples, c.row_bytes(), c.integration, c.nout_pols()};
}

/// Blocks of a grid-stride launch of `threads` threads over n elements (at most 65536: the
/// kernels' loops cover the rest).
inline unsigned grid_stride_blocks(std::size_t n, int threads) {
  const std::size_t t = static_cast<std::size_t>(threads);
  return static_cast<unsigned>(std::min<std::size_t>((n + t - 1) / t, 65536));
}

}  // namespace warpbeam::beamform::detail
