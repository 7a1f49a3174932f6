// The MAT-file structure check (mat5_check.hpp). Every byte count read from the file is checked
// against what encloses it before anything is read or allocated by it.
#include "io/mat5_check.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/checked.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::io::detail {

namespace {

// Data types (matfile_format.pdf, table 1-1) and array classes (table 1-3).
enum : std::uint32_t {
  miINT8 = 1,
  miINT32 = 5,
  miUINT32 = 6,
  miMATRIX = 14,
  miCOMPRESSED = 15,
  miUTF8 = 16,
};
enum : std::uint32_t {
  mxCELL = 1,
  mxSTRUCT = 2,
  mxOBJECT = 3,
  mxCHAR = 4,
  mxSPARSE = 5,
  mxDOUBLE = 6,
  mxUINT64 = 15,
};
constexpr int kMaxDepth = 32;
constexpr int kMaxRank = 32;
// A deflate stream expands at most ~1032:1; more than this per compressed byte is a bomb.
constexpr std::int64_t kMaxInflateRatio = 1100;

// Bytes per element of a data type; 0 for the types that are no numeric data.
std::size_t type_bytes(std::uint32_t t) {
  static constexpr std::array<std::uint8_t, 19> size = {0, 1, 1, 2, 2, 4, 4, 4, 0, 8,
                                                        0, 0, 8, 8, 0, 0, 1, 2, 4};
  return t < size.size() ? size[t] : 0;
}

std::uint32_t swap32(std::uint32_t v) {
  return __builtin_bswap32(v);
}

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  fail(ErrorCategory::format, "{}: not a MAT-file warpbeam reads: {}", path, why);
}

// A bounded stream of bytes: a region of the file, or the inflated contents of a compressed one.
class Source {
 public:
  virtual ~Source() = default;
  // Exactly n bytes into out, or false when the stream ends first.
  virtual bool read(void* out, std::size_t n) = 0;
  bool skip(std::uint64_t n) {
    char buf[4096];
    while (n > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, sizeof buf));
      if (!read(buf, k)) return false;
      n -= k;
    }
    return true;
  }
};

class FileSource final : public Source {
 public:
  FileSource(std::FILE* f, std::uint64_t bytes) : f_(f), left_(bytes) {}
  bool read(void* out, std::size_t n) override {
    if (n > left_) return false;
    if (n && std::fread(out, 1, n, f_) != n) return false;
    left_ -= n;
    return true;
  }

 private:
  std::FILE* f_;
  std::uint64_t left_;
};

class InflateSource final : public Source {
 public:
  InflateSource(std::FILE* f, std::uint64_t bytes, const std::string& path) : f_(f), left_(bytes) {
    std::memset(&z_, 0, sizeof z_);
    if (inflateInit(&z_) != Z_OK) fail(ErrorCategory::io, "{}: zlib cannot start", path);
  }
  ~InflateSource() override { inflateEnd(&z_); }
  InflateSource(const InflateSource&) = delete;
  InflateSource& operator=(const InflateSource&) = delete;

  bool read(void* out, std::size_t n) override {
    z_.next_out = static_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out > 0) {
      if (z_.avail_in == 0 && left_ > 0) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(left_, sizeof in_));
        if (std::fread(in_, 1, k, f_) != k) return false;
        left_ -= k;
        z_.next_in = in_;
        z_.avail_in = static_cast<uInt>(k);
      }
      const uInt before = z_.avail_out;
      const int ret = inflate(&z_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) return z_.avail_out == 0;
      if (ret != Z_OK && !(ret == Z_BUF_ERROR && z_.avail_in == 0 && left_ > 0)) return false;
      if (z_.avail_out == before && z_.avail_in == 0 && left_ == 0) return false;  // no progress
    }
    return true;
  }

 private:
  std::FILE* f_;
  std::uint64_t left_;
  z_stream z_;
  unsigned char in_[16384];
};

struct Tag {
  std::uint32_t type = 0;
  std::uint64_t bytes = 0;  // of the data
  bool small = false;       // the data (<= 4 bytes) sat inside the tag
  std::array<unsigned char, 4> data{};
};

