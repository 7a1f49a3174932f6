#pragma once
// Internal: the delay and weight of one (voxel, transmit, receiver) triple, shared by the CPU
// reference and the CUDA kernels so that both compute bit-identical sample indices.
//
// The time of flight is computed in double precision with explicitly rounded operations (no
// fused multiply-add on either side: cpu.cpp is compiled with -ffp-contract=off, the device
// uses __dmul_rn/__dadd_rn), so the CPU and GPU agree on k and on which terms are in range.
// A float32 delay would not do: at tau ~ 100 us and fc = 5 MHz the phase fc*tau ~ 500 cycles
// carries 3e-5 cycles of float rounding, a 2e-4 rad error per term, above the 1e-5 tolerance of
// the GPU-vs-CPU tests. The phase is reduced to its fractional cycle in double before float
// sin/cos. Formulas: see include/warpbeam/das.hpp.
#include <cmath>

#ifdef __CUDACC__
#define WB_DAS_HD __host__ __device__ __forceinline__
#else
#define WB_DAS_HD inline
#endif

namespace warpbeam::das::detail {

/// Constants of one plan, in the form the inner loops want.
struct DelayParams {
  double inv_c = 0;       ///< 1 / sound speed (s/m)
  double fs = 0;          ///< sampling frequency (Hz)
  double t0 = 0;          ///< time of sample 0 (s)
  double fc = 0;          ///< demodulation frequency (Hz), IQ only
  double two_fnum = 0;    ///< 2 * f-number; 0 = full aperture
  double last_index = 0;  ///< nsamples - 1: a term needs 0 <= i < nsamples - 1
  int window = 0;         ///< 0 boxcar, 1 Hann, 2 Tukey
  float tukey_alpha = 0.5f;
  int iq = 1;  ///< 1: apply exp(2 pi i fc tau)
};

/// A receive element; wx / wy are 0 along the long axis of a row-column line element.
struct Element {
  double x, y, z;
  double wx, wy;
};

/// Interpolation weights of samples k and k+1 (complex for IQ); k < 0 when the term is skipped.
/// a = (1 - f) c and b = f c, with c = w exp(2 pi i fc tau) (w for RF) also kept apart, for
/// kernels that interpolate first and rotate after.
struct Coeff {
  float ar, ai, br, bi;
  int k;
  float f = 0.f, cr = 0.f, ci = 0.f;
};

WB_DAS_HD double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
WB_DAS_HD double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
WB_DAS_HD double dsub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
WB_DAS_HD float cos_pi(float x) {
#ifdef __CUDA_ARCH__
  return cospif(x);
#else
  return std::cos(3.14159265f * x);
#endif
}
WB_DAS_HD void sincos_2pi(float x, float* s, float* c) {
#ifdef __CUDA_ARCH__
  sincospif(2.0f * x, s, c);
#else
  // float trigonometry is within ~1 ulp, as sincospif; x is a fraction of a cycle in [0, 1).
  const float a = 6.28318531f * x;
  *s = std::sin(a);
  *c = std::cos(a);
#endif
}

/// Receive window at u = rho2f / dz, rho2f = 2 F rho (the aperture holds u <= 1). The inside test
/// is done in double without a division, so host and device agree on it exactly.
WB_DAS_HD float window_weight(int window, double rho2f, double dz, float alpha) {
  if (!(rho2f <= dz)) return 0.f;
  if (window == 0) return 1.f;
  const float uf = static_cast<float>(rho2f) / static_cast<float>(dz);
  if (window == 1) return 0.5f + 0.5f * cos_pi(uf);
  const float edge = 1.f - alpha;
  if (uf <= edge) return 1.f;
  return 0.5f + 0.5f * cos_pi((uf - edge) / alpha);
}

/// The weights of voxel (px, py, pz) for one transmit (tau_tx, w_tx) and receiver e.
WB_DAS_HD Coeff das_coefficients(const DelayParams& P, double px, double py, double pz,
                                 double tau_tx, float w_tx, const Element& e) {
  Coeff r{0.f, 0.f, 0.f, 0.f, -1};
  const double dx = dsub(px, e.x), dy = dsub(py, e.y), dz = dsub(pz, e.z);
  const double lat2 = dadd(dmul(e.wx, dmul(dx, dx)), dmul(e.wy, dmul(dy, dy)));
  const double dist = sqrt(dadd(lat2, dmul(dz, dz)));
  const double tau = dadd(tau_tx, dmul(dist, P.inv_c));
  const double idx = dmul(dsub(tau, P.t0), P.fs);
  if (!(idx >= 0.0 && idx < P.last_index)) return r;
  float w = w_tx;
  if (P.two_fnum > 0) {
    if (!(dz > 0)) return r;
    w *= window_weight(P.window, dmul(sqrt(lat2), P.two_fnum), dz, P.tukey_alpha);
  }
  if (w == 0.f) return r;
  const double kf = floor(idx);
  const float f = static_cast<float>(dsub(idx, kf));
  float cr = w, ci = 0.f;
  if (P.iq) {
    const double cyc = dmul(P.fc, tau);
    const float frac = static_cast<float>(dsub(cyc, floor(cyc)));
    float s, c;
    sincos_2pi(frac, &s, &c);
    cr = w * c;
    ci = w * s;
  }
  const float g = 1.f - f;
  r.ar = g * cr;
  r.ai = g * ci;
  r.br = f * cr;
  r.bi = f * ci;
  r.k = static_cast<int>(kf);
  r.f = f;
  r.cr = cr;
  r.ci = ci;
  return r;
}

/// das_coefficients compiled without FMA contraction (delay_host.cpp): what host code calls.
Coeff host_coefficients(const DelayParams& p, double px, double py, double pz, double tau_tx,
                        float w_tx, const Element& e);

}  // namespace warpbeam::das::detail
