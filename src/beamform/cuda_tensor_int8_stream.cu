// CUDA beamformer on int8 tensor cores, streaming (tensor_int8_stream; issue 17). The arithmetic
// is tensor_int8's (cuda_tensor_int8.cu, beamform/int8.hpp): per channel and pol the real GEMM
// V'[2B x T] = A'[2B x 2A] X'[2A x T] on mma.sync.m16n8k32 s8 -> s32 (exact), |V|^2 in 64-bit
// integers, out = float(P) * fl(s^2), bit for bit emulate_int8(). What differs is the data flow,
// built for small N (B1: 32 antennas, 32 beams, ci4) where the MMA work is negligible and the
// kernel is a stream: 1 byte of voltage in, 128 bytes of power out per channel and sample.
//
// - A warp owns one channel (and one group of 32 beams, one pol) for the block's life; its A'
//   (64 rows x 64 k' = 4 m16 tiles x 2 k32 steps) lives in 32 registers per lane, loaded once as
//   MMA fragments (built in that order by build_frag_stream, no shared memory, no ldmatrix).
// - The k' axis is permuted so that lane (g, q) (g = lane / 4 the B fragment's column = time,
//   q = lane % 4) needs exactly antennas 8q .. 8q + 7 of its time row: one 8-byte load per
//   sample (16 bytes for dual pol), a warp's load of 8 rows 256 contiguous bytes. In k step s,
//   fragment half h, byte w of the lane's 4: antenna 8q + 4s + 2h + w / 2, component w % 2
//   (re, im); expand_ci4 of the lane's two words gives the four B registers directly.
// - Input: each lane copies its own bytes with cp.async into its own slots of a 3-stage ring
//   (2 for dual pol), chunks of 32 samples (4 n8 tiles) two chunks ahead; no thread reads another
//   thread's slot, so the ring needs no barrier.
// - Detection in registers: rows 0-7 of each m16 tile are Re of 8 beams, rows 8-15 their Im, so
//   c0/c2 (c1/c3) are Re/Im of one beam at one sample. Integration N <= 32 (a power of two):
//   in-thread over the sample pair and tiles, warp shuffles over the 4 lanes of a row; a warp
//   owns every sample of its channel in a chunk, so no atomics.
// - Output [beam][pol][time / N][chan]: a block is 16 warps = 16 channels; each chunk's power
//   goes to a shared tile [chan][beam][sample] (beam stride 40, channel stride 1282 floats:
//   conflict-free 8-byte writes from the MMA layout and conflict-free reads across channels),
//   double-buffered (one barrier per chunk), and leaves as 16-byte stores, rows of 16 channels
//   (64 contiguous bytes) per (beam, sample).
// Limits (check_int8_stream_config): ci4, nantennas <= 32, pols not summed, N dividing 32.
// Not measured yet: written without a GPU (GPU-REQUEST.sh of branch bf8).
#include <cuda_runtime.h>

#include <algorithm>

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

constexpr int kCT = 16;                // channels (= warps) per block
constexpr int kThreads = 32 * kCT;     // 512
constexpr int kNT = 4;                 // n8 tiles per chunk
constexpr int kTT = 8 * kNT;           // samples per chunk (32)
constexpr int kBeams = 32;             // beams per warp (4 m16 tiles of re/im rows)
constexpr int kBS = kTT + 8;           // shared tile: beam stride (floats)
constexpr int kCS = kBeams * kBS + 2;  // shared tile: channel stride (floats), = 2 mod 32
constexpr int kMaxChunksPerBlock = 16;
static_assert(kBS % 32 == 8 && kCS % 32 == 2, "the bank arguments of the header");
static_assert(kCT == 16, "the output loop's shifts: 4 groups of 4 channels");

template <int NP>
constexpr int kStages = NP == 1 ? 3 : 2;  // input ring depth (dual pol: 16 bytes a lane a sample)

