// CUDA beamformer, fp32 on CUDA cores: "register-stream" (round 2).
//
// Why a second fp32 kernel. Round 1's register-tiled kernel (cuda_register_tiled.cu) ran B1 (32
// antennas, 32 beams, 1024 ch, 8192 samples, ci4) at 5.10 ms = 23 % of the measured fp32 FMA rate.
// What bound it, estimated for its best tuning (16 beams x 2 samples, 256 threads, 124 registers
// and 86 KB of shared memory per block -> 2 blocks = 16 warps per SM):
//  - staging, not FMAs: per group of 16 antennas a block loads 16 KB of weights and 16 KB of
//    voltages through grid-stride loops (8 + 8 dependent global-load round trips per thread, index
//    math with runtime divisions), between two __syncthreads. B1 has only 2 groups per block,
//    and with 2 blocks per SM the FMA pipes idle through most of these phases: 16 warps x 4096
//    FMAs per block-group take ~16 k cycles per SM, the staging ~10-20 k cycles of latency.
//  - weights re-read from L2 by every block (32 KB per 64 samples x 8 channels: 1.07 GB for B1,
//    4x the input).
//  - not the output store: a warp writes 8 channels x 4 time rows = 4 whole 32-byte sectors per
//    instruction, 1.07 GB in 33.5 M sectors, ~0.3 ms at the copy bandwidth.
//
// This kernel removes the staging from the time loop:
//  - a block is 8 warps = 8 channels; lane l of warp w handles samples t0 + l + 32 j (j < TPT)
//    of channel c0 + w and BPT beams. Its voltages come straight from global memory: a warp reads
//    32 consecutive rows of [chan][time][antenna][pol] (one contiguous run, 16-byte loads),
//    32 bytes per sample per antenna chunk, prefetched one chunk ahead and decoded in registers
//    (ci4/ci8 through a level table in shared memory: 16 entries for ci4, so the 32 lanes' lookups
//    hit distinct banks or broadcast).
//  - the weights of the block's 8 channels x BPT beams x all antennas (64 KB for B1, BPT 32) are
//    loaded once: a block covers a long run of samples (chunk_len, ~8 waves of blocks in all).
//    They are read as LDS.128 of two beams, the same address for the whole warp (a broadcast):
//    per antenna and sample, BPT / 2 LDS + 4 BPT FFMA (16 + 128 for BPT 32).
//  - the output goes through shared memory: each thread writes its |v|^2 (or v) to a
//    [beam][chan][time] tile; after each tile of 32 TPT samples, thread (beam, chan) sums its
//    samples into output bins in time order (an integration that crosses tiles carries in a
//    register; a block's run is a multiple of the integration) and stores rows of 8 channels of
//    [beam][pol][time][chan] (whole 32-byte sectors). Both pols of a summed output are added in
//    the tile in a fixed order. No atomics: results are bitwise reproducible.
// Prediction for B1 (BPT 32, TPT 1): issue share of FFMA 128 / (128 + 16 LDS.128 + 2 LDS +
// ~6 integer) = 84 %; shared-memory wavefronts ~50 % of the SM's bandwidth; registers ~110 and
// 99 KB of shared memory -> 2 blocks (16 warps) per SM. Expect 60-75 % of the FMA rate, i.e.
// 1.5-1.9 ms (floor 1.15 ms), against 5.1 ms for register-tiled.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>

