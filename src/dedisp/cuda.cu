// CUDA dedispersion. First version: the direct kernel, one thread per (DM trial, output sample),
// input unpacked on the fly. The tiled ARTEMIS-style kernel replaces it as the default.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/executor.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::dedisp::detail {
namespace {

__device__ inline float load_sample(const std::uint8_t* __restrict__ in, std::int64_t row_bytes,
                                    std::int64_t t, int ch, int nbits, bool is_signed) {
  const std::uint8_t* r = in + t * row_bytes;
  switch (nbits) {
    case 8:
      return is_signed ? static_cast<float>(static_cast<signed char>(r[ch])) : r[ch];
    case 16: {
      const unsigned short v = reinterpret_cast<const unsigned short*>(r)[ch];
      return is_signed ? static_cast<float>(static_cast<short>(v)) : v;
    }
    case 32:
      return reinterpret_cast<const float*>(r)[ch];
    default: {
      const int per_byte = 8 / nbits;
      const unsigned mask = (1u << nbits) - 1u;
      const unsigned v = (r[ch / per_byte] >> ((ch % per_byte) * nbits)) & mask;
      const int half = 1 << (nbits - 1);
      return (is_signed && nbits > 1 && v >= static_cast<unsigned>(half))
                 ? static_cast<float>(static_cast<int>(v) - 2 * half)
                 : static_cast<float>(v);
    }
  }
}

__global__ void direct_kernel(const std::uint8_t* __restrict__ in, std::int64_t row_bytes,
                              int nchans, int nbits, bool is_signed,
                              const std::int32_t* __restrict__ delays,
                              const std::uint8_t* __restrict__ killmask, std::int64_t nt,
                              float* __restrict__ out) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const int d = blockIdx.y;
  if (t >= nt) return;
  float sum = 0;
  for (int ch = 0; ch < nchans; ++ch) {
    if (killmask && !killmask[ch]) continue;
    sum += load_sample(in, row_bytes, t + delays[d * nchans + ch], ch, nbits, is_signed);
  }
  out[d * nt + t] = sum;
}

class CudaDirectExecutor final : public Executor {
 public:
  explicit CudaDirectExecutor(const PlanData& p) : delays_(p.delays.size()) {
    copy_bytes(delays_.data(), p.delays.data(), delays_.bytes());
    if (!p.config.killmask.empty()) {
      killmask_ = DeviceArray<std::uint8_t>(p.config.killmask.size());
      copy_bytes(killmask_.data(), p.config.killmask.data(), killmask_.bytes());
    }
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    const auto& c = p.config;
    const std::int64_t row = (static_cast<std::int64_t>(c.nchans) * c.nbits + 7) / 8;
    constexpr int threads = 256;
    const dim3 grid(static_cast<unsigned>((p.nsamples_out + threads - 1) / threads),
                    static_cast<unsigned>(c.dms.size()));
    cudaStream_t s = WB_STREAM(stream);
    direct_kernel<<<grid, threads, 0, s>>>(in, row, c.nchans, c.nbits, c.is_signed, delays_.data(),
                                           killmask_.data(), p.nsamples_out, out);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  DeviceArray<std::int32_t> delays_;
  DeviceArray<std::uint8_t> killmask_;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const PlanData& plan) {
  return std::make_unique<CudaDirectExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