struct Params : ShapeParams {
  int nbg;               // groups of 32 beams (grid y)
  int nchan_tiles;       // blocks along channels (grid x = nchan_tiles x time blocks)
  int nchunks;           // chunks of kTT samples per channel
  int chunks_per_block;  // chunks one block streams over
  bool fast;             // rows and pointer 8-byte aligned: cp.async of 8 bytes
  bool raw;              // two's complement codes: expand by bit operations, not the table
  bool vec_out;          // nchans % 4 == 0 and the output 16-byte aligned: float4 stores
};

/// Copies 8 bytes global -> shared asynchronously (through L1: .ca, the only mode for 8 bytes).
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}

/// The same through the s8 table (tab[code] = re | im << 8), for other encodings and levels.
__device__ __forceinline__ void expand_table(unsigned w, unsigned& lo, unsigned& hi,
                                             const unsigned short* tab) {
  lo = tab[w & 0xFFu] | (static_cast<unsigned>(tab[(w >> 8) & 0xFFu]) << 16);
  hi = tab[(w >> 16) & 0xFFu] | (static_cast<unsigned>(tab[w >> 24]) << 16);
}

template <int NP>
__global__ void __launch_bounds__(kThreads, 1)
    stream_kernel(const std::uint8_t* __restrict__ in, const uint4* __restrict__ frag,
                  const unsigned short* __restrict__ table, const float* __restrict__ scale2,
                  Params p, float* __restrict__ out) {
  constexpr int S = kStages<NP>;
  constexpr int kSlot = kNT * NP * kThreads;  // uint2 per ring stage
  extern __shared__ float4 smem_raw[];
  float* tile = reinterpret_cast<float*>(smem_raw);              // [2][kCT][kCS]
  uint2* ring = reinterpret_cast<uint2*>(tile + 2 * kCT * kCS);  // [S][kNT * NP][kThreads]
  unsigned short* tab = reinterpret_cast<unsigned short*>(ring + S * kSlot);  // [256]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  const int ctile = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.nchan_tiles));
  const int tblock = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.nchan_tiles));
  const int bg = blockIdx.y, pol = blockIdx.z;
  const int c = ctile * kCT + warp;  // this warp's channel
  const bool cvalid = c < p.nchans;
  const int chunk0 = tblock * p.chunks_per_block;
  const int nck = min(p.chunks_per_block, p.nchunks - chunk0);
  const int n = p.integration;

  for (int i = tid; i < 256; i += kThreads)
    tab[i] = table[i];

  // A' of this channel, pol and beam group as fragments: af[m][s] for m16 tile m, k32 step s.
  unsigned af[4][2][4];
  float s2[4];  // fl(s^2) of beam bg * 32 + 8m + g
#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (cvalid)
        v = frag[((static_cast<std::int64_t>(c) * p.npol + pol) * p.nbg + bg) * 256 +
                 (m * 2 + s) * 32 + lane];
      af[m][s][0] = v.x;
      af[m][s][1] = v.y;
      af[m][s][2] = v.z;
      af[m][s][3] = v.w;
    }
    const int b = bg * kBeams + 8 * m + g;
    s2[m] = (cvalid && b < p.nbeams) ? scale2[static_cast<std::int64_t>(c) * p.nbeams + b] : 0.f;
  }

  // Chunk k (of this block) -> ring stage k % S: this lane's bytes 8 (q NP + h) .. + 7 of the
  // rows of samples t0 + 8j + g. Out-of-range rows, channels and antenna groups read zeros (their
  // columns are never stored; antennas past the last have zero weights).
  auto load_chunk = [&](int k) {
    if (k < nck) {
      const std::int64_t t0 = static_cast<std::int64_t>(chunk0 + k) * kTT;
      uint2* slot = ring + (k % S) * kSlot;
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const std::int64_t t = t0 + 8 * j + g;
#pragma unroll
        for (int h = 0; h < NP; ++h) {
          uint2* dst = slot + (j * NP + h) * kThreads + tid;
          const int off = 8 * (q * NP + h);
          if (cvalid && t < p.nsamples && off < p.row_bytes) {
            const std::uint8_t* src =
                in + (static_cast<std::int64_t>(c) * p.nsamples + t) * p.row_bytes + off;
            if (p.fast) {
              cp_async8(dst, src);
            } else {  // unaligned rows or pointer: byte by byte, zero past the row
              unsigned lo = 0, hi = 0;
#pragma unroll
              for (int e = 0; e < 8; ++e)
                if (off + e < p.row_bytes) {
                  const unsigned v = static_cast<unsigned>(src[e]) << (8 * (e % 4));
                  if (e < 4)
                    lo |= v;
                  else
                    hi |= v;
                }
              *dst = make_uint2(lo, hi);
            }
          } else {
            *dst = make_uint2(0, 0);
          }
        }
      }
    }
    cp_async_commit();  // empty groups too: the wait below counts groups
  };

  const std::int64_t ntout = p.nsamples / n;
  const int nbins = kTT / n, log2_nbins = __ffs(nbins) - 1;
  const int lanes_per_bin = max(1, min(n, 8) / 2);  // integration 2, 4, 8: 1, 2, 4 lanes of a row

