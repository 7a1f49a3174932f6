#pragma once
// Internal: device helpers shared by the CUDA dedispersion kernels.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "dedisp/cuda_kernels.hpp"
#include "dedisp/quantise.hpp"
#include "warpbeam/core.hpp"

namespace warpbeam::dedisp::detail {

/// Writes one sum to [ndm][nsamples_out] element `idx` as float32 or quantised to 8/16 bits.
/// `o.nbits` is uniform over the grid, so the branch costs nothing.
__device__ __forceinline__ void store_output(const OutputTarget& o, std::int64_t idx, float v) {
  if (o.nbits == 32) {
    static_cast<float*>(o.data)[idx] = v;
  } else if (o.nbits == 8) {
    static_cast<std::uint8_t*>(o.data)[idx] =
        static_cast<std::uint8_t>(quantise(v, o.scale, o.offset, 255.0f));
  } else {
    static_cast<std::uint16_t*>(o.data)[idx] =
        static_cast<std::uint16_t>(quantise(v, o.scale, o.offset, 65535.0f));
  }
}

/// Four consecutive uint8 codes s[0..3] of a scratch row starting at sample `s0` (any alignment),
/// in the bytes of `lo`, and s[4] in the low byte of `hi` (higher bytes: other samples). Reads
/// the two aligned words that hold them (L1 serves the neighbour lanes' overlap); words at or
/// past `stride_words` read as zero, so no read leaves the row.
__device__ __forceinline__ void load_code_window(const std::uint32_t* __restrict__ row32,
                                                 std::int64_t stride_words, std::int64_t s0,
                                                 std::uint32_t& lo, std::uint32_t& hi) {
  const std::int64_t wi = s0 >> 2;
  const unsigned sh = static_cast<unsigned>(s0 & 3) * 8u;
  const std::uint32_t w0 = wi < stride_words ? __ldg(row32 + wi) : 0u;
  const std::uint32_t w1 = wi + 1 < stride_words ? __ldg(row32 + wi + 1) : 0u;
  lo = __funnelshift_r(w0, w1, sh);  // bytes s0..s3
  hi = w1 >> sh;                     // low byte: s4
}

/// Calls f(std::integral_constant<int, NBITS>{}) for the input's sample width, so that each
/// launcher instantiates its kernel per nbits in one place; throws invalid_argument otherwise.
template <class F>
void dispatch_nbits(int nbits, F&& f) {
  switch (nbits) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
    case 32:
      return f(std::integral_constant<int, 32>{});
    default:
      fail(ErrorCategory::invalid_argument,
           "nbits = " + std::to_string(nbits) + " is not one of 1, 2, 4, 8, 16, 32");
  }
}

}  // namespace warpbeam::dedisp::detail
