#pragma once
// Internal (CUDA only): the fp16 RRII complex pair of the fused kernel and the device tables
// and finalisation step both CUDA executors share (cuda_finalize.cu).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "epic/block_fft.hpp"
#include "epic/tables.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::epic::detail {

// ---------------------------------------------------------------------------------------------
// Two complex fp16 values packed "RRII": re = (X.re, Y.re), im = (X.im, Y.im). One complex
// multiply-add on this pair transforms both polarisations at once.
// ---------------------------------------------------------------------------------------------
struct c2h {
  __half2 re, im;
};

__device__ __forceinline__ c2h add(c2h a, c2h b) {
  return {__hadd2(a.re, b.re), __hadd2(a.im, b.im)};
}
__device__ __forceinline__ c2h sub(c2h a, c2h b) {
  return {__hsub2(a.re, b.re), __hsub2(a.im, b.im)};
}
__device__ __forceinline__ c2h mul_neg_i(c2h a) {
  return {a.im, __hneg2(a.re)};
}
__device__ __forceinline__ c2h mul_pos_i(c2h a) {
  return {__hneg2(a.im), a.re};
}

using fft::half_bits;

__device__ __forceinline__ __half2 half2_const(std::uint16_t bits) {
  __half2_raw r;
  r.x = bits;
  r.y = bits;
  return __half2(r);
}

/// x * w_16^E with the constants folded at compile time.
template <int E>
__device__ __forceinline__ c2h mul_const(c2h a, fft::Root16<E>) {
  constexpr std::uint16_t cb = half_bits(fft::kCos16[E]);
  constexpr std::uint16_t sb = half_bits(-fft::kSin16[E]);
  const __half2 c = half2_const(cb), s = half2_const(sb);
  return {__hfma2(a.re, c, __hneg2(__hmul2(a.im, s))), __hfma2(a.re, s, __hmul2(a.im, c))};
}

/// x * (c + i s) with tw = (c, s) packed in one __half2 (a runtime twiddle).
__device__ __forceinline__ c2h mul_twiddle(c2h a, __half2 tw) {
  const __half2 c = __low2half2(tw), s = __high2half2(tw);
  return {__hfma2(a.re, c, __hneg2(__hmul2(a.im, s))), __hfma2(a.re, s, __hmul2(a.im, c))};
}

// ---------------------------------------------------------------------------------------------
// Shared by the CUDA executors: the plan's tables on the device and the last step of a gulp.
// ---------------------------------------------------------------------------------------------
struct DeviceTables {
  DeviceArray<float> ax, ay;  // [nchan][nused][N]
  DeviceArray<float> corr;    // [nchan][N][N], FFT order
  DeviceArray<int> used;      // [nused]
  DeviceArray<float2> cal;    // [nchan][nstand][2]
  explicit DeviceTables(const PlanTables& t);
};

/// out[c][k][y][x] = (raw[c][k][q][p] - sum_i autos[c][used_i][k] ay_i(q) ax_i(p)) corr(q, p),
/// (y, x) = ((q + N/2) mod N, (p + N/2) mod N). raw: [nchan][nparts][4][N][N] FFT order (sums of
/// the products over parts of the gulp, added here; fp32 from the fused kernel, fp64 from the
/// multi-kernel path); autos: [nchan][nparts][nstand][4] (XX, YY, Re XY, Im XY per stand, fp64).
/// The autocorrelation image is summed in fp32 over blocks of 16 antennas and in fp64 across
/// blocks, and subtracted in fp64: it cancels most of XX* and YY*, so its rounding must not grow
/// with the number of antennas.
void launch_finalize(const PlanTables& t, const DeviceTables& d, const float* raw, int nparts,
                     const double* autos, float* out, cudaStream_t stream);
void launch_finalize(const PlanTables& t, const DeviceTables& d, const double* raw,
                     const double* autos, float* out, cudaStream_t stream);

/// autos[c][s][4] = sum_t of the calibrated voltages' XX, YY, Re XY*, Im XY*, for every stand (0
/// for stands not gridded: their calibration is 0): fp32 over blocks of 16 spectra, fp64 across
/// blocks, so that the rounding does not grow with the gulp.
void launch_autos(const PlanTables& t, const DeviceTables& d, const std::uint8_t* in, double* autos,
                  cudaStream_t stream);

}  // namespace warpbeam::epic::detail
