#pragma once
// Internal (CUDA): loading one stored sample (fp32 or fp16, real or complex) as float(2), and the
// complex multiply-accumulate of the two interpolation taps.
#include <cuda_fp16.h>

#include "das/delay.hpp"

namespace warpbeam::das::detail {

__device__ __forceinline__ float2 load_sample(const float2* p) {
  return __ldg(p);
}
__device__ __forceinline__ float2 load_sample(const __half2* p) {
  return __half22float2(__ldg(p));
}
__device__ __forceinline__ float2 load_sample(const float* p) {
  return make_float2(__ldg(p), 0.f);
}
__device__ __forceinline__ float2 load_sample(const __half* p) {
  return make_float2(__half2float(__ldg(p)), 0.f);
}

/// acc += a * s0 + b * s1 (complex), the interpolated and phase-rotated term of one frame.
__device__ __forceinline__ void accumulate_iq(float2& acc, const Coeff& c, float2 s0, float2 s1) {
  acc.x = fmaf(c.ar, s0.x, acc.x);
  acc.x = fmaf(-c.ai, s0.y, acc.x);
  acc.x = fmaf(c.br, s1.x, acc.x);
  acc.x = fmaf(-c.bi, s1.y, acc.x);
  acc.y = fmaf(c.ar, s0.y, acc.y);
  acc.y = fmaf(c.ai, s0.x, acc.y);
  acc.y = fmaf(c.br, s1.y, acc.y);
  acc.y = fmaf(c.bi, s1.x, acc.y);
}
/// acc += a * s0 + b * s1 for real samples (a, b real).
__device__ __forceinline__ void accumulate_rf(float& acc, const Coeff& c, float s0, float s1) {
  acc = fmaf(c.ar, s0, acc);
  acc = fmaf(c.br, s1, acc);
}

}  // namespace warpbeam::das::detail
