// CUDA DAS, tensor-core (TC) variant. The sum over receivers is a matrix product once the samples
// are grouped by their index: for a tile of 16 voxels, a tile of receivers (8 complex or 16 real)
// and each distinct sample index kk that the tile touches,
//     out[voxel][frame] += W_kk[voxel][rx] * S_kk[rx][frame],
// where W_kk holds the interpolation weight of every (voxel, rx) whose tap k or k+1 equals kk
// (zero elsewhere) and S_kk = data[kk][tx][rx][frame] is a contiguous row block of the layout
// [sample][tx][rx_padded][re, im][bp] (fp16), so it loads straight into a wmma fragment. Complex
// products use the real embedding Re = Wr Sr - Wi Si, Im = Wi Sr + Wr Si, with K = (rx, re/im).
// Weights and samples are fp16, sums fp32 (m16n16k16 HMMA). A warp owns one voxel tile and
// 16 x NT frames; the weights are computed by the warp (4 or 8 pairs per lane, double-precision
// delays as everywhere, delay.hpp) and staged in shared memory.
#include <mma.h>

#include <climits>

#include "das/cuda_common.cuh"

namespace warpbeam::das::detail {
namespace {

using namespace nvcuda;
constexpr int kWarps = 4;

template <bool IQ, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    tc_kernel(GeometryArgs g, DelayParams P, const __half* __restrict__ data, std::int64_t nrxp,
              std::int64_t bp, float2* __restrict__ out) {
  constexpr int RX = IQ ? 8 : 16;  // receivers per K = 16 tile
  constexpr int kPerLane = 16 * RX / 32;
  constexpr int kPlanes = IQ ? 2 : 1;
  __shared__ __align__(32) __half a_sm[kWarps][2][256];
  __shared__ __align__(32) float c_sm[kWarps][2][256];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slot0 = (blockIdx.x * kWarps + warp) * 16;
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.y) * 16 * NT;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_re[NT], acc_im[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    wmma::fill_fragment(acc_re[t], 0.f);
    wmma::fill_fragment(acc_im[t], 0.f);
  }

