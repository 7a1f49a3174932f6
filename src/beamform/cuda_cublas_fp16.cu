// CUDA beamformer for large N through cuBLAS: "cublas-fp16" (round 2).
//
// Why: round 1's hand-written mma.sync kernel (cuda_tensor_core.cu) ran B2 (256 dual-pol antennas,
// 1024 beams, 384 ch, 2048 samples, ci8) at 82 ms = 40 TFLOP/s, 5 % of cuBLAS's fp16 GEMM rate (850
// TFLOP/s measured): 64 x 64 block tiles, K steps of 32 and a __syncthreads per step. cuBLAS's
// sm_90 GEMMs (wgmma, TMA, deep pipelines) reach the tensor-core rate for these shapes (per channel
// and pol M = 2 x 1024, N = 2048, K = 2 x 256).
//
// Per chunk of channels (bounded scratch), three launches:
//  1. unpack: ci4/ci8/cf16/cf32 [chan][time][antenna][pol] -> X' fp16 [chan][pol][time][k'],
//     k' = 2 antenna + (re, im), zero-padded to kpad (the natural "K-major" operand).
//  2. cublasGemmStridedBatchedEx, batch = channels x pols, fp16 in, fp32 accumulate:
//       C'[t][r] = sum_k' A'[r][k'] X'[t][k'],
//     A' [chan][pol][mpad][kpad] built once per set_weights: row r = 2 beam + (re, im) out,
//       row 2b:     [ Wr, -Wi ] at k' = 2a, 2a + 1     -> Re v_b
//       row 2b + 1: [ Wi,  Wr ]                          -> Im v_b
//     (the real 2x2-block form of the complex product: 8 real flops per complex MAC, as the
//     complex GEMM). C' rows hold (Re, Im) of each beam side by side. C' is fp32 or fp16
//     (tuning.gemm_output_bits); fp16 is scaled by alpha = 2^-e chosen from the weights so that
//     |C'| <= sum_k |A'| max|x| 2^-e <= 16384 cannot overflow.
//  3. detect: |v|^2 (x 2^2e), summed over pols and integration bins in a fixed order, through a
//     32 x 32 shared-memory tile to [beam][pol][time][chan] rows of 32 channels (or the complex
//     voltages). No atomics: bitwise reproducible.
// Bytes for B2 (the floor is the GEMM: 3.3e12 flop at ~700 TFLOP/s = 4.7 ms):
//   unpack 0.8 GB read + 1.6 GB written;   GEMM: X' 1.6 + A' 1.6 GB read, C' 6.4 GB (fp16) or
//   12.9 GB (fp32) written;   detect: C' read, 6.4 GB of power written.
// Predicted: fp16 C' 0.7 + ~5 + ~3.5 = ~9 ms; fp32 C' 0.7 + ~6 + ~5 = ~12 ms (vs 82 ms round 1,
// 22.5 ms cuBLAS TF32 complex GEMM). The target (6.7 ms) needs the detection fused into the
// GEMM's epilogue (C' never written): a next step.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "beamform/cuda_common.cuh"
#include "beamform/executor.hpp"
#include "core/cuda_check.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform::detail {
namespace {

constexpr std::size_t kScratchBudget = std::size_t{1} << 30;  // bytes of C' per chunk (at most)
constexpr int kTile = 32;                                     // detect: 32 channels x 32 beams
constexpr int kBinsPerBlock = 8;                              // detect: output bins per block

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCategory::cuda,
         std::string("cuBLAS error ") + std::to_string(static_cast<int>(s)) + " in " + what);
}

__device__ __forceinline__ unsigned pack_half2_clamped(float2 v) {
  const __half2 h =
      __floats2half2_rn(fminf(fmaxf(v.x, -65504.f), 65504.f), fminf(fmaxf(v.y, -65504.f), 65504.f));
  return *reinterpret_cast<const unsigned*>(&h);
}

struct UnpackParams {
  int nant, npol, khalf;  // khalf = kpad / 2 (complex slots per X' row)
  std::int64_t nsamples, row_bytes;
};

/// One block per input row (channel of the chunk, time): X'[chl][pol][t][a] = (re, im) as half2.
template <int D>
__global__ void unpack_kernel(const std::uint8_t* __restrict__ in, const float2* __restrict__ table,
                              UnpackParams p, unsigned* __restrict__ xp) {
  __shared__ float2 tab[256];
  if constexpr (D == kCi4 || D == kCi8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
      tab[i] = table[i];
    __syncthreads();
  }
  const std::int64_t row = blockIdx.x;  // chl * nsamples + t
  const std::int64_t chl = row / p.nsamples, t = row % p.nsamples;
  const std::uint8_t* src = in + row * p.row_bytes;
  constexpr int bpc = kBytesPerComplex<D>;
  for (int a = threadIdx.x; a < p.khalf; a += blockDim.x)
    for (int pol = 0; pol < p.npol; ++pol) {
      unsigned v = 0u;
      if (a < p.nant)
        v = pack_half2_clamped(
            decode_sample<D>(src + (static_cast<std::int64_t>(a) * p.npol + pol) * bpc, tab));
      xp[((chl * p.npol + pol) * p.nsamples + t) * p.khalf + a] = v;
    }
}

