// CUDA beamformer on int8 tensor cores, GEMM form (tensor_int8 for large N; issue 17). The
// arithmetic is tensor_int8's (beamform/int8.hpp: exact s8 x s8 -> s32 sums, |V|^2 in 64-bit
// integers, out = float(P) * fl(s^2)), bit for bit emulate_int8(); what differs is the data flow,
// built for B2 (1024 beams, 256 antennas, 2048 samples, 384 channels): a GEMM big enough that
// reuse, not the tensor cores, decides the time.
//
// Two kernels per execute():
// 1. expand_x: the ci4/ci8 codes of every (channel, sample) row -> X' [chan][pol][sample][k'] s8,
//    k' = 2a + (re, im), zero past the last antenna (k' padded to 64) and the last sample (padded
//    to the block's 128). One pass over the input; it takes the pol de-interleave and the code
//    table out of the GEMM's inner loop, so the GEMM's operands are plain K-major s8 matrices.
// 2. int8_gemm: per (channel, pol) the real GEMM C'[2B x T] = A'[2B x 2A] X'^T, on
//    mma.sync.m16n8k32 (row.col: both operands K-major, as ldmatrix reads them).
//    - A' is the general kernel's (launch_build_a_int8): each 16-row MMA tile is 8 beams' Re
//      rows over their Im rows, so a thread's c0/c2 (c1/c3) are Re/Im of one beam at one
//      sample: detection in registers. (Storing only the Re rows and deriving the Im rows in
//      registers halves A's bytes but cost 4 ALU instructions and the register moves per
//      fragment word, 11 instructions per MMA in all: measured slower, docs/PERFORMANCE.md.)
//    - Block: 64 beams x 128 samples, 8 warps of 32 beams x 32 samples (16 MMAs per k32 step
//      from 4 + 2 ldmatrix.x4, both k32 steps' fragments loaded before the first MMA), k' in
//      stages of 64 bytes (32 antennas), a 4-stage cp.async ring over A' (128 x 64 B) and X'
//      (128 x 64 B), one barrier per stage; or (tuning 128 threads) 64 samples, 4 warps, 2
//      stages, two blocks per SM.
//    - kG = 4 channels per block, one after the other: each channel's power goes to a shared
//      tile [chan][beam][sample] (row of 136 floats: conflict-free 8-byte writes from the MMA
//      layout), and at the end the block stores rows of 4 channels (16-byte stores) of the
//      output [beam][pol][time][chan]. Blocks of channel groups 2g and 2g + 1 with the same
//      beams and samples are launched next to each other, so the two 16-byte halves of each
//      32-byte sector meet in L2 and reach HBM as whole sectors.
// Limits: integration 1 and no pol sum (uses_int8_gemm()); else cuda_tensor_int8.cu's kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "beamform/cuda_common.cuh"
#include "beamform/cuda_int8_expand.cuh"
#include "beamform/cuda_mma.cuh"
#include "beamform/executor.hpp"
#include "beamform/int8.hpp"
#include "core/cuda_check.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform::detail {
namespace {

using namespace mma;

constexpr int kBB = 64;        // beams per block
constexpr int kBM = 2 * kBB;   // rows of A' and C' per block (Re and Im of each beam)
constexpr int kBK = 64;        // k' bytes per stage (32 antennas)
constexpr int kLd = kBK + 16;  // 80-byte shared rows: conflict-free ldmatrix and cp.async
constexpr int kG = 4;          // channels per block (16-byte output rows)
constexpr int kTPad = 128;     // X' samples padded to the largest block's
constexpr int kExpandAnt = 8;  // antennas per thread in expand_x (16 bytes of X' per pol)
static_assert(kLd % 16 == 0, "rows must stay 16-byte aligned for cp.async/ldmatrix");

/// The two compiled block shapes (CudaTuning::threads_per_block): BN samples per block, a ring
/// of kStages, 2 x BN / 32 warps of 32 beams x 32 samples. 256 threads: 128 samples, 4 stages,
/// 218 KiB of shared memory, one block per SM; 128 threads: 64 samples, 2 stages, 104 KiB, two
/// blocks per SM (one's MMAs run while the other stores its tile).
template <int BN>
struct Shape {
  static constexpr int kBN = BN;
  static constexpr int kStages = BN == 128 ? 4 : 2;
  static constexpr int kThreads = 2 * BN;
  static constexpr int kOutLd = BN + 8;  // output tile row (floats): conflict-free 8-byte writes
  static constexpr std::size_t kSmem =
      static_cast<std::size_t>(kStages) * (kBM + BN) * kLd +
      sizeof(float) * (kG * kBB + static_cast<std::size_t>(kG) * kBB * kOutLd);
  static_assert(kTPad % BN == 0, "X' padding covers whole blocks");
};

struct ExpandParams {
  int nchans, nant, npol, kpad;
  std::int64_t nsamples, tpad, row_bytes;
  bool vector_loads, raw;
};

/// X' [chan][pol][tpad][kpad] from the input codes; a thread writes 8 antennas (16 bytes) of one
/// (channel, sample) row for every pol, zero where there is no data.
template <int D, int NP>
__global__ void expand_x(const std::uint8_t* __restrict__ in, const char2* __restrict__ table,
                         ExpandParams p, std::int8_t* __restrict__ xs) {
  __shared__ char2 tab[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x)
    tab[i] = table[i];
  __syncthreads();
  const int groups = p.kpad / (2 * kExpandAnt);
  const std::int64_t total = static_cast<std::int64_t>(p.nchans) * p.tpad * groups;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(i % groups);
    const std::int64_t t = (i / groups) % p.tpad;
    const int c = static_cast<int>(i / (static_cast<std::int64_t>(groups) * p.tpad));
    const int a = g * kExpandAnt;
    XLoader<D, NP, kExpandAnt> xl;
    xl.load(in, p, c, t, a);  // zero when t >= nsamples or a >= nant
    unsigned h[kExpandAnt / 2];
    auto dst = [&](int pol) {
      return reinterpret_cast<uint4*>(
          xs + ((static_cast<std::int64_t>(c) * p.npol + pol) * p.tpad + t) * p.kpad + 2 * a);
    };
    xl.template expand<0>(h, p.raw, p.nant, a, tab);
    *dst(0) = make_uint4(h[0], h[1], h[2], h[3]);
    if constexpr (NP == 2) {
      xl.template expand<1>(h, p.raw, p.nant, a, tab);
      *dst(1) = make_uint4(h[0], h[1], h[2], h[3]);
    }
  }
}

