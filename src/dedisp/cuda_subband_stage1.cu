// Stage 1 of the CUDA sub-band method for codes of 8 bits or fewer: every sub-band's rows in one
// launch, one block per (time tile, sub-band) that computes all the sub-band's stage-1 rows.
//
// Why. A sub-band is a small brute-force problem (D1: 16 channels, 86 rows). Run through the
// packed brute-force kernel, a block covers a tile of a few rows, so its work per staged sample
// and per output is small: ncu on D1 (H200, 2026-12-03, 2^18 samples) counted ~5 instructions
// per addition (staging, offsets, flush and 64-bit store indexing around 1 (load, add) pair per
// 2 additions), and 64 launches, one per sub-band. Here the block stages its sub-band's channels
// once for the time tile, for every row: the window of channel k spans the smallest to the
// largest delay of k over all rows (D1: < 300 samples) plus the tile, as the packed kernel's E/O
// pair words (cuda_packed.cu: two samples per 32-bit word, so one load and one integer add serve
// two output samples, exactly). Each warp then takes rows w, w + W, ...: per row its lanes hold
// 16 output samples (8 pair words), each lane < nch reads its channel's offset once, and the
// channel loop broadcasts it with a shuffle; per channel 8 (shared load, add) pairs, 32
// consecutive words per warp (no bank conflict). The sums stay in 16-bit lanes (nch <= 32:
// 32 x 255 < 65536, no flush) and are stored as float pairs.
//
// Bound: the (load, add) pairs, ~1.2 instructions per addition with the shuffle and the stores,
// and the series stores (D1: 22.7 GB of float32 rows, ~6 ms at the H200's copy rate).
// Measured (H200, 2026-12-03, run s17-c, ncu at 2^18 samples): 2.48 ms for all 64 sub-bands
// against 64 x 97-115 us = 6.2-7.4 ms through the packed kernel; L1/shared 94 % busy, DRAM 52 %:
// the shared-memory pipe bounds it now. The whole D1 sub-band run: 39.3 ms from 61.6 ms.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"
#include "dedisp/cuda_methods.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int W = kSubbandStage1Warps;
constexpr int P = kSubbandStage1Samples / 64;  // pair words per lane
constexpr int BT = kSubbandStage1Samples;

__global__ void __launch_bounds__(32 * W) subband_stage1_kernel(const SubbandStage1Args a) {
  extern __shared__ __align__(16) std::uint32_t smem[];
  const SubbandStage1Band band = a.bands[blockIdx.y];
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * BT;
  if (t0 >= band.len - a.short_by) return;  // past the samples this gulp needs (block-uniform)
  const int R = a.row_words;
  const int nch = band.nch;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::size_t tab = static_cast<std::size_t>(blockIdx.y) * kSubbandStage1MaxChannels;
  const auto* codes = a.scratch + band.in_offset;

  // Stage: warp w the channels w, w + W, ..., each as its E and O rows of pair words.
  for (int k = warp; k < nch; k += W) {
    const auto* row32 = reinterpret_cast<const std::uint32_t*>(codes + k * a.stride);
    const int groups = ((a.span[tab + k] >> 1) + BT / 2 + 1) / 2;
    stage_pair_rows(row32, a.stride / 4, t0 + a.base[tab + k], groups, a.sign_flip,
                    smem + static_cast<std::size_t>(k) * 2 * R, R, lane, 32);
  }
  __syncthreads();

  const float offset = static_cast<float>(static_cast<int>(a.sign_flip) * nch);
  for (int r = warp; r < a.nrows; r += W) {
    int mine = 0;  // lane k < nch: the word of its channel's window where this row's sum starts
    if (lane < nch) {
      const int rel =
          a.rel[(static_cast<std::size_t>(blockIdx.y) * a.nrows + r) * kSubbandStage1MaxChannels +
                lane];
      mine = lane * 2 * R + (rel & 1) * R + (rel >> 1);
    }
    std::uint32_t lanes[P];
#pragma unroll
    for (int i = 0; i < P; ++i)
      lanes[i] = 0;
#pragma unroll 4
    for (int k = 0; k < nch; ++k) {
      const std::uint32_t* p = smem + __shfl_sync(0xFFFFFFFFu, mine, k) + lane;
#pragma unroll
      for (int i = 0; i < P; ++i)
        lanes[i] += p[32 * i];
    }
    // Output samples t0 + 2 (lane + 32 i) and the next: a float pair, 8-byte aligned when the
    // row's first sample is (uniform over the row).
    const std::int64_t first = band.out_offset + static_cast<std::int64_t>(r) * band.len;
    float* out = a.series + first;
    const bool pairs = (first & 1) == 0;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const std::int64_t t = t0 + 2 * (lane + 32 * i);
      const float v0 = static_cast<float>(lanes[i] & 0xFFFFu) - offset;
      const float v1 = static_cast<float>(lanes[i] >> 16) - offset;
      if (pairs && t + 1 < band.len) {
        *reinterpret_cast<float2*>(out + t) = make_float2(v0, v1);
      } else {
        if (t < band.len) out[t] = v0;
        if (t + 1 < band.len) out[t + 1] = v1;
      }
    }
  }
}

}  // namespace

void launch_subband_stage1(const SubbandStage1Args& a, const Stream* stream) {
  if (a.nsub <= 0 || a.ntime_tiles <= 0) return;
  cudaStream_t s = WB_STREAM(stream);
  ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(subband_stage1_kernel),
                                         a.smem_bytes);
  const dim3 grid(static_cast<unsigned>(a.ntime_tiles), static_cast<unsigned>(a.nsub));
  subband_stage1_kernel<<<grid, 32 * W, a.smem_bytes, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::dedisp::detail