class Walker {
 public:
  Walker(const std::string& path, bool swap) : path_(path), swap_(swap) {}

  std::uint32_t word(const unsigned char* p) const {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return swap_ ? swap32(v) : v;
  }

  // Reads a tag, counting its bytes against `left` (the enclosing element's unread bytes).
  Tag tag(Source& s, std::uint64_t& left) const {
    unsigned char b[8];
    if (left < 8 || !s.read(b, 8)) bad(path_, "an element ends inside a tag");
    left -= 8;
    Tag t;
    const std::uint32_t w0 = word(b), w1 = word(b + 4);
    if (w0 >> 16) {  // small data element: byte count in the upper half, data in the tag
      t.small = true;
      t.type = w0 & 0xFFFF;
      t.bytes = w0 >> 16;
      if (t.bytes > 4) bad(path_, "a small data element of more than 4 bytes");
      std::memcpy(t.data.data(), b + 4, 4);
    } else {
      t.type = w0;
      t.bytes = w1;
    }
    return t;
  }

  // The data of an element whose tag was just read, into `out` (at most out_size bytes kept),
  // then its padding to 8 bytes; all counted against `left`.
  void data(Source& s, const Tag& t, std::uint64_t& left, void* out = nullptr,
            std::size_t out_size = 0) const {
    if (t.small) {
      if (out) std::memcpy(out, t.data.data(), std::min<std::size_t>(out_size, 4));
      return;
    }
    const std::uint64_t padded = (t.bytes + 7) / 8 * 8;
    if (padded > left) bad(path_, "an element runs past the one that holds it");
    const std::size_t keep =
        out ? static_cast<std::size_t>(std::min<std::uint64_t>(out_size, t.bytes)) : 0;
    if ((keep && !s.read(out, keep)) || !s.skip(padded - keep))
      bad(path_, "the file ends inside an element");
    left -= padded;
  }

  // An miMATRIX element of `bytes` bytes (its tag already read).
  void matrix(Source& s, std::uint64_t bytes, int depth) const {
    if (depth > kMaxDepth) bad(path_, "arrays nested deeper than 32");
    if (bytes == 0) return;  // an empty array (MATLAB writes empty struct fields so)
    std::uint64_t left = bytes;
    // Array flags.
    Tag t = tag(s, left);
    unsigned char flags[8] = {};
    if (t.type != miUINT32 || t.bytes != 8) bad(path_, "an array without its flags");
    data(s, t, left, flags, 8);
    const std::uint32_t cls = word(flags) & 0xFF;
    const bool complex = (word(flags) & 0x800) != 0;
    // Dimensions.
    t = tag(s, left);
    if (t.type != miINT32 || t.bytes % 4 != 0 || t.bytes < 8 || t.bytes > 4 * kMaxRank)
      bad(path_, "an array without 2 to 32 dimensions");
    unsigned char dims[4 * kMaxRank] = {};
    data(s, t, left, dims, sizeof dims);
    std::int64_t numel = 1;
    for (std::uint64_t i = 0; i < t.bytes / 4; ++i) {
      const auto d = static_cast<std::int32_t>(word(dims + 4 * i));
      if (d < 0) bad(path_, "a negative dimension");
      numel = warpbeam::detail::checked_mul(numel, d, path_ + ": array size");
    }
    // Name.
    t = tag(s, left);
    if (t.type != miINT8) bad(path_, "an array without a name element");
    data(s, t, left);

    if (cls == mxSTRUCT) {
      t = tag(s, left);
      unsigned char len_bytes[4] = {};
      if (t.type != miINT32 || t.bytes != 4) bad(path_, "a struct without its field-name length");
      data(s, t, left, len_bytes, 4);
      const std::uint32_t len = word(len_bytes);
      t = tag(s, left);
      if (t.type != miINT8 || len == 0 || len > 4096 || t.bytes % len != 0)
        bad(path_, "a struct whose field names do not match their length");
      const std::uint64_t nfields = t.bytes / len;
      data(s, t, left);
      children(s,
               warpbeam::detail::checked_mul(numel, static_cast<std::int64_t>(nfields),
                                             path_ + ": struct"),
               left, depth);
    } else if (cls == mxCELL) {
      children(s, numel, left, depth);
    } else if (cls == mxCHAR || (cls >= mxDOUBLE && cls <= mxUINT64)) {
      for (int part = 0; part < (complex ? 2 : 1); ++part) {
        t = tag(s, left);
        const std::size_t size = type_bytes(t.type);
        if (size == 0) bad(path_, fmt::format("array data of type {}", t.type));
        // Numbers fill exactly numel elements of the stored type; UTF-8 text at least numel bytes.
        const bool text = cls == mxCHAR && t.type == miUTF8;
        if (text ? t.bytes < static_cast<std::uint64_t>(numel)
                 : t.bytes != static_cast<std::uint64_t>(numel) * size)
          bad(path_, fmt::format("an array of {} elements with {} bytes of data", numel, t.bytes));
        data(s, t, left);
      }
    } else if (cls == mxSPARSE || cls == mxOBJECT || cls >= 16) {
      bad(path_, fmt::format("a variable of MATLAB class {} (sparse arrays, objects, function "
                             "handles are not read)",
                             cls));
    } else {
      bad(path_, fmt::format("an array of unknown class {}", cls));
    }
    if (!s.skip(left)) bad(path_, "the file ends inside an array");
  }

