// The tiled CUDA kernel: the ARTEMIS scheme (Armour et al. 2012, "A GPU-based survey for
// millisecond radio transients using ARTEMIS") with float32 sums, for every nbits.
//
// The work is a sum over channels of shifted rows: out[d][t] = sum_k x[k][t + D(d, k)]. The
// direct kernel reloads and unpacks x for every DM; here
//  - the input is corner-turned once into [channel][time] rows (cuda_transpose.cu), so a
//    channel's samples are contiguous;
//  - a block covers a rectangle of BD DM trials x BT = TX * K output samples; for each stage of
//    CC channels it stages, per channel, the one contiguous input span all its DMs need (BT plus
//    the channel's delay spread across the BD DMs) into shared memory, unpacked to float32
//    there (the int->float conversion runs once per staged sample, not once per DM);
//  - each thread keeps K output samples of one DM in registers (samples lane + i * TX) and adds
//    one staged row per channel: K shared loads and K fp32 adds, with one broadcast load of the
//    row offset per channel. A warp lies along time, so its 32 lanes read 32 consecutive words
//    (no bank conflict) at a shift that is uniform over the warp.
// What bounds it: one shared-memory load per add (32 loads vs 128 fp32 adds per clock per SM),
// so at best a quarter of the add rate; the staging costs ~(BT + span) / (BD * BT) of a load
// per add. The packed kernel (cuda_packed.cu) halves the loads for nbits <= 8.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"

namespace warpbeam::dedisp::detail {
namespace {

// Four consecutive staged samples s[4q .. 4q+3] of a row as float32 values.
// uint8 codes: signed when flip = 2^(nbits-1) != 0 (two's complement of nbits).
__device__ __forceinline__ float4 load4(const std::uint8_t* __restrict__ codes, std::int64_t stride,
                                        std::int64_t s0, std::uint32_t flip) {
  std::uint32_t lo, hi;
  load_code_window(reinterpret_cast<const std::uint32_t*>(codes), stride / 4, s0, lo, hi);
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const std::uint32_t b = (lo >> (8 * e)) & 0xFFu;
    v[e] = static_cast<float>(static_cast<int>(b) - static_cast<int>((b & flip) << 1));
  }
  return make_float4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ float4 load4(const float* __restrict__ values, std::int64_t stride,
                                        std::int64_t s0, std::uint32_t) {
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    v[e] = s0 + e < stride ? __ldg(values + s0 + e) : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

template <class Code, int K, int TX>
__global__ void __launch_bounds__(K >= 32 ? 512 : 1024) tiled_kernel(const TileArgs a) {
  static_assert(K == 8 || K == 16 || K == 32, "samples per thread: 8, 16 or 32");
  static_assert(TX == 32 || TX == 64, "whole warps along time: the shift is warp-uniform");
  constexpr int BT = TX * K;

  extern __shared__ __align__(16) float smemf[];
  const int R = a.row_words;  // a multiple of 4: 16-byte aligned rows
  float* rows = smemf;        // [cc][R]
  int* s_off = reinterpret_cast<int*>(smemf + static_cast<std::size_t>(a.channels_per_stage) * R);

  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int lane_t = tid % TX;
  const int g = tid / TX;
  const int dm_tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(a.ndm_tiles));
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x / a.ndm_tiles) * BT;
  const int bd = a.dms_per_block;
  const int d0 = dm_tile * bd;
  const int nd = min(bd, a.ndm - d0);
  const int gc = min(g, nd - 1);
  const int nused = a.nused;
  const std::int32_t* __restrict__ base = a.base + static_cast<std::size_t>(dm_tile) * nused;
  const std::int32_t* __restrict__ span = a.span + static_cast<std::size_t>(dm_tile) * nused;
  const std::int32_t* __restrict__ delays = a.delays;
  const Code* __restrict__ scratch = static_cast<const Code*>(a.scratch);
  const int warp = tid / 32, lane = tid % 32, nwarps = nthreads / 32;