/// Host-layout weights [chan][pol][beam][ant] (fp32 complex, device) -> A' [chan][pol][mpad][kpad]
/// fp16, rows interleaved (Re, Im) per beam as described at the top.
__global__ void build_a_interleaved(const float2* __restrict__ w, __half* __restrict__ aw,
                                    std::int64_t nmat, int nbeams, int nant, int mpad, int kpad) {
  const std::int64_t n = nmat * mpad * kpad;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % kpad);
    const int r = static_cast<int>((i / kpad) % mpad);
    const std::int64_t m = i / (static_cast<std::int64_t>(kpad) * mpad);  // chan * npol + pol
    const int b = r / 2, im_out = r % 2, a = k / 2, im_in = k % 2;
    float v = 0.f;
    if (b < nbeams && a < nant) {
      const float2 x = w[(m * nbeams + b) * nant + a];
      v = im_out ? (im_in ? x.x : x.y) : (im_in ? -x.y : x.x);
      v = fminf(fmaxf(v, -65504.f), 65504.f);
    }
    aw[i] = __float2half_rn(v);
  }
}

struct DetectParams {
  int chunk_chans, chan0, nchans, npol, nbeams, mhalf;  // mhalf = mpad / 2 complex per C' row
  std::int64_t nsamples, ntout;
  int integration, nout_pols, npol_inner;
  bool voltage;
  float power_scale, voltage_scale;
};

__device__ __forceinline__ float2 load_c(const float2* p) {
  return *p;
}
__device__ __forceinline__ float2 load_c(const __half2* p) {
  return __half22float2(*p);
}

/// Block (32, 8): a tile of 32 channels x 32 beams for kBinsPerBlock output bins of one output
/// pol. Reads C' rows along beams (256 contiguous bytes), writes output rows along channels
/// (128 contiguous bytes).
template <typename CT>
__global__ void __launch_bounds__(256)
    detect_kernel(const CT* __restrict__ cp, DetectParams p, float* __restrict__ out) {
  __shared__ float2 tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int b0 = blockIdx.x * kTile, cl0 = blockIdx.y * kTile;
  const std::int64_t ngroups = (p.ntout + kBinsPerBlock - 1) / kBinsPerBlock;
  for (std::int64_t z = blockIdx.z; z < ngroups * p.nout_pols; z += gridDim.z) {
    const int op = static_cast<int>(z % p.nout_pols);
    const std::int64_t bin0 = (z / p.nout_pols) * kBinsPerBlock;
    const std::int64_t bin1 = min(bin0 + kBinsPerBlock, p.ntout);
    for (std::int64_t bin = bin0; bin < bin1; ++bin) {
      // Load: thread (tx = beam, ty) sums channels cl0 + ty + 8 i.
      float2 acc[kTile / 8];
#pragma unroll
      for (int i = 0; i < kTile / 8; ++i) {
        acc[i] = make_float2(0.f, 0.f);
        const int cl = cl0 + ty + 8 * i, b = b0 + tx;
        if (cl >= p.chunk_chans || b >= p.nbeams) continue;
        for (int q = 0; q < p.npol_inner; ++q) {
          const int pol = p.npol_inner == 2 ? q : op;
          const CT* row =
              cp +
              ((static_cast<std::int64_t>(cl) * p.npol + pol) * p.nsamples + bin * p.integration) *
                  p.mhalf +
              b;
          for (int s = 0; s < p.integration; ++s) {
            const float2 v = load_c(row + static_cast<std::int64_t>(s) * p.mhalf);
            if (p.voltage)
              acc[i] = v;
            else
              acc[i].x += v.x * v.x + v.y * v.y;
          }
        }
      }
      __syncthreads();  // the previous bin's tile is stored
#pragma unroll
      for (int i = 0; i < kTile / 8; ++i)
        tile[ty + 8 * i][tx] = acc[i];
      __syncthreads();
      // Store: thread (tx = channel, ty) writes beams b0 + ty + 8 i.
      const int cl = cl0 + tx;
      if (cl < p.chunk_chans) {
        const std::int64_t cg = p.chan0 + cl;
#pragma unroll
        for (int i = 0; i < kTile / 8; ++i) {
          const int b = b0 + ty + 8 * i;
          if (b >= p.nbeams) continue;
          const float2 v = tile[tx][ty + 8 * i];
          if (p.voltage) {
            reinterpret_cast<float2*>(
                out)[((static_cast<std::int64_t>(b) * p.npol + op) * p.nsamples + bin) * p.nchans +
                     cg] = make_float2(v.x * p.voltage_scale, v.y * p.voltage_scale);
          } else {
            out[((static_cast<std::int64_t>(b) * p.nout_pols + op) * p.ntout + bin) * p.nchans +
                cg] = v.x * p.power_scale;
          }
        }
      }
    }
  }
}

