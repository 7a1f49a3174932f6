#pragma once
// Internal: the int8 arithmetic of the tensor-int8 beamformer (cuda_tensor_int8.cu), on the host:
// the weight quantisation both the plan and the kernel use, the s8 voltage table, the limits that
// keep the integer sums exact, and a CPU emulation that computes exactly what the kernel computes
// (the GPU test compares the two bit for bit; the CPU test measures the emulation's error against
// float64 and so establishes the variant's error bound in CI).
//
// Quantisation (one scale per channel and beam, shared by both pols):
//   s[c][b] = max over pols, antennas and components of |w| / 127,   q = round(w / s) in [-127,
//   127]
// (round half to even; s = 0 when every weight of the beam is 0). The kernel applies w' = s q.
// Voltages: ci4/ci8 codes through the conversion table, which must give integers in [-128, 127]
// (every built-in encoding does; custom levels must too), so x is exact in s8.
// Arithmetic: V = sum_a q_a x_a in integers (exact: |V| < 2^31 for any nantennas <= 65536),
// P = Re(V)^2 + Im(V)^2 in 64-bit integers, summed exactly over the output's pols and integration,
// then out = float(P) * fl(s^2) (two fp32 roundings; order-free, so the kernel is deterministic).
#include <complex>
#include <cstdint>
#include <vector>

#include "warpbeam/beamform.hpp"

namespace warpbeam::beamform::detail {

struct Int8Weights {
  std::vector<std::int8_t> q;  ///< [chan][pol][beam][antenna][re, im]
  std::vector<float> scale;    ///< [chan][beam]: the applied weight is scale * q
  std::vector<float> scale2;   ///< [chan][beam]: fl(scale * scale), the power scale
};

/// Quantises w [chan][pol][beam][antenna] as above.
Int8Weights quantize_int8(const BeamformConfig& c, const std::complex<float>* w);
/// The weights the kernel applies, scale * q, in the layout of w (for effective_weights()).
std::vector<std::complex<float>> dequantize_int8(const BeamformConfig& c, const Int8Weights& q);

/// The s8 values of the 256 codes, (re, im) pairs as conversion_table() (ci8: im unused). Throws
/// unsupported, naming the code, when a value is not an integer in [-128, 127], or for cf16/cf32.
std::vector<std::int8_t> int8_table(const BeamformConfig& c);

/// Throws unsupported when the tensor-int8 kernel cannot form `c` exactly: not ci4/ci8, values
/// outside s8, voltage output, an integration not dividing 64, or sums that could overflow 64 bits
/// (npol summed x integration x the largest possible |V|^2).
void check_int8_config(const BeamformConfig& c);

/// Throws as check_int8_config(), then invalid_argument naming the reason for what the streaming
/// variant (tensor_int8_stream, cuda_tensor_int8_stream.cu) does not handle: voltages other than
/// ci4, more than 32 antennas (its weights live in 32 registers a lane: one k' block of 64), both
/// pols summed into one output, an integration not dividing its 32-sample chunk (1, 2, 4, .. 32).
void check_int8_stream_config(const BeamformConfig& c);

/// True when tensor_int8 runs as its GEMM kernel (cuda_tensor_int8_gemm.cu): only when the
/// environment variable WARPBEAM_INT8_GEMM=1 asks for it (opt-in until its current form has
/// passed the GPU tests on the H200), with integration 1 and the pols not summed; the general
/// kernel (cuda_tensor_int8.cu) otherwise. Both compute exactly emulate_int8(). Any value other
/// than 0 or 1 throws invalid_argument.
bool uses_int8_gemm(const BeamformConfig& c);

/// True when check_int8_stream_config(c) accepts c (the automatic choice's test).
bool fits_int8_stream(const BeamformConfig& c);

/// The kernel's arithmetic on the host: in [chan][time][row_bytes()] bytes, out float32
/// c.output_shape() (power). Exactly the tensor-int8 kernel's output for the same q.
void emulate_int8(const BeamformConfig& c, const Int8Weights& w, const std::uint8_t* in,
                  float* out);

}  // namespace warpbeam::beamform::detail