#pragma unroll
  for (int k = 0; k < S - 1; ++k)
    load_chunk(k);
  __syncthreads();  // the table

  for (int k = 0; k < nck; ++k) {
    load_chunk(k + S - 1);
    cp_async_wait<S - 1>();  // chunk k has landed (this lane's own slots)
    const uint2* slot = ring + (k % S) * kSlot;
    float* mine = tile + (k & 1) * kCT * kCS + warp * kCS;
    unsigned long long bin_sum[4] = {0, 0, 0, 0};  // integration 16, 32: across tiles
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      // The lane's 8 codes of this pol: antennas 8q .. 8q + 3 (w0) and 8q + 4 .. 8q + 7 (w1).
      unsigned w0, w1;
      if constexpr (NP == 1) {
        const uint2 x = slot[j * kThreads + tid];
        w0 = x.x;
        w1 = x.y;
      } else {  // bytes alternate pol 0, pol 1
        const uint2 x0 = slot[(2 * j) * kThreads + tid], x1 = slot[(2 * j + 1) * kThreads + tid];
        const unsigned sel = pol == 0 ? 0x6420u : 0x7531u;
        w0 = __byte_perm(x0.x, x0.y, sel);
        w1 = __byte_perm(x1.x, x1.y, sel);
      }
      unsigned bf[2][2];  // [k step][b0, b1]
      if (p.raw) {
        expand_ci4(w0, bf[0][0], bf[0][1]);
        expand_ci4(w1, bf[1][0], bf[1][1]);
      } else {
        expand_table(w0, bf[0][0], bf[0][1], tab);
        expand_table(w1, bf[1][0], bf[1][1], tab);
      }
      int acc[4][4];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          acc[m][r] = 0;
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int m = 0; m < 4; ++m)
          mma_16832(acc[m], af[m][s], bf[s][0], bf[s][1]);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        // |V|^2 of beam 8m + g at samples 8j + 2q (c0, c2) and 8j + 2q + 1 (c1, c3).
        const int* a = acc[m];
        const unsigned long long p0 = static_cast<unsigned long long>(
            static_cast<long long>(a[0]) * a[0] + static_cast<long long>(a[2]) * a[2]);
        const unsigned long long p1 = static_cast<unsigned long long>(
            static_cast<long long>(a[1]) * a[1] + static_cast<long long>(a[3]) * a[3]);
        float* row = mine + (8 * m + g) * kBS;
        if (n == 1) {
          *reinterpret_cast<float2*>(row + 8 * j + 2 * q) = make_float2(
              __fmul_rn(__ull2float_rn(p0), s2[m]), __fmul_rn(__ull2float_rn(p1), s2[m]));
          continue;
        }
        // Exact integer sums: the pair, then the 2 or 4 lanes of the row (n = 4, 8), then the
        // tiles (n = 16, 32).
        unsigned long long sum = p0 + p1;
        if (n >= 4) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
        if (n >= 8) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
        if (n <= 8) {
          if (q % lanes_per_bin == 0)
            row[(8 * j + 2 * q) / n] = __fmul_rn(__ull2float_rn(sum), s2[m]);
        } else {
          bin_sum[m] += sum;
          if ((j + 1) % (n / 8) == 0) {
            if (q == 0) row[(8 * j) / n] = __fmul_rn(__ull2float_rn(bin_sum[m]), s2[m]);
            bin_sum[m] = 0;
          }
        }
      }
    }
    __syncthreads();  // the chunk's tile is complete (the other buffer may still be read)

    // Rows of 16 channels of [beam][pol][time / N][chan]: item = (beam, bin, 4-channel group),
    // the group fastest; a warp reads 8 bins x 4 groups (conflict-free: channel stride 2 mod 32).
    const float* t = tile + (k & 1) * kCT * kCS;
    const std::int64_t to0 = static_cast<std::int64_t>(chunk0 + k) * (kTT / n);
    for (int i = tid; i < kBeams * nbins * (kCT / 4); i += kThreads) {
      // nbins is a power of two: shifts, not divisions by a run-time value.
      const int grp = i % (kCT / 4), bin = (i >> 2) & (nbins - 1), bl = i >> (2 + log2_nbins);
      const int b = bg * kBeams + bl, c4 = ctile * kCT + 4 * grp;
      const std::int64_t to = to0 + bin;
      if (b >= p.nbeams || to >= ntout || c4 >= p.nchans) continue;
      const float* src = t + (4 * grp) * kCS + bl * kBS + bin;
      float* dst =
          out + ((static_cast<std::int64_t>(b) * p.nout_pols + pol) * ntout + to) * p.nchans + c4;
      if (p.vec_out) {
        *reinterpret_cast<float4*>(dst) = make_float4(src[0], src[kCS], src[2 * kCS], src[3 * kCS]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (c4 + e < p.nchans) dst[e] = src[e * kCS];
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)
}

// q [chan][pol][beam][ant][re, im] -> A' fragments [chan][pol][beam group][m][s][lane] uint4,
// one 32-bit register per thread: register r of lane (g, q) holds row g + 8 (r % 2) of m16 tile m
// (beam 32 bg + 8m + g, re for the first 8 rows, im for the next) and k' bytes 4q + 16 (r / 2) +
// 0..3 of k32 step s, antenna 8q + 4s + 2h + w / 2 (h = r / 2, w the byte), component w % 2.
__global__ void build_frag_stream(const std::int8_t* __restrict__ q8, unsigned* __restrict__ frag,
                                  int nchans, int npol, int nbeams, int nant, int nbg) {
  const std::int64_t total = static_cast<std::int64_t>(nchans) * npol * nbg * 1024;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i % 4), lane = static_cast<int>((i / 4) % 32);
    const int ms = static_cast<int>((i / 128) % 8), m = ms / 2, s = ms % 2;
    const int bgi = static_cast<int>((i / 1024) % nbg);
    const std::int64_t cp = i / (1024 * static_cast<std::int64_t>(nbg));  // chan * npol + pol
    const int g = lane / 4, q = lane % 4, h = r / 2, im_out = r % 2;
    const int b = bgi * kBeams + 8 * m + g;
    unsigned word = 0;
    for (int w = 0; w < 4; ++w) {
      const int a = 8 * q + 4 * s + 2 * h + w / 2, im_in = w % 2;
      int v = 0;
      if (b < nbeams && a < nant) {
        const std::int8_t* x = q8 + ((cp * nbeams + b) * nant + a) * 2;  // (qr, qi)
        // Re V = qr xr - qi xi, Im V = qi xr + qr xi.
        v = im_out ? (im_in ? x[0] : x[1]) : (im_in ? -x[1] : x[0]);
      }
      word |= static_cast<unsigned>(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)))
              << (8 * w);
    }
    frag[i] = word;
  }
}

