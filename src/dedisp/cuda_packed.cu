// The packed CUDA kernel: the tiled (ARTEMIS) scheme of cuda_tiled.cu with exact integer
// arithmetic for nbits <= 8, the default for such inputs.
//
// Why. In the tiled kernel every (DM, channel, sample) costs one shared-memory load and one fp32
// add; shared-memory loads issue at 32 per clock per SM against 128 fp32 adds, so it is bound at
// a quarter of the add rate. Here two neighbouring output samples share one 32-bit word: each
// staged word holds two consecutive input samples in 16-bit lanes, and one 32-bit integer add
// accumulates both (no carry can cross lanes while a lane holds at most 256 codes of <= 255:
// 65280 <= 65535). So each load and each add serve two samples: the bound doubles, to half the
// fp32 add rate (64 sample-adds per clock per SM), and the sums stay exact integers. Every
// kPackedFlushChannels channels the lanes are flushed into 32-bit accumulators.
//
// Shared memory. For channel j of a stage the block stages its input span s[0..] (samples from
// t0 + D(d0, k), see tile_geometry.hpp) twice, as pair words
//   E[m] = s[2m] | s[2m+1] << 16    and    O[m] = s[2m+1] | s[2m+2] << 16,
// so the pair (s[x], s[x+1]) is E[x/2] for even x and O[x/2] for odd x: aligned 32-bit words
// for any delay, no byte shuffles in the inner loop. A warp lies along time and shares its DM,
// hence one shift per warp: lane l reads word base + l (+ TX per register pair), 32 consecutive
// words, no bank conflict. Signed codes are stored offset by 2^(nbits-1) (x ^ 2^(nbits-1)), so
// every lane value is in [0, 2^nbits); the offset times the channel count is removed at the end.
//
// Per stage of CC channels: every warp stages whole channels (per 4 samples: two aligned global
// loads, a funnel shift, four byte permutes, two 64-bit shared stores), __syncthreads, then per
// channel one broadcast load of the warp's row offset and K/2 (shared load, integer add) pairs.
//
// What bounds it: shared-memory load issue, (K/2 + 1) loads per K sample-adds, i.e. ~57
// sample-adds per clock per SM at K = 16 (45 % of the fp32 add rate); then instruction issue,
// since the staging costs ~6 instructions per staged sample, each staged sample serving BD DMs:
// ~(BT + span) / (BD * BT) * 6 per sample-add (D1 at 16 DMs x 512 samples: ~0.45). Registers:
// 58 at K = 16 (two 512-thread blocks per SM).
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"
#include "dedisp/tile_geometry.hpp"

namespace warpbeam::dedisp::detail {
namespace {

template <int K, int TX>
__global__ void __launch_bounds__(K >= 32 ? 512 : 1024) packed_kernel(const TileArgs a) {
  static_assert(K == 8 || K == 16 || K == 32, "samples per thread: 8, 16 or 32");
  static_assert(TX == 32 || TX == 64, "whole warps along time: the shift is warp-uniform");
  static_assert(kPackedFlushChannels * 255 <= 65535, "a 16-bit lane must not overflow");
  constexpr int BT = TX * K;  // output samples per block
  constexpr int P = K / 2;    // pair words (registers) per thread

  extern __shared__ __align__(16) std::uint32_t smem[];
  const int R = a.row_words;   // even: 8-byte aligned rows
  std::uint32_t* rows = smem;  // [cc][2][R]: channel j's E row, then its O row
  int* s_off =
      reinterpret_cast<int*>(smem + static_cast<std::size_t>(a.channels_per_stage) * 2 * R);

  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);  // TX * BD
  const int lane_t = tid % TX;                        // along time
  const int g = tid / TX;                             // DM within the tile (warp-uniform)
  const int dm_tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(a.ndm_tiles));
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x / a.ndm_tiles) * BT;
  const int bd = a.dms_per_block;
  const int d0 = dm_tile * bd;
  const int nd = min(bd, a.ndm - d0);  // valid DMs of this tile
  const int gc = min(g, nd - 1);       // surplus threads of a partial tile compute a copy
  const int nused = a.nused;
  const std::int32_t* __restrict__ base = a.base + static_cast<std::size_t>(dm_tile) * nused;
  const std::int32_t* __restrict__ span = a.span + static_cast<std::size_t>(dm_tile) * nused;
  const std::int32_t* __restrict__ delays = a.delays;
  const auto* __restrict__ codes = static_cast<const std::uint8_t*>(a.scratch);
  const std::int64_t stride_words = a.stride / 4;
  const std::uint32_t flip = a.sign_flip;
  const int warp = tid / 32, lane = tid % 32, nwarps = nthreads / 32;

  std::uint32_t lanes[P];
  std::uint32_t acc[K];