#include "beamform/cuda_common.cuh"
#include "beamform/executor.hpp"
#include "core/cuda_check.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform::detail {
namespace {

constexpr int kWarps = 8;  // warps per block = channels per block (32-byte output rows)
constexpr int kThreads = 32 * kWarps;
constexpr int kChunkBytes = 32;                   // raw bytes of a row a thread holds per chunk
constexpr std::size_t kWeightBudget = 64 * 1024;  // shared-memory bytes for the weight window

struct Params : ShapeParams {
  int npol_inner;
  bool voltage;
  int load_mode;  // 2: 16-byte vector loads, 1: 4-byte words, 0: bytes (row alignment)
  int nchan_tiles;
  std::int64_t chunk_len;  // samples per block: a multiple of the tile and of the integration
  int wa;                  // antennas per weight window (a multiple of the chunk's antennas)
};

/// The 32 raw bytes of row (c, t) starting at byte0 (zero past the end of the row, or when
/// !valid).
__device__ __forceinline__ void load_row(unsigned (&r)[8], const std::uint8_t* __restrict__ in,
                                         const Params& p, int c, std::int64_t t, int byte0,
                                         bool valid) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
    r[i] = 0u;
  if (!valid) return;
  const std::uint8_t* src =
      in + (static_cast<std::int64_t>(c) * p.nsamples + t) * p.row_bytes + byte0;
  const std::int64_t left = p.row_bytes - byte0;
  if (p.load_mode == 2 && left >= kChunkBytes) {
    const uint4 v0 = __ldg(reinterpret_cast<const uint4*>(src));
    const uint4 v1 = __ldg(reinterpret_cast<const uint4*>(src) + 1);
    r[0] = v0.x, r[1] = v0.y, r[2] = v0.z, r[3] = v0.w;
    r[4] = v1.x, r[5] = v1.y, r[6] = v1.z, r[7] = v1.w;
  } else if (p.load_mode >= 1) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (4 * i < left) r[i] = __ldg(reinterpret_cast<const unsigned*>(src) + i);
  } else {
#pragma unroll
    for (int i = 0; i < kChunkBytes; ++i)
      if (i < left) r[i / 4] |= static_cast<unsigned>(__ldg(src + i)) << (8 * (i % 4));
  }
}

/// Antenna k (a compile-time constant once the caller's loop is unrolled) of pol `pol` from the
/// chunk's raw words. Layout of a row: [antenna][pol] elements of kBytesPerComplex<D> bytes.
template <int D, int NP>
__device__ __forceinline__ float2 decode(const unsigned (&r)[8], int k, int pol, const float* lv) {
  if constexpr (D == kCi4) {
    // Element e = k NP + pol is byte e: word e / 4, shift 8 (e % 4).
    unsigned byte;
    if constexpr (NP == 1)
      byte = (r[k / 4] >> (8 * (k % 4))) & 0xFFu;
    else
      byte = (r[k / 2] >> (16 * (k % 2) + 8 * pol)) & 0xFFu;
    return make_float2(lv[byte >> 4], lv[byte & 0xFu]);
  } else if constexpr (D == kCi8) {
    unsigned v;
    if constexpr (NP == 1)
      v = r[k / 2] >> (16 * (k % 2));
    else
      v = r[k] >> (16 * pol);
    return make_float2(lv[v & 0xFFu], lv[(v >> 8) & 0xFFu]);
  } else if constexpr (D == kCf16) {
    unsigned w;
    if constexpr (NP == 1)
      w = r[k];
    else
      w = pol ? r[2 * k + 1] : r[2 * k];
    __half2 h;
    *reinterpret_cast<unsigned*>(&h) = w;
    return __half22float2(h);
  } else {
    if constexpr (NP == 1) {
      return make_float2(__uint_as_float(r[2 * k]), __uint_as_float(r[2 * k + 1]));
    } else {
      const int i = 4 * k;
      return pol ? make_float2(__uint_as_float(r[i + 2]), __uint_as_float(r[i + 3]))
                 : make_float2(__uint_as_float(r[i]), __uint_as_float(r[i + 1]));
    }
  }
}

/// acc += w x (complex), 4 FMAs.
__device__ __forceinline__ void cmac(float2& acc, float wr, float wi, float2 x) {
  acc.x = fmaf(wr, x.x, acc.x);
  acc.x = fmaf(-wi, x.y, acc.x);
  acc.y = fmaf(wr, x.y, acc.y);
  acc.y = fmaf(wi, x.x, acc.y);
}