class CudaInt8StreamExecutor final : public Executor {
 public:
  explicit CudaInt8StreamExecutor(const PlanData& pd) : table_(256) {
    const auto& c = pd.config;
    check_int8_stream_config(c);
    const std::vector<std::int8_t> t = int8_table(c);  // (re, im) s8 pairs = tab[code] re | im << 8
    copy_bytes(table_.data(), t.data(), table_.bytes());
    raw_ = c.encoding == Encoding::twos_complement && c.levels.empty();
    nbg_ = (c.nbeams + kBeams - 1) / kBeams;
    q_ = DeviceArray<std::int8_t>(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams *
                                  c.nantennas * 2);
    scale2_ = DeviceArray<float>(static_cast<std::size_t>(c.nchans) * c.nbeams);
    frag_ = DeviceArray<uint4>(static_cast<std::size_t>(c.nchans) * c.npol * nbg_ * 256);
    const int np = c.npol;
    kernel_ = np == 2 ? stream_kernel<2> : stream_kernel<1>;
    const int stages = np == 2 ? kStages<2> : kStages<1>;
    smem_ = 2 * kCT * kCS * sizeof(float) +
            static_cast<std::size_t>(stages) * kNT * np * kThreads * sizeof(uint2) +
            256 * sizeof(unsigned short);
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel_), smem_);
    nchan_tiles_ = (c.nchans + kCT - 1) / kCT;
    nchunks_ = static_cast<int>((c.nsamples + kTT - 1) / kTT);
    // Up to 16 chunks (512 samples) per block: B1 is 64 x 16 blocks of 512 threads (7.8 waves
    // of one block per SM on 132 SMs); short blocks of samples are split further so that the
    // grid still has several blocks per channel tile.
    chunks_per_block_ = std::clamp(nchunks_ / 4, 1, kMaxChunksPerBlock);
    const std::int64_t tblocks = (nchunks_ + chunks_per_block_ - 1) / chunks_per_block_;
    blocks_x_ = tblocks * nchan_tiles_;
    if (blocks_x_ > 0x7FFFFFFF || nbg_ > 65535)
      fail(ErrorCategory::invalid_argument,
           "nsamples x nchans (or nbeams) is too large for one CUDA launch: use smaller blocks");
  }

  void set_weights(const PlanData& pd, const std::complex<float>*, const Stream* stream) override {
    if (!pd.int8) return;  // the plan quantises first, then calls again with the result
    const auto& c = pd.config;
    cudaStream_t s = WB_STREAM(stream);
    copy_bytes(q_.data(), pd.int8->q.data(), q_.bytes(), stream);
    copy_bytes(scale2_.data(), pd.int8->scale2.data(), scale2_.bytes(), stream);
    const int threads = 256;
    const unsigned blocks = grid_stride_blocks(frag_.size() * 4, threads);
    build_frag_stream<<<blocks, threads, 0, s>>>(q_.data(),
                                                 reinterpret_cast<unsigned*>(frag_.data()),
                                                 c.nchans, c.npol, c.nbeams, c.nantennas, nbg_);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    Params p{shape_params(c)};
    p.nbg = nbg_;
    p.nchan_tiles = nchan_tiles_;
    p.nchunks = nchunks_;
    p.chunks_per_block = chunks_per_block_;
    p.fast = p.row_bytes % 8 == 0 && reinterpret_cast<std::uintptr_t>(in) % 8 == 0;
    p.raw = raw_;
    p.vec_out = c.nchans % 4 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
    const dim3 grid(static_cast<unsigned>(blocks_x_), static_cast<unsigned>(nbg_),
                    static_cast<unsigned>(c.npol));
    cudaStream_t s = WB_STREAM(stream);
    kernel_<<<grid, kThreads, smem_, s>>>(in, frag_.data(), table_.data(), scale2_.data(), p, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  using KernelFn = void (*)(const std::uint8_t*, const uint4*, const unsigned short*, const float*,
                            Params, float*);
  DeviceArray<unsigned short> table_;
  DeviceArray<std::int8_t> q_;
  DeviceArray<float> scale2_;
  DeviceArray<uint4> frag_;
  KernelFn kernel_ = nullptr;
  std::size_t smem_ = 0;
  bool raw_ = true;
  int nbg_ = 1, nchan_tiles_ = 0, nchunks_ = 0, chunks_per_block_ = 1;
  std::int64_t blocks_x_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_tensor_int8_stream_executor(const PlanData& plan) {
  return std::make_unique<CudaInt8StreamExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
