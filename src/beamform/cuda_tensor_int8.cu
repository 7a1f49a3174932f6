// CUDA beamformer on int8 tensor cores (tensor_int8). Per channel and pol the beams are the
// complex GEMM V[beam][time] = Q[beam][antenna] X[antenna][time] in integers, as one real GEMM on
// mma.sync.m16n8k32 (s8 x s8 -> s32, exact):
//   A' [2B x 2A] s8: for beam b and antenna a the 2x2 block [[qr, -qi], [qi, qr]] (rows: re/im out,
//      columns k' = 2a + re/im in); q in [-127, 127], so -q fits;
//   X' [2A x T] s8: the ci4/ci8 codes expanded to s8 (re, im) pairs in the kernel: two's
//      complement by bit operations, other encodings through a 256-entry s8 table.
// Rows of each 16-row MMA tile are the real parts of 8 beams (rows 0-7) and their imaginary parts
// (rows 8-15), so a thread's accumulators c0/c2 (c1/c3) are Re/Im of one beam at one time: the
// detection happens in registers. |V|^2 is formed in 64-bit integers and summed exactly over the
// pols and the integration (registers, or 64-bit shared-memory atomics when lanes share an output
// sample: integer sums do not depend on the order), and the output is float(P) * fl(s^2) with the
// beam's scale s (beamform/int8.hpp, whose emulate_int8() computes the same numbers on the host).
// The complex beams never reach device memory.
//
// Block: WM x 2 warps of 32 x 32 outputs (16 beams x 32 samples each); tile 32 WM rows (16 WM
// beams) x 64 samples, K step 64 (32 antennas, two k32 MMA steps), two shared-memory stages (A' by
// cp.async, X' through registers: the next stage's global loads are in flight during the current
// one's MMAs). The block loops over 8 channels and stores rows of 8 channels (32 B) of
// [beam][pol][time][chan] from a shared-memory tile (the transpose fused into the store).
// WM = 2 (32 beams per block) for nbeams <= 32 (B1), else WM = 4 (64 beams per block).
// Not measured yet (issue 17: the next GPU session runs bench/gpu-benchmarks.txt).
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

constexpr int kBN = 64;        // time samples per block
constexpr int kBK = 64;        // k' bytes per stage (32 antennas)
constexpr int kAnt = kBK / 2;  // antennas per stage
constexpr int kLd = kBK + 16;  // padded row (bytes): 80 B rows make ldmatrix conflict-free
constexpr int kCT = 8;         // channels per block (the output tile's fastest axis)
static_assert(kLd % 16 == 0, "rows must stay 16-byte aligned for cp.async/ldmatrix");

struct Params : ShapeParams {
  int npol_inner, kstages;
  int mpad, kpad;     // A' rows / columns in device memory
  bool vector_loads;  // input rows and pointer aligned for word loads
  bool raw;           // two's complement codes: expand by bit operations, not the table
  int nchan_tiles;
};