template <int D, int NP, int BPT, int TPT>
__global__ void __launch_bounds__(kThreads, 2)
    stream_kernel(const std::uint8_t* __restrict__ in, const float2* __restrict__ wdev,
                  const float* __restrict__ levels, Params p, float* __restrict__ out) {
  constexpr int kBpc = kBytesPerComplex<D>;
  constexpr int kAnt = kChunkBytes / (NP * kBpc);  // antennas per raw chunk
  constexpr int TT = 32 * TPT;                     // samples per tile
  constexpr int kStride = TT + 1;                  // padded tile row: conflict-free both ways
  constexpr int kLevels = D == kCi4 ? 16 : (D == kCi8 ? 256 : 0);
  static_assert(BPT % 2 == 0 && BPT * kWarps <= kThreads, "one storing thread per beam x chan");
  extern __shared__ float4 smem_raw[];
  const int npi = p.npol_inner;
  float2* ws = reinterpret_cast<float2*>(smem_raw);  // [kWarps][npi][wa][BPT]
  float* tile = reinterpret_cast<float*>(ws + static_cast<std::size_t>(kWarps) * npi * p.wa *
                                                  BPT);             // [BPT][kWarps][kStride] (x2)
  float* lv = tile + BPT * kWarps * kStride * (p.voltage ? 2 : 1);  // [kLevels]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ctile = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.nchan_tiles));
  const std::int64_t tb =
      static_cast<std::int64_t>(blockIdx.x / static_cast<unsigned>(p.nchan_tiles)) * p.chunk_len;
  const std::int64_t te = min(tb + p.chunk_len, p.nsamples);
  const int c0 = ctile * kWarps, c = c0 + warp;
  const bool cvalid = c < p.nchans;
  const int pol_outer = blockIdx.y;
  const int b0 = blockIdx.z * BPT;

  for (int i = threadIdx.x; i < kLevels; i += kThreads)
    lv[i] = levels[i];

  // Weights of antennas [aw0, aw0 + wa) for the block's channels, inner pols and beams; zero
  // outside the data (so partial chunks and beam groups need no branches in the FMA loop).
  auto load_window = [&](int aw0) {
    const int n = kWarps * npi * p.wa * BPT;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const int b = i % BPT, a = (i / BPT) % p.wa, r = i / (BPT * p.wa);
      const int pi = r % npi, cl = r / npi;
      const int pol = npi == 2 ? pi : pol_outer;
      float2 w = make_float2(0.f, 0.f);
      if (c0 + cl < p.nchans && aw0 + a < p.nant && b0 + b < p.nbeams)
        w = wdev[((static_cast<std::int64_t>(c0 + cl) * p.npol + pol) * p.nant + aw0 + a) *
                     p.nbeams +
                 b0 + b];
      ws[i] = w;
    }
  };
  const bool resident = p.wa >= p.nant;
  if (resident) load_window(0);
  __syncthreads();

  // The storing thread (beam sb, channel sc) and its running output bin.
  const int sb = threadIdx.x / kWarps, sc = threadIdx.x % kWarps;
  const int bgs = b0 + sb, cgs = c0 + sc;
  const bool store_valid = sb < BPT && bgs < p.nbeams && cgs < p.nchans;
  const int op = p.nout_pols == 1 ? 0 : pol_outer;
  const std::int64_t ntout = p.nsamples / p.integration;
  float bin_sum = 0.f;
  int bin_n = 0;
  std::int64_t bin = tb / p.integration;

  auto store_tile = [&](std::int64_t t0) {
    if (!store_valid) return;
    const int nt = static_cast<int>(min(static_cast<std::int64_t>(TT), te - t0));
    const int row = (sb * kWarps + sc) * kStride;
    if (p.voltage) {
      const float2* src = reinterpret_cast<const float2*>(tile) + row;
      float2* o =
          reinterpret_cast<float2*>(out) +
          ((static_cast<std::int64_t>(bgs) * p.npol + pol_outer) * p.nsamples + t0) * p.nchans +
          cgs;
      for (int t = 0; t < nt; ++t)
        o[static_cast<std::int64_t>(t) * p.nchans] = src[t];
      return;
    }
    float* o = out + (static_cast<std::int64_t>(bgs) * p.nout_pols + op) * ntout * p.nchans + cgs;
    if (p.integration == 1) {  // B1: a plain copy (LDS + STG per sample)
      float* ot = o + t0 * p.nchans;
      for (int t = 0; t < nt; ++t)
        ot[static_cast<std::int64_t>(t) * p.nchans] = tile[row + t];
      return;
    }
    for (int t = 0; t < nt; ++t) {
      bin_sum += tile[row + t];
      if (++bin_n == p.integration) {
        o[bin * p.nchans] = bin_sum;
        ++bin;
        bin_sum = 0.f;
        bin_n = 0;
      }
    }
  };

  float2 acc[BPT][TPT];
  unsigned raw[TPT][8];
  auto load_raw = [&](unsigned(&r)[TPT][8], std::int64_t t0, int a0) {
#pragma unroll
    for (int j = 0; j < TPT; ++j) {
      const std::int64_t t = t0 + lane + 32 * j;
      load_row(r[j], in, p, c, t, a0 * NP * kBpc, cvalid && t < te);
    }
  };

  // Steps: antenna chunk (fastest), inner pol, tile. Every thread of the block walks the same
  // steps, so the barriers below are uniform.
  std::int64_t t0 = tb;
  int pi = 0, a0 = 0;
  load_raw(raw, t0, a0);
  for (;;) {
    int na0 = a0 + kAnt, npi_next = pi;
    std::int64_t nt0 = t0;
    if (na0 >= p.nant) {
      na0 = 0;
      if (++npi_next == npi) {
        npi_next = 0;
        nt0 += TT;
      }
    }
    const bool more = nt0 < te;
    unsigned nraw[TPT][8];
    if (more) load_raw(nraw, nt0, na0);  // in flight during this chunk's FMAs

    const int aw0 = a0 - a0 % p.wa;
    if (!resident && a0 == aw0) {
      __syncthreads();
      load_window(aw0);
      __syncthreads();
    }
    if (a0 == 0) {
#pragma unroll
      for (int b = 0; b < BPT; ++b)
#pragma unroll
        for (int j = 0; j < TPT; ++j)
          acc[b][j] = make_float2(0.f, 0.f);
    }
    const int pol = NP == 2 ? (npi == 2 ? pi : pol_outer) : 0;
    const float2* wrow = ws + (static_cast<std::size_t>(warp * npi + pi) * p.wa + (a0 - aw0)) * BPT;
#pragma unroll
    for (int k = 0; k < kAnt; ++k) {
      float2 x[TPT];
#pragma unroll
      for (int j = 0; j < TPT; ++j)
        x[j] = decode<D, NP>(raw[j], k, pol, lv);
      const float4* w4 = reinterpret_cast<const float4*>(wrow + k * BPT);
#pragma unroll
      for (int b = 0; b < BPT / 2; ++b) {
        const float4 w = w4[b];  // beams 2b, 2b + 1: one broadcast LDS.128
#pragma unroll
        for (int j = 0; j < TPT; ++j) {
          cmac(acc[2 * b][j], w.x, w.y, x[j]);
          cmac(acc[2 * b + 1][j], w.z, w.w, x[j]);
        }
      }
    }

    if (na0 == 0) {  // this pol of this tile is complete: into the shared tile
#pragma unroll
      for (int b = 0; b < BPT; ++b)
#pragma unroll
        for (int j = 0; j < TPT; ++j) {
          const int idx = (b * kWarps + warp) * kStride + lane + 32 * j;
          if (p.voltage) {
            reinterpret_cast<float2*>(tile)[idx] = acc[b][j];
          } else {
            const float pw = acc[b][j].x * acc[b][j].x + acc[b][j].y * acc[b][j].y;
            tile[idx] = pi == 0 ? pw : tile[idx] + pw;
          }
        }
      if (pi == npi - 1) {
        __syncthreads();
        store_tile(t0);
        __syncthreads();
      }
    }
    if (!more) break;
#pragma unroll
    for (int j = 0; j < TPT; ++j)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        raw[j][i] = nraw[j][i];
    t0 = nt0;
    pi = npi_next;
    a0 = na0;
  }
}