  // `count` miMATRIX elements (struct fields or cells), each at least one 8-byte tag.
  void children(Source& s, std::int64_t count, std::uint64_t& left, int depth) const {
    if (static_cast<std::uint64_t>(count) > left / 8)
      bad(path_, fmt::format("{} fields or cells in {} bytes", count, left));
    for (std::int64_t i = 0; i < count; ++i) {
      const Tag t = tag(s, left);
      if (t.type != miMATRIX || t.small || t.bytes > left)
        bad(path_, "a struct field or cell that is not an array inside its parent");
      left -= t.bytes;
      matrix(s, t.bytes, depth + 1);
    }
  }

 private:
  const std::string& path_;
  bool swap_;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

void check_mat5_structure(const std::string& path, std::int64_t file_bytes) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(ErrorCategory::io, "{}: cannot open: {}", path, std::strerror(errno));
  unsigned char header[128];
  if (file_bytes < 128 || std::fread(header, 1, 128, f.get()) != 128)
    bad(path, "no 128-byte header");
  // "IM" as written by a little-endian machine: on this (little-endian) one, no swap.
  const bool swap = header[126] == 'M' && header[127] == 'I';
  const Walker w(path, swap);
  std::int64_t at = 128;
  while (at < file_bytes) {
    std::uint64_t left = static_cast<std::uint64_t>(file_bytes - at);
    FileSource file(f.get(), left);
    const Tag t = w.tag(file, left);
    if (t.small || t.bytes > left)
      bad(path, fmt::format("the element at byte {} runs past the end of the file", at));
    if (t.type == miMATRIX) {
      if (t.bytes % 8 != 0) bad(path, fmt::format("the array at byte {} is not padded", at));
      FileSource body(f.get(), t.bytes);
      w.matrix(body, t.bytes, 0);
    } else if (t.type == miCOMPRESSED) {
      InflateSource z(f.get(), t.bytes, path);
      std::uint64_t inner_left = 8;
      const Tag inner = w.tag(z, inner_left);
      if (inner.type != miMATRIX || inner.small)
        bad(path, fmt::format("the compressed element at byte {} holds no array", at));
      const std::int64_t limit = warpbeam::detail::checked_mul(
          static_cast<std::int64_t>(t.bytes) + 64, kMaxInflateRatio, path);
      if (static_cast<std::int64_t>(inner.bytes) > limit)
        bad(path, fmt::format("the compressed array at byte {} declares {} bytes from {}", at,
                              inner.bytes, t.bytes));
      w.matrix(z, inner.bytes, 0);
    } else {
      bad(path,
          fmt::format("a data element of type {} at byte {} (expected an array)", t.type, at));
    }
    at += 8 + static_cast<std::int64_t>(t.bytes);
    if (std::fseek(f.get(), static_cast<long>(at), SEEK_SET) != 0)
      fail(ErrorCategory::io, "{}: cannot seek: {}", path, std::strerror(errno));
  }
}

}  // namespace warpbeam::io::detail