struct GemmParams {
  int nchans, npol, nbeams, mpad, kpad, kstages;
  std::int64_t nsamples, tpad;
  int mtiles, cgroups;
  bool vec_store;  // nchans % 4 == 0 and the output 16-byte aligned
};

template <int BN>
__global__ void __launch_bounds__(2 * BN, 256 / BN)
    int8_gemm(const std::int8_t* __restrict__ aw, const std::int8_t* __restrict__ xs,
              const float* __restrict__ scale2, GemmParams p, float* __restrict__ out) {
  using S = Shape<BN>;
  constexpr int kBN = S::kBN, kStages = S::kStages, kThreads = S::kThreads, kOutLd = S::kOutLd;
  extern __shared__ float4 smem_raw[];
  std::int8_t* As = reinterpret_cast<std::int8_t*>(smem_raw);      // [kStages][kBM][kLd]
  std::int8_t* Bs = As + kStages * kBM * kLd;                      // [kStages][kBN][kLd]
  float* S2 = reinterpret_cast<float*>(Bs + kStages * kBN * kLd);  // [kG][kBB]
  float* Ot = S2 + kG * kBB;                                       // [kG][kBB][kOutLd]

  // Block -> (beam tile, sample tile, channel group, pol); neighbouring blocks share the beam
  // and sample tile and differ in the channel group's lowest bit (see the top).
  const unsigned x = blockIdx.x;
  const int half = static_cast<int>(x % 2u);
  const int mtile = static_cast<int>((x / 2u) % static_cast<unsigned>(p.mtiles));
  const std::int64_t ttile = (x / 2u) / static_cast<unsigned>(p.mtiles);
  const int pol = static_cast<int>(blockIdx.y % static_cast<unsigned>(p.npol));
  const int cg = static_cast<int>(blockIdx.y / static_cast<unsigned>(p.npol)) * 2 + half;
  if (cg >= p.cgroups) return;
  const int c0 = cg * kG, nct = min(kG, p.nchans - c0);
  const int b0 = mtile * kBB;  // A' rows from 2 b0
  const std::int64_t t0 = ttile * kBN;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp / (kBN / 32), wn = warp % (kBN / 32);  // the warp's 32 beams, 32 samples

  for (int i = tid; i < kG * kBB; i += kThreads) {
    const int cl = i / kBB, b = b0 + i % kBB;
    S2[i] = (cl < nct && b < p.nbeams) ? scale2[static_cast<std::int64_t>(c0 + cl) * p.nbeams + b]
                                       : 0.f;
  }

  const int nstages = nct * p.kstages;  // stage s: channel s / kstages, k' block s % kstages
  // The ring is filled in stage order, so the loader keeps running pointers (no divisions in the
  // loop): this thread's chunks of A' (kBM * 4 / kThreads) and X' (2), their shared slots.
  constexpr int kAChunks = kBM * 4 / kThreads;
  const std::int64_t chan_a = static_cast<std::int64_t>(p.npol) * p.mpad * p.kpad;
  const std::int64_t chan_x = static_cast<std::int64_t>(p.npol) * p.tpad * p.kpad;
  const std::int64_t cp0 = static_cast<std::int64_t>(c0) * p.npol + pol;
  const std::int8_t* a_src =
      aw + (cp0 * p.mpad + 2 * b0) * p.kpad + (tid / 4) * p.kpad + 16 * (tid % 4);
  const std::int8_t* x_src =
      xs + (cp0 * p.tpad + t0) * p.kpad + (tid / 4) * p.kpad + 16 * (tid % 4);
  const std::int64_t a_step = static_cast<std::int64_t>(kThreads / 4) * p.kpad;  // rows per h
  const unsigned a_dst = smem_addr(As) + (tid / 4) * kLd + 16 * (tid % 4);
  const unsigned x_dst = smem_addr(Bs) + (tid / 4) * kLd + 16 * (tid % 4);
  int load_s = 0, load_ks = 0, load_buf = 0;
  auto load_stage = [&] {
    if (load_s < nstages) {
      const std::int64_t k = load_ks * kBK;
#pragma unroll
      for (int h = 0; h < kAChunks; ++h)
        cp_async16_s(a_dst + (load_buf * kBM + h * (kThreads / 4)) * kLd, a_src + h * a_step + k);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        cp_async16_s(x_dst + (load_buf * kBN + h * (kThreads / 4)) * kLd, x_src + h * a_step + k);
      if (++load_ks == p.kstages) {
        load_ks = 0;
        a_src += chan_a;
        x_src += chan_x;
      }
      ++load_s;
      load_buf = load_buf + 1 == kStages ? 0 : load_buf + 1;
    }
    cp_async_commit();  // empty groups past the end keep the ring's count uniform
  };

  int acc[4][4][4];  // [beam group][n8 tile][c0..c3]
  auto zero_acc = [&] {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          acc[i][j][k] = 0;
  };
  zero_acc();

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    load_stage();

  int buf = 0, ks = 0, cl = 0;  // the stage being multiplied: ring slot, k' block, channel
  // This lane's ldmatrix rows in ring slot 0 (lanes 8i .. 8i + 7 address 8x16-byte tile i): A'
  // tiles (rows 0-7, k 0-15), (8-15, 0-15), (0-7, 16-31), (8-15, 16-31) = a0..a3; X' tiles
  // (n 0-7, k 0-15), (0-7, 16-31), (8-15, 0-15), (8-15, 16-31) = b0, b1 of two n8 tiles.
  unsigned a_frag =
      smem_addr(As) + (wm * 64 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + (lane >> 4) * 16;
  unsigned b_frag =
      smem_addr(Bs) + (wn * 32 + (lane & 7) + (lane >> 4) * 8) * kLd + ((lane >> 3) & 1) * 16;
  for (int s = 0; s < nstages; ++s) {
    cp_async_wait<kStages - 2>();  // stage s has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's, and stage s - 1's buffer is free again
    load_stage();                  // stage s + kStages - 1
    // Both k32 steps' fragments first, then the 32 MMAs (the asm statements keep their order, so
    // loading them here is what lets the MMAs of step 0 hide the loads of step 1).
    unsigned af[2][4][4], bf[2][2][4];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i)  // the warp's 4 m16 tiles: rows wm 64 + 16 i ..
        ldmatrix_x4_s(af[k][i], a_frag + buf * (kBM * kLd) + i * (16 * kLd) + 32 * k);
#pragma unroll
      for (int j = 0; j < 2; ++j)  // two pairs of n8 tiles
        ldmatrix_x4_s(bf[k][j], b_frag + buf * (kBN * kLd) + j * (16 * kLd) + 32 * k);
    }
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma_16832(acc[i][j], af[k][i], bf[k][j / 2][2 * (j % 2)], bf[k][j / 2][2 * (j % 2) + 1]);
    buf = buf + 1 == kStages ? 0 : buf + 1;
    if (++ks == p.kstages) {
      // Channel finished: |V|^2 in 64-bit integers, times s^2, into the output tile.
      ks = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int bl = wm * 32 + i * 8 + lane / 4;
        const float s2 = S2[cl * kBB + bl];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int tl = wn * 32 + j * 8 + 2 * (lane % 4);
          const int* c = acc[i][j];
          const unsigned long long p0 = static_cast<unsigned long long>(
              static_cast<long long>(c[0]) * c[0] + static_cast<long long>(c[2]) * c[2]);
          const unsigned long long p1 = static_cast<unsigned long long>(
              static_cast<long long>(c[1]) * c[1] + static_cast<long long>(c[3]) * c[3]);
          *reinterpret_cast<float2*>(Ot + (cl * kBB + bl) * kOutLd + tl) =
              make_float2(__fmul_rn(__ull2float_rn(p0), s2), __fmul_rn(__ull2float_rn(p1), s2));
        }
      }
      zero_acc();
      ++cl;
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Store rows of kG channels of [beam][pol][time][chan].
  for (int i = tid; i < kBB * kBN; i += kThreads) {
    const int tl = i % kBN, bl = i / kBN;
    const int b = b0 + bl;
    const std::int64_t t = t0 + tl;
    if (b >= p.nbeams || t >= p.nsamples) continue;
    float* dst =
        out + ((static_cast<std::int64_t>(b) * p.npol + pol) * p.nsamples + t) * p.nchans + c0;
    if (p.vec_store && nct == kG) {
      *reinterpret_cast<float4*>(dst) =
          make_float4(Ot[(0 * kBB + bl) * kOutLd + tl], Ot[(1 * kBB + bl) * kOutLd + tl],
                      Ot[(2 * kBB + bl) * kOutLd + tl], Ot[(3 * kBB + bl) * kOutLd + tl]);
    } else {
      for (int cl = 0; cl < nct; ++cl)
        dst[cl] = Ot[(cl * kBB + bl) * kOutLd + tl];
    }
  }
}

