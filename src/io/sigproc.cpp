#include "warpbeam/io/sigproc.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/parallel_read.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::io {

namespace {

constexpr std::int32_t kMaxKeywordLength = 80;     // the longest SIGPROC keyword is ~15
constexpr std::int32_t kMaxStringLength = 4096;    // source names and file names
constexpr std::int64_t kMaxHeaderBytes = 1 << 16;  // real headers are a few hundred bytes
constexpr int kMaxChannels = 1 << 24;

enum class Kind { integer, real, text, flag };

Kind keyword_kind(std::string_view k) {
  static constexpr std::string_view ints[] = {
      "telescope_id", "machine_id",  "data_type",     "nchans",   "nbits", "nifs", "nbeams",
      "ibeam",        "barycentric", "pulsarcentric", "nsamples", "npuls", "nbins"};
  static constexpr std::string_view reals[] = {"fch1",    "foff",    "tstart",   "tsamp",
                                               "src_raj", "src_dej", "az_start", "za_start",
                                               "refdm",   "period",  "refrm",    "fchannel"};
  static constexpr std::string_view texts[] = {"source_name", "rawdatafile"};
  for (auto s : ints)
    if (k == s) return Kind::integer;
  for (auto s : reals)
    if (k == s) return Kind::real;
  for (auto s : texts)
    if (k == s) return Kind::text;
  if (k == "signed") return Kind::flag;
  fail(ErrorCategory::format, "unknown SIGPROC header keyword '{}'", k);
}

// Reads the file's header from an open stream; sets header_bytes.
class HeaderParser {
 public:
  HeaderParser(std::FILE* fp, const std::string& path) : fp_(fp), path_(path) {}

  FilterbankHeader parse() {
    FilterbankHeader h;
    if (read_string(kMaxKeywordLength, true) != "HEADER_START")
      fail(ErrorCategory::format, "'{}' is not a SIGPROC filterbank (no HEADER_START)", path_);
    for (;;) {
      const std::string key = read_string(kMaxKeywordLength, false);
      if (key == "HEADER_END") break;
      if (key == "FREQUENCY_START" || key == "FREQUENCY_END" || key == "fchannel")
        fail(ErrorCategory::unsupported,
             "'{}': per-channel frequency tables (FREQUENCY_START) are not supported", path_);
      switch (keyword_kind(key)) {
        case Kind::integer:
          set_int(h, key, read_pod<std::int32_t>(key));
          break;
        case Kind::real:
          set_real(h, key, read_pod<double>(key));
          break;
        case Kind::text:
          set_text(h, key, read_string(kMaxStringLength, false));
          break;
        case Kind::flag:
          h.is_signed = read_pod<std::int8_t>(key) != 0;
          break;
      }
    }
    h.header_bytes = consumed_;
    if (!tstart_seen_) warn_no_tstart(path_);
    return h;
  }

 private:
  template <class T>
  T read_pod(const std::string& key) {
    T v{};
    need(sizeof(T), key);
    if (std::fread(&v, sizeof(T), 1, fp_) != 1)
      fail(ErrorCategory::format, "'{}': truncated header (in the value of '{}')", path_, key);
    consumed_ += sizeof(T);
    return v;
  }

  std::string read_string(std::int32_t max_len, bool first) {
    std::int32_t len = 0;
    need(4, "a string length");
    if (std::fread(&len, 4, 1, fp_) != 1) {
      if (first) fail(ErrorCategory::format, "'{}' is empty or not a SIGPROC filterbank", path_);
      fail(ErrorCategory::format, "'{}': truncated header (no HEADER_END)", path_);
    }
    consumed_ += 4;
    if (len <= 0 || len > max_len) {
      if (first) fail(ErrorCategory::format, "'{}' is not a SIGPROC filterbank (bad magic)", path_);
      fail(ErrorCategory::format, "'{}': corrupt header (a string of length {})", path_, len);
    }
    std::string s(static_cast<std::size_t>(len), '\0');
    need(len, "a string");
    if (std::fread(s.data(), 1, s.size(), fp_) != s.size())
      fail(ErrorCategory::format, "'{}': truncated header", path_);
    consumed_ += len;
    return s;
  }

