#pragma once
// Big-endian (network order) integers in byte buffers, for the LWA frame headers (TBF, TBX).
#include <cstdint>

namespace warpbeam::io::detail {

inline std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((std::uint16_t{p[0]} << 8) | std::uint16_t{p[1]});
}
inline std::int16_t be16s(const std::uint8_t* p) {
  return static_cast<std::int16_t>(be16(p));
}
inline std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}
inline std::int64_t be64s(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}
inline void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v & 0xFF);
}
inline void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8)
    p[i] = static_cast<std::uint8_t>(v & 0xFF);
}
inline void put64(std::uint8_t* p, std::int64_t s) {
  auto v = static_cast<std::uint64_t>(s);
  for (int i = 7; i >= 0; --i, v >>= 8)
    p[i] = static_cast<std::uint8_t>(v & 0xFF);
}

}  // namespace warpbeam::io::detail
