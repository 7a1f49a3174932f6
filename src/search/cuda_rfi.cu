// The RFI stage of a gulp on the GPU (clean_filterbank() of warpbeam/search.hpp), so that only the
// packed samples cross PCIe:
//   rfi_unpack_kernel  packed [time][chan] -> float32 [chan][time] rows (as unpack_samples()),
//                      through a 32 x 32 shared-memory tile;
//   rfi_stats_kernel   one block per channel: the tree median and the robust sigma about it;
//   rfi_clean_kernel   one thread per time sample: (x - median) * scale for kept channels, 0 for
//                      zapped ones, then minus the mean of the kept channels (zero-DM), summed in
//                      channel order in double, as the CPU, so the means are the same floats.
// The rows it leaves are the channel-major input of DedispersionPlan::execute_channel_major().
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "search/cuda_kernels.hpp"
#include "search/cuda_stats.cuh"

namespace warpbeam::search::detail {
namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr int kCleanThreads = 256;

/// Sample (t, c) of the packed input as unpack_samples() gives it: sub-byte samples lowest bits
/// first, two's complement when signed (never for 1 bit); 16-bit little-endian; 32-bit float.
__device__ __forceinline__ float load_sample(const std::uint8_t* __restrict__ raw,
                                             std::int64_t row_bytes, std::int64_t t, int c,
                                             int nbits, bool is_signed) {
  const std::uint8_t* r = raw + t * row_bytes;
  if (nbits == 8)
    return is_signed ? static_cast<float>(static_cast<std::int8_t>(r[c]))
                     : static_cast<float>(r[c]);
  if (nbits == 16) {
    const std::uint16_t v = reinterpret_cast<const std::uint16_t*>(r)[c];
    return is_signed ? static_cast<float>(static_cast<std::int16_t>(v)) : static_cast<float>(v);
  }
  if (nbits == 32) return reinterpret_cast<const float*>(r)[c];
  const int per_byte = 8 / nbits;
  const unsigned mask = (1u << nbits) - 1u;
  const unsigned v = (static_cast<unsigned>(r[c / per_byte]) >> ((c % per_byte) * nbits)) & mask;
  const int half = 1 << (nbits - 1);
  const int s = (is_signed && nbits > 1 && v >= static_cast<unsigned>(half))
                    ? static_cast<int>(v) - 2 * half
                    : static_cast<int>(v);
  return static_cast<float>(s);
}

__global__ void rfi_unpack_kernel(const RfiArgs a) {
  __shared__ float tile[kTile][kTile + 1];
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const int c0 = static_cast<int>(blockIdx.y) * kTile;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
#pragma unroll
  for (int r = 0; r < kTile; r += kTileRows) {
    const std::int64_t t = t0 + ty + r;
    const int c = c0 + tx;
    float v = 0.0f;
    if (c < a.nchans && t < a.rows) v = load_sample(a.raw, a.row_bytes, t, c, a.nbits, a.is_signed);
    tile[ty + r][tx] = v;
  }
  __syncthreads();
  const std::int64_t t = t0 + tx;
#pragma unroll
  for (int r = 0; r < kTile; r += kTileRows) {
    const int c = c0 + ty + r;
    if (c < a.nchans && t < a.rows)
      a.data[static_cast<std::int64_t>(c) * a.stride + t] = tile[tx][ty + r];
  }
}

__global__ void __launch_bounds__(kSearchThreads) rfi_stats_kernel(const RfiArgs a) {
  __shared__ StatsSmem sm;
  const auto c = static_cast<std::int64_t>(blockIdx.x);
  const float* x = a.data + c * a.stride;
  float* la = a.level_a + c * a.a_stride;
  float* lb = a.level_b + c * a.b_stride;
  auto value = [&](std::int64_t i) { return x[i]; };
  const float med = block_tree_median(value, a.rows, la, lb, sm);
  const double sigma = block_robust_rms(value, a.rows, med, la, lb, sm);
  if (threadIdx.x == 0) {
    a.median[c] = med;
    a.sigma[c] = sigma;
  }
}

__global__ void __launch_bounds__(kCleanThreads) rfi_clean_kernel(const RfiArgs a) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.rows) return;
  float* col = a.data + t;
  double sum = 0;
  for (int c = 0; c < a.nchans; ++c) {
    float* p = col + static_cast<std::int64_t>(c) * a.stride;
    const float v = a.keep[c] ? __fmul_rn(__fsub_rn(*p, a.median[c]), a.scale[c]) : 0.0f;
    *p = v;
    sum += static_cast<double>(v);
  }
  if (!a.zero_dm || a.kept <= 0) return;
  const auto mean = static_cast<float>(sum / a.kept);
  for (int c = 0; c < a.nchans; ++c)
    if (a.keep[c]) col[static_cast<std::int64_t>(c) * a.stride] -= mean;
}

void check(const RfiArgs& a) {
  if (a.rows < 1 || a.nchans < 1 || a.stride < a.rows)
    fail(ErrorCategory::invalid_argument, "RFI stage of " + std::to_string(a.rows) + " rows x " +
                                              std::to_string(a.nchans) + " channels, stride " +
                                              std::to_string(a.stride));
}

}  // namespace

void launch_rfi_unpack(const RfiArgs& a, const Stream* stream) {
  check(a);
  const dim3 grid(static_cast<unsigned>((a.rows + kTile - 1) / kTile),
                  static_cast<unsigned>((a.nchans + kTile - 1) / kTile));
  rfi_unpack_kernel<<<grid, dim3(kTile, kTileRows), 0, WB_STREAM(stream)>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_rfi_stats(const RfiArgs& a, const Stream* stream) {
  check(a);
  rfi_stats_kernel<<<a.nchans, kSearchThreads, 0, WB_STREAM(stream)>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

void launch_rfi_clean(const RfiArgs& a, const Stream* stream) {
  check(a);
  const auto blocks = static_cast<unsigned>((a.rows + kCleanThreads - 1) / kCleanThreads);
  rfi_clean_kernel<<<blocks, kCleanThreads, 0, WB_STREAM(stream)>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::search::detail
