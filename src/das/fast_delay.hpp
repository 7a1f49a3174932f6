#pragma once
// Internal: single-precision delays and weights for the fp16 kernels (TCW, BI fp16), about 40
// float instructions per (voxel, receiver) pair instead of ~60 double-precision ones plus two
// double square roots (delay.hpp), which run at half the fp32 rate or slower on the H200.
//
// Only the discrete decisions must agree exactly with the double-precision reference: whether a
// term is in range (0 <= i < nsamples - 1) and inside the f-number aperture. The float path
// decides them only when its value is farther from the boundary than a bound on its rounding
// error; otherwise it returns false and the caller computes the pair with das_coefficients()
// (double, bit-identical to the CPU). Everything else is continuous: a sample index off by 1e-4
// moves the interpolation weight f by 1e-4, and at k -> k+1 the linear interpolation is
// continuous, so k itself may differ from the reference's near an integer. The phase error is
// ~1e-4 rad at 200 cycles (float rounding of fc * dist / c), far below the fp16 storage's
// 5e-4 relative rounding and the 1e-2 tolerance of the fp16 variants (never used for fp32).
//
// Error bounds (IEEE float, u = 6e-8): coordinates rounded to float are off by u |p| each, so a
// distance is off by at most ~4 u C (C = the largest coordinate magnitude of the plan) plus
// ~3 u dist from the arithmetic and rsqrt (MUFU.RSQ: 2^-22.9 relative); in samples that is
// times fs / c. The margins below are ~25-100x those bounds.
#include <cmath>

#include "das/delay.hpp"