template <int D>
void launch_unpack(const std::uint8_t* in, const float2* table, const UnpackParams& p,
                   std::int64_t rows, unsigned* xp, cudaStream_t s) {
  const int threads = std::min(256, std::max(32, (p.khalf + 31) / 32 * 32));
  unpack_kernel<D><<<static_cast<unsigned>(rows), threads, 0, s>>>(in, table, p, xp);
  WB_CUDA_CHECK_LAUNCH();
}

class CudaGemmExecutor final : public Executor {
 public:
  explicit CudaGemmExecutor(const PlanData& pd) : tuning_(pd.tuning), table_(256) {
    const auto& c = pd.config;
    if (!pd.table.empty()) copy_bytes(table_.data(), pd.table.data(), table_.bytes());
    mpad_ = (2 * c.nbeams + 15) / 16 * 16;
    kpad_ = (2 * c.nantennas + 15) / 16 * 16;
    if (c.nsamples > 0x7FFFFFFF)
      fail(ErrorCategory::invalid_argument, "cublas-fp16 takes at most 2^31 - 1 samples per block");
    out16_ = tuning_.gemm_output_bits == 16;
    const std::size_t celem = out16_ ? 2 : 4;
    const std::size_t per_chan = static_cast<std::size_t>(c.npol) * c.nsamples * mpad_ * celem;
    chunk_ = static_cast<int>(
        std::clamp<std::size_t>(kScratchBudget / per_chan, 1, static_cast<std::size_t>(c.nchans)));
    if (tuning_.gemm_chunk_channels > 0) chunk_ = std::min(tuning_.gemm_chunk_channels, c.nchans);
    wstage_ =
        DeviceArray<float2>(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams * c.nantennas);
    aw_ = DeviceArray<__half>(static_cast<std::size_t>(c.nchans) * c.npol * mpad_ * kpad_);
    xp_ = DeviceArray<__half>(static_cast<std::size_t>(chunk_) * c.npol * c.nsamples * kpad_);
    cbuf_ = DeviceArray<std::uint8_t>(static_cast<std::size_t>(chunk_) * per_chan);
    cublas_check(cublasCreate(&handle_), "cublasCreate");
    // Largest |x| the unpacked input can hold: the levels, or fp16's range (X' is fp16).
    xmax_ = 65504.f;
    if (!pd.table.empty()) {
      xmax_ = 0.f;
      for (float v : pd.table)
        xmax_ = std::max(xmax_, std::fabs(v));
    }
  }
  ~CudaGemmExecutor() override {
    if (handle_) cublasDestroy(handle_);
  }
  CudaGemmExecutor(const CudaGemmExecutor&) = delete;
  CudaGemmExecutor& operator=(const CudaGemmExecutor&) = delete;

  CudaTuning tuning() const override { return tuning_; }

