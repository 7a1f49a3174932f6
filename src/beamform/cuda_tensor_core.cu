// CUDA beamformer on tensor cores (large N): per channel and pol the beams are the complex GEMM
// V[beam][time] = W[beam][antenna] X[antenna][time], done as one real GEMM with fp16 operands
// and fp32 accumulation on mma.sync.m16n8k16:
//   A' [2B x 2A]: for beam b and antenna a the 2x2 block [[Wr, -Wi], [Wi, Wr]] (rows: re/im out,
//      columns k' = 2a + re/im in), so that A' X' gives Re V and Im V with 8 real flops per
//      complex multiply-accumulate, exactly as the complex product;
//   X' [2A x T]: the voltages, decoded in registers (4/8-bit through the conversion table) into
//      half2 (re, im) pairs, i.e. stored [time][k'] - the "col" B operand of the MMA as is.
// Rows of each 16-row MMA tile hold the real parts of 8 beams (rows 0-7) and their imaginary
// parts (rows 8-15), so a thread's accumulators c0/c2 (and c1/c3) are Re/Im of the same beam and
// time: the power |V|^2 is formed in registers, summed over pols/integrated into a shared-memory
// tile [32 beams][64 / N samples][8 channels] over the 8 channels the block loops over, and
// stored as whole 32-byte runs of [beam][pol][time][chan] (the transpose fused into the store).
//
// Block: 4 warps (2 along beams x 2 along time, 32 x 32 outputs each); tile 64 rows (32 beams) x
// 64 samples, K step 32 (16 antennas), two shared-memory stages: A' by cp.async, X' by registers
// (the next stage's global loads are in flight while the current one is multiplied).
// Power output only, integration dividing 64 (the plan checks; other cases use the fp32 kernel).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "beamform/cuda_common.cuh"
#include "beamform/cuda_mma.cuh"
#include "beamform/executor.hpp"
#include "core/cuda_check.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform::detail {
namespace {

using namespace mma;

constexpr int kBM = 64;  // A' rows per block (32 beams)
constexpr int kBeams = kBM / 2;
constexpr int kBN = 64;        // time samples per block
constexpr int kBK = 32;        // k' per stage (16 antennas)
constexpr int kAnt = kBK / 2;  // antennas per stage
constexpr int kLd = kBK + 8;   // padded row (halves): 80 B rows make ldmatrix conflict-free
constexpr int kCT = 8;         // channels per block (the output tile's fastest axis)
constexpr int kThreads = 128;
static_assert(kBM == 2 * 32 && kBN == 2 * 32, "4 warps of 32 x 32");
static_assert((kLd * 2) % 16 == 0, "rows must stay 16-byte aligned for cp.async/ldmatrix");
static_assert(kBN * 2 == kThreads, "X' stage: one thread per (time, half of the antennas)");

struct Params : ShapeParams {
  int npol_inner, kstages;
  int mpad, kpad;  // A' rows / columns in device memory
  bool vector_loads;
  int nchan_tiles;
};

__device__ __forceinline__ unsigned pack_half2(float2 v) {
  const __half2 h = __floats2half2_rn(v.x, v.y);
  return *reinterpret_cast<const unsigned*>(&h);
}

/// The samples one thread decodes per stage: antennas a .. a + 7 (both pols) at time t of channel
/// c, held as raw words while the current stage is multiplied; decode<POL>() turns antenna k of
/// pol POL into a half2 (re, im) word. All word indices are compile-time constants (no local
/// memory).
template <int D, int NP>
struct XLoader {
  static constexpr int kBpc = kBytesPerComplex<D>;
  static constexpr int kBytes = 8 * NP * kBpc;  // 8, 16, 32, 64 or 128
  static constexpr int kWords = (kBytes + 3) / 4;
  unsigned w[kWords];
  bool valid;

