// Stage 2 of the CUDA sub-band method (stage 1 is the tiled or packed kernel run on each
// sub-band's channels: cuda_subband.cpp).
//
// out[i][t] = sum_s S(q(i, s), s)[t + shift[i][s]]: a brute-force sum over sub-bands whose rows
// depend on the fine trial only through the coarse DM of its group and a phase. So a block takes
// up to 8 fine trials of one group (one warp each, lanes along time, 8 samples per thread in
// registers) and 256 output samples; per stage of CC sub-bands it stages, for each sub-band and
// each phase the group uses, the one window all its trials read,
// [t0 + min_shift, t0 + 256 + max_shift), in shared memory (coalesced global loads, read once
// per block instead of once per trial), then every warp adds its trial's window at its shift:
// one broadcast offset load and 8 (shared load, add) pairs per sub-band, 32 consecutive words
// per warp (no bank conflict). Bound: shared-memory load issue (one load per add, as the tiled
// kernel), plus the staging, (256 + span) / (trials per block x 256) loads per add.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"
#include "dedisp/cuda_methods.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int K = kSubbandSamplesPerThread;
constexpr int BD = kSubbandTrialsPerBlock;
constexpr int BT = kSubbandBlockSamples;

__global__ void __launch_bounds__(32 * BD) subband_stage2_kernel(const SubbandStage2Args a) {
  extern __shared__ __align__(16) float smem[];
  const int R = a.row_words;
  const int CC = a.subbands_per_stage;
  const int MP = a.max_phases;
  float* rows = smem;                                                                 // [CC][MP][R]
  int* s_off = reinterpret_cast<int*>(smem + static_cast<std::size_t>(CC) * MP * R);  // [BD][CC]

  const int tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(a.ntiles));
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x / a.ntiles) * BT;
  const int j = a.tile_coarse[tile];
  const int nd = a.tile_count[tile];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i = a.tile_first[tile] + min(warp, nd - 1);  // surplus warps compute a copy
  const int q0 = a.phase_begin[j];
  const int np = a.phase_begin[j + 1] - q0;
  const int nsub = a.nsub;

  float acc[K];
#pragma unroll
  for (int e = 0; e < K; ++e)
    acc[e] = 0.0f;

  for (int s0 = 0; s0 < nsub; s0 += CC) {
    const int cc = min(CC, nsub - s0);
    __syncthreads();  // the previous stage's rows are no longer read
    // Each warp's own offsets: the row of its trial's phase, at its shift.
    for (int k = lane; k < cc; k += 32) {
      const int s = s0 + k;
      const int p = a.phase[static_cast<std::size_t>(i) * nsub + s];
      const std::size_t qs = static_cast<std::size_t>(q0 + p) * nsub + s;
      s_off[warp * CC + k] =
          (k * MP + p) * R + a.shift[static_cast<std::size_t>(i) * nsub + s] - a.min_shift[qs];
    }
    // Stage: warp w stages rows w, w + BD, ... of the cc x np used rows.
    for (int w = warp; w < cc * np; w += BD) {
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
        dst[x] = idx < row_len ? __ldg(src + idx) : 0.0f;
      }
    }
    __syncthreads();
    const int* off = s_off + warp * CC;
#pragma unroll 4
    for (int k = 0; k < cc; ++k) {
      const float* p = rows + off[k] + lane;
#pragma unroll
      for (int e = 0; e < K; ++e)
        acc[e] += p[32 * e];
    }
  }

  if (warp >= nd) return;
  const std::int64_t out_row = static_cast<std::int64_t>(i) * a.nsamples_out;
#pragma unroll
  for (int e = 0; e < K; ++e) {
    const std::int64_t t = t0 + lane + 32 * e;
    if (t < a.nsamples_out) store_output(a.out, out_row + t, acc[e]);
  }
}

}  // namespace

void launch_subband_stage2(const SubbandStage2Args& a, const Stream* stream) {
  if (a.ntiles <= 0 || a.nsamples_out <= 0) return;
  cudaStream_t s = WB_STREAM(stream);
  ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(subband_stage2_kernel),
                                         a.smem_bytes);
  const std::int64_t ntime = (a.nsamples_out + BT - 1) / BT;
  const auto blocks = static_cast<unsigned>(ntime * a.ntiles);
  subband_stage2_kernel<<<blocks, 32 * BD, a.smem_bytes, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::dedisp::detail
