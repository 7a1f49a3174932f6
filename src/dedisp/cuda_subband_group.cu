// Stage 2 of the CUDA sub-band method, one block per coarse group (the default; the first
// kernel, one block per 8 trials, is cuda_subband.cu).
//
// Why. out[i][t] = sum_s S(q(i, s), s)[t + shift[i][s]] reads, for every fine trial of a coarse
// DM's group, the same few stage-1 rows (one per sub-band and phase) at shifts that differ by a
// few samples. The first kernel staged those rows per tile of 8 trials: D1's groups hold ~17
// trials (1122 trials, 65 coarse DMs), so every row was staged 3 times (tiles of 8, 8 and 1),
// and a tile of 1 trial still ran 8 warps (the surplus computing copies). Its staging then cost
// ~(256 + span) x phases / (trials x 256) global loads per addition, 0.5 to 2 for D1, with 8 warps
// per block to hide their latency; ncu (H200, 2026-12-02, 2^18 samples) put the whole sub-band
// run at 31 ms of which stage 1 (64 packed launches of 113 us) is 7 ms: stage 2 ran at ~8e11
// additions/s, a tenth of the brute-force kernel's rate.
//
// Design (2026-12-04). A block takes one tile of up to 2 x NW trials of one coarse group (NW =
// a.warps, 10 by default: cuda_subband.cpp) and one 256-sample time tile; warp w accumulates
// trials w and w + NW (2 x 8 samples per lane in registers); a warp with no trial left only
// stages. The plan packs each group's used stage-1 windows to their own lengths (block + span,
// 16-byte aligned: subband_schedule.cpp) into stages of a few sub-bands that fit the block's
// shared memory (D1: 70-146 KiB per group, one or two stages at ~75 KiB per block) and
// precomputes every (trial, sub-band) offset into them. Per stage: one barrier, the stage's
// offsets and windows copied by cp.async (4 and 16 bytes per copy, all warps, issued back to
// back: plain loads made each lane wait for each load before its store), one wait and barrier,
// then every warp adds, per trial and sub-band, one broadcast offset load and 8 (shared load,
// fp32 add) pairs, 32 consecutive words per warp (no bank conflict).
//
// Bound. Shared-memory load issue: one 4-byte load per addition, 32 per clock per SM, 8.4e12
// additions/s on an H200 (132 SMs x 1.98 GHz), the same per-load rate as the packed brute-force
// kernel (two additions per load, 8.3e12 measured). D1's stage 2 is 1122 x 64 x 1.03e6 = 7.4e10
// additions. The staging adds phases x (256 + span) / (trials x 256) global loads per addition.
//
// History (H200, ncu at 2^18 samples, stage 2 alone; docs/PERFORMANCE.md):
// - one block per 8 trials (cuda_subband.cu): 22.95 ms, 25 % occupancy, 0.41 eligible warps;
// - one block per group, 16 warps, rows sized for the plan's largest span (785 samples, mean
//   86), plain loads: 8.04 ms; with cp.async (s17-b): 6.49 ms, 6 stages of 11 sub-bands per
//   block; tried and dropped (s17-c/d/e): windows computed by all threads per stage (7.1 ms),
//   half-trial work units (whole D1 38.0 against 36.8 ms), pair words of 16-bit sums (s18-a,
//   6.97 ms);
// - packed schedule (s19-a/b): 4.86 ms at 16 warps x 2 blocks, 4.44 ms at 10 x 3 (whole D1
//   30.5 and 28.7 ms): the 4-byte copies were ~30 % of the instructions;
// - 16-byte aligned windows (s19-c/d): 3.77 ms (5.0e12 additions/s, 60 % of the shared-load
//   bound), 0.67 issued warps per scheduler, 1.89 eligible;
//   whole D1 26.1 ms (stage 1 2.48 ms at 2^18 of it).
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"
#include "dedisp/cuda_methods.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int K = kSubbandSamplesPerThread;
constexpr int TPW = kSubbandGroupTrialsPerWarp;
constexpr int BT = kSubbandBlockSamples;