#pragma unroll
  for (int i = 0; i < P; ++i)
    lanes[i] = 0;
#pragma unroll
  for (int i = 0; i < K; ++i)
    acc[i] = 0;

  int since_flush = 0;
  for (int k0 = 0; k0 < nused; k0 += a.channels_per_stage) {
    const int cc = min(a.channels_per_stage, nused - k0);
    __syncthreads();  // the previous stage's rows are no longer read

    // Row offset of every (channel, DM) of the stage, E or O row by the shift's parity: each
    // warp-row g fills its own DM's entries (no division).
    for (int j = lane_t; j < cc; j += TX) {
      const int rel = delays[static_cast<std::size_t>(d0 + gc) * nused + k0 + j] - base[k0 + j];
      s_off[j * bd + g] = j * 2 * R + (rel & 1) * R + (rel >> 1);
    }
    // Stage rows: warp w stages channels w, w + nwarps, ... (the automatic channels per stage
    // is a multiple of the warps); lane l the groups q = l, l + 32, ... of 4 samples. Channel j
    // needs pair words m < m_end = span/2 + BT/2 (see TileGeometry::row_words): q < m_end/2.
    for (int j = warp; j < cc; j += nwarps) {
      const int k = k0 + j;
      const int groups = ((span[k] >> 1) + BT / 2 + 1) / 2;
      const auto* row32 =
          reinterpret_cast<const std::uint32_t*>(codes + static_cast<std::int64_t>(k) * a.stride);
      // 2q + 1 < R (R is even and >= m_end): both pairs of words stay inside the row.
      stage_pair_rows(row32, stride_words, t0 + base[k], groups, flip,
                      rows + static_cast<std::size_t>(j) * 2 * R, R, lane, 32);
    }
    __syncthreads();

    // Accumulate: thread (g, lane_t) holds the pairs p = lane_t + i*TX, i.e. output samples
    // t0 + 2p and t0 + 2p + 1 of DM d0 + g. The word it reads is at most
    // span/2 + BT/2 - 1 < m_end into its row: always staged above.
    const int* off = s_off + gc;
#pragma unroll 2
    for (int j = 0; j < cc; ++j) {
      const std::uint32_t* p = rows + off[j * bd] + lane_t;
#pragma unroll
      for (int i = 0; i < P; ++i)
        lanes[i] += p[i * TX];
    }
    if (++since_flush == a.stages_per_flush || k0 + a.channels_per_stage >= nused) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        acc[2 * i] += lanes[i] & 0xFFFFu;
        acc[2 * i + 1] += lanes[i] >> 16;
        lanes[i] = 0;
      }
      since_flush = 0;
    }
  }

  if (g >= nd) return;
  // acc <= 255 * nused < 2^31; the difference is an exact integer, one rounding to float.
  const int offset = static_cast<int>(flip) * nused;
  const std::int64_t out_row = static_cast<std::int64_t>(d0 + g) * a.nsamples_out;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const std::int64_t t = t0 + 2 * (lane_t + i * TX);
    if (t < a.nsamples_out)
      store_output(a.out, out_row + t, static_cast<float>(static_cast<int>(acc[2 * i]) - offset));
    if (t + 1 < a.nsamples_out)
      store_output(a.out, out_row + t + 1,
                   static_cast<float>(static_cast<int>(acc[2 * i + 1]) - offset));
  }
}

template <int K, int TX>
void launch(const TileArgs& a, cudaStream_t s) {
  auto* kernel = packed_kernel<K, TX>;
  ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), a.smem_bytes);
  const auto blocks = static_cast<unsigned>(static_cast<std::int64_t>(a.ndm_tiles) * a.ntime_tiles);
  const auto threads = static_cast<unsigned>(a.lanes * a.dms_per_block);
  kernel<<<blocks, threads, a.smem_bytes, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_packed(const TileArgs& a, const Stream* stream) {
  cudaStream_t s = WB_STREAM(stream);
  const int key = a.samples_per_thread * 1000 + a.lanes;
  switch (key) {
    case 8032:
      return launch<8, 32>(a, s);
    case 8064:
      return launch<8, 64>(a, s);
    case 16032:
      return launch<16, 32>(a, s);
    case 16064:
      return launch<16, 64>(a, s);
    case 32032:
      return launch<32, 32>(a, s);
    case 32064:
      return launch<32, 64>(a, s);
    default:
      fail(ErrorCategory::invalid_argument,
           "packed kernel: no instance for " + std::to_string(a.samples_per_thread) +
               " samples per thread x " + std::to_string(a.lanes) + " lanes");
  }
}

}  // namespace warpbeam::dedisp::detail