  float acc[K];
#pragma unroll
  for (int i = 0; i < K; ++i)
    acc[i] = 0.0f;

  for (int k0 = 0; k0 < nused; k0 += a.channels_per_stage) {
    const int cc = min(a.channels_per_stage, nused - k0);
    __syncthreads();  // the previous stage's rows are no longer read

    // Row offset of every (channel, DM): each warp-row g fills its own DM's entries.
    for (int j = lane_t; j < cc; j += TX)
      s_off[j * bd + g] =
          j * R + delays[static_cast<std::size_t>(d0 + gc) * nused + k0 + j] - base[k0 + j];
    // Stage rows: warp w stages channels w, w + nwarps, ...; lane l the groups q = l, l + 32,
    // ... of 4 samples. Channel j needs samples x < span + BT: q < (span + BT + 3) / 4, and
    // 4q + 3 < R (R is a multiple of 4 and >= max span + BT).
    for (int j = warp; j < cc; j += nwarps) {
      const int k = k0 + j;
      const int groups = (span[k] + BT + 3) / 4;
      const std::int64_t first = t0 + base[k];
      const Code* row = scratch + static_cast<std::int64_t>(k) * a.stride;
      auto* dst = reinterpret_cast<float4*>(rows + static_cast<std::size_t>(j) * R);
#pragma unroll 2
      for (int q = lane; q < groups; q += 32)
        dst[q] = load4(row, a.stride, first + 4 * static_cast<std::int64_t>(q), a.sign_flip);
    }
    __syncthreads();

    // Thread (g, lane_t) holds samples t0 + lane_t + i*TX of DM d0 + g; it reads row words
    // rel + lane_t + i*TX <= span + BT - 1: staged above.
    const int* off = s_off + gc;
#pragma unroll 2
    for (int j = 0; j < cc; ++j) {
      const float* p = rows + off[j * bd] + lane_t;
#pragma unroll
      for (int i = 0; i < K; ++i)
        acc[i] += p[i * TX];
    }
  }

  if (g >= nd) return;
  const std::int64_t out_row = static_cast<std::int64_t>(d0 + g) * a.nsamples_out;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const std::int64_t t = t0 + lane_t + i * TX;
    if (t < a.nsamples_out) store_output(a.out, out_row + t, acc[i]);
  }
}

template <class Code, int K, int TX>
void launch(const TileArgs& a, cudaStream_t s) {
  auto* kernel = tiled_kernel<Code, K, TX>;
  ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), a.smem_bytes);
  const auto blocks = static_cast<unsigned>(static_cast<std::int64_t>(a.ndm_tiles) * a.ntime_tiles);
  const auto threads = static_cast<unsigned>(a.lanes * a.dms_per_block);
  kernel<<<blocks, threads, a.smem_bytes, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

template <class Code>
void launch_code(const TileArgs& a, cudaStream_t s) {
  switch (a.samples_per_thread * 1000 + a.lanes) {
    case 8032:
      return launch<Code, 8, 32>(a, s);
    case 8064:
      return launch<Code, 8, 64>(a, s);
    case 16032:
      return launch<Code, 16, 32>(a, s);
    case 16064:
      return launch<Code, 16, 64>(a, s);
    case 32032:
      return launch<Code, 32, 32>(a, s);
    case 32064:
      return launch<Code, 32, 64>(a, s);
    default:
      fail(ErrorCategory::invalid_argument,
           "tiled kernel: no instance for " + std::to_string(a.samples_per_thread) +
               " samples per thread x " + std::to_string(a.lanes) + " lanes");
  }
}

}  // namespace

void launch_tiled(const TileArgs& a, const Stream* stream) {
  cudaStream_t s = WB_STREAM(stream);
  if (a.float_codes)
    launch_code<float>(a, s);
  else
    launch_code<std::uint8_t>(a, s);
}

}  // namespace warpbeam::dedisp::detail
