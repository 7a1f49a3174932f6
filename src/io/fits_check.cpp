// FITS header check before cfitsio (see fits_check.hpp for why and the standard's sections).
#include "io/fits_check.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::io::detail {

namespace {

constexpr std::int64_t kBlock = 2880;
constexpr int kCard = 80;
constexpr int kMaxHeaders = 1000;  // cfitsio's MAXHDU

// a * b for a, b >= 0, or -1 on overflow.
std::int64_t mul(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) return -1;
  return a * b;
}

// The value field of a card (columns 11-80), without leading blanks; "" for a card without "= ".
std::string value_of(const char* card) {
  if (card[8] != '=' || card[9] != ' ') return {};
  std::string v(card + 10, kCard - 10);
  const auto first = v.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : v.substr(first);
}

// Keywords whose value the standard makes a character string (and cfitsio copies as one).
bool string_keyword(const std::string& key) {
  if (key == "XTENSION" || key == "EXTNAME") return true;
  for (const char* stem : {"TTYPE", "TFORM", "TUNIT", "TDISP"})
    if (key.rfind(stem, 0) == 0 && key.size() > 5 &&
        key.find_first_not_of("0123456789", 5) == std::string::npos)
      return true;
  return false;
}

}  // namespace

void check_fits_headers(const std::string& path, std::int64_t file_bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  std::int64_t offset = 0;
  char block[kBlock];
  for (int hdu = 1; hdu <= kMaxHeaders && offset < file_bytes; ++hdu) {
    if (std::fseek(f.get(), static_cast<long>(offset), SEEK_SET) != 0)
      fail(ErrorCategory::io, "cannot read '{}': {}", path, std::strerror(errno));
    std::map<std::string, std::int64_t> ints;  // BITPIX, NAXIS, NAXISn, PCOUNT, GCOUNT
    bool end = false;
    std::int64_t card_no = 0;
    while (!end) {
      if (std::fread(block, 1, kBlock, f.get()) != static_cast<std::size_t>(kBlock))
        fail(ErrorCategory::format, "'{}': header {} has no END card before the end of the file",
             path, hdu);
      offset += kBlock;
      for (int c = 0; c < kBlock / kCard && !end; ++c) {
        const char* card = block + c * kCard;
        ++card_no;
        for (int i = 0; i < kCard; ++i) {
          const auto b = static_cast<unsigned char>(card[i]);
          if (b < 32 || b > 126)
            fail(ErrorCategory::format,
                 "'{}': card {} of header {} holds byte 0x{:02x}, not ASCII text (a FITS header "
                 "is ASCII 32-126)",
                 path, card_no, hdu, b);
        }
        std::string key(card, 8);
        key.erase(key.find_last_not_of(' ') + 1);
        if (key == "END") {
          end = true;
          break;
        }
        const std::string value = value_of(card);
        if (value.empty()) continue;
        if (string_keyword(key) && value.front() != '\'')
          fail(ErrorCategory::format,
               "'{}': {} in header {} is not a quoted string (FITS requires one)", path, key, hdu);
        if (key == "BITPIX" || key == "PCOUNT" || key == "GCOUNT" || key.rfind("NAXIS", 0) == 0) {
          long long v = 0;
          char tail = 0;
          if (std::sscanf(value.c_str(), "%lld %c", &v, &tail) < 1 || (tail != 0 && tail != '/'))
            fail(ErrorCategory::format, "'{}': {} in header {} is not an integer", path, key, hdu);
          ints[key] = v;
        }
      }
    }
    // The data that follows, to find the next header.
    if (!ints.count("BITPIX") || !ints.count("NAXIS"))
      fail(ErrorCategory::format, "'{}': header {} has no BITPIX or NAXIS", path, hdu);
    const std::int64_t bitpix = ints["BITPIX"], naxis = ints["NAXIS"];
    if (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 &&
        bitpix != -64)
      fail(ErrorCategory::format, "'{}': BITPIX = {} in header {}", path, bitpix, hdu);
    if (naxis < 0 || naxis > 999)
      fail(ErrorCategory::format, "'{}': NAXIS = {} in header {}", path, naxis, hdu);
    std::int64_t values = naxis > 0 ? 1 : 0;
    for (std::int64_t n = 1; n <= naxis; ++n) {
      const auto it = ints.find(fmt::format("NAXIS{}", n));
      if (it == ints.end() || it->second < 0)
        fail(ErrorCategory::format, "'{}': NAXIS{} of header {} is missing or negative", path, n,
             hdu);
      if (n == 1 && it->second == 0 && naxis > 1) continue;  // random groups (§6)
      values = mul(values, it->second);
    }
    const std::int64_t pcount = ints.count("PCOUNT") ? ints["PCOUNT"] : 0;
    const std::int64_t gcount = ints.count("GCOUNT") ? ints["GCOUNT"] : 1;
    if (pcount < 0 || gcount < 0)
      fail(ErrorCategory::format, "'{}': PCOUNT or GCOUNT of header {} is negative", path, hdu);
    const std::int64_t bytes =
        values == 0 && pcount == 0
            ? 0
            : mul(mul(std::abs(bitpix) / 8, gcount),
                  values < 0 || pcount > std::numeric_limits<std::int64_t>::max() - values
                      ? -1
                      : values + pcount);
    if (bytes < 0 || bytes > file_bytes) return;  // past the end: the reader reports truncation
    offset += (bytes + kBlock - 1) / kBlock * kBlock;
  }
}

}  // namespace warpbeam::io::detail
