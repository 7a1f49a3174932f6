// CUDA beamformer, fp32 on CUDA cores: the kernel of the BEST-2 GPU beamformer (Magro et al.
// 2013, section 4) adapted to sm_90. Threads run over time samples; each holds BPT beams x TPT
// adjacent samples of complex accumulators in registers for one channel; the weights of a group
// of 16 antennas (for BPT beams and 8 channels) are staged in shared memory and read as
// broadcasts; the voltages of the group are loaded with coalesced 32-bit words, decoded in
// registers (4-bit through the conversion table) and staged as float2 in shared memory.
//
// Block: 8 channels (lane % 8) x (blockDim / 8) threads along time; time tile TT = TPT * blockDim
// / 8. Grid: x = time tiles x channel tiles (channel fastest), y = pol, z = beam groups of BPT.
// The output [beam][pol][time][chan] is stored straight from registers: a warp covers 8
// channels x 4 time rows, i.e. four whole 32-byte sectors per store (the transpose is fused).
// Power integrated over samples of other threads, or summed over pols, is added atomically to an
// output zeroed first (fp32 atomics: the sum order, not the result, varies from run to run).
#include <cuda_runtime.h>

#include <algorithm>

#include "beamform/cuda_common.cuh"
#include "beamform/executor.hpp"
#include "core/cuda_check.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::beamform::detail {
namespace {

constexpr int kCT = 8;   // channels per block (lane % 8)
constexpr int kAG = 16;  // antennas staged per step

struct Params : ShapeParams {
  bool voltage, sum_pols, atomics, word_loads;
  int nchan_tiles;
};

/// Shared memory of one block: voltages [kAG][kCT][TT + 2] float2 (the +2 float2 pad puts the 8
/// channels of one time pair in distinct banks), weights [kAG][BPT][kCT] float2, table [256].
__host__ __device__ constexpr int xs_stride(int tt) {
  return tt + 2;
}
__host__ __device__ constexpr std::size_t smem_bytes(int bpt, int tt) {
  return (static_cast<std::size_t>(kAG) * kCT * xs_stride(tt) + kAG * bpt * kCT + 256) *
         sizeof(float2);
}

template <int D, int BPT, int TPT>
__global__ void __launch_bounds__(256)
    beamform_kernel(const std::uint8_t* __restrict__ in, const float2* __restrict__ wdev,
                    const float2* __restrict__ table, Params p, float* __restrict__ out) {
  static_assert(BPT == 8 || BPT == 16 || BPT == 32, "beams per thread");
  static_assert(TPT == 2 || TPT == 4, "adjacent samples per thread (float4 loads of 2 samples)");
  static_assert(kCT == 8, "a quarter warp spans the 8 channels");
  extern __shared__ float4 smem_raw[];
  const int tth = blockDim.x / kCT;  // threads along time
  const int tt = tth * TPT;          // time tile
  const int stride = xs_stride(tt);
  float2* xs = reinterpret_cast<float2*>(smem_raw);                // [kAG][kCT][stride]
  float2* ws = xs + static_cast<std::size_t>(kAG) * kCT * stride;  // [kAG][BPT][kCT]
  float2* tab = ws + kAG * BPT * kCT;                              // [256]

  const int tid = threadIdx.x;
  const int c = tid % kCT, tq = tid / kCT;
  const int ctile = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.nchan_tiles));
  const std::int64_t ttile = blockIdx.x / static_cast<unsigned>(p.nchan_tiles);
  const int c0 = ctile * kCT;
  const std::int64_t t0 = ttile * tt;
  const int pol = blockIdx.y;
  const int b0 = blockIdx.z * BPT;
  constexpr int bpc = kBytesPerComplex<D>;

  if constexpr (D == kCi4 || D == kCi8)
    for (int i = tid; i < 256; i += blockDim.x)
      tab[i] = table[i];

  float2 acc[BPT][TPT];
#pragma unroll
  for (int b = 0; b < BPT; ++b)