  void need(std::int64_t bytes, std::string_view what) {
    if (consumed_ + bytes > kMaxHeaderBytes)
      fail(ErrorCategory::format, "'{}': header longer than {} bytes while reading {}", path_,
           kMaxHeaderBytes, what);
  }

  void set_int(FilterbankHeader& h, const std::string& k, std::int32_t v) {
    if (k == "telescope_id")
      h.telescope_id = v;
    else if (k == "machine_id")
      h.machine_id = v;
    else if (k == "data_type")
      h.data_type = v;
    else if (k == "nchans")
      h.nchans = v;
    else if (k == "nbits")
      h.nbits = v;
    else if (k == "nifs")
      h.nifs = v;
    else if (k == "nbeams")
      h.nbeams = v;
    else if (k == "ibeam")
      h.ibeam = v;
    else if (k == "barycentric")
      h.barycentric = v;
    else if (k == "pulsarcentric")
      h.pulsarcentric = v;
    // nsamples, npuls, nbins: informational; nsamples is recomputed from the file size.
  }
  void set_real(FilterbankHeader& h, const std::string& k, double v) {
    if (k == "fch1")
      h.fch1 = v;
    else if (k == "foff")
      h.foff = v;
    else if (k == "tstart")
      h.tstart = v, tstart_seen_ = true;
    else if (k == "tsamp")
      h.tsamp = v;
    else if (k == "src_raj")
      h.src_raj = v;
    else if (k == "src_dej")
      h.src_dej = v;
    else if (k == "az_start")
      h.az_start = v;
    else if (k == "za_start")
      h.za_start = v;
    else if (k == "refdm")
      h.refdm = v;
    else if (k == "period")
      h.period = v;
  }
  void set_text(FilterbankHeader& h, const std::string& k, std::string v) {
    if (k == "source_name")
      h.source_name = std::move(v);
    else if (k == "rawdatafile")
      h.rawdatafile = std::move(v);
  }

  // Without tstart every time is counted from MJD 0: said once per file and process (the search
  // opens a file several times).
  static void warn_no_tstart(const std::string& path) {
    static std::mutex m;
    static std::set<std::string> warned;
    const std::lock_guard<std::mutex> lock(m);
    if (warned.insert(path).second)
      warnf(
          "'{}' has no tstart keyword: its MJDs (candidates' mjd, beams' tstart) count from MJD 0",
          path);
  }

  std::FILE* fp_;
  const std::string& path_;
  std::int64_t consumed_ = 0;
  bool tstart_seen_ = false;
};

std::FILE* open_for_reading(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(ErrorCategory::io, "cannot open '{}': it is a directory", path);
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  return fp;
}

std::int64_t file_size(std::FILE* fp) {
  struct stat st {};
  if (::fstat(fileno(fp), &st) != 0) return 0;
  return static_cast<std::int64_t>(st.st_size);
}

// Reads the header and sets nsamples; warns about a trailing partial row.
FilterbankHeader parse_header(std::FILE* fp, const std::string& path) {
  FilterbankHeader h = HeaderParser(fp, path).parse();
  try {
    h.validate();
  } catch (const Error& e) {
    throw Error(e.category(), fmt::format("'{}': {}", path, e.what()));
  }
  const std::int64_t data_bytes = file_size(fp) - h.header_bytes;
  const auto row = static_cast<std::int64_t>(h.bytes_per_sample());
  h.nsamples = data_bytes / row;
  if (data_bytes % row != 0)
    warnf("'{}': the data end in a partial sample row ({} of {} bytes); it is ignored", path,
          data_bytes % row, row);
  return h;
}

void write_string(OutputFile& f, std::string_view s) {
  const auto len = static_cast<std::int32_t>(s.size());
  f.write(&len, 4);
  f.write(s.data(), s.size());
}
void write_int(OutputFile& f, std::string_view k, std::int32_t v) {
  write_string(f, k);
  f.write(&v, 4);
}
void write_real(OutputFile& f, std::string_view k, double v) {
  write_string(f, k);
  f.write(&v, 8);
}

}  // namespace