template <int D, int NP, int WM>
__global__ void __launch_bounds__(64 * WM)
    int8_kernel(const std::uint8_t* __restrict__ in, const std::int8_t* __restrict__ aw,
                const char2* __restrict__ table, const float* __restrict__ scale2, Params p,
                float* __restrict__ out) {
  constexpr int kThreads = 64 * WM;
  constexpr int kBM = 32 * WM;  // A' rows per block
  constexpr int kBeams = kBM / 2;
  constexpr int kApt = kAnt / WM;  // antennas per thread in the X' stage (16 or 8)
  static_assert(kBN * WM == kThreads, "X' stage: WM threads per time row");
  extern __shared__ float4 smem_raw[];
  std::int8_t* As = reinterpret_cast<std::int8_t*>(smem_raw);  // [2][kBM][kLd]
  std::int8_t* Bs = As + 2 * kBM * kLd;                        // [2][kBN][kLd]
  char2* tab = reinterpret_cast<char2*>(Bs + 2 * kBN * kLd);   // [256]
  float* S2 = reinterpret_cast<float*>(tab + 256);             // [kCT][kBeams]
  float* Of = S2 + kCT * kBeams;  // integration 1: [kBeams][kBN][kCT] float
  unsigned long long* Ou = reinterpret_cast<unsigned long long*>(Of);  // else [kBeams][bins][kCT]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;  // warp's 32-row / 32-column block
  const int ctile = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.nchan_tiles));
  const std::int64_t ttile = blockIdx.x / static_cast<unsigned>(p.nchan_tiles);
  const int c0 = ctile * kCT, nct = min(kCT, p.nchans - c0);
  const std::int64_t t0 = ttile * kBN;
  const int mtile = blockIdx.y;
  const int pol_outer = blockIdx.z;
  const int n = p.integration, nbins = kBN / n;

  for (int i = tid; i < 256; i += kThreads)
    tab[i] = table[i];
  for (int i = tid; i < kCT * kBeams; i += kThreads) {
    const int cl = i / kBeams, b = mtile * kBeams + i % kBeams;
    S2[i] = (cl < nct && b < p.nbeams) ? scale2[static_cast<std::int64_t>(c0 + cl) * p.nbeams + b]
                                       : 0.f;
  }
  if (n > 1)
    for (int i = tid; i < kBeams * nbins * kCT; i += kThreads)
      Ou[i] = 0ull;

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
    const std::int8_t* src = aw +
                             ((static_cast<std::int64_t>(c0 + cl) * p.npol + pol) * p.mpad +
                              static_cast<std::int64_t>(mtile) * kBM) *
                                 p.kpad +
                             ks * kBK;
    for (int i = tid; i < kBM * (kBK / 16); i += kThreads) {  // 16-byte chunks
      const int r = i / (kBK / 16), q = i % (kBK / 16);
      cp_async16(As + (buf * kBM + r) * kLd + 16 * q,
                 src + static_cast<std::int64_t>(r) * p.kpad + 16 * q);
    }
    cp_async_commit();
  };
  XLoader<D, NP, kApt> xl;
  const int xt = tid / WM, xq = tid % WM;  // this thread's X' row (time) and antenna group
  auto load_x = [&](int s) {
    int cl, pol, ks;
    stage_coords(s, cl, pol, ks);
    xl.load(in, p, c0 + cl, t0 + xt, ks * kAnt + kApt * xq);
  };
  auto store_x = [&](int s, int buf) {
    int cl, pol, ks;
    stage_coords(s, cl, pol, ks);
    unsigned h[kApt / 2];
    if (NP == 2 && pol == 1)
      xl.template expand<NP == 2 ? 1 : 0>(h, p.raw, p.nant, ks * kAnt + kApt * xq, tab);
    else
      xl.template expand<0>(h, p.raw, p.nant, ks * kAnt + kApt * xq, tab);
    uint4* dst = reinterpret_cast<uint4*>(Bs + (buf * kBN + xt) * kLd + 2 * kApt * xq);
#pragma unroll
    for (int i = 0; i < kApt / 8; ++i)
      dst[i] = make_uint4(h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]);
  };

  int acc[2][4][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          acc[i][j][k] = 0;
  };
  zero_acc();
  // Integration 1 with the pol sum: pol 0's |V|^2 waits here for pol 1's (same thread, same
  // output sample), so that the sum stays an exact integer.
  unsigned long long held[2][4][2];

  __syncthreads();  // the table is in place before the first expansion
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
    const std::int8_t* a_base = As + buf * kBM * kLd;
    const std::int8_t* b_base = Bs + buf * kBN * kLd;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 32) {
      unsigned af[2][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int row = wm * 32 + i * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        ldmatrix_x4(af[i], a_base + row * kLd + kk + (lane / 16) * 16);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {  // two pairs of n8 tiles
        const int nrow = wn * 32 + j * 16 + (lane % 8) + (lane / 16) * 8;
        ldmatrix_x4(bf[j], b_base + nrow * kLd + kk + ((lane / 8) % 2) * 16);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma_16832(acc[i][j], af[i], bf[j / 2][2 * (j % 2)], bf[j / 2][2 * (j % 2) + 1]);
    }
    int cl, pol, ks;
    stage_coords(s, cl, pol, ks);
    if (ks == p.kstages - 1) {
      // Channel (and pol) finished: |V|^2 in 64-bit integers into the output tile.
      const bool last_pol = p.npol_inner == 1 || pol == p.npol_inner - 1;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int bl = (wm * 2 + i) * 8 + lane / 4;  // beam within the block
        const float s2 = S2[cl * kBeams + bl];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int tl = wn * 32 + j * 8 + 2 * (lane % 4);
          const auto* c = acc[i][j];
          const unsigned long long p0 = static_cast<unsigned long long>(
              static_cast<long long>(c[0]) * c[0] + static_cast<long long>(c[2]) * c[2]);
          const unsigned long long p1 = static_cast<unsigned long long>(
              static_cast<long long>(c[1]) * c[1] + static_cast<long long>(c[3]) * c[3]);
          if (n == 1) {
            unsigned long long q0 = p0, q1 = p1;
            if (p.npol_inner == 2) {
              if (pol == 0) {
                held[i][j][0] = p0;
                held[i][j][1] = p1;
              } else {
                q0 += held[i][j][0];
                q1 += held[i][j][1];
              }
            }
            if (last_pol) {  // each entry belongs to this thread alone
              Of[(bl * kBN + tl) * kCT + cl] = __fmul_rn(__ull2float_rn(q0), s2);
              Of[(bl * kBN + tl + 1) * kCT + cl] = __fmul_rn(__ull2float_rn(q1), s2);
            }
          } else {  // t and t + 1 share a bin; lanes and warps share bins: exact atomics
            atomicAdd(Ou + (bl * nbins + tl / n) * kCT + cl, p0 + p1);
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
  const std::int64_t ntout = p.nsamples / n;
  const std::int64_t to0 = t0 / n;
  for (int i = tid; i < kBeams * nbins * kCT; i += kThreads) {
    const int cl = i % kCT, bin = (i / kCT) % nbins, bl = i / (kCT * nbins);
    const int b = mtile * kBeams + bl;
    const std::int64_t to = to0 + bin;
    if (cl < nct && b < p.nbeams && to < ntout) {
      const float v = n == 1 ? Of[i] : __fmul_rn(__ull2float_rn(Ou[i]), S2[cl * kBeams + bl]);
      out[((static_cast<std::int64_t>(b) * p.nout_pols + pol_outer) * ntout + to) * p.nchans + c0 +
          cl] = v;
    }
  }
}

class CudaInt8Executor final : public Executor {
 public:
  explicit CudaInt8Executor(const PlanData& pd) : table_(256) {
    const auto& c = pd.config;
    const std::vector<std::int8_t> t = int8_table(c);  // (re, im) s8 pairs
    copy_bytes(table_.data(), t.data(), table_.bytes());
    raw_ = c.encoding == Encoding::twos_complement && c.levels.empty();
    wm_ = c.nbeams <= 32 ? 2 : 4;
    const int bm = 32 * wm_, beams = bm / 2;
    mpad_ = (c.nbeams + beams - 1) / beams * bm;
    kpad_ = (c.nantennas + kAnt - 1) / kAnt * kBK;
    q_ = DeviceArray<std::int8_t>(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams *
                                  c.nantennas * 2);
    scale2_ = DeviceArray<float>(static_cast<std::size_t>(c.nchans) * c.nbeams);
    aw_ = DeviceArray<std::int8_t>(static_cast<std::size_t>(c.nchans) * c.npol * mpad_ * kpad_);
    const bool dual = c.npol == 2, ci4 = c.sample_type == SampleType::ci4;
    if (wm_ == 2)
      kernel_ = ci4 ? (dual ? int8_kernel<kCi4, 2, 2> : int8_kernel<kCi4, 1, 2>)
                    : (dual ? int8_kernel<kCi8, 2, 2> : int8_kernel<kCi8, 1, 2>);
    else
      kernel_ = ci4 ? (dual ? int8_kernel<kCi4, 2, 4> : int8_kernel<kCi4, 1, 4>)
                    : (dual ? int8_kernel<kCi8, 2, 4> : int8_kernel<kCi8, 1, 4>);
    // Output tile: integration 1, floats [beams][64][8]; else 64-bit sums [beams][64 / N][8].
    const std::size_t tile = c.integration == 1
                                 ? static_cast<std::size_t>(beams) * kBN * kCT * sizeof(float)
                                 : static_cast<std::size_t>(beams) * (kBN / c.integration) * kCT *
                                       sizeof(unsigned long long);
    smem_ =
        (2 * bm * kLd + 2 * kBN * kLd) + 256 * sizeof(char2) + kCT * beams * sizeof(float) + tile;
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel_), smem_);
    nchan_tiles_ = (c.nchans + kCT - 1) / kCT;
    blocks_x_ = (c.nsamples + kBN - 1) / kBN * nchan_tiles_;
    if (blocks_x_ > 0x7FFFFFFF)
      fail(ErrorCategory::invalid_argument,
           "nsamples x nchans is too large for one CUDA launch: use smaller blocks");
  }

  void set_weights(const PlanData& pd, const std::complex<float>*, const Stream* stream) override {
    if (!pd.int8) return;  // the plan quantises first, then calls again with the result
    upload_int8_weights(pd, q_, scale2_, aw_, mpad_, kpad_, stream);
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    Params p{shape_params(c)};
    p.npol_inner = (c.sum_pols && c.npol == 2) ? 2 : 1;
    p.kstages = kpad_ / kBK;
    p.mpad = mpad_;
    p.kpad = kpad_;
    // A thread reads 8 bytes per word pair: rows and the pointer must be 8-byte aligned.
    p.vector_loads = p.row_bytes % 8 == 0 && reinterpret_cast<std::uintptr_t>(in) % 8 == 0;
    p.raw = raw_;
    p.nchan_tiles = nchan_tiles_;
    const dim3 grid(static_cast<unsigned>(blocks_x_), static_cast<unsigned>(mpad_ / (32 * wm_)),
                    static_cast<unsigned>(c.npol / p.npol_inner));
    cudaStream_t s = WB_STREAM(stream);
    kernel_<<<grid, 64 * wm_, smem_, s>>>(in, aw_.data(), table_.data(), scale2_.data(), p, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  using KernelFn = void (*)(const std::uint8_t*, const std::int8_t*, const char2*, const float*,
                            Params, float*);
  DeviceArray<char2> table_;
  DeviceArray<std::int8_t> q_, aw_;
  DeviceArray<float> scale2_;
  KernelFn kernel_ = nullptr;
  std::size_t smem_ = 0;
  bool raw_ = true;
  int wm_ = 2, mpad_ = 0, kpad_ = 0, nchan_tiles_ = 0;
  std::int64_t blocks_x_ = 0;
};

}  // namespace

namespace {
// q [chan][pol][beam][ant][re, im] -> A' [chan][pol][mpad][kpad] s8 with the re/im row
// arrangement described at the top (zero in the padding).
__global__ void build_a_int8_kernel(const std::int8_t* __restrict__ q, std::int8_t* __restrict__ aw,
                                    int nchans, int npol, int nbeams, int nant, int mpad,
                                    int kpad) {
  const std::int64_t total = static_cast<std::int64_t>(nchans) * npol * mpad * kpad;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % kpad);
    const int r = static_cast<int>((i / kpad) % mpad);
    const std::int64_t cp = i / (static_cast<std::int64_t>(kpad) * mpad);  // chan * npol + pol
    const int b = (r / 16) * 8 + r % 8, im_out = (r % 16) / 8;
    const int a = k / 2, im_in = k % 2;
    int v = 0;
    if (b < nbeams && a < nant) {
      const std::int8_t* x = q + ((cp * nbeams + b) * nant + a) * 2;  // (qr, qi)
      v = im_out ? (im_in ? x[0] : x[1]) : (im_in ? -x[1] : x[0]);
    }
    aw[i] = static_cast<std::int8_t>(v);
  }
}

}  // namespace

