// Complex voltage sample types and the code -> value conversion table
// (include/warpbeam/sample_type.hpp).
#include "warpbeam/sample_type.hpp"

#include <cmath>
#include <limits>

#include "warpbeam/format.hpp"

namespace warpbeam {

std::string_view to_string(SampleType t) {
  switch (t) {
    case SampleType::ci4:
      return "ci4";
    case SampleType::ci8:
      return "ci8";
    case SampleType::cf16:
      return "cf16";
    case SampleType::cf32:
      return "cf32";
  }
  return "?";
}

std::string_view to_string(Encoding e) {
  switch (e) {
    case Encoding::twos_complement:
      return "twos-complement";
    case Encoding::offset_binary:
      return "offset-binary";
    case Encoding::sign_magnitude:
      return "sign-magnitude";
  }
  return "?";
}

SampleType parse_sample_type(std::string_view s) {
  for (auto t : {SampleType::ci4, SampleType::ci8, SampleType::cf16, SampleType::cf32})
    if (s == to_string(t)) return t;
  fail(ErrorCategory::invalid_argument, "sample type '{}' is not one of ci4, ci8, cf16, cf32", s);
}

Encoding parse_encoding(std::string_view s) {
  for (auto e : {Encoding::twos_complement, Encoding::offset_binary, Encoding::sign_magnitude})
    if (s == to_string(e)) return e;
  fail(ErrorCategory::invalid_argument,
       "encoding '{}' is not one of twos-complement, offset-binary, sign-magnitude", s);
}

int bytes_per_complex(SampleType t) {
  switch (t) {
    case SampleType::ci4:
      return 1;
    case SampleType::ci8:
      return 2;
    case SampleType::cf16:
      return 4;
    case SampleType::cf32:
      return 8;
  }
  return 0;
}

int bits_per_component(SampleType t) {
  return bytes_per_complex(t) * 4;
}

float code_value(unsigned code, int bits, Encoding encoding) {
  const unsigned half = 1u << (bits - 1);
  code &= (1u << bits) - 1u;
  switch (encoding) {
    case Encoding::twos_complement:
      return code >= half ? static_cast<float>(static_cast<int>(code) - 2 * static_cast<int>(half))
                          : static_cast<float>(code);
    case Encoding::offset_binary:
      return static_cast<float>(static_cast<int>(code) - static_cast<int>(half));
    case Encoding::sign_magnitude: {
      const float mag = static_cast<float>(code & (half - 1u));
      return (code & half) ? -mag : mag;
    }
  }
  return 0;
}

std::vector<float> conversion_table(SampleType t, Encoding encoding,
                                    const std::vector<float>& levels) {
  if (t != SampleType::ci4 && t != SampleType::ci8)
    fail(ErrorCategory::invalid_argument, "a conversion table is for ci4/ci8 samples, not {}",
         to_string(t));
  const int bits = t == SampleType::ci4 ? 4 : 8;
  const std::size_t ncodes = std::size_t{1} << bits;
  if (!levels.empty() && levels.size() != ncodes)
    fail(ErrorCategory::invalid_argument, "{} levels need {} entries (one per code), got {}",
         to_string(t), ncodes, levels.size());
  for (std::size_t i = 0; i < levels.size(); ++i)
    if (!std::isfinite(levels[i]))
      fail(ErrorCategory::invalid_argument, "level {} = {} is not finite", i, levels[i]);
  auto value = [&](unsigned code) {
    return levels.empty() ? code_value(code, bits, encoding) : levels[code];
  };
  std::vector<float> table(512);
  for (unsigned byte = 0; byte < 256; ++byte) {
    if (bits == 4) {
      table[2 * byte] = value(byte >> 4);
      table[2 * byte + 1] = value(byte & 0xFu);
    } else {
      table[2 * byte] = value(byte);
      table[2 * byte + 1] = 0;
    }
  }
  return table;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1F;
  const std::uint32_t mant = h & 0x3FFu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  return sign ? -v : v;
}

std::uint16_t float_to_half(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000u : 0;
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7E00u);
  if (a >= 65520.f) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {                                      // subnormal or zero
    const auto m = static_cast<std::uint16_t>(std::nearbyint(a * std::ldexp(1.0f, 24)));
    return static_cast<std::uint16_t>(sign | m);  // m == 0x400 rolls into the smallest normal
  }
  int e;
  const float fr = std::frexp(a, &e);  // a = fr * 2^e, fr in [0.5, 1)
  auto m = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(fr, 11)));  // 1024 .. 2048
  if (m == 2048) {
    m = 1024;
    ++e;
  }
  if (e + 14 >= 31) return static_cast<std::uint16_t>(sign | 0x7C00u);
  return static_cast<std::uint16_t>(sign | ((e + 14) << 10) | (m & 0x3FFu));
}

}  // namespace warpbeam