std::size_t FilterbankHeader::bytes_per_sample() const {
  return packed_bytes(nbits, static_cast<std::size_t>(nchans) * static_cast<std::size_t>(nifs));
}

void FilterbankHeader::validate() const {
  if (nchans <= 0 || nchans > kMaxChannels)
    fail(ErrorCategory::format, "nchans = {} is not a valid channel count (1 to {})", nchans,
         kMaxChannels);
  if (!supported_nbits(nbits))
    fail(ErrorCategory::format, "nbits = {} is not supported (1, 2, 4, 8, 16, 32)", nbits);
  if (nifs != 1)
    fail(ErrorCategory::unsupported, "nifs = {}: only single-IF (total intensity) data", nifs);
  if (!(tsamp > 0 && tsamp < 1e4) || !std::isfinite(tsamp))
    fail(ErrorCategory::format, "tsamp = {} s is not a valid sampling time", tsamp);
  if (!(fch1 > 0 && fch1 < 1e7) || !std::isfinite(fch1))
    fail(ErrorCategory::format, "fch1 = {} MHz is not a valid frequency", fch1);
  if (!(foff != 0 && std::abs(foff) < 1e6) || !std::isfinite(foff))
    fail(ErrorCategory::format, "foff = {} MHz is not a valid channel width", foff);
  if (fmin_mhz() <= 0)
    fail(ErrorCategory::format, "the band reaches {} MHz (fch1 {}, foff {}, nchans {})", fmin_mhz(),
         fch1, foff, nchans);
  if (data_type != 0 && data_type != 1)
    fail(ErrorCategory::unsupported, "data_type = {}: only filterbank data (1, or 0) are read",
         data_type);
}

nlohmann::json to_json(const FilterbankHeader& h) {
  return {{"source_name", h.source_name},
          {"rawdatafile", h.rawdatafile},
          {"telescope_id", h.telescope_id},
          {"machine_id", h.machine_id},
          {"data_type", h.data_type},
          {"nchans", h.nchans},
          {"nbits", h.nbits},
          {"nifs", h.nifs},
          {"nbeams", h.nbeams},
          {"ibeam", h.ibeam},
          {"barycentric", h.barycentric},
          {"pulsarcentric", h.pulsarcentric},
          {"signed", h.is_signed},
          {"fch1", h.fch1},
          {"foff", h.foff},
          {"tstart", h.tstart},
          {"tsamp", h.tsamp},
          {"src_raj", h.src_raj},
          {"src_dej", h.src_dej},
          {"az_start", h.az_start},
          {"za_start", h.za_start},
          {"refdm", h.refdm},
          {"header_bytes", h.header_bytes},
          {"nsamples", h.nsamples}};
}