__global__ void __launch_bounds__(32 * kSubbandGroupMaxWarps, 2)
    subband_group_kernel(const SubbandGroupArgs a) {
  extern __shared__ __align__(16) float smem[];
  const int MS = a.max_stage_subbands;
  const int NW = a.warps;
  float* rows = smem;                                        // [area_words]
  int* s_off = reinterpret_cast<int*>(smem + a.area_words);  // [TPW x NW][MS]

  const int tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(a.ntiles));
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x / a.ntiles) * BT;
  const int j = a.tile_coarse[tile];
  const int first = a.tile_first[tile];
  const int nd = a.tile_count[tile];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int nsub = a.nsub;

  float acc[TPW][K];
#pragma unroll
  for (int u = 0; u < TPW; ++u)
#pragma unroll
    for (int e = 0; e < K; ++e)
      acc[u][e] = 0.0f;

  for (int g = a.stage_begin[j]; g < a.stage_begin[j + 1]; ++g) {
    const SubbandGroupStage st = a.stages[g];
    const int cc = st.sub_hi - st.sub_lo;
    __syncthreads();  // the previous stage's rows and offsets are no longer read
    // The stage's offsets, then its windows (warp w: windows w, w + NW, ...), all by cp.async.
    for (int x = static_cast<int>(threadIdx.x); x < nd * cc; x += 32 * NW) {
      const int u = x / cc, k = x % cc;
      const std::int32_t* src =
          a.offset + static_cast<std::size_t>(first + u) * nsub + st.sub_lo + k;
      cp_async_f32(reinterpret_cast<float*>(s_off + u * MS + k),
                   reinterpret_cast<const float*>(src), true);
    }
    // 16 bytes per copy: src, dst and len are multiples of 4 words (subband_schedule.cpp), the
    // series buffer 256-byte aligned (cudaMalloc), t0 a multiple of 256.
    for (int r = st.row_lo + warp; r < st.row_hi; r += NW) {
      const SubbandGroupRow w = a.rows[r];
      const float* __restrict__ src = a.series + w.src + t0;
      float* dst = rows + w.dst;
      const std::int64_t lim = w.limit - t0;  // words of the row left from src on
      for (int x = 4 * lane; x < w.len; x += 128) {
        const std::int64_t left = lim - x;
        const int bytes = left >= 4 ? 16 : left > 0 ? 4 * static_cast<int>(left) : 0;
        cp_async_f32x4(dst + x, bytes > 0 ? src + x : a.series, bytes);
      }
    }
    cp_async_wait_all();
    __syncthreads();
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
      const int trial = warp + u * NW;  // warp-uniform
      if (trial >= nd) break;
      const int* off = s_off + trial * MS;
#pragma unroll 4
      for (int k = 0; k < cc; ++k) {
        const float* p = rows + off[k] + lane;
#pragma unroll
        for (int e = 0; e < K; ++e)
          acc[u][e] += p[32 * e];
      }
    }
  }

#pragma unroll
  for (int u = 0; u < TPW; ++u) {
    const int trial = warp + u * NW;
    if (trial >= nd) break;
    const std::int64_t out_row = static_cast<std::int64_t>(first + trial) * a.nsamples_out;
#pragma unroll
    for (int e = 0; e < K; ++e) {
      const std::int64_t t = t0 + lane + 32 * e;
      if (t < a.nsamples_out) store_output(a.out, out_row + t, acc[u][e]);
    }
  }
}

}  // namespace

void launch_subband_group(const SubbandGroupArgs& a, const Stream* stream) {
  if (a.ntiles <= 0 || a.nsamples_out <= 0) return;
  cudaStream_t s = WB_STREAM(stream);
  ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(subband_group_kernel),
                                         a.smem_bytes);
  const std::int64_t ntime = (a.nsamples_out + BT - 1) / BT;
  const auto blocks = static_cast<unsigned>(ntime * a.ntiles);
  subband_group_kernel<<<blocks, 32 * a.warps, a.smem_bytes, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::dedisp::detail
