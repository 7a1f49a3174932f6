// The direct CUDA kernel: the baseline every other variant is measured against, the scheme of
// dedisp's kernel (Barsdell et al. 2012; github.com/ajameson/dedisp, kernels.cuh) re-implemented
// here, so that "speed-up over direct" measured in the same run stands for the speed-up over
// dedisp on the same card:
//  - a corner turn of the packed [time][chan] rows into [channel word][time] 32-bit words (a
//    word holds 32/nbits consecutive channels of one time sample, as the input packs them);
//  - one thread per (DM trial, 2 consecutive output samples), blocks of 8 (time) x 32 (DM)
//    threads; for every channel the thread loads the word holding its sample at the channel's
//    delay (consecutive threads: consecutive words), extracts the channel's bits and adds them
//    as an integer (nbits <= 8) or a float (16, 32).
// Every (DM, channel, sample) costs one 4-byte global load, served by L1/L2 with little reuse
// across DMs: dedisp's figure on the H200 is ~1e12 channel-DM-samples/s, ~3 % of the fp32 add
// rate (issue 3).
#include <cuda_runtime.h>

#include <type_traits>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int kBlockSamps = 8;      // dedisp's DEDISP_BLOCK_SAMPS: threads along time
constexpr int kBlockDms = 32;       // DEDISP_BLOCK_SIZE / DEDISP_BLOCK_SAMPS: threads along DM
constexpr int kSampsPerThread = 2;  // DEDISP_SAMPS_PER_THREAD
constexpr int kTile = 32;

// [time][row_bytes] -> [word][stride] uint32: a plain 32 x 32 tiled transpose of 4-byte words;
// a row whose length is not a multiple of 4 bytes gets its last word zero-padded.
__global__ void word_transpose_kernel(const std::uint8_t* __restrict__ in, std::int64_t row_bytes,
                                      std::int64_t nsamples, int nwords,
                                      std::uint32_t* __restrict__ words, std::int64_t stride) {
  __shared__ std::uint32_t tile[kTile][kTile + 1];
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const int w0 = static_cast<int>(blockIdx.y) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const bool aligned = row_bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(in) % 4 == 0;
#pragma unroll
  for (int r = 0; r < kTile; r += 8) {
    const std::int64_t t = t0 + ty + r;
    const int w = w0 + tx;
    std::uint32_t v = 0;
    if (t < nsamples && w < nwords) {
      const std::uint8_t* p = in + t * row_bytes + 4 * static_cast<std::int64_t>(w);
      if (aligned) {
        v = *reinterpret_cast<const std::uint32_t*>(p);
      } else {
        for (int b = 0; b < 4; ++b)
          if (4 * w + b < row_bytes) v |= static_cast<std::uint32_t>(p[b]) << (8 * b);
      }
    }
    tile[ty + r][tx] = v;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kTile; r += 8) {
    const int w = w0 + ty + r;
    const std::int64_t t = t0 + tx;
    if (w < nwords && t < nsamples)
      words[static_cast<std::int64_t>(w) * stride + t] = tile[tx][ty + r];
  }
}

template <int NBITS>
__global__ void __launch_bounds__(kBlockSamps* kBlockDms) direct_kernel(const DirectArgs a) {
  constexpr int per_word = 32 / NBITS;
  using Sum = std::conditional_t<(NBITS <= 8), std::uint32_t, float>;
  const int d = static_cast<int>(blockIdx.y) * kBlockDms + static_cast<int>(threadIdx.y);
  const std::int64_t t_first =
      (static_cast<std::int64_t>(blockIdx.x) * kBlockSamps + threadIdx.x) * kSampsPerThread;
  if (d >= a.ndm || t_first >= a.nsamples_out) return;
  const std::uint32_t* __restrict__ words = a.words;
  const std::uint8_t* __restrict__ killmask = a.killmask;
  const std::int32_t* __restrict__ delays = a.delays + static_cast<std::int64_t>(d) * a.nchans;
  Sum sum[kSampsPerThread] = {};
  for (int cw = 0; cw < a.nwords; ++cw) {
    const std::uint32_t* __restrict__ row = words + static_cast<std::int64_t>(cw) * a.stride;
    for (int sub = 0; sub < per_word; ++sub) {
      const int c = cw * per_word + sub;
      if (c >= a.nchans) break;
      if (killmask && !killmask[c]) continue;
      const std::int64_t delay = delays[c];
#pragma unroll
      for (int s = 0; s < kSampsPerThread; ++s) {
        const std::int64_t t = t_first + s;
        if (t >= a.nsamples_out) break;
        const std::uint32_t w = row[t + delay];
        if constexpr (NBITS <= 8) {
          sum[s] += ((w >> (sub * NBITS)) & ((1u << NBITS) - 1u)) ^ a.sign_flip;
        } else if constexpr (NBITS == 16) {
          const std::uint32_t v = (w >> (sub * 16)) & 0xFFFFu;
          sum[s] += a.is_signed ? static_cast<float>(static_cast<short>(v)) : static_cast<float>(v);
        } else {
          sum[s] += __uint_as_float(w);
        }
      }
    }
  }
  const std::int64_t out_row = static_cast<std::int64_t>(d) * a.nsamples_out;
#pragma unroll
  for (int s = 0; s < kSampsPerThread; ++s) {
    const std::int64_t t = t_first + s;
    if (t >= a.nsamples_out) break;
    if constexpr (NBITS <= 8)
      store_output(
          a.out, out_row + t,
          static_cast<float>(static_cast<int>(sum[s]) - static_cast<int>(a.sign_flip) * a.nused));
    else
      store_output(a.out, out_row + t, sum[s]);
  }
}

template <int NBITS>
void launch(const DirectArgs& a, cudaStream_t s) {
  const dim3 block(kBlockSamps, kBlockDms);
  const std::int64_t per_block = kBlockSamps * kSampsPerThread;
  const dim3 grid(static_cast<unsigned>((a.nsamples_out + per_block - 1) / per_block),
                  static_cast<unsigned>((a.ndm + kBlockDms - 1) / kBlockDms));
  direct_kernel<NBITS><<<grid, block, 0, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_direct_transpose(const std::uint8_t* in, std::int64_t row_bytes, std::int64_t nsamples,
                             std::uint32_t* words, int nwords, std::int64_t stride,
                             const Stream* stream) {
  if (nsamples <= 0 || nwords <= 0) return;
  const dim3 grid(static_cast<unsigned>((nsamples + kTile - 1) / kTile),
                  static_cast<unsigned>((nwords + kTile - 1) / kTile));
  word_transpose_kernel<<<grid, dim3(kTile, 8), 0, WB_STREAM(stream)>>>(in, row_bytes, nsamples,
                                                                        nwords, words, stride);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_direct(const DirectArgs& a, const Stream* stream) {
  if ((a.ndm + kBlockDms - 1) / kBlockDms > 65535)
    fail(ErrorCategory::unsupported,
         "the direct kernel handles at most " + std::to_string(65535 * kBlockDms) + " DM trials");
  cudaStream_t s = WB_STREAM(stream);
  dispatch_nbits(a.nbits, [&](auto nbits) { launch<decltype(nbits)::value>(a, s); });
}

}  // namespace warpbeam::dedisp::detail