// Host [chan][pol][beam][ant] -> device [chan][pol][ant][beam] (beams contiguous: the staging
// reads BPT consecutive beams).
__global__ void transpose_weights_stream(const float2* __restrict__ src, float2* __restrict__ dst,
                                         int nbeams, int nant, std::int64_t nmat) {
  const std::int64_t n = nmat * nbeams * nant;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int b = static_cast<int>(i % nbeams);
    const std::int64_t r = i / nbeams;
    const int a = static_cast<int>(r % nant);
    const std::int64_t m = r / nant;  // chan * npol + pol
    dst[i] = src[(m * nbeams + b) * nant + a];
  }
}

using KernelFn = void (*)(const std::uint8_t*, const float2*, const float*, Params, float*);

template <int D, int NP>
KernelFn pick_kernel(int bpt, int tpt) {
  if (bpt == 32) return stream_kernel<D, NP, 32, 1>;
  if (tpt == 1) return stream_kernel<D, NP, 16, 1>;
  return stream_kernel<D, NP, 16, 2>;
}

template <int D>
KernelFn pick_kernel(int npol, int bpt, int tpt) {
  return npol == 2 ? pick_kernel<D, 2>(bpt, tpt) : pick_kernel<D, 1>(bpt, tpt);
}

KernelFn pick_kernel(SampleType t, int npol, int bpt, int tpt) {
  switch (t) {
    case SampleType::ci4:
      return pick_kernel<kCi4>(npol, bpt, tpt);
    case SampleType::ci8:
      return pick_kernel<kCi8>(npol, bpt, tpt);
    case SampleType::cf16:
      return pick_kernel<kCf16>(npol, bpt, tpt);
    case SampleType::cf32:
      return pick_kernel<kCf32>(npol, bpt, tpt);
  }
  return nullptr;
}

