// CUDA DAS, batch-inner (BI) variant. The channel data are permuted once per execute to
// [sample][tx][rx][bp] (bp = batch padded), so the frames of one sample are contiguous. A warp
// holds 4 voxels x 8 lanes: the 8 lanes of a voxel read 8 consecutive 16-byte vectors of frames
// (128 contiguous bytes per voxel, a whole cache line), R times over the batch. Each lane
// computes the delay and weights of one receiver of a group of 8 (double precision, delay.hpp)
// and the group shares them by warp shuffles, so every (voxel, tx, rx) delay is computed once
// per block of frames. fp16 storage halves the bytes read and interpolates the two taps in half2
// arithmetic (fewer instructions per point); the rotation and the sums stay fp32. With fp16
// storage the delays may also be computed in float (Fast, fast_delay.hpp: ~40 fp32 instructions
// per pair instead of ~60 fp64 ones at half rate and two fp64 square roots; the in-range and
// aperture decisions stay exact).
#include "das/cuda_common.cuh"
#include "das/cuda_sample.cuh"

namespace warpbeam::das::detail {
namespace {

constexpr int kLanes = 8;  // lanes per voxel
constexpr int kVoxelsPerWarp = 32 / kLanes;

__device__ __forceinline__ float2 to_f2(float2 v) {
  return v;
}
__device__ __forceinline__ float2 to_f2(float v) {
  return make_float2(v, 0.f);
}

template <bool IQ, class S, int R, bool Fast>
__global__ void __launch_bounds__(256)
    bi_kernel(GeometryArgs g, DelayParams P, FastParams F, const S* __restrict__ data,
              std::int64_t bp, float2* __restrict__ out) {
  constexpr int VEC = 16 / sizeof(S);                // frames per 16-byte load
  constexpr bool kHalf = sizeof(S) == (IQ ? 4 : 2);  // fp16 storage
  constexpr int kSpan = kLanes * VEC * R;
  const int lane = threadIdx.x & 31, j = lane & (kLanes - 1), base_lane = lane & ~(kLanes - 1);
  const int slot =
      (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * kVoxelsPerWarp + (lane / kLanes);
  const bool active = slot < g.nvoxels;
  const int sl = active ? slot : g.nvoxels - 1;
  const std::int64_t b_base = static_cast<std::int64_t>(blockIdx.y) * kSpan;
  const double px = g.vx[sl], py = g.vy[sl], pz = g.vz[sl];
  const std::int64_t k_stride = static_cast<std::int64_t>(g.ntx) * g.nrx * bp;

  float2 acc[R][VEC];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      acc[r][i] = make_float2(0.f, 0.f);

  for (int q = 0; q < g.ntx; ++q) {
    const std::int64_t tq = static_cast<std::int64_t>(q) * g.nvoxels + sl;
    const double ttx = g.tau_tx[tq];
    const float wtx = active ? (g.w_tx ? g.w_tx[tq] : 1.f) : 0.f;
    const FastVoxel fv = make_fast_voxel(P, px, py, pz, ttx);
    for (int m0 = 0; m0 < g.nrx; m0 += kLanes) {
      // Lane j of each voxel group computes receiver m0 + j ...
      Coeff mine{0.f, 0.f, 0.f, 0.f, -1};
      if (m0 + j < g.nrx && wtx != 0.f) {
        if constexpr (Fast) {
          const FastCoeff c = coefficients_f32(P, F, fv, px, py, pz, ttx, wtx,
                                               g.fast_elements[m0 + j], g.elements[m0 + j]);
          mine.k = c.k;
          mine.f = c.f;
          mine.cr = c.cr;
          mine.ci = c.ci;
        } else {
          mine = das_coefficients(P, px, py, pz, ttx, wtx, g.elements[m0 + j]);
        }
      }
      // ... and the group walks through the 8 receivers with the shared weights.
#pragma unroll
      for (int jj = 0; jj < kLanes; ++jj) {
        const int src = base_lane | jj;
        Coeff c{0.f, 0.f, 0.f, 0.f, -1};
        c.k = __shfl_sync(0xffffffffu, mine.k, src);
        if constexpr (kHalf) {  // interpolate in half2, rotate and sum in fp32
          c.f = __shfl_sync(0xffffffffu, mine.f, src);
          c.cr = __shfl_sync(0xffffffffu, mine.cr, src);
          if constexpr (IQ) c.ci = __shfl_sync(0xffffffffu, mine.ci, src);
        } else {
          c.ar = __shfl_sync(0xffffffffu, mine.ar, src);
          c.br = __shfl_sync(0xffffffffu, mine.br, src);
          if constexpr (IQ) {
            c.ai = __shfl_sync(0xffffffffu, mine.ai, src);
            c.bi = __shfl_sync(0xffffffffu, mine.bi, src);
          }
        }
        if (c.k < 0) continue;
        const S* row0 = data + (static_cast<std::int64_t>(c.k) * g.ntx + q) * g.nrx * bp +
                        static_cast<std::int64_t>(m0 + jj) * bp + b_base + j * VEC;
        const S* row1 = row0 + k_stride;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (b_base + (r * kLanes + j) * VEC < bp) {
            const uint4 u0 = __ldg(reinterpret_cast<const uint4*>(row0 + r * kLanes * VEC));
            const uint4 u1 = __ldg(reinterpret_cast<const uint4*>(row1 + r * kLanes * VEC));
            if constexpr (kHalf) {
              // t = s0 + f (s1 - s0) on half2 pairs (re, im for IQ; two frames for RF): 2 half
              // instructions instead of 4 conversions and 4 FMA; the fp16 error is ~5e-4 per term.
              const __half2* h0 = reinterpret_cast<const __half2*>(&u0);
              const __half2* h1 = reinterpret_cast<const __half2*>(&u1);
              const __half2 fh = __float2half2_rn(c.f);
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                const float2 t = __half22float2(__hfma2(fh, __hsub2(h1[i], h0[i]), h0[i]));
                if constexpr (IQ) {
                  float2& a = acc[r][i];
                  a.x = fmaf(c.cr, t.x, a.x);
                  a.x = fmaf(-c.ci, t.y, a.x);
                  a.y = fmaf(c.cr, t.y, a.y);
                  a.y = fmaf(c.ci, t.x, a.y);
                } else {
                  acc[r][2 * i].x = fmaf(c.cr, t.x, acc[r][2 * i].x);
                  acc[r][2 * i + 1].x = fmaf(c.cr, t.y, acc[r][2 * i + 1].x);
                }
              }
            } else {
              const S* e0 = reinterpret_cast<const S*>(&u0);
              const S* e1 = reinterpret_cast<const S*>(&u1);
#pragma unroll
              for (int i = 0; i < VEC; ++i) {
                if constexpr (IQ)
                  accumulate_iq(acc[r][i], c, to_f2(e0[i]), to_f2(e1[i]));
                else
                  accumulate_rf(acc[r][i].x, c, to_f2(e0[i]).x, to_f2(e1[i]).x);
              }
            }
          }
        }
      }
    }
  }
  if (!active) return;
  const std::int64_t v = g.voxel[slot];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      const std::int64_t b = b_base + (r * kLanes + j) * VEC + i;
      if (b < g.batch) out[b * g.nvoxels + v] = acc[r][i];
    }
}