  __device__ __forceinline__ void load(const std::uint8_t* __restrict__ in, const Params& p, int c,
                                       std::int64_t t, int a) {
    valid = t < p.nsamples && a < p.nant;
    if (!valid) return;
    const std::uint8_t* src = in + (static_cast<std::int64_t>(c) * p.nsamples + t) * p.row_bytes +
                              static_cast<std::int64_t>(a) * NP * kBpc;
    if (p.vector_loads && a + 8 <= p.nant) {
      if constexpr (kBytes == 8) {
        const uint2 v = *reinterpret_cast<const uint2*>(src);
        w[0] = v.x;
        w[1] = v.y;
      } else {
#pragma unroll
        for (int i = 0; i < kBytes / 16; ++i) {
          const uint4 v = *reinterpret_cast<const uint4*>(src + 16 * i);
          w[4 * i] = v.x;
          w[4 * i + 1] = v.y;
          w[4 * i + 2] = v.z;
          w[4 * i + 3] = v.w;
        }
      }
      return;
    }
    // Unaligned rows or a partial antenna group: element by element, zero past the last antenna.
#pragma unroll
    for (int i = 0; i < kWords; ++i)
      w[i] = 0;
#pragma unroll
    for (int e = 0; e < 8 * NP; ++e) {
      if (a + e / NP >= p.nant) break;
      const std::uint8_t* s = src + e * kBpc;
      if constexpr (kBpc == 1) {
        w[e / 4] |= static_cast<unsigned>(*s) << (8 * (e % 4));
      } else if constexpr (kBpc == 2) {
        w[e / 2] |= static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(s))
                    << (16 * (e % 2));
      } else if constexpr (kBpc == 4) {
        w[e] = *reinterpret_cast<const unsigned*>(s);
      } else {
        const uint2 v = *reinterpret_cast<const uint2*>(s);
        w[2 * e] = v.x;
        w[2 * e + 1] = v.y;
      }
    }
  }

  template <int POL>
  __device__ __forceinline__ unsigned decode(int k, const float2* tab) const {
    const int e = k * NP + POL;
    if constexpr (D == kCi4) {
      return pack_half2(tab[(w[e / 4] >> (8 * (e % 4))) & 0xFFu]);
    } else if constexpr (D == kCi8) {
      const unsigned v = w[e / 2] >> (16 * (e % 2));
      return pack_half2(make_float2(tab[v & 0xFFu].x, tab[(v >> 8) & 0xFFu].x));
    } else if constexpr (D == kCf16) {
      return w[e];
    } else {
      return pack_half2(make_float2(__uint_as_float(w[2 * e]), __uint_as_float(w[2 * e + 1])));
    }
  }

  /// The 8 half2 words of pol POL (zero outside the data).
  template <int POL>
  __device__ __forceinline__ void decode_all(unsigned (&h)[8], const Params& p, int a,
                                             const float2* tab) const {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      h[k] = (valid && a + k < p.nant) ? decode<POL>(k, tab) : 0u;
  }
};

