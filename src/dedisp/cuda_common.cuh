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

// Selectors of __byte_perm(x, y, s) (byte i of the result = byte s_i of {y:x}; 4 = y's byte 0).
// With y = 0, 4 reads as a zero byte.
inline constexpr unsigned kPair01 = 0x4140;  // x.b0 | x.b1 << 16
inline constexpr unsigned kPair23 = 0x4342;  // x.b2 | x.b3 << 16
inline constexpr unsigned kPair12 = 0x4241;  // x.b1 | x.b2 << 16
inline constexpr unsigned kPair34 = 0x5453;  // x.b3 | y.b0 << 16, with y.b1 == 0

/// Stages samples s[0 .. 4 groups + 1) of a uint8 code row, s[x] = code at sample `first` + x
/// (signed codes offset by `flip` = 2^(nbits-1), 0 for unsigned), as the pair words
///   E[m] = s[2m] | s[2m+1] << 16   (words rows[0 .. 2 groups))  and
///   O[m] = s[2m+1] | s[2m+2] << 16 (words rows[R .. R + 2 groups)),
/// so that the pair (s[x], s[x+1]) is one aligned word, E[x/2] or O[x/2], for any x (the packed
/// kernels, cuda_packed.cu). Lanes `lane`, `lane + nlanes`, ... take the groups of 4 samples.
__device__ __forceinline__ void stage_pair_rows(const std::uint32_t* __restrict__ row32,
                                                std::int64_t stride_words, std::int64_t first,
                                                int groups, std::uint32_t flip, std::uint32_t* rows,
                                                int R, int lane, int nlanes) {
  const std::uint32_t flip4 = flip * 0x01010101u;
  auto* E = reinterpret_cast<uint2*>(rows);
  auto* O = reinterpret_cast<uint2*>(rows + R);
#pragma unroll 2
  for (int q = lane; q < groups; q += nlanes) {
    std::uint32_t lo, hi;
    load_code_window(row32, stride_words, first + 4 * static_cast<std::int64_t>(q), lo, hi);
    lo ^= flip4;
    hi = (hi ^ flip) & 0xFFu;
    E[q] = make_uint2(__byte_perm(lo, 0, kPair01), __byte_perm(lo, 0, kPair23));
    O[q] = make_uint2(__byte_perm(lo, 0, kPair12), __byte_perm(lo, hi, kPair34));
  }
}

/// Asynchronous copy of one float from global to shared memory (cp.async, sm_80+), or of a zero
/// when `valid` is false (src-size 0: nothing is read, `src` only has to be a valid address).
/// The copies of a thread complete at cp_async_wait_all(); __syncthreads() after it publishes
/// them to the block. Why: a staging loop of plain loads waits for each load before its store,
/// while these issue back to back and the block waits once.
__device__ __forceinline__ void cp_async_f32(float* dst, const float* src, bool valid) {
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}

/// Copies 16 bytes (4 floats) global -> shared asynchronously, the first `bytes` (0-16) of them
/// from `src` and zeros for the rest; both addresses 16-byte aligned. Through L2 only (.cg):
/// what is staged is read from shared memory.
__device__ __forceinline__ void cp_async_f32x4(float* dst, const float* src, int bytes) {
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
               : "memory");
}

/// Waits for every cp_async_f32() and cp_async_f32x4() this thread issued.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
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