#pragma unroll
    for (int j = 0; j < TPT; ++j)
      acc[b][j] = make_float2(0.f, 0.f);

  for (int a0 = 0; a0 < p.nant; a0 += kAG) {
    const int nag = min(kAG, p.nant - a0);
    __syncthreads();  // previous group's compute (and the table fill) done
    // Weights of this group: [a][b][c] <- wdev[pol][a0 + a][b0 + b][c0 + c] (chan fastest).
    for (int i = tid; i < kAG * BPT * kCT; i += blockDim.x) {
      const int cc = i % kCT, b = (i / kCT) % BPT, a = i / (kCT * BPT);
      float2 w = make_float2(0.f, 0.f);
      if (a < nag && b0 + b < p.nbeams && c0 + cc < p.nchans)
        w = wdev[((static_cast<std::int64_t>(pol) * p.nant + a0 + a) * p.nbeams + b0 + b) *
                     p.nchans +
                 c0 + cc];
      ws[i] = w;
    }
    // Voltages of this group for pol `pol`: xs[a][c][t].
    if (p.word_loads) {
      // Rows are 4-byte aligned: read whole words of the group's contiguous bytes in each row.
      const int chunk = nag * p.npol * bpc;  // bytes of the group in one row
      const int words = (chunk + 3) / 4;
      constexpr int per_word = 4 / bpc;
      for (int i = tid; i < kCT * tt * words; i += blockDim.x) {
        const int w = i % words, t = (i / words) % tt, cc = i / (words * tt);
        const std::int64_t tg = t0 + t;
        unsigned word = 0;
        const bool valid = c0 + cc < p.nchans && tg < p.nsamples;
        if (valid)
          word = *reinterpret_cast<const unsigned*>(
              in + ((static_cast<std::int64_t>(c0 + cc) * p.nsamples + tg) * p.row_bytes +
                    static_cast<std::int64_t>(a0) * p.npol * bpc + 4 * w));
#pragma unroll
        for (int k = 0; k < per_word; ++k) {
          const int e = (4 * w) / bpc + k;  // element (antenna, pol) in the group
          if (e >= nag * p.npol || e % p.npol != pol) continue;
          xs[((e / p.npol) * kCT + cc) * stride + t] =
              valid ? decode_word_element<D>(word, k, tab) : make_float2(0.f, 0.f);
        }
      }
      // Antennas past the end of a partial group read as zero (their weights are zero too, but
      // stale shared memory could hold NaN bit patterns).
      for (int i = tid; i < (kAG - nag) * kCT * tt; i += blockDim.x) {
        const int t = i % tt, cc = (i / tt) % kCT, a = nag + i / (tt * kCT);
        xs[(a * kCT + cc) * stride + t] = make_float2(0.f, 0.f);
      }
    } else {
      // Any alignment (odd antenna counts of 1- and 2-byte samples, cf32): one element per load.
      for (int i = tid; i < kAG * kCT * tt; i += blockDim.x) {
        const int t = i % tt, cc = (i / tt) % kCT, a = i / (tt * kCT);
        const std::int64_t tg = t0 + t;
        float2 v = make_float2(0.f, 0.f);
        if (a < nag && c0 + cc < p.nchans && tg < p.nsamples)
          v = decode_sample<D>(
              in + (static_cast<std::int64_t>(c0 + cc) * p.nsamples + tg) * p.row_bytes +
                  (static_cast<std::int64_t>(a0 + a) * p.npol + pol) * bpc,
              tab);
        xs[(a * kCT + cc) * stride + t] = v;
      }
    }
    __syncthreads();
    // Multiply-accumulate: per antenna, TPT voltages (one float4 per 2 adjacent samples; the 8
    // channels of a quarter warp hit distinct banks) and BPT weights (one float2 per beam; the
    // 8 channels' weights are 64 contiguous bytes, broadcast to the 4 time rows of the warp).
#pragma unroll 4
    for (int a = 0; a < kAG; ++a) {
      float2 x[TPT];
      const float2* xp = xs + (a * kCT + c) * stride + tq * TPT;
#pragma unroll
      for (int j = 0; j < TPT; j += 2) {
        const float4 v = *reinterpret_cast<const float4*>(xp + j);
        x[j] = make_float2(v.x, v.y);
        x[j + 1] = make_float2(v.z, v.w);
      }
      const float2* wp = ws + a * BPT * kCT + c;
#pragma unroll
      for (int b = 0; b < BPT; ++b) {
        const float2 w = wp[b * kCT];
#pragma unroll
        for (int j = 0; j < TPT; ++j) {
          acc[b][j].x = fmaf(w.x, x[j].x, acc[b][j].x);
          acc[b][j].x = fmaf(-w.y, x[j].y, acc[b][j].x);
          acc[b][j].y = fmaf(w.x, x[j].y, acc[b][j].y);
          acc[b][j].y = fmaf(w.y, x[j].x, acc[b][j].y);
        }
      }
    }
  }

  // Store [beam][out pol][time][chan] straight from registers.
  const int cg = c0 + c;
  if (cg >= p.nchans) return;
  const std::int64_t tbase = t0 + tq * TPT;