template <int D, int NP>
__global__ void __launch_bounds__(kThreads)
    mma_kernel(const std::uint8_t* __restrict__ in, const __half* __restrict__ aw,
               const float2* __restrict__ table, Params p, float* __restrict__ out) {
  extern __shared__ float4 smem_raw[];
  __half* As = reinterpret_cast<__half*>(smem_raw);             // [2][kBM][kLd]
  __half* Bs = As + 2 * kBM * kLd;                              // [2][kBN][kLd]
  float2* tab = reinterpret_cast<float2*>(Bs + 2 * kBN * kLd);  // [256]
  float* O = reinterpret_cast<float*>(tab + 256);               // [kBeams][kBN / N][kCT]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;  // warp's 32-row / 32-column quadrant
  const int ctile = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.nchan_tiles));
  const std::int64_t ttile = blockIdx.x / static_cast<unsigned>(p.nchan_tiles);
  const int c0 = ctile * kCT, nct = min(kCT, p.nchans - c0);
  const std::int64_t t0 = ttile * kBN;
  const int mtile = blockIdx.y;  // 32 beams
  const int pol_outer = blockIdx.z;
  const int nbins = kBN / p.integration;

  if constexpr (D == kCi4 || D == kCi8)
    for (int i = tid; i < 256; i += kThreads)
      tab[i] = table[i];
  for (int i = tid; i < kBeams * nbins * kCT; i += kThreads)
    O[i] = 0.f;

  // Stage s -> (channel, inner pol, k stage).
  const int nstages = nct * p.npol_inner * p.kstages;
  auto stage_coords = [&](int s, int& cl, int& pol, int& ks) {
    ks = s % p.kstages;
    const int r = s / p.kstages;
    pol = p.npol_inner == 1 ? pol_outer : r % p.npol_inner;
    cl = r / p.npol_inner;
  };
  auto load_a = [&](int s, int buf) {
    int cl, pol, ks;
    stage_coords(s, cl, pol, ks);
    const __half* src = aw +
                        ((static_cast<std::int64_t>(c0 + cl) * p.npol + pol) * p.mpad +
                         static_cast<std::int64_t>(mtile) * kBM) *
                            p.kpad +
                        ks * kBK;
    for (int i = tid; i < kBM * (kBK / 8); i += kThreads) {  // 16-byte chunks
      const int r = i / (kBK / 8), q = i % (kBK / 8);
      cp_async16(As + (buf * kBM + r) * kLd + 8 * q,
                 src + static_cast<std::int64_t>(r) * p.kpad + 8 * q);
    }
    cp_async_commit();
  };
  XLoader<D, NP> xl;
  const int xt = tid / 2, xh = tid % 2;  // this thread's X' row (time) and antenna half
  auto load_x = [&](int s) {
    int cl, pol, ks;
    (void)pol;
    stage_coords(s, cl, pol, ks);
    xl.load(in, p, c0 + cl, t0 + xt, ks * kAnt + 8 * xh);
  };
  auto store_x = [&](int s, int buf) {
    int cl, pol, ks;
    stage_coords(s, cl, pol, ks);
    unsigned h[8];
    if (NP == 2 && pol == 1)
      xl.template decode_all<NP == 2 ? 1 : 0>(h, p, ks * kAnt + 8 * xh, tab);
    else
      xl.template decode_all<0>(h, p, ks * kAnt + 8 * xh, tab);
    uint4* dst = reinterpret_cast<uint4*>(Bs + (buf * kBN + xt) * kLd + 16 * xh);
    dst[0] = make_uint4(h[0], h[1], h[2], h[3]);
    dst[1] = make_uint4(h[4], h[5], h[6], h[7]);
  };

  float acc[2][4][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          acc[i][j][k] = 0.f;
  };
  zero_acc();

  __syncthreads();  // the table is in place before the first decode
  load_a(0, 0);
  load_x(0);
  store_x(0, 0);
  cp_async_wait_all();
  __syncthreads();

  for (int s = 0; s < nstages; ++s) {
    const int buf = s & 1;
    if (s + 1 < nstages) {
      load_a(s + 1, buf ^ 1);
      load_x(s + 1);
    }
    // Multiply: two k16 steps over the stage.
    const __half* a_base = As + buf * kBM * kLd;
    const __half* b_base = Bs + buf * kBN * kLd;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      unsigned af[2][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int row = wm * 32 + i * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        ldmatrix_x4(af[i], a_base + row * kLd + kk + (lane / 16) * 8);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {  // two pairs of n8 tiles
        const int n = wn * 32 + j * 16 + (lane % 8) + (lane / 16) * 8;
        ldmatrix_x4(bf[j], b_base + n * kLd + kk + ((lane / 8) % 2) * 8);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma_16816(acc[i][j], af[i], bf[j / 2][2 * (j % 2)], bf[j / 2][2 * (j % 2) + 1]);
    }
    int cl, pol, ks;
    stage_coords(s, cl, pol, ks);
    if (ks == p.kstages - 1) {
      // Channel (and pol) finished: |V|^2 into the output tile, then start afresh.
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int bl = (wm * 2 + i) * 8 + lane / 4;  // beam within the block
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int tl = wn * 32 + j * 8 + 2 * (lane % 4);
          const float p0 = acc[i][j][0] * acc[i][j][0] + acc[i][j][2] * acc[i][j][2];
          const float p1 = acc[i][j][1] * acc[i][j][1] + acc[i][j][3] * acc[i][j][3];
          float* o0 = O + (bl * nbins + tl / p.integration) * kCT + cl;
          float* o1 = O + (bl * nbins + (tl + 1) / p.integration) * kCT + cl;
          if (p.integration == 1) {
            *o0 += p0;  // each entry belongs to this thread alone
            *o1 += p1;
          } else if (p.integration == 2) {
            *o0 += p0 + p1;
          } else {
            atomicAdd(o0, p0 + p1);  // bins shared between lanes
          }
        }
      }
      zero_acc();
    }
    if (s + 1 < nstages) store_x(s + 1, buf ^ 1);
    cp_async_wait_all();
    __syncthreads();
  }

  // Store the tile: rows of 8 channels of [beam][pol][time / N][chan].
  const std::int64_t ntout = p.nsamples / p.integration;
  const std::int64_t to0 = t0 / p.integration;
  for (int i = tid; i < kBeams * nbins * kCT; i += kThreads) {
    const int cl = i % kCT, bin = (i / kCT) % nbins, bl = i / (kCT * nbins);
    const int b = mtile * kBeams + bl;
    const std::int64_t to = to0 + bin;
    if (cl < nct && b < p.nbeams && to < ntout)
      out[((static_cast<std::int64_t>(b) * p.nout_pols + pol_outer) * ntout + to) * p.nchans + c0 +
          cl] = O[i];
  }
}

