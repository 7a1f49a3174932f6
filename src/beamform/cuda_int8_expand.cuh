#pragma once
// Internal, CUDA: the operands the int8 beamformers share (cuda_tensor_int8.cu,
// cuda_tensor_int8_gemm.cu, cuda_tensor_int8_stream.cu): the weight matrix A', and ci4/ci8 codes
// -> s8 (re, im) pairs, two's complement codes by bit operations, other encodings through a
// 256-entry s8 table (beamform/int8.hpp's int8_table()).
#include <cuda_runtime.h>

#include <cstdint>

#include "beamform/cuda_common.cuh"
#include "beamform/executor.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform::detail {

/// q [chan][pol][beam][ant][re, im] -> A' [chan][pol][mpad][kpad] s8 on `s`: per antenna a and
/// beam b the 2x2 block [[qr, -qi], [qi, qr]] (columns k' = 2a + re/im in), rows in 16-row MMA
/// tiles of 8 beams' Re rows over their Im rows (row r: beam (r / 16) 8 + r % 8, Im when
/// r % 16 >= 8); zero in the padding. Defined in cuda_tensor_int8.cu.
void launch_build_a_int8(const std::int8_t* q, std::int8_t* aw, int nchans, int npol, int nbeams,
                         int nant, int mpad, int kpad, cudaStream_t s);
/// set_weights() of both tensor-int8 kernels: the plan's quantised weights (pd.int8) -> q and
/// scale2 on the device, then A' [chan][pol][mpad][kpad] from q; synchronous when stream is null.
/// Defined in cuda_tensor_int8.cu.
void upload_int8_weights(const PlanData& pd, DeviceArray<std::int8_t>& q,
                         DeviceArray<float>& scale2, DeviceArray<std::int8_t>& aw, int mpad,
                         int kpad, const Stream* stream);

/// Four ci4 codes of one pol (bytes of w: high nibble re, low nibble im, two's complement) ->
/// s8 (re, im) pairs: lo gets codes 0 and 1, hi codes 2 and 3.
__device__ __forceinline__ void expand_ci4(unsigned w, unsigned& lo, unsigned& hi) {
  // Sign-extend each nibble into its byte: (v ^ 8) - 8, bytewise.
  const unsigned re = __vsub4(((w >> 4) & 0x0F0F0F0Fu) ^ 0x08080808u, 0x08080808u);
  const unsigned im = __vsub4((w & 0x0F0F0F0Fu) ^ 0x08080808u, 0x08080808u);
  lo = __byte_perm(re, im, 0x5140);  // re0 im0 re1 im1
  hi = __byte_perm(re, im, 0x7362);  // re2 im2 re3 im3
}

/// The input of one thread per stage: antennas a .. a + kApt - 1 (every pol) of one time row,
/// held as raw words while the current stage multiplies; expand<POL>() writes their s8 (re, im)
/// pairs of pol POL (2 kApt bytes, zero outside the data) as 32-bit words.
template <int D, int NP, int kApt>
struct XLoader {
  static constexpr int kBpc = kBytesPerComplex<D>;  // 1 or 2
  static constexpr int kBytes = kApt * NP * kBpc;   // 8 .. 64
  static constexpr int kWords = kBytes / 4;
  static_assert(kBytes % 8 == 0, "whole 64-bit chunks");
  unsigned w[kWords];
  bool valid;

  template <class P>
  __device__ __forceinline__ void load(const std::uint8_t* __restrict__ in, const P& p, int c,
                                       std::int64_t t, int a) {
    valid = t < p.nsamples && a < p.nant;
#pragma unroll
    for (int i = 0; i < kWords; ++i)
      w[i] = 0;
    if (!valid) return;
    const std::uint8_t* src = in + (static_cast<std::int64_t>(c) * p.nsamples + t) * p.row_bytes +
                              static_cast<std::int64_t>(a) * NP * kBpc;
    if (p.vector_loads && a + kApt <= p.nant) {
#pragma unroll
      for (int i = 0; i < kWords / 2; ++i) {
        const uint2 v = *reinterpret_cast<const uint2*>(src + 8 * i);
        w[2 * i] = v.x;
        w[2 * i + 1] = v.y;
      }
      return;
    }
    // Unaligned rows or a partial antenna group: byte by byte, zero past the last antenna.
#pragma unroll
    for (int e = 0; e < kBytes; ++e)
      if (a + e / (NP * kBpc) < p.nant) w[e / 4] |= static_cast<unsigned>(src[e]) << (8 * (e % 4));
  }

  __device__ __forceinline__ unsigned byte(int e) const {
    return (w[e / 4] >> (8 * (e % 4))) & 0xFFu;
  }

  /// out[k/2] = s8 (re, im) of antennas k, k + 1 (k even) for pol POL.
  template <int POL>
  __device__ __forceinline__ void expand(unsigned (&out)[kApt / 2], bool raw, int nant, int a,
                                         const char2* tab) const {
    if (raw) {
      if constexpr (D == kCi4) {
        // One word = 4 codes; with 2 pols, pick this pol's codes of two words first.
#pragma unroll
        for (int i = 0; i < kApt / 4; ++i) {
          unsigned codes;
          if constexpr (NP == 1)
            codes = w[i];
          else
            codes = __byte_perm(w[2 * i], w[2 * i + 1], POL == 0 ? 0x6420 : 0x7531);
          expand_ci4(codes, out[2 * i], out[2 * i + 1]);
        }
      } else {
        // ci8 codes are s8 already: one word = (re, im) of 2 antennas (1 pol) or of 1 antenna
        // and both pols.
#pragma unroll
        for (int i = 0; i < kApt / 2; ++i) {
          if constexpr (NP == 1)
            out[i] = w[i];
          else
            out[i] = __byte_perm(w[2 * i], w[2 * i + 1], POL == 0 ? 0x5410 : 0x7632);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kApt / 2; ++i) {
        unsigned v = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int e = (2 * i + h) * NP + POL;  // sample index in this thread's bytes
          char2 x;
          if constexpr (D == kCi4) {
            x = tab[byte(e)];
          } else {
            x = make_char2(tab[byte(2 * e)].x, tab[byte(2 * e + 1)].x);
          }
          const unsigned pair = static_cast<unsigned char>(x.x) |
                                (static_cast<unsigned>(static_cast<unsigned char>(x.y)) << 8);
          v |= pair << (16 * h);
        }
        out[i] = v;
      }
    }
    // Antennas past the last are zero whatever the codes (partial groups read zero bytes, which
    // a table need not map to 0).
#pragma unroll
    for (int i = 0; i < kApt / 2; ++i) {
      if (!valid || a + 2 * i >= nant)
        out[i] = 0;
      else if (a + 2 * i + 1 >= nant)
        out[i] &= 0xFFFFu;
    }
  }
};

}  // namespace warpbeam::beamform::detail