class CudaStreamExecutor final : public Executor {
 public:
  explicit CudaStreamExecutor(const PlanData& pd)
      : tuning_(pd.tuning),
        wdev_(static_cast<std::size_t>(pd.config.nchans) * pd.config.npol * pd.config.nbeams *
              pd.config.nantennas),
        wstage_(wdev_.size()),
        levels_(256) {
    const auto& c = pd.config;
    // Level tables: ci4 nibble -> value (16), ci8 byte -> value (256), from the plan's table.
    std::vector<float> lv(256, 0.f);
    if (c.sample_type == SampleType::ci4)
      for (unsigned n = 0; n < 16; ++n)
        lv[n] = pd.table[2 * (n << 4)];
    if (c.sample_type == SampleType::ci8)
      for (unsigned code = 0; code < 256; ++code)
        lv[code] = pd.table[2 * code];
    copy_bytes(levels_.data(), lv.data(), levels_.bytes());

    const int bpt = tuning_.beams_per_thread, tpt = tuning_.samples_per_thread;
    kernel_ = pick_kernel(c.sample_type, c.npol, bpt, tpt);
    voltage_ = c.output == OutputKind::voltage;
    npi_ = (!voltage_ && c.sum_pols && c.npol == 2) ? 2 : 1;
    const int kant = kChunkBytes / (c.npol * bytes_per_complex(c.sample_type));
    // The weight window: every antenna when it fits the budget (B1: 32 antennas x 32 beams x 8
    // channels = 64 KB), else the largest multiple of the chunk that does.
    const std::size_t per_ant = static_cast<std::size_t>(kWarps) * npi_ * bpt * sizeof(float2);
    const int all = (c.nantennas + kant - 1) / kant * kant;
    const int fit = std::max(kant, static_cast<int>(kWeightBudget / per_ant) / kant * kant);
    wa_ = std::min(all, fit);
    const int tt = 32 * tpt;
    smem_ = static_cast<std::size_t>(wa_) * per_ant +
            static_cast<std::size_t>(bpt) * kWarps * (tt + 1) * sizeof(float) * (voltage_ ? 2 : 1) +
            256 * sizeof(float);
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel_), smem_);
    // Runs of samples per block: about 8 waves of blocks over the GPU, each run a multiple of
    // the tile and of the integration (so no output bin crosses blocks).
    int occ = 0, dev = 0, sms = 0;
    WB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel_, kThreads, smem_));
    WB_CUDA_CHECK(cudaGetDevice(&dev));
    WB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    nchan_tiles_ = (c.nchans + kWarps - 1) / kWarps;
    const std::int64_t units =
        static_cast<std::int64_t>(nchan_tiles_) * (c.npol / npi_) * ((c.nbeams + bpt - 1) / bpt);
    const std::int64_t slots = static_cast<std::int64_t>(std::max(occ, 1)) * std::max(sms, 1);
    const std::int64_t want = std::max<std::int64_t>(1, (8 * slots + units - 1) / units);
    const std::int64_t unit =
        std::lcm(static_cast<std::int64_t>(tt), static_cast<std::int64_t>(c.integration));
    const std::int64_t per = (c.nsamples + want - 1) / want;
    chunk_len_ = (per + unit - 1) / unit * unit;
    const std::int64_t nchunks = (c.nsamples + chunk_len_ - 1) / chunk_len_;
    blocks_x_ = nchunks * nchan_tiles_;
    if (blocks_x_ > 0x7FFFFFFF)
      fail(ErrorCategory::invalid_argument,
           "nsamples x nchans is too large for one CUDA launch: use smaller blocks");
  }

  void set_weights(const PlanData& pd, const std::complex<float>* w,
                   const Stream* stream) override {
    const auto& c = pd.config;
    cudaStream_t s = WB_STREAM(stream);
    copy_bytes(wstage_.data(), w, wstage_.bytes(), stream);
    const int threads = 256;
    const unsigned blocks = grid_stride_blocks(wdev_.size(), threads);
    transpose_weights_stream<<<blocks, threads, 0, s>>>(
        wstage_.data(), wdev_.data(), c.nbeams, c.nantennas,
        static_cast<std::int64_t>(c.nchans) * c.npol);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    Params p{shape_params(c)};
    p.npol_inner = npi_;
    p.voltage = voltage_;
    const auto addr = reinterpret_cast<std::uintptr_t>(in);
    p.load_mode = (p.row_bytes % 16 == 0 && addr % 16 == 0) ? 2
                  : (p.row_bytes % 4 == 0 && addr % 4 == 0) ? 1
                                                            : 0;
    p.nchan_tiles = nchan_tiles_;
    p.chunk_len = chunk_len_;
    p.wa = wa_;
    const dim3 grid(static_cast<unsigned>(blocks_x_), static_cast<unsigned>(c.npol / npi_),
                    static_cast<unsigned>((c.nbeams + tuning_.beams_per_thread - 1) /
                                          tuning_.beams_per_thread));
    cudaStream_t s = WB_STREAM(stream);
    kernel_<<<grid, kThreads, smem_, s>>>(in, wdev_.data(), levels_.data(), p, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  CudaTuning tuning() const override { return tuning_; }

 private:
  CudaTuning tuning_;
  DeviceArray<float2> wdev_, wstage_;
  DeviceArray<float> levels_;
  KernelFn kernel_ = nullptr;
  bool voltage_ = false;
  int npi_ = 1, wa_ = 0, nchan_tiles_ = 0;
  std::size_t smem_ = 0;
  std::int64_t chunk_len_ = 0, blocks_x_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_register_stream_executor(const PlanData& plan) {
  return std::make_unique<CudaStreamExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