class CudaInt8GemmExecutor final : public Executor {
 public:
  explicit CudaInt8GemmExecutor(const PlanData& pd) : table_(256) {
    const auto& c = pd.config;
    const std::vector<std::int8_t> t = int8_table(c);  // (re, im) s8 pairs
    copy_bytes(table_.data(), t.data(), table_.bytes());
    raw_ = c.encoding == Encoding::twos_complement && c.levels.empty();
    mpad_ = (c.nbeams + kBB - 1) / kBB * kBM;  // A' rows
    kpad_ = (c.nantennas + kBK / 2 - 1) / (kBK / 2) * kBK;
    tpad_ = (c.nsamples + kTPad - 1) / kTPad * kTPad;
    q_ = DeviceArray<std::int8_t>(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams *
                                  c.nantennas * 2);
    scale2_ = DeviceArray<float>(static_cast<std::size_t>(c.nchans) * c.nbeams);
    aw_ = DeviceArray<std::int8_t>(static_cast<std::size_t>(c.nchans) * c.npol * mpad_ * kpad_);
    xs_ = DeviceArray<std::int8_t>(static_cast<std::size_t>(c.nchans) * c.npol *
                                   static_cast<std::size_t>(tpad_) * kpad_);
    const bool dual = c.npol == 2, ci4 = c.sample_type == SampleType::ci4;
    expand_ = ci4 ? (dual ? expand_x<kCi4, 2> : expand_x<kCi4, 1>)
                  : (dual ? expand_x<kCi8, 2> : expand_x<kCi8, 1>);
    threads_ = pd.tuning.threads_per_block;
    const int bn = threads_ / 2;
    gemm_ = bn == 128 ? int8_gemm<128> : int8_gemm<64>;
    smem_ = bn == 128 ? Shape<128>::kSmem : Shape<64>::kSmem;
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(gemm_), smem_);
    mtiles_ = mpad_ / kBM;
    cgroups_ = (c.nchans + kG - 1) / kG;
    const std::int64_t x = 2 * static_cast<std::int64_t>(mtiles_) * (tpad_ / bn);
    const std::int64_t y = static_cast<std::int64_t>((cgroups_ + 1) / 2) * c.npol;
    if (x > 0x7FFFFFFF || y > 65535)
      fail(ErrorCategory::invalid_argument,
           "nsamples x nbeams or nchans is too large for one CUDA launch: use smaller blocks");
    grid_ = dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
  }

  void set_weights(const PlanData& pd, const std::complex<float>*, const Stream* stream) override {
    if (!pd.int8) return;  // the plan quantises first, then calls again with the result
    upload_int8_weights(pd, q_, scale2_, aw_, mpad_, kpad_, stream);
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    cudaStream_t s = WB_STREAM(stream);
    ExpandParams e{c.nchans, c.nantennas, c.npol, kpad_, c.nsamples, tpad_, c.row_bytes(),
                   // XLoader reads 8 bytes per word pair: rows and the pointer 8-byte aligned.
                   c.row_bytes() % 8 == 0 && reinterpret_cast<std::uintptr_t>(in) % 8 == 0, raw_};
    const int threads = 256;
    const std::size_t work =
        static_cast<std::size_t>(c.nchans) * static_cast<std::size_t>(tpad_) * (kpad_ / 16);
    expand_<<<grid_stride_blocks(work, threads), threads, 0, s>>>(in, table_.data(), e, xs_.data());
    WB_CUDA_CHECK_LAUNCH();
    GemmParams g{c.nchans,
                 c.npol,
                 c.nbeams,
                 mpad_,
                 kpad_,
                 kpad_ / kBK,
                 c.nsamples,
                 tpad_,
                 mtiles_,
                 cgroups_,
                 c.nchans % kG == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0};
    gemm_<<<grid_, threads_, smem_, s>>>(aw_.data(), xs_.data(), scale2_.data(), g, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  using ExpandFn = void (*)(const std::uint8_t*, const char2*, ExpandParams, std::int8_t*);
  using GemmFn = void (*)(const std::int8_t*, const std::int8_t*, const float*, GemmParams, float*);
  DeviceArray<char2> table_;
  DeviceArray<std::int8_t> q_, aw_, xs_;
  DeviceArray<float> scale2_;
  ExpandFn expand_ = nullptr;
  GemmFn gemm_ = nullptr;
  std::size_t smem_ = 0;
  bool raw_ = true;
  int mpad_ = 0, kpad_ = 0, mtiles_ = 0, cgroups_ = 0, threads_ = 256;
  std::int64_t tpad_ = 0;
  dim3 grid_;
};

}  // namespace

std::unique_ptr<Executor> make_tensor_int8_gemm_executor(const PlanData& plan) {
  return std::make_unique<CudaInt8GemmExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
