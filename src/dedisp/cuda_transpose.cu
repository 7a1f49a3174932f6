// The corner turn of the tiled and packed kernels: packed SIGPROC [time][chan] samples ->
// [used channel][time] rows, so that a channel's consecutive samples are consecutive bytes and
// a block can stage one contiguous span per channel. nbits <= 8 keep their raw unsigned code
// (one byte; the kernels apply the sign), 16 and 32 become float32. One pass over the input
// (D1: 1.07 GB read, 1.07 GB written), a small part of the dedispersion time; its cost is inside
// every tiled/packed execute() and so inside every figure measured.
#include <cuda_runtime.h>

#include <type_traits>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int kTile = 32;  // 32 channels x 32 samples per block
constexpr int kRows = 8;   // block 32 x 8 threads, 4 samples each

template <int NBITS>
using Code = std::conditional_t<(NBITS <= 8), std::uint8_t, float>;

// Sample (t, ch) of the packed input as its code (nbits <= 8) or value (16, 32). Bit order as
// SIGPROC: the first sample of a byte is in its lowest bits.
template <int NBITS>
__device__ __forceinline__ Code<NBITS> load_code(const std::uint8_t* __restrict__ in,
                                                 std::int64_t row_bytes, std::int64_t t, int ch,
                                                 bool is_signed) {
  const std::uint8_t* r = in + t * row_bytes;
  if constexpr (NBITS == 8) {
    return r[ch];
  } else if constexpr (NBITS < 8) {
    constexpr int per_byte = 8 / NBITS;
    constexpr unsigned mask = (1u << NBITS) - 1u;
    return static_cast<std::uint8_t>((r[ch / per_byte] >> ((ch % per_byte) * NBITS)) & mask);
  } else if constexpr (NBITS == 16) {
    const unsigned short v = reinterpret_cast<const unsigned short*>(r)[ch];
    return is_signed ? static_cast<float>(static_cast<short>(v)) : static_cast<float>(v);
  } else {
    return reinterpret_cast<const float*>(r)[ch];
  }
}

template <int NBITS>
__global__ void transpose_kernel(const TransposeArgs a) {
  using T = Code<NBITS>;
  __shared__ T tile[kTile][kTile + 1];  // +1: the column reads hit distinct banks
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const int c0 = static_cast<int>(blockIdx.y) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = c0 + tx;
#pragma unroll
  for (int r = 0; r < kTile; r += kRows) {
    const std::int64_t t = t0 + ty + r;
    T v = 0;
    if (c < a.nchans && t < a.nsamples) v = load_code<NBITS>(a.in, a.row_bytes, t, c, a.is_signed);
    tile[ty + r][tx] = v;
  }
  __syncthreads();
  T* __restrict__ out = static_cast<T*>(a.scratch);
  const std::int64_t t = t0 + tx;
#pragma unroll
  for (int r = 0; r < kTile; r += kRows) {
    const int ch = c0 + ty + r;
    if (ch >= a.nchans || t >= a.nsamples) continue;
    const int row = a.chan_row[ch];
    if (row >= 0) out[static_cast<std::int64_t>(row) * a.stride + t] = tile[tx][ty + r];
  }
}

template <int NBITS>
void launch(const TransposeArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((a.nsamples + kTile - 1) / kTile),
                  static_cast<unsigned>((a.nchans + kTile - 1) / kTile));
  transpose_kernel<NBITS><<<grid, dim3(kTile, kRows), 0, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_transpose(const TransposeArgs& a, const Stream* stream) {
  if (a.nsamples <= 0 || a.nchans <= 0) return;
  cudaStream_t s = WB_STREAM(stream);
  dispatch_nbits(a.nbits, [&](auto nbits) { launch<decltype(nbits)::value>(a, s); });
}

}  // namespace warpbeam::dedisp::detail
