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
// Here a block takes up to kSubbandGroupTrials = 32 trials of one group (D1: the whole group, so
// each row is staged once per time tile) on 16 warps; warp w accumulates trials w and w + 16
// (2 x 8 samples per lane in registers: 16 accumulators); a warp with no trial left only stages.
// Per stage of CC sub-bands: stage each used row's window [t0 + min_shift, + 256 + span) in
// shared memory (coalesced cp.async copies by all 16 warps, issued back to back, then one wait:
// plain loads made each lane wait for each load before its store), then every warp adds, per trial
// and sub-band, one broadcast offset load and 8 (shared load, fp32 add) pairs, 32 consecutive words
// per warp (no bank conflict).
//
// Occupancy: two blocks per SM (32 warps, 50 %; __launch_bounds__ keeps the registers within
// 64 per thread, shared memory ~92 KB per block): the first kernel ran at 25 % (2 blocks of 8
// warps) with 0.41 eligible warps per scheduler, latency-bound (ncu, 2026-12-02).
//
// Expected rate. Bound by shared-memory load issue: one 4-byte load per addition, 32 per clock
// per SM, i.e. 8.4e12 additions/s on an H200 (132 SMs x 1.98 GHz): the same per-load rate as the
// packed brute-force kernel, which does two additions per load (8.3e12 additions/s measured).
// The staging adds phases x (256 + span) / (trials x 256) global loads per addition: D1, ~17
// trials, 1-2 phases, span ~100-500: 0.05-0.25. D1's stage 2 is 1122 x 64 x 1.03e6 = 7.4e10
// additions: at ~60 % of the bound, ~15 ms (from ~90 ms), stage 1 unchanged (~28 ms).
// Measured (H200, 2026-12-02, 2^18 samples): 8.04 ms against the first kernel's 22.95 ms, i.e.
// 2.3e12 additions/s, 28 % of the bound (0.99 eligible warps per scheduler: still latency-bound
// on the staging); the whole D1 sub-band run 62 ms (from 120 ms). docs/PERFORMANCE.md.
// With cp.async (2026-12-03, run s17-b): 6.49 ms, 1.50 eligible warps per scheduler. Tried and
// dropped in runs s17-c/d: the rows' windows computed by all threads per stage (7.1 ms: one more
// barrier per stage), and half-trial work units so that a group of 17 trials spreads evenly over
// the 16 warps (whole D1 38.0 ms against 36.8 ms with whole trials, same run s17-e: more
// instructions per addition, 4 samples per offset load instead of 8).
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"
#include "dedisp/cuda_methods.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int K = kSubbandSamplesPerThread;
constexpr int NW = kSubbandGroupWarps;
constexpr int TPW = kSubbandGroupTrials / kSubbandGroupWarps;  // trials per warp
constexpr int BT = kSubbandBlockSamples;
static_assert(kSubbandGroupTrials % kSubbandGroupWarps == 0, "whole trials per warp");

__global__ void __launch_bounds__(32 * NW, 2) subband_group_kernel(const SubbandStage2Args a) {
  extern __shared__ __align__(16) float smem[];
  const int R = a.row_words;
  const int CC = a.subbands_per_stage;
  const int MP = a.max_phases;
  float* rows = smem;  // [CC][MP][R]
  // [kSubbandGroupTrials][CC]
  int* s_off = reinterpret_cast<int*>(smem + static_cast<std::size_t>(CC) * MP * R);

  const int tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(a.ntiles));
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x / a.ntiles) * BT;
  const int j = a.tile_coarse[tile];
  const int first = a.tile_first[tile];
  const int nd = a.tile_count[tile];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int q0 = a.phase_begin[j];
  const int np = a.phase_begin[j + 1] - q0;
  const int nsub = a.nsub;

  float acc[TPW][K];
#pragma unroll
  for (int u = 0; u < TPW; ++u)
#pragma unroll
    for (int e = 0; e < K; ++e)
      acc[u][e] = 0.0f;

  for (int s0 = 0; s0 < nsub; s0 += CC) {
    const int cc = min(CC, nsub - s0);
    __syncthreads();  // the previous stage's rows and offsets are no longer read
    // Offsets of every (trial, sub-band) of the stage into the staged rows.
    for (int x = static_cast<int>(threadIdx.x); x < nd * cc; x += 32 * NW) {
      const int u = x / cc, k = x % cc, s = s0 + k;
      const std::size_t is = static_cast<std::size_t>(first + u) * nsub + s;
      const int p = a.phase[is];
      const std::size_t qs = static_cast<std::size_t>(q0 + p) * nsub + s;
      s_off[u * CC + k] = (k * MP + p) * R + a.shift[is] - a.min_shift[qs];
    }
    // Stage: warp w stages rows w, w + NW, ... of the cc x np rows (unused ones skipped).
    for (int w = warp; w < cc * np; w += NW) {
      const int k = w / np, p = w % np, s = s0 + k;
      const std::size_t qs = static_cast<std::size_t>(q0 + p) * nsub + s;
      if (!a.used[qs]) continue;
      const std::int64_t lo = a.min_shift[qs];
      const int len = BT + a.max_shift[qs] - static_cast<int>(lo);
      const std::int64_t row_len = a.sub_len[s];
      const float* __restrict__ src =
          a.series + a.sub_offset[s] + static_cast<std::int64_t>(q0 + p) * row_len;
      float* dst = rows + static_cast<std::size_t>(k * MP + p) * R;
      for (int x = lane; x < len; x += 32) {
        const std::int64_t idx = t0 + lo + x;
        cp_async_f32(dst + x, idx < row_len ? src + idx : src, idx < row_len);
      }
    }
    cp_async_wait_all();
    __syncthreads();
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
      const int trial = warp + u * NW;  // warp-uniform
      if (trial >= nd) break;
      const int* off = s_off + trial * CC;
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

void launch_subband_group(const SubbandStage2Args& a, const Stream* stream) {
  if (a.ntiles <= 0 || a.nsamples_out <= 0) return;
  cudaStream_t s = WB_STREAM(stream);
  ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(subband_group_kernel),
                                         a.smem_bytes);
  const std::int64_t ntime = (a.nsamples_out + BT - 1) / BT;
  const auto blocks = static_cast<unsigned>(ntime * a.ntiles);
  subband_group_kernel<<<blocks, 32 * NW, a.smem_bytes, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::dedisp::detail