void launch_build_a_int8(const std::int8_t* q, std::int8_t* aw, int nchans, int npol, int nbeams,
                         int nant, int mpad, int kpad, cudaStream_t s) {
  const int threads = 256;
  const std::size_t n = static_cast<std::size_t>(nchans) * npol * mpad * kpad;
  build_a_int8_kernel<<<grid_stride_blocks(n, threads), threads, 0, s>>>(q, aw, nchans, npol,
                                                                         nbeams, nant, mpad, kpad);
  WB_CUDA_CHECK_LAUNCH();
}

void upload_int8_weights(const PlanData& pd, DeviceArray<std::int8_t>& q,
                         DeviceArray<float>& scale2, DeviceArray<std::int8_t>& aw, int mpad,
                         int kpad, const Stream* stream) {
  const auto& c = pd.config;
  cudaStream_t s = WB_STREAM(stream);
  copy_bytes(q.data(), pd.int8->q.data(), q.bytes(), stream);
  copy_bytes(scale2.data(), pd.int8->scale2.data(), scale2.bytes(), stream);
  launch_build_a_int8(q.data(), aw.data(), c.nchans, c.npol, c.nbeams, c.nantennas, mpad, kpad, s);
  if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
}

std::unique_ptr<Executor> make_tensor_int8_executor(const PlanData& plan) {
  if (uses_int8_gemm(plan.config)) return make_tensor_int8_gemm_executor(plan);
  return std::make_unique<CudaInt8Executor>(plan);
}

}  // namespace warpbeam::beamform::detail