  for (int q = 0; q < g.ntx; ++q) {
    for (int m0 = 0; m0 < g.nrx; m0 += RX) {
      Coeff cf[kPerLane];
      int kmin = INT_MAX, kmax = -1;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int p = lane + 32 * i, v = p / RX, mm = p % RX, slot = slot0 + v;
        cf[i] = Coeff{0.f, 0.f, 0.f, 0.f, -1};
        if (slot < g.nvoxels && m0 + mm < g.nrx) {
          const std::int64_t tq = static_cast<std::int64_t>(q) * g.nvoxels + slot;
          const float wtx = g.w_tx ? g.w_tx[tq] : 1.f;
          if (wtx != 0.f)
            cf[i] = das_coefficients(P, g.vx[slot], g.vy[slot], g.vz[slot], g.tau_tx[tq], wtx,
                                     g.elements[m0 + mm]);
        }
        if (cf[i].k >= 0) {
          kmin = min(kmin, cf[i].k);
          kmax = max(kmax, cf[i].k + 1);
        }
      }
      kmin = __reduce_min_sync(0xffffffffu, kmin);
      kmax = __reduce_max_sync(0xffffffffu, kmax);
      // One product per distinct sample index kk touched by this (voxel, rx) tile, visited in
      // increasing order (indices no tap uses are skipped, so scattered voxels cost no more).
      for (int kk = kmin; kk <= kmax;) {
        __syncwarp();  // the previous kk's fragments are loaded before A is rewritten
        int next = INT_MAX;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const int p = lane + 32 * i, v = p / RX, mm = p % RX;
          float wr = 0.f, wi = 0.f;
          if (cf[i].k >= 0) {
            if (cf[i].k == kk) {
              wr += cf[i].ar;
              wi += cf[i].ai;
            }
            if (cf[i].k + 1 == kk) {
              wr += cf[i].br;
              wi += cf[i].bi;
            }
            if (cf[i].k > kk) next = min(next, cf[i].k);
            if (cf[i].k + 1 > kk) next = min(next, cf[i].k + 1);
          }
          if constexpr (IQ) {
            a_sm[warp][0][v * 16 + 2 * mm] = __float2half_rn(wr);
            a_sm[warp][0][v * 16 + 2 * mm + 1] = __float2half_rn(-wi);
            a_sm[warp][1][v * 16 + 2 * mm] = __float2half_rn(wi);
            a_sm[warp][1][v * 16 + 2 * mm + 1] = __float2half_rn(wr);
          } else {
            a_sm[warp][0][v * 16 + mm] = __float2half_rn(wr);
          }
        }
        const int this_kk = kk;
        kk = __reduce_min_sync(0xffffffffu, next);
        __syncwarp();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa_re, fa_im;
        wmma::load_matrix_sync(fa_re, a_sm[warp][0], 16);
        if constexpr (IQ) wmma::load_matrix_sync(fa_im, a_sm[warp][1], 16);
        const __half* brow =
            data + ((static_cast<std::int64_t>(this_kk) * g.ntx + q) * nrxp + m0) * kPlanes * bp +
            b0;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          if (b0 + 16 * t < bp) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
            wmma::load_matrix_sync(fb, brow + 16 * t, static_cast<unsigned>(bp));
            wmma::mma_sync(acc_re[t], fa_re, fb, acc_re[t]);
            if constexpr (IQ) wmma::mma_sync(acc_im[t], fa_im, fb, acc_im[t]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (b0 + 16 * t >= bp) continue;
    __syncwarp();
    wmma::store_matrix_sync(c_sm[warp][0], acc_re[t], 16, wmma::mem_row_major);
    wmma::store_matrix_sync(c_sm[warp][1], acc_im[t], 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int v = e / 16, bb = e % 16, slot = slot0 + v;
      const std::int64_t b = b0 + 16 * t + bb;
      if (slot < g.nvoxels && b < g.batch)
        out[b * g.nvoxels + g.voxel[slot]] =
            make_float2(c_sm[warp][0][e], IQ ? c_sm[warp][1][e] : 0.f);
    }
  }
}

class CudaTcExecutor final : public Executor {
 public:
  explicit CudaTcExecutor(const PlanData& p) : geo_(p) {
    const auto& c = p.config;
    iq_ = c.signal == Signal::iq;
    const int rx = iq_ ? 8 : 16;
    nrxp_ = (c.nrx() + rx - 1) / rx * rx;
    bp_ = (c.batch + 15) / 16 * 16;
    nt_ = bp_ <= 32 ? 2 : 4;
    const std::size_t n =
        static_cast<std::size_t>(c.nsamples * c.ntx() * nrxp_ * (iq_ ? 2 : 1) * bp_);
    buf_ = DeviceArray<__half>(n);
    device_memset(buf_.data(), 0, buf_.bytes());  // padded receivers and frames stay zero
    // Finished before any execute() on a non-blocking stream can write the buffer.
    device_synchronize();
  }

  void execute(const PlanData& p, const void* in, std::complex<float>* out, const Stream* stream,
               Event* layout_done) override {
    const auto& c = p.config;
    cudaStream_t s = WB_STREAM(stream);
    permute_planar_f16(in, buf_.data(), iq_, c.batch, c.nrx(), nrxp_, c.ntx(), c.nsamples, bp_, s);
    if (layout_done) layout_done->record(stream);
    const GeometryArgs g = geometry_args(geo_, c);
    auto* o = reinterpret_cast<float2*>(out);
    const dim3 grid(static_cast<unsigned>((c.nvoxels() + 16 * kWarps - 1) / (16 * kWarps)),
                    static_cast<unsigned>((bp_ + 16 * nt_ - 1) / (16 * nt_)));
    const dim3 block(32 * kWarps);
    if (iq_ && nt_ == 2)
      tc_kernel<true, 2><<<grid, block, 0, s>>>(g, p.params, buf_.data(), nrxp_, bp_, o);
    else if (iq_)
      tc_kernel<true, 4><<<grid, block, 0, s>>>(g, p.params, buf_.data(), nrxp_, bp_, o);
    else if (nt_ == 2)
      tc_kernel<false, 2><<<grid, block, 0, s>>>(g, p.params, buf_.data(), nrxp_, bp_, o);
    else
      tc_kernel<false, 4><<<grid, block, 0, s>>>(g, p.params, buf_.data(), nrxp_, bp_, o);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  DeviceGeometry geo_;
  DeviceArray<__half> buf_;
  std::int64_t nrxp_ = 0, bp_ = 0;
  int nt_ = 4;
  bool iq_ = true;
};

}  // namespace

std::unique_ptr<Executor> make_tensor_core_executor(const PlanData& plan) {
  return std::make_unique<CudaTcExecutor>(plan);
}

}  // namespace warpbeam::das::detail
