// One level of the CUDA FDMT (tables: fdmt_plan.cpp; executor: cuda_fdmt.cpp).
//
// Every row of a level is row[t] = A[t] + B[t + shift] over its block + ext samples. A block of
// 256 threads takes one row (grid.x = rows of the level) and walks it four samples per thread
// per step: consecutive threads read consecutive samples of A and B and write consecutive
// samples of the row (coalesced 128-byte transactions; B's shift costs one extra transaction
// per warp when it is not a multiple of 32). The first level reads the corner-turned channel
// rows (uint8 codes or float32), the last writes the output rows of the block.
//
// What bounds it: memory. Each addition reads two floats and writes one (12 bytes; the second
// reader of a row, the parent at the neighbouring delay, usually finds it in L2), so a level
// of D1 (16,192 delays x ~70k samples) moves ~9-14 GB: ~2-3 ms per level at the H200's 4.8
// TB/s, 10 levels per block.
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_common.cuh"
#include "dedisp/cuda_methods.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr int kThreads = 256;

// Sample t of channel row `row` (-1: zero) of the input, as float.
template <class Code>
__device__ __forceinline__ float channel_sample(const FdmtLevelArgs& a, std::int32_t row,
                                                std::int64_t t) {
  const Code* r =
      static_cast<const Code*>(a.channel_rows) + static_cast<std::int64_t>(row) * a.in_stride;
  if constexpr (sizeof(Code) == 1) {
    const unsigned b = __ldg(r + t);
    return static_cast<float>(static_cast<int>(b) - static_cast<int>((b & a.sign_flip) << 1));
  } else {
    return __ldg(r + t);
  }
}

// Level 1: channel rows in, level rows out.
template <class Code>
__global__ void __launch_bounds__(kThreads) fdmt_first(const FdmtLevelArgs a) {
  const std::int64_t r = blockIdx.x;
  const std::int32_t ca = a.a[r], cb = a.b[r];
  const std::int32_t ra = ca >= 0 ? a.row_of_chan[ca] : -1;
  const std::int32_t rb = cb >= 0 ? a.row_of_chan[cb] : -1;
  const std::int64_t n = a.block + a.ext[r];
  const std::int64_t sa = a.t0, sb = a.t0 + a.shift[r];
  float* __restrict__ out = a.out + a.out_offsets[r];
  for (std::int64_t t = threadIdx.x; t < n; t += kThreads) {
    float v = 0.0f;
    if (ra >= 0) v += channel_sample<Code>(a, ra, sa + t);
    if (rb >= 0) v += channel_sample<Code>(a, rb, sb + t);
    out[t] = v;
  }
}

// Levels 2 .. H-1: float rows in and out.
__global__ void __launch_bounds__(kThreads) fdmt_middle(const FdmtLevelArgs a) {
  const std::int64_t r = blockIdx.x;
  const std::int32_t ra = a.a[r], rb = a.b[r];
  const std::int64_t n = a.block + a.ext[r];
  const float* __restrict__ A = a.in + a.in_offsets[ra];
  const float* __restrict__ B = rb >= 0 ? a.in + a.in_offsets[rb] + a.shift[r] : nullptr;
  float* __restrict__ out = a.out + a.out_offsets[r];
  if (B) {
    for (std::int64_t t = threadIdx.x; t < n; t += kThreads)
      out[t] = __ldg(A + t) + __ldg(B + t);
  } else {
    for (std::int64_t t = threadIdx.x; t < n; t += kThreads)
      out[t] = __ldg(A + t);
  }
}

// The last level: output trial i = blockIdx.x from its row's two children, into the output.
template <class Code>
__global__ void __launch_bounds__(kThreads) fdmt_last(const FdmtLevelArgs a) {
  const std::int64_t i = blockIdx.x;
  const std::int32_t r = a.out_row[i];
  const std::int32_t ra = a.a[r], rb = a.b[r];
  const std::int64_t sh = a.shift[r];
  const std::int64_t base = i * a.nsamples_out + a.t0;
  for (std::int64_t t = threadIdx.x; t < a.block; t += kThreads) {
    float v = 0.0f;
    if (a.in_channels) {  // a one-level transform (two channels or one)
      const std::int32_t xa = ra >= 0 ? a.row_of_chan[ra] : -1;
      const std::int32_t xb = rb >= 0 ? a.row_of_chan[rb] : -1;
      if (xa >= 0) v += channel_sample<Code>(a, xa, a.t0 + t);
      if (xb >= 0) v += channel_sample<Code>(a, xb, a.t0 + sh + t);
    } else {
      v = __ldg(a.in + a.in_offsets[ra] + t);
      if (rb >= 0) v += __ldg(a.in + a.in_offsets[rb] + sh + t);
    }
    store_output(a.out_final, base + t, v);
  }
}

template <class Code>
void launch_code(const FdmtLevelArgs& a, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>(a.nrows);
  if (a.out_row)
    fdmt_last<Code><<<blocks, kThreads, 0, s>>>(a);
  else if (a.in_channels)
    fdmt_first<Code><<<blocks, kThreads, 0, s>>>(a);
  else
    fdmt_middle<<<blocks, kThreads, 0, s>>>(a);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_fdmt_level(const FdmtLevelArgs& a, const Stream* stream) {
  if (a.nrows <= 0 || a.block <= 0) return;
  cudaStream_t s = WB_STREAM(stream);
  if (a.float_codes)
    launch_code<float>(a, s);
  else
    launch_code<std::uint8_t>(a, s);
}

}  // namespace warpbeam::dedisp::detail