  void set_weights(const PlanData& pd, const std::complex<float>* w,
                   const Stream* stream) override {
    const auto& c = pd.config;
    cudaStream_t s = WB_STREAM(stream);
    copy_bytes(wstage_.data(), w, wstage_.bytes(), stream);
    const int threads = 256;
    const unsigned blocks = grid_stride_blocks(aw_.size(), threads);
    build_a_interleaved<<<blocks, threads, 0, s>>>(wstage_.data(), aw_.data(),
                                                   static_cast<std::int64_t>(c.nchans) * c.npol,
                                                   c.nbeams, c.nantennas, mpad_, kpad_);
    WB_CUDA_CHECK_LAUNCH();
    // fp16 C': the largest row sum of |A'| bounds |C'| / max|x|; scale by 2^-e so that the bound
    // stays below 16384 (a quarter of fp16's range).
    exponent_ = 0;
    if (out16_) {
      double wmax = 0;
      const std::size_t n = static_cast<std::size_t>(c.nantennas);
      const std::size_t rows = static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams;
      for (std::size_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (std::size_t a = 0; a < n; ++a)
          sum += std::fabs(w[r * n + a].real()) + std::fabs(w[r * n + a].imag());
        wmax = std::max(wmax, sum);
      }
      const double bound = wmax * xmax_;
      if (bound > 16384) exponent_ = static_cast<int>(std::ceil(std::log2(bound / 16384)));
    }
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    cudaStream_t s = WB_STREAM(stream);
    cublas_check(cublasSetStream(handle_, s), "cublasSetStream");
    const float alpha = std::ldexp(1.0f, -exponent_), beta = 0.f;
    const std::int64_t row = c.row_bytes();
    const int npi = (c.output == OutputKind::power && c.sum_pols && c.npol == 2) ? 2 : 1;
    for (int ch0 = 0; ch0 < c.nchans; ch0 += chunk_) {
      const int nch = std::min(chunk_, c.nchans - ch0);
      // 1. unpack
      UnpackParams up{c.nantennas, c.npol, kpad_ / 2, c.nsamples, row};
      const std::uint8_t* src = in + static_cast<std::int64_t>(ch0) * c.nsamples * row;
      const std::int64_t rows = static_cast<std::int64_t>(nch) * c.nsamples;
      auto* xw = reinterpret_cast<unsigned*>(xp_.data());
      switch (c.sample_type) {
        case SampleType::ci4:
          launch_unpack<kCi4>(src, table_.data(), up, rows, xw, s);
          break;
        case SampleType::ci8:
          launch_unpack<kCi8>(src, table_.data(), up, rows, xw, s);
          break;
        case SampleType::cf16:
          launch_unpack<kCf16>(src, table_.data(), up, rows, xw, s);
          break;
        case SampleType::cf32:
          launch_unpack<kCf32>(src, table_.data(), up, rows, xw, s);
          break;
      }
      // 2. GEMM (column-major view: C' (mpad x T) = op(A') (mpad x kpad) X' (kpad x T)).
      const __half* a = aw_.data() + static_cast<std::int64_t>(ch0) * c.npol * mpad_ * kpad_;
      cublas_check(
          cublasGemmStridedBatchedEx(
              handle_, CUBLAS_OP_T, CUBLAS_OP_N, mpad_, static_cast<int>(c.nsamples), kpad_, &alpha,
              a, CUDA_R_16F, kpad_, static_cast<long long>(mpad_) * kpad_, xp_.data(), CUDA_R_16F,
              kpad_, static_cast<long long>(c.nsamples) * kpad_, &beta, cbuf_.data(),
              out16_ ? CUDA_R_16F : CUDA_R_32F, mpad_, static_cast<long long>(c.nsamples) * mpad_,
              nch * c.npol, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
      // 3. detect
      DetectParams dp{};
      dp.chunk_chans = nch;
      dp.chan0 = ch0;
      dp.nchans = c.nchans;
      dp.npol = c.npol;
      dp.nbeams = c.nbeams;
      dp.mhalf = mpad_ / 2;
      dp.nsamples = c.nsamples;
      dp.ntout = c.nsamples_out();
      dp.integration = c.integration;
      dp.nout_pols = c.nout_pols();
      dp.npol_inner = npi;
      dp.voltage = c.output == OutputKind::voltage;
      const double inv = std::ldexp(1.0, exponent_);
      dp.voltage_scale = static_cast<float>(inv);
      dp.power_scale = static_cast<float>(inv * inv);
      const std::int64_t groups =
          (dp.ntout + kBinsPerBlock - 1) / kBinsPerBlock * static_cast<std::int64_t>(dp.nout_pols);
      const dim3 grid(static_cast<unsigned>((c.nbeams + kTile - 1) / kTile),
                      static_cast<unsigned>((nch + kTile - 1) / kTile),
                      static_cast<unsigned>(std::min<std::int64_t>(groups, 65535)));
      const dim3 block(kTile, 8);
      if (out16_)
        detect_kernel<__half2>
            <<<grid, block, 0, s>>>(reinterpret_cast<const __half2*>(cbuf_.data()), dp, out);
      else
        detect_kernel<float2>
            <<<grid, block, 0, s>>>(reinterpret_cast<const float2*>(cbuf_.data()), dp, out);
      WB_CUDA_CHECK_LAUNCH();
    }
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  CudaTuning tuning_;
  DeviceArray<float2> table_, wstage_;
  DeviceArray<__half> aw_, xp_;
  DeviceArray<std::uint8_t> cbuf_;
  cublasHandle_t handle_ = nullptr;
  bool out16_ = true;
  int mpad_ = 0, kpad_ = 0, chunk_ = 1, exponent_ = 0;
  float xmax_ = 65504.f;
};

}  // namespace

std::unique_ptr<Executor> make_cublas_fp16_executor(const PlanData& plan) {
  return std::make_unique<CudaGemmExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