#pragma unroll
  for (int b = 0; b < BPT; ++b) {
    const int bg = b0 + b;
    if (bg >= p.nbeams) break;
    if (p.voltage) {
#pragma unroll
      for (int j = 0; j < TPT; ++j) {
        const std::int64_t t = tbase + j;
        if (t < p.nsamples)
          reinterpret_cast<float2*>(
              out)[((static_cast<std::int64_t>(bg) * p.npol + pol) * p.nsamples + t) * p.nchans +
                   cg] = acc[b][j];
      }
      continue;
    }
    const int op = p.sum_pols ? 0 : pol;
    const std::int64_t ntout = p.nsamples / p.integration;
    float* ob = out + (static_cast<std::int64_t>(bg) * p.nout_pols + op) * ntout * p.nchans + cg;
    // Sum this thread's samples bin by bin (bins of `integration` samples), then store or add.
    float sum = 0.f;
    std::int64_t bin = tbase / p.integration;
#pragma unroll
    for (int j = 0; j < TPT; ++j) {
      const std::int64_t t = tbase + j;
      if (t >= p.nsamples) break;
      const std::int64_t tb = t / p.integration;
      if (tb != bin) {
        if (p.atomics)
          atomicAdd(ob + bin * p.nchans, sum);
        else
          ob[bin * p.nchans] = sum;
        sum = 0.f;
        bin = tb;
      }
      sum += acc[b][j].x * acc[b][j].x + acc[b][j].y * acc[b][j].y;
    }
    if (tbase < p.nsamples) {
      if (p.atomics)
        atomicAdd(ob + bin * p.nchans, sum);
      else
        ob[bin * p.nchans] = sum;
    }
  }
}

// Host [chan][pol][beam][ant] -> device [pol][ant][beam][chan] (channel fastest for staging).
__global__ void transpose_weights(const float2* __restrict__ src, float2* __restrict__ dst,
                                  int nchans, int npol, int nbeams, int nant) {
  const std::int64_t n = static_cast<std::int64_t>(nchans) * npol * nbeams * nant;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % nchans);
    const std::int64_t r = i / nchans;
    const int b = static_cast<int>(r % nbeams);
    const int a = static_cast<int>((r / nbeams) % nant);
    const int p = static_cast<int>(r / (static_cast<std::int64_t>(nbeams) * nant));
    dst[i] = src[((static_cast<std::int64_t>(c) * npol + p) * nbeams + b) * nant + a];
  }
}

using KernelFn = void (*)(const std::uint8_t*, const float2*, const float2*, Params, float*);

template <int D>
KernelFn pick_kernel(int bpt, int tpt) {
  if (tpt == 2) {
    if (bpt == 8) return beamform_kernel<D, 8, 2>;
    if (bpt == 16) return beamform_kernel<D, 16, 2>;
    return beamform_kernel<D, 32, 2>;
  }
  if (bpt == 8) return beamform_kernel<D, 8, 4>;
  return beamform_kernel<D, 16, 4>;  // 32 x 4 is rejected by resolve_tuning (256 registers)
}

