#include "warpbeam/unpack.hpp"
#include "warpbeam/format.hpp"

#include <cstring>

namespace warpbeam {

bool supported_nbits(int nbits) {
  return nbits == 1 || nbits == 2 || nbits == 4 || nbits == 8 || nbits == 16 || nbits == 32;
}

std::size_t packed_bytes(int nbits, std::size_t count) {
  return (count * static_cast<std::size_t>(nbits) + 7) / 8;
}

namespace {
// Sub-byte samples: sample j of a byte sits in bits [j*nbits, (j+1)*nbits).
template <int NBITS>
void unpack_subbyte(const std::uint8_t* in, std::size_t count, float* out, bool is_signed) {
  constexpr int per_byte = 8 / NBITS;
  constexpr unsigned mask = (1u << NBITS) - 1u;
  constexpr int half = 1 << (NBITS - 1);
#pragma omp parallel for schedule(static) if (count > (1u << 20))
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) {
    const unsigned v = (in[i / per_byte] >> ((i % per_byte) * NBITS)) & mask;
    const int s = (is_signed && v >= static_cast<unsigned>(half)) ? static_cast<int>(v) - 2 * half
                                                                  : static_cast<int>(v);
    out[i] = static_cast<float>(s);
  }
}

// 8- and 16-bit samples: a conversion per value, vectorised, and on every thread for a large
// count (a gulp of the file search: ~10^8 values, which one thread unpacks in ~0.1 s).
template <class T>
void unpack_whole(const std::uint8_t* in, std::size_t count, float* out) {
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for simd schedule(static) if (count > (1u << 20))
  for (std::int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, in + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}
}  // namespace

void unpack_samples(const std::uint8_t* in, int nbits, std::size_t count, float* out,
                    bool is_signed) {
  switch (nbits) {
    case 1:
      return unpack_subbyte<1>(in, count, out, false);
    case 2:
      return unpack_subbyte<2>(in, count, out, is_signed);
    case 4:
      return unpack_subbyte<4>(in, count, out, is_signed);
    case 8:
      if (is_signed) {
        unpack_whole<std::int8_t>(in, count, out);
      } else {
        unpack_whole<std::uint8_t>(in, count, out);
      }
      return;
    case 16:  // little-endian files on little-endian hosts
      if (is_signed) {
        unpack_whole<std::int16_t>(in, count, out);
      } else {
        unpack_whole<std::uint16_t>(in, count, out);
      }
      return;
    case 32:
      if (count) std::memcpy(out, in, count * sizeof(float));  // memcpy(null, null, 0) is UB
      return;
    default:
      fail(ErrorCategory::invalid_argument, "nbits = {} is not supported (1, 2, 4, 8, 16, 32)",
           nbits);
  }
}

#ifndef WARPBEAM_HAVE_CUDA
void unpack_samples_cuda(const std::uint8_t*, int, std::size_t, float*, bool, const Stream*) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

}  // namespace warpbeam