template <bool IQ, class S, bool Fast = false>
void launch_bi(int repeats, int threads, const GeometryArgs& g, const DelayParams& P,
               const FastParams& F, const void* data, std::int64_t bp, float2* out,
               cudaStream_t s) {
  constexpr int VEC = 16 / sizeof(S);
  // R = 8 is built only where its accumulators fit in 32 floats (fp32 storage).
  constexpr bool kHasR8 = (IQ ? 2 : 1) * 8 * VEC <= 32;
  if (repeats >= 8 && !kHasR8) repeats = 4;
  const int span = kLanes * VEC * repeats;
  const int voxels_per_block = threads / 32 * kVoxelsPerWarp;
  const dim3 grid(static_cast<unsigned>((g.nvoxels + voxels_per_block - 1) / voxels_per_block),
                  static_cast<unsigned>((bp + span - 1) / span));
  const S* d = static_cast<const S*>(data);
  if (repeats == 1)
    bi_kernel<IQ, S, 1, Fast><<<grid, threads, 0, s>>>(g, P, F, d, bp, out);
  else if (repeats == 2)
    bi_kernel<IQ, S, 2, Fast><<<grid, threads, 0, s>>>(g, P, F, d, bp, out);
  else if (repeats == 4 || !kHasR8)
    bi_kernel<IQ, S, 4, Fast><<<grid, threads, 0, s>>>(g, P, F, d, bp, out);
  else if constexpr (kHasR8)
    bi_kernel<IQ, S, 8, Fast><<<grid, threads, 0, s>>>(g, P, F, d, bp, out);
  WB_CUDA_CHECK_LAUNCH();
}