namespace warpbeam::das::detail {

/// Float constants of one plan for fast_coefficients().
struct FastParams {
  float fs_over_c = 0;   ///< samples per metre of path
  float fc_over_c = 0;   ///< carrier cycles per metre of path (IQ)
  float two_fnum = 0;    ///< 2 F; 0 = full aperture
  float last = 0;        ///< nsamples - 1
  float rel_margin = 0;  ///< relative error margin (of sample indices and aperture distances)
  float abs_margin = 0;  ///< absolute margin in samples (coordinate rounding)
  float ap_margin = 0;   ///< absolute margin in metres for the aperture test
  int window = 0;        ///< 0 boxcar, 1 Hann, 2 Tukey
  float tukey_alpha = 0.5f;
  int iq = 1;
};

/// A receive element in float (see Element).
struct FastElement {
  float x, y, z, wx, wy;
};

/// Per (voxel, transmit) constants: the sample index of the transmit part, (tau_tx - t0) fs, and
/// the fractional carrier cycles fc tau_tx - floor(fc tau_tx), both from double precision.
struct FastVoxel {
  float x, y, z;
  float idx0, cyc0;
};

/// Result of one pair: samples k and k+1 weighted (1 - f) and f, times c = w exp(2 pi i fc tau).
/// k < 0: no contribution.
struct FastCoeff {
  int k;
  float f, cr, ci;
};

WB_DAS_HD float fast_rsqrt(float x) {
#ifdef __CUDA_ARCH__
  return rsqrtf(x);
#else
  return 1.0f / std::sqrt(x);
#endif
}

/// sin and cos of 2 pi x for x in [-0.5, 0.5] (fast hardware approximations on the device,
/// absolute error ~5e-7 in this range).
WB_DAS_HD void fast_sincos_2pi(float x, float* s, float* c) {
#ifdef __CUDA_ARCH__
  __sincosf(6.28318531f * x, s, c);
#else
  *s = std::sin(6.28318531f * x);
  *c = std::cos(6.28318531f * x);
#endif
}

WB_DAS_HD float fast_cos_pi(float x) {
#ifdef __CUDA_ARCH__
  return __cosf(3.14159265f * x);
#else
  return std::cos(3.14159265f * x);
#endif
}

/// Float constants of a plan; `coord_max` is the largest |coordinate| of voxels and elements (m).
inline FastParams make_fast_params(const DelayParams& p, double coord_max) {
  FastParams f;
  f.fs_over_c = static_cast<float>(p.fs * p.inv_c);
  f.fc_over_c = static_cast<float>(p.fc * p.inv_c);
  f.two_fnum = static_cast<float>(p.two_fnum);
  f.last = static_cast<float>(p.last_index);
  f.rel_margin = 1e-5f;
  f.abs_margin = static_cast<float>(1e-5 * coord_max * p.fs * p.inv_c + 1e-3);
  f.ap_margin = static_cast<float>(1e-5 * coord_max * (1.0 + p.two_fnum) + 1e-12);
  f.window = p.window;
  f.tukey_alpha = p.tukey_alpha;
  f.iq = p.iq;
  return f;
}

/// The weights of one (voxel, receiver) pair in float. Returns false when a discrete decision is
/// too close to call in float: the caller must then use das_coefficients() (double).
WB_DAS_HD bool fast_coefficients(const FastParams& F, const FastVoxel& v, float w_tx,
                                 const FastElement& e, FastCoeff* out) {
  const float dx = v.x - e.x, dy = v.y - e.y, dz = v.z - e.z;
  const float lat2 = e.wx * (dx * dx) + e.wy * (dy * dy);
  const float d2 = dz * dz + lat2;
  const float dist = d2 * fast_rsqrt(d2);  // NaN for d2 = 0: undecided below
  const float ds = dist * F.fs_over_c;
  const float idx = v.idx0 + ds;
  const float margin = F.rel_margin * (fabsf(v.idx0) + ds) + F.abs_margin;
  out->k = -1;
  if (!(idx > margin && idx < F.last - margin)) {
    // Clearly out of range: no term, as the reference decides; near a boundary (or NaN): ask.
    return idx < -margin || idx > F.last + margin;
  }
  float w = w_tx;
  if (F.two_fnum > 0) {
    const float rho2f = (lat2 > 0 ? lat2 * fast_rsqrt(lat2) : 0.f) * F.two_fnum;
    const float diff = dz - rho2f;
    const float m = F.rel_margin * (fabsf(dz) + rho2f) + F.ap_margin;
    if (diff < -m) return true;  // outside the aperture (or behind the element)
    if (!(diff > m)) return false;
    if (F.window != 0) {
      const float u = rho2f / dz;
      if (F.window == 1) {
        w *= 0.5f + 0.5f * fast_cos_pi(u);
      } else {
        const float edge = 1.f - F.tukey_alpha;
        if (u > edge) w *= 0.5f + 0.5f * fast_cos_pi((u - edge) / F.tukey_alpha);
      }
    }
  }
  if (w == 0.f) return true;
  const float kf = floorf(idx);
  out->k = static_cast<int>(kf);
  out->f = idx - kf;
  if (F.iq) {
    const float cyc = v.cyc0 + dist * F.fc_over_c;
    float s, c;
    fast_sincos_2pi(cyc - rintf(cyc), &s, &c);
    out->cr = w * c;
    out->ci = w * s;
  } else {
    out->cr = w;
    out->ci = 0.f;
  }
  return true;
}

/// The per-(voxel, transmit) constants from the double-precision voxel and transmit delay.
WB_DAS_HD FastVoxel make_fast_voxel(const DelayParams& P, double px, double py, double pz,
                                    double tau_tx) {
  FastVoxel v;
  v.x = static_cast<float>(px);
  v.y = static_cast<float>(py);
  v.z = static_cast<float>(pz);
  v.idx0 = static_cast<float>((tau_tx - P.t0) * P.fs);
  const double cyc = P.fc * tau_tx;
  v.cyc0 = static_cast<float>(cyc - floor(cyc));
  return v;
}

/// One pair by the float path, or by das_coefficients() where the float path cannot decide.
WB_DAS_HD FastCoeff coefficients_f32(const DelayParams& P, const FastParams& F, const FastVoxel& v,
                                     double px, double py, double pz, double tau_tx, float w_tx,
                                     const FastElement& fe, const Element& e) {
  FastCoeff r;
  if (!fast_coefficients(F, v, w_tx, fe, &r)) {
    const Coeff c = das_coefficients(P, px, py, pz, tau_tx, w_tx, e);
    r = FastCoeff{c.k, c.f, c.cr, c.ci};
  }
  return r;
}

}  // namespace warpbeam::das::detail