FilterbankHeader read_filterbank_header(const std::string& path) {
  std::FILE* fp = open_for_reading(path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(fp, &std::fclose);
  return parse_header(fp, path);
}

// ---------------------------------------------------------------------------------------------

FilterbankReader::FilterbankReader(const std::string& path) : path_(path) {
  fp_ = open_for_reading(path);
  try {
    header_ = parse_header(fp_, path);
  } catch (...) {
    std::fclose(fp_);
    fp_ = nullptr;
    throw;
  }
}

FilterbankReader::~FilterbankReader() {
  if (fp_) std::fclose(fp_);
}

void FilterbankReader::seek(std::int64_t sample) {
  if (sample < 0 || sample > header_.nsamples)
    fail(ErrorCategory::invalid_argument, "seek to sample {} outside [0, {}]", sample,
         header_.nsamples);
  const auto off =
      header_.header_bytes + sample * static_cast<std::int64_t>(header_.bytes_per_sample());
  if (fseeko(fp_, off, SEEK_SET) != 0)
    fail(ErrorCategory::io, "cannot seek in '{}': {}", path_, std::strerror(errno));
  position_ = sample;
}

void FilterbankReader::set_read_threads(int threads) {
  read_threads_ = std::clamp(threads, 1, 64);
}

std::int64_t FilterbankReader::read_raw(std::int64_t nsamp, std::uint8_t* out) {
  nsamp = std::clamp<std::int64_t>(nsamp, 0, header_.nsamples - position_);
  const std::size_t bytes = static_cast<std::size_t>(nsamp) * header_.bytes_per_sample();
  if (bytes == 0) return 0;
  if (read_threads_ > 1 && bytes >= 2 * detail::kMinReadPieceBytes) {
    // Positional reads beside the stream, which is then moved past them for the next fread.
    const std::int64_t offset =
        header_.header_bytes + position_ * static_cast<std::int64_t>(header_.bytes_per_sample());
    const auto got = detail::read_at(fileno(fp_), offset, bytes, out, read_threads_);
    if (got.bytes != bytes)
      fail(ErrorCategory::io, "cannot read '{}' at sample {}: {}", path_,
           position_ + static_cast<std::int64_t>(got.bytes / header_.bytes_per_sample()),
           got.error ? std::strerror(got.error) : "unexpected end of file");
    if (fseeko(fp_, offset + static_cast<std::int64_t>(bytes), SEEK_SET) != 0)
      fail(ErrorCategory::io, "cannot seek in '{}': {}", path_, std::strerror(errno));
  } else if (std::fread(out, 1, bytes, fp_) != bytes) {
    fail(ErrorCategory::io, "cannot read '{}' at sample {}: {}", path_, position_,
         std::ferror(fp_) ? std::strerror(errno) : "unexpected end of file");
  }
  position_ += nsamp;
  return nsamp;
}

std::int64_t FilterbankReader::read(std::int64_t nsamp, float* out) {
  nsamp = std::clamp<std::int64_t>(nsamp, 0, header_.nsamples - position_);
  raw_.resize(static_cast<std::size_t>(nsamp) * header_.bytes_per_sample());
  const std::int64_t got = read_raw(nsamp, raw_.data());
  // Each row starts on a byte boundary: unpack row by row when a row is not whole bytes.
  const std::size_t nvals = static_cast<std::size_t>(header_.nchans) * header_.nifs;
  if ((nvals * header_.nbits) % 8 == 0) {
    unpack_samples(raw_.data(), header_.nbits, static_cast<std::size_t>(got) * nvals, out,
                   header_.is_signed);
  } else {
    for (std::int64_t t = 0; t < got; ++t)
      unpack_samples(raw_.data() + t * header_.bytes_per_sample(), header_.nbits, nvals,
                     out + t * nvals, header_.is_signed);
  }
  return got;
}

std::vector<float> FilterbankReader::read_all() {
  seek(0);
  std::vector<float> data(static_cast<std::size_t>(header_.nsamples) * header_.nchans);
  read(header_.nsamples, data.data());
  return data;
}

// ---------------------------------------------------------------------------------------------

void pack_samples(const float* in, int nbits, std::size_t count, std::uint8_t* out,
                  bool is_signed) {
  if (nbits == 32) {
    if (count) std::memcpy(out, in, count * sizeof(float));
    return;
  }
  if (!supported_nbits(nbits))
    fail(ErrorCategory::invalid_argument, "nbits = {} is not supported (1, 2, 4, 8, 16, 32)",
         nbits);
  const double lo = is_signed ? -std::ldexp(1.0, nbits - 1) : 0.0;
  const double hi = is_signed ? std::ldexp(1.0, nbits - 1) - 1 : std::ldexp(1.0, nbits) - 1;
  auto quantise = [&](float v) -> std::uint32_t {
    double q = std::nearbyint(static_cast<double>(v));
    if (!(q >= lo)) q = lo;  // NaN goes to the bottom
    if (q > hi) q = hi;
    return static_cast<std::uint32_t>(static_cast<std::int64_t>(q)) &
           ((nbits == 16) ? 0xFFFFu : ((1u << nbits) - 1u));
  };
  if (nbits == 16) {
    for (std::size_t i = 0; i < count; ++i) {
      const auto v = static_cast<std::uint16_t>(quantise(in[i]));
      std::memcpy(out + 2 * i, &v, 2);
    }
    return;
  }
  if (nbits == 8) {
    for (std::size_t i = 0; i < count; ++i)
      out[i] = static_cast<std::uint8_t>(quantise(in[i]));
    return;
  }
  const int per_byte = 8 / nbits;
  std::memset(out, 0, packed_bytes(nbits, count));
  for (std::size_t i = 0; i < count; ++i)
    out[i / per_byte] |= static_cast<std::uint8_t>(quantise(in[i]) << ((i % per_byte) * nbits));
}

FilterbankWriter::FilterbankWriter(const std::string& path, const FilterbankHeader& header)
    : out_(path), header_(header) {
  header_.validate();
  write_string(out_, "HEADER_START");
  if (!header_.rawdatafile.empty()) {
    write_string(out_, "rawdatafile");
    write_string(out_, header_.rawdatafile);
  }
  if (!header_.source_name.empty()) {
    write_string(out_, "source_name");
    write_string(out_, header_.source_name);
  }
  write_int(out_, "telescope_id", header_.telescope_id);
  write_int(out_, "machine_id", header_.machine_id);
  write_int(out_, "data_type", header_.data_type);
  write_int(out_, "barycentric", header_.barycentric);
  write_int(out_, "pulsarcentric", header_.pulsarcentric);
  write_real(out_, "src_raj", header_.src_raj);
  write_real(out_, "src_dej", header_.src_dej);
  write_real(out_, "az_start", header_.az_start);
  write_real(out_, "za_start", header_.za_start);
  write_real(out_, "fch1", header_.fch1);
  write_real(out_, "foff", header_.foff);
  write_int(out_, "nchans", header_.nchans);
  write_int(out_, "nbeams", header_.nbeams);
  write_int(out_, "ibeam", header_.ibeam);
  write_int(out_, "nbits", header_.nbits);
  write_real(out_, "tstart", header_.tstart);
  write_real(out_, "tsamp", header_.tsamp);
  write_int(out_, "nifs", header_.nifs);
  if (header_.refdm != 0) write_real(out_, "refdm", header_.refdm);
  if (header_.is_signed) {
    write_string(out_, "signed");
    const std::int8_t one = 1;
    out_.write(&one, 1);
  }
  write_string(out_, "HEADER_END");
}

void FilterbankWriter::write(const float* data, std::int64_t nsamp) {
  if (nsamp <= 0) return;
  const std::size_t nvals = static_cast<std::size_t>(header_.nchans) * header_.nifs;
  if (header_.nbits == 32) {
    out_.write(data, static_cast<std::size_t>(nsamp) * nvals * sizeof(float));
  } else {
    const std::size_t row = header_.bytes_per_sample();
    packed_.resize(static_cast<std::size_t>(nsamp) * row);
    for (std::int64_t t = 0; t < nsamp; ++t)
      pack_samples(data + t * nvals, header_.nbits, nvals, packed_.data() + t * row,
                   header_.is_signed);
    out_.write(packed_.data(), packed_.size());
  }
  written_ += nsamp;
}

void FilterbankWriter::write_raw(const std::uint8_t* data, std::size_t bytes) {
  const std::size_t row = header_.bytes_per_sample();
  if (bytes % row != 0)
    fail(ErrorCategory::invalid_argument, "write_raw: {} bytes is not a whole number of samples",
         bytes);
  out_.write(data, bytes);
  written_ += static_cast<std::int64_t>(bytes / row);
}

void FilterbankWriter::commit() {
  out_.commit();
}

}  // namespace warpbeam::io
