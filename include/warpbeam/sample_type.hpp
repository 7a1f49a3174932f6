#pragma once
// Channelised complex antenna voltages: the sample types telescopes send and the conversion table
// that turns a packed integer code into its value. Shared by the beamformer, the raw-voltage
// readers/writers (GUPPI raw) and the voltage simulator.
//
// Canonical layout (DESIGN.md): [chan][time][antenna][pol], one complex sample per element:
//   ci4  1 byte:  real part in the high nibble, imaginary in the low nibble (four antennas of one
//                 pol per 32-bit word), each a 4-bit code;
//   ci8  2 bytes: real then imaginary, each an 8-bit code;
//   cf16 4 bytes: IEEE half real, half imaginary;  cf32 8 bytes: float real, float imaginary.
// Integer codes are two's complement unless another Encoding is given; the value of every code
// comes from a 256-entry lookup table (as the BEST-2 GPU beamformer, Magro et al. 2013, converts
// its 4-bit samples), so offset-binary, sign-magnitude or non-uniform quantisers cost nothing.

#include <cstdint>
#include <string_view>
#include <vector>

namespace warpbeam {

/// Element type of one complex voltage sample.
enum class SampleType { ci4, ci8, cf16, cf32 };

/// How the integer codes of ci4/ci8 samples map to values (ignored for cf16/cf32).
enum class Encoding {
  twos_complement,  ///< -2^(n-1) .. 2^(n-1)-1 (the usual F-engine output)
  offset_binary,    ///< code - 2^(n-1)
  sign_magnitude,   ///< top bit is the sign, the rest the magnitude
};

std::string_view to_string(SampleType t);
std::string_view to_string(Encoding e);
/// Parses "ci4", "ci8", "cf16", "cf32"; throws invalid_argument otherwise.
SampleType parse_sample_type(std::string_view s);
/// Parses "twos-complement", "offset-binary", "sign-magnitude"; throws invalid_argument.
Encoding parse_encoding(std::string_view s);

/// Bytes of one complex sample: 1 (ci4), 2 (ci8), 4 (cf16), 8 (cf32).
int bytes_per_complex(SampleType t);
/// Bits per real component: 4, 8, 16, 32.
int bits_per_component(SampleType t);

/// The value of integer code `code` (0 .. 2^bits-1, read as an unsigned bit pattern) under
/// `encoding`, for bits 4 or 8.
float code_value(unsigned code, int bits, Encoding encoding);

/// The conversion table the kernels use, 512 floats = 256 (re, im) pairs indexed by one byte:
///  ci4: byte -> (value(high nibble), value(low nibble));
///  ci8: byte -> (value(byte), 0) (each component of a ci8 sample is looked up separately).
/// `levels`, when not empty, overrides `encoding`: levels[code] is the value of code (16 entries
/// for ci4, 256 for ci8). Throws invalid_argument for cf16/cf32 or a wrong number of levels.
std::vector<float> conversion_table(SampleType t, Encoding encoding,
                                    const std::vector<float>& levels = {});

/// IEEE 754 binary16 <-> float32 (round to nearest even; overflow to infinity), for cf16 data.
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

}  // namespace warpbeam
