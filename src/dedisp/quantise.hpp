#pragma once
// Internal: the one formula of the quantised (8/16-bit) output, shared by the CUDA kernels and the
// host path so that both give the same integer for the same float32 sum (see OutputScaling).
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define WB_HOST_DEVICE __host__ __device__
#else
#define WB_HOST_DEVICE
#endif

namespace warpbeam::dedisp::detail {

/// clamp(rint(fma(sum, scale, offset)), 0, maxval): fmaf is correctly rounded on both sides,
/// fmaxf(NaN, 0) is 0, rintf rounds half to even (the default rounding mode on the host).
WB_HOST_DEVICE inline std::uint32_t quantise(float sum, float scale, float offset, float maxval) {
  float v = fmaf(sum, scale, offset);
  v = fminf(fmaxf(v, 0.0f), maxval);
  return static_cast<std::uint32_t>(rintf(v));
}

}  // namespace warpbeam::dedisp::detail