KernelFn pick_kernel(SampleType t, int bpt, int tpt) {
  switch (t) {
    case SampleType::ci4:
      return pick_kernel<kCi4>(bpt, tpt);
    case SampleType::ci8:
      return pick_kernel<kCi8>(bpt, tpt);
    case SampleType::cf16:
      return pick_kernel<kCf16>(bpt, tpt);
    case SampleType::cf32:
      return pick_kernel<kCf32>(bpt, tpt);
  }
  return nullptr;
}

class CudaRegisterTiledExecutor final : public Executor {
 public:
  explicit CudaRegisterTiledExecutor(const PlanData& p)
      : tuning_(p.tuning),
        wdev_(static_cast<std::size_t>(p.config.nchans) * p.config.npol * p.config.nbeams *
              p.config.nantennas),
        wstage_(wdev_.size()),
        table_(256) {
    const auto& c = p.config;
    if (!p.table.empty()) copy_bytes(table_.data(), p.table.data(), table_.bytes());
    kernel_ = pick_kernel(c.sample_type, tuning_.beams_per_thread, tuning_.samples_per_thread);
    const int tt = tuning_.threads_per_block / kCT * tuning_.samples_per_thread;
    smem_ = smem_bytes(tuning_.beams_per_thread, tt);
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(kernel_), smem_);
    const std::int64_t ntime_tiles = (c.nsamples + tt - 1) / tt;
    nchan_tiles_ = (c.nchans + kCT - 1) / kCT;
    blocks_x_ = ntime_tiles * nchan_tiles_;
    if (blocks_x_ > 0x7FFFFFFF)
      fail(ErrorCategory::invalid_argument,
           "nsamples x nchans = " + std::to_string(c.nsamples * c.nchans) +
               " is too large for one CUDA launch: use smaller blocks");
  }

  CudaTuning tuning() const override { return tuning_; }

  void set_weights(const PlanData& p, const std::complex<float>* w, const Stream* stream) override {
    const auto& c = p.config;
    cudaStream_t s = WB_STREAM(stream);
    copy_bytes(wstage_.data(), w, wstage_.bytes(), stream);
    const int threads = 256;
    const unsigned blocks = grid_stride_blocks(wdev_.size(), threads);
    transpose_weights<<<blocks, threads, 0, s>>>(wstage_.data(), wdev_.data(), c.nchans, c.npol,
                                                 c.nbeams, c.nantennas);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void execute(const PlanData& pd, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = pd.config;
    Params p{shape_params(c)};
    p.voltage = c.output == OutputKind::voltage;
    p.sum_pols = c.sum_pols && c.npol == 2;
    p.atomics = !p.voltage && (p.sum_pols || (tuning_.samples_per_thread % c.integration != 0));
    p.word_loads = c.sample_type != SampleType::cf32 && p.row_bytes % 4 == 0 &&
                   reinterpret_cast<std::uintptr_t>(in) % 4 == 0;
    p.nchan_tiles = nchan_tiles_;
    cudaStream_t s = WB_STREAM(stream);
    if (p.atomics) {
      const std::size_t bytes = static_cast<std::size_t>(c.nbeams) * c.nout_pols() *
                                c.nsamples_out() * c.out_row_floats() * sizeof(float);
      WB_CUDA_CHECK(cudaMemsetAsync(out, 0, bytes, s));
    }
    const dim3 grid(static_cast<unsigned>(blocks_x_), static_cast<unsigned>(c.npol),
                    static_cast<unsigned>((c.nbeams + tuning_.beams_per_thread - 1) /
                                          tuning_.beams_per_thread));
    kernel_<<<grid, tuning_.threads_per_block, smem_, s>>>(in, wdev_.data(), table_.data(), p, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  CudaTuning tuning_;
  DeviceArray<float2> wdev_, wstage_, table_;
  KernelFn kernel_ = nullptr;
  std::size_t smem_ = 0;
  int nchan_tiles_ = 0;
  std::int64_t blocks_x_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_register_tiled_executor(const PlanData& plan) {
  return std::make_unique<CudaRegisterTiledExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