// Host-layout weights [chan][pol][beam][ant] (fp32 complex, on the device) -> A' [chan][pol]
// [mpad][kpad] fp16 with the re/im row arrangement described at the top.
__global__ void build_a_prime(const float2* __restrict__ w, __half* __restrict__ aw, int nchans,
                              int npol, int nbeams, int nant, int mpad, int kpad) {
  const std::int64_t n = static_cast<std::int64_t>(nchans) * npol * mpad * kpad;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % kpad);
    const int r = static_cast<int>((i / kpad) % mpad);
    const std::int64_t cp = i / (static_cast<std::int64_t>(kpad) * mpad);  // chan * npol + pol
    const int b = (r / 16) * 8 + r % 8, im_out = (r % 16) / 8;
    const int a = k / 2, im_in = k % 2;
    float v = 0.f;
    if (b < nbeams && a < nant) {
      const float2 x = w[(cp * nbeams + b) * nant + a];
      v = im_out ? (im_in ? x.x : x.y) : (im_in ? -x.y : x.x);
      v = fminf(fmaxf(v, -65504.f), 65504.f);
    }
    aw[i] = __float2half_rn(v);
  }
}

class CudaMmaExecutor final : public Executor {
 public:
  explicit CudaMmaExecutor(const PlanData& pd) : table_(256) {
    const auto& c = pd.config;
    if (!pd.table.empty()) copy_bytes(table_.data(), pd.table.data(), table_.bytes());
    mpad_ = (c.nbeams + kBeams - 1) / kBeams * kBM;
    kpad_ = (c.nantennas + kAnt - 1) / kAnt * kBK;
    wstage_ =
        DeviceArray<float2>(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams * c.nantennas);
    aw_ = DeviceArray<__half>(static_cast<std::size_t>(c.nchans) * c.npol * mpad_ * kpad_);
    const bool dual = c.npol == 2;
    switch (c.sample_type) {
      case SampleType::ci4:
        kernel_ = dual ? mma_kernel<kCi4, 2> : mma_kernel<kCi4, 1>;
        break;
      case SampleType::ci8:
        kernel_ = dual ? mma_kernel<kCi8, 2> : mma_kernel<kCi8, 1>;
        break;
      case SampleType::cf16:
        kernel_ = dual ? mma_kernel<kCf16, 2> : mma_kernel<kCf16, 1>;
        break;
      case SampleType::cf32:
        kernel_ = dual ? mma_kernel<kCf32, 2> : mma_kernel<kCf32, 1>;
        break;
    }
    const int nbins = kBN / c.integration;
    smem_ = (2 * kBM * kLd + 2 * kBN * kLd) * sizeof(__half) + 256 * sizeof(float2) +
            static_cast<std::size_t>(kBeams) * nbins * kCT * sizeof(float);
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel_), smem_);
    nchan_tiles_ = (c.nchans + kCT - 1) / kCT;
    blocks_x_ = (c.nsamples + kBN - 1) / kBN * nchan_tiles_;
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
    const unsigned blocks = grid_stride_blocks(aw_.size(), threads);
    build_a_prime<<<blocks, threads, 0, s>>>(wstage_.data(), aw_.data(), c.nchans, c.npol, c.nbeams,
                                             c.nantennas, mpad_, kpad_);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    Params p{shape_params(c)};
    p.npol_inner = (c.sum_pols && c.npol == 2) ? 2 : 1;
    p.kstages = kpad_ / kBK;
    p.mpad = mpad_;
    p.kpad = kpad_;
    const int chunk = 8 * c.npol * bytes_per_complex(c.sample_type);  // bytes per 8 antennas
    const int align = chunk >= 16 ? 16 : 8;
    p.vector_loads = p.row_bytes % align == 0 && reinterpret_cast<std::uintptr_t>(in) % align == 0;
    p.nchan_tiles = nchan_tiles_;
    const dim3 grid(static_cast<unsigned>(blocks_x_), static_cast<unsigned>(mpad_ / kBM),
                    static_cast<unsigned>(c.npol / p.npol_inner));
    cudaStream_t s = WB_STREAM(stream);
    kernel_<<<grid, kThreads, smem_, s>>>(in, aw_.data(), table_.data(), p, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  using KernelFn = void (*)(const std::uint8_t*, const __half*, const float2*, Params, float*);
  DeviceArray<float2> table_, wstage_;
  DeviceArray<__half> aw_;
  KernelFn kernel_ = nullptr;
  std::size_t smem_ = 0;
  int mpad_ = 0, kpad_ = 0, nchan_tiles_ = 0;
  std::int64_t blocks_x_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_tensor_core_executor(const PlanData& plan) {
  return std::make_unique<CudaMmaExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