class CudaBiExecutor final : public Executor {
 public:
  explicit CudaBiExecutor(const PlanData& p) : geo_(p) {
    const auto& c = p.config;
    iq_ = c.signal == Signal::iq;
    fp16_ = c.storage == Storage::fp16;
    const int elem = (iq_ ? 2 : 1) * (fp16_ ? 2 : 4);  // bytes per stored sample
    const int vec = 16 / elem;
    bp_ = (c.batch + kLanes * vec - 1) / (kLanes * vec) * (kLanes * vec);
    // Accumulators per lane: R x vec complex values; keep them within 32 floats (R <= 8).
    const int rmax = iq_ ? 32 / (2 * vec) : 32 / vec;
    int r = 1;
    while (r < rmax && r * kLanes * vec < bp_)
      r *= 2;
    repeats_ = c.tuning.bi_repeats ? std::min(c.tuning.bi_repeats, rmax) : std::min(r, 8);
    threads_ = c.tuning.threads_per_block ? c.tuning.threads_per_block : 256;
    // Float delays only where the storage already limits the precision to fp16's.
    float_delays_ = fp16_ && c.tuning.delay_bits != 64;
    const std::size_t bytes = static_cast<std::size_t>(c.nsamples * c.ntx() * c.nrx() * bp_) * elem;
    buf_ = DeviceArray<unsigned char>(bytes);
    device_memset(buf_.data(), 0, bytes);  // the padded frames stay zero
    // Finished before any execute() on a non-blocking stream can write the buffer.
    device_synchronize();
  }

  void execute(const PlanData& p, const void* in, std::complex<float>* out, const Stream* stream,
               Event* layout_done) override {
    const auto& c = p.config;
    cudaStream_t s = WB_STREAM(stream);
    permute_batch_inner(in, buf_.data(), iq_, fp16_ ? StoreType::f16 : StoreType::f32, c.batch,
                        c.nrx(), c.ntx(), c.nsamples, bp_, s);
    if (layout_done) layout_done->record(stream);
    const GeometryArgs g = geometry_args(geo_, c);
    auto* o = reinterpret_cast<float2*>(out);
    const FastParams& F = geo_.fast;
    if (iq_ && fp16_ && float_delays_)
      launch_bi<true, __half2, true>(repeats_, threads_, g, p.params, F, buf_.data(), bp_, o, s);
    else if (iq_ && fp16_)
      launch_bi<true, __half2>(repeats_, threads_, g, p.params, F, buf_.data(), bp_, o, s);
    else if (iq_)
      launch_bi<true, float2>(repeats_, threads_, g, p.params, F, buf_.data(), bp_, o, s);
    else if (fp16_ && float_delays_)
      launch_bi<false, __half, true>(repeats_, threads_, g, p.params, F, buf_.data(), bp_, o, s);
    else if (fp16_)
      launch_bi<false, __half>(repeats_, threads_, g, p.params, F, buf_.data(), bp_, o, s);
    else
      launch_bi<false, float>(repeats_, threads_, g, p.params, F, buf_.data(), bp_, o, s);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  DeviceGeometry geo_;
  DeviceArray<unsigned char> buf_;
  std::int64_t bp_ = 0;
  bool iq_ = true, fp16_ = false, float_delays_ = false;
  int repeats_ = 1, threads_ = 256;
};

}  // namespace

std::unique_ptr<Executor> make_batch_inner_executor(const PlanData& plan) {
  return std::make_unique<CudaBiExecutor>(plan);
}

}  // namespace warpbeam::das::detail
