// CUDA DAS, baseline (BL) variant: a thread per voxel and a tile of TB frames; the data stay in the
// input layout [batch][rx][tx][sample] (or an fp16 copy of it). Receive delays are computed in the
// kernel (double precision, das/delay.hpp), once per (voxel, tx, rx) and shared by the TB frames;
// transmit delays come from the precomputed [tx][voxel] table. Neighbouring threads are
// neighbouring voxels (locality order), so a warp's loads of one (rx, frame) row fall within a
// few cache lines.
#include "das/cuda_common.cuh"
#include "das/cuda_sample.cuh"

namespace warpbeam::das::detail {
namespace {

template <bool IQ, class S, int TB>
__global__ void __launch_bounds__(256)
    bl_kernel(GeometryArgs g, DelayParams P, const S* __restrict__ data, float2* __restrict__ out) {
  const int slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot >= g.nvoxels) return;
  const int b0 = blockIdx.y * TB;
  const double px = g.vx[slot], py = g.vy[slot], pz = g.vz[slot];
  const std::int64_t K = g.nsamples;
  const std::int64_t bstride = static_cast<std::int64_t>(g.nrx) * g.ntx * K;
  float2 acc[TB];
#pragma unroll
  for (int j = 0; j < TB; ++j)
    acc[j] = make_float2(0.f, 0.f);
  for (int q = 0; q < g.ntx; ++q) {
    const std::int64_t tq = static_cast<std::int64_t>(q) * g.nvoxels + slot;
    const double ttx = g.tau_tx[tq];
    const float wtx = g.w_tx ? g.w_tx[tq] : 1.f;
    if (wtx == 0.f) continue;
    for (int m = 0; m < g.nrx; ++m) {
      const Coeff c = das_coefficients(P, px, py, pz, ttx, wtx, g.elements[m]);
      if (c.k < 0) continue;
      const S* p = data + (b0 * bstride + (static_cast<std::int64_t>(m) * g.ntx + q) * K + c.k);
#pragma unroll
      for (int j = 0; j < TB; ++j) {
        if (b0 + j < g.batch) {
          const float2 s0 = load_sample(p + j * bstride), s1 = load_sample(p + j * bstride + 1);
          if constexpr (IQ)
            accumulate_iq(acc[j], c, s0, s1);
          else
            accumulate_rf(acc[j].x, c, s0.x, s1.x);
        }
      }
    }
  }
  const std::int64_t v = g.voxel[slot];
#pragma unroll
  for (int j = 0; j < TB; ++j)
    if (b0 + j < g.batch) out[(b0 + j) * static_cast<std::int64_t>(g.nvoxels) + v] = acc[j];
}

template <bool IQ, class S>
void launch_bl(int tb, int threads, const GeometryArgs& g, const DelayParams& P, const void* data,
               float2* out, cudaStream_t s) {
  const dim3 block(threads);
  const dim3 grid(static_cast<unsigned>((g.nvoxels + threads - 1) / threads),
                  static_cast<unsigned>((g.batch + tb - 1) / tb));
  const S* d = static_cast<const S*>(data);
  if (tb == 4)
    bl_kernel<IQ, S, 4><<<grid, block, 0, s>>>(g, P, d, out);
  else if (tb == 8)
    bl_kernel<IQ, S, 8><<<grid, block, 0, s>>>(g, P, d, out);
  else
    bl_kernel<IQ, S, 16><<<grid, block, 0, s>>>(g, P, d, out);
  WB_CUDA_CHECK_LAUNCH();
}

class CudaBlExecutor final : public Executor {
 public:
  explicit CudaBlExecutor(const PlanData& p) : geo_(p) {
    const auto& c = p.config;
    fp16_ = c.storage == Storage::fp16;
    count_ = c.batch * c.nrx() * c.ntx() * c.nsamples * (c.signal == Signal::iq ? 2 : 1);
    if (fp16_) half_ = DeviceArray<__half>(static_cast<std::size_t>(count_));
    tb_ = c.tuning.batch_tile ? c.tuning.batch_tile : 8;
    threads_ = c.tuning.threads_per_block ? c.tuning.threads_per_block : 128;
  }

  void execute(const PlanData& p, const void* in, std::complex<float>* out, const Stream* stream,
               Event* layout_done) override {
    const auto& c = p.config;
    cudaStream_t s = WB_STREAM(stream);
    const GeometryArgs g = geometry_args(geo_, c);
    auto* o = reinterpret_cast<float2*>(out);
    const bool iq = c.signal == Signal::iq;
    if (fp16_) convert_f16(static_cast<const float*>(in), half_.data(), count_, s);
    if (layout_done) layout_done->record(stream);
    if (fp16_) {
      if (iq)
        launch_bl<true, __half2>(tb_, threads_, g, p.params, half_.data(), o, s);
      else
        launch_bl<false, __half>(tb_, threads_, g, p.params, half_.data(), o, s);
    } else if (iq) {
      launch_bl<true, float2>(tb_, threads_, g, p.params, in, o, s);
    } else {
      launch_bl<false, float>(tb_, threads_, g, p.params, in, o, s);
    }
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  DeviceGeometry geo_;
  DeviceArray<__half> half_;
  std::int64_t count_ = 0;
  bool fp16_ = false;
  int tb_ = 8, threads_ = 128;
};

}  // namespace

std::unique_ptr<Executor> make_baseline_executor(const PlanData& plan) {
  return std::make_unique<CudaBlExecutor>(plan);
}

}  // namespace warpbeam::das::detail
