// GUPPI raw reader and writer (include/warpbeam/io/guppi.hpp).
#include "warpbeam/io/guppi.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"

namespace warpbeam::io {

namespace {

constexpr int kCard = 80;
constexpr std::int64_t kMaxHeaderBytes = 1 << 20;  // real headers are a few kB

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  const auto b = s.find_last_not_of(' ');
  return s.substr(a, b - a + 1);
}

// The value text of a card without quotes and padding ("'8       '" -> "8").
std::string unquote(const std::string& v) {
  std::string t = trim(v);
  if (t.size() >= 2 && t.front() == '\'') {
    const auto end = t.find('\'', 1);
    t = trim(t.substr(1, end == std::string::npos ? std::string::npos : end - 1));
  }
  return t;
}

double to_number(const GuppiHeader& h, const std::string& key, const std::string& where) {
  const std::string v = h.get(key);
  try {
    std::size_t pos = 0;
    const double d = std::stod(v, &pos);
    if (trim(v.substr(pos)).empty() && std::isfinite(d)) return d;
  } catch (const std::exception&) {
  }
  fail(ErrorCategory::format, "{}: GUPPI keyword {} = '{}' is not a number", where, key, v);
}

std::int64_t to_integer(const GuppiHeader& h, const std::string& key, const std::string& where) {
  const double d = to_number(h, key, where);
  if (d != std::floor(d) || std::abs(d) > 9e15)
    fail(ErrorCategory::format, "{}: GUPPI keyword {} = {} is not a whole number", where, key, d);
  return static_cast<std::int64_t>(d);
}

void require(const GuppiHeader& h, const std::string& key, const std::string& where) {
  if (!h.has(key))
    fail(ErrorCategory::format, "{}: the GUPPI header lacks the keyword {}", where, key);
}

// Reads the header text (up to and including the END card) at the current position; "" at EOF.
std::string read_header_text(std::FILE* fp, const std::string& where) {
  std::string text;
  char card[kCard];
  for (;;) {
    const std::size_t n = std::fread(card, 1, kCard, fp);
    if (n == 0 && text.empty()) return "";
    if (n < static_cast<std::size_t>(kCard))
      fail(ErrorCategory::format, "{}: the GUPPI header ends without an END card", where);
    text.append(card, kCard);
    if (std::strncmp(card, "END", 3) == 0 && trim(std::string(card + 3, kCard - 3)).empty())
      return text;
    if (static_cast<std::int64_t>(text.size()) > kMaxHeaderBytes)
      fail(ErrorCategory::format, "{}: no END card in the first {} bytes: not a GUPPI header",
           where, kMaxHeaderBytes);
  }
}

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<std::int64_t>(st.st_size);
}

}  // namespace

std::string GuppiHeader::get(const std::string& key) const {
  for (const auto& [k, v] : cards)
    if (k == key) return unquote(v);
  return "";
}

bool GuppiHeader::has(const std::string& key) const {
  for (const auto& kv : cards)
    if (kv.first == key) return true;
  return false;
}

SampleType GuppiHeader::sample_type() const {
  if (is_float) return nbits == 16 ? SampleType::cf16 : SampleType::cf32;
  return nbits == 4 ? SampleType::ci4 : SampleType::ci8;
}

std::int64_t GuppiHeader::block_samples() const {
  return blocsize * 8 / (static_cast<std::int64_t>(obsnchan) * npol * 2 * nbits);
}

GuppiHeader parse_guppi_header(const std::string& text, const std::string& where) {
  GuppiHeader h;
  if (text.size() % kCard != 0)
    fail(ErrorCategory::format, "{}: GUPPI header of {} bytes is not whole 80-character cards",
         where, text.size());
  for (std::size_t i = 0; i < text.size(); i += kCard) {
    const std::string card = text.substr(i, kCard);
    const std::string key = trim(card.substr(0, 8));
    if (key == "END") break;
    if (key.empty() || key == "COMMENT" || key == "HISTORY") continue;
    for (unsigned char ch : card)
      if (ch < 32 || ch > 126)
        fail(ErrorCategory::format, "{}: GUPPI header card {} has a non-ASCII byte: not a header",
             where, i / kCard);
    if (card.size() < 10 || card[8] != '=')
      fail(ErrorCategory::format, "{}: GUPPI header card {} ('{}') has no '=' in column 9", where,
           i / kCard, trim(card));
    h.cards.emplace_back(key, trim(card.substr(9)));
  }
  for (const char* k : {"BLOCSIZE", "NBITS", "NPOL", "OBSNCHAN", "TBIN", "OBSFREQ"})
    require(h, k, where);
  if (!h.has("CHAN_BW") && !h.has("OBSBW"))
    fail(ErrorCategory::format, "{}: the GUPPI header lacks both CHAN_BW and OBSBW", where);
  h.blocsize = to_integer(h, "BLOCSIZE", where);
  h.nbits = static_cast<int>(to_integer(h, "NBITS", where));
  h.npol_keyword = static_cast<int>(to_integer(h, "NPOL", where));
  h.obsnchan = static_cast<int>(to_integer(h, "OBSNCHAN", where));
  if (h.has("NANTS")) h.nants = static_cast<int>(to_integer(h, "NANTS", where));
  if (h.has("OVERLAP")) h.overlap = static_cast<int>(to_integer(h, "OVERLAP", where));
  if (h.has("DIRECTIO")) h.directio = to_integer(h, "DIRECTIO", where) != 0;
  h.is_float = h.get("DATATYPE") == "FLOAT";
  h.tbin_s = to_number(h, "TBIN", where);
  h.obsfreq_mhz = to_number(h, "OBSFREQ", where);
  if (h.has("OBSBW")) h.obsbw_mhz = to_number(h, "OBSBW", where);
  if (h.has("CHAN_BW")) h.chan_bw_mhz = to_number(h, "CHAN_BW", where);
  if (h.has("STT_IMJD")) {
    h.mjd_start = static_cast<double>(to_integer(h, "STT_IMJD", where));
    if (h.has("STT_SMJD")) h.mjd_start += to_number(h, "STT_SMJD", where) / 86400.0;
    if (h.has("STT_OFFS")) h.mjd_start += to_number(h, "STT_OFFS", where) / 86400.0;
  }
  // Sanity: each value within what a real recording has.
  if (h.npol_keyword == 4 || h.npol_keyword == 2)
    h.npol = 2;
  else if (h.npol_keyword == 1)
    h.npol = 1;
  else
    fail(ErrorCategory::format, "{}: GUPPI NPOL = {} is not 1, 2 or 4", where, h.npol_keyword);
  if (h.is_float ? (h.nbits != 16 && h.nbits != 32) : (h.nbits != 4 && h.nbits != 8))
    fail(h.nbits == 16 || h.nbits == 2 ? ErrorCategory::unsupported : ErrorCategory::format,
         "{}: GUPPI NBITS = {} is not supported (4 or 8; 16 or 32 with DATATYPE = 'FLOAT')", where,
         h.nbits);
  if (h.obsnchan < 1 || h.obsnchan > (1 << 24))
    fail(ErrorCategory::format, "{}: GUPPI OBSNCHAN = {} is outside [1, 2^24]", where, h.obsnchan);
  if (h.nants < 1 || h.obsnchan % h.nants != 0)
    fail(ErrorCategory::format, "{}: GUPPI NANTS = {} does not divide OBSNCHAN = {}", where,
         h.nants, h.obsnchan);
  const std::int64_t bits_per_sample = static_cast<std::int64_t>(h.obsnchan) * h.npol * 2 * h.nbits;
  if (h.blocsize <= 0 || (h.blocsize * 8) % bits_per_sample != 0)
    fail(ErrorCategory::format,
         "{}: GUPPI BLOCSIZE = {} is not a whole number of time samples of OBSNCHAN {} x {} pols "
         "x 2 x {} bits (the header contradicts its block size)",
         where, h.blocsize, h.obsnchan, h.npol, h.nbits);
  if (h.overlap < 0 || h.overlap >= h.block_samples())
    fail(ErrorCategory::format, "{}: GUPPI OVERLAP = {} must be in [0, {})", where, h.overlap,
         h.block_samples());
  if (!(h.tbin_s > 0))
    fail(ErrorCategory::format, "{}: GUPPI TBIN = {} s must be > 0", where, h.tbin_s);
  if (h.chan_bw_mhz == 0) h.chan_bw_mhz = h.obsbw_mhz / h.nchans();
  if (h.chan_bw_mhz == 0)
    fail(ErrorCategory::format, "{}: GUPPI CHAN_BW / OBSBW give a zero channel width", where);
  h.header_bytes = static_cast<std::int64_t>(text.size());
  if (h.directio) h.header_bytes = (h.header_bytes + 511) / 512 * 512;
  return h;
}

// ---------------------------------------------------------------------------------------------

GuppiReader::GuppiReader(const std::string& path) : path_(path) {
  fp_ = std::fopen(path.c_str(), "rb");
  if (!fp_) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  try {
    open_first_header();
  } catch (...) {
    std::fclose(fp_);  // the destructor does not run for a constructor that throws
    fp_ = nullptr;
    throw;
  }
}

void GuppiReader::open_first_header() {
  const std::string& path = path_;
  const std::string text = read_header_text(fp_, path + " block 0");
  if (text.empty()) fail(ErrorCategory::format, "'{}' is empty: not a GUPPI raw file", path);
  first_ = parse_guppi_header(text, path + " block 0");
  // Count whole blocks, assuming every header is as long as the first (checked while reading).
  file_bytes_ = file_size(path);
  const std::int64_t stride =
      first_.header_bytes + first_.blocsize;  // BLOCSIZE <= 9e15: no overflow
  nblocks_ = file_bytes_ / stride;
  info_.format = "guppi";
  info_.nchans = first_.nchans();
  info_.nantennas = first_.nants;
  info_.npol = first_.npol;
  info_.sample_type = first_.sample_type();
  info_.foff_hz = first_.chan_bw_mhz * 1e6;
  info_.fch1_hz = (first_.obsfreq_mhz - (first_.nchans() - 1) / 2.0 * first_.chan_bw_mhz) * 1e6;
  info_.tsamp_s = first_.tbin_s;
  info_.mjd_start = first_.mjd_start;
  info_.block_samples = first_.block_samples() - first_.overlap;
  info_.source_name = first_.get("SRC_NAME");
  info_.telescope = first_.get("TELESCOP");
  std::fseek(fp_, 0, SEEK_SET);
}

GuppiReader::~GuppiReader() {
  if (fp_) std::fclose(fp_);
}

bool GuppiReader::read_raw_block(std::vector<std::uint8_t>& data, GuppiHeader& header) {
  const std::string where = fmt::format("{} block {}", path_, block_index_);
  const long start = std::ftell(fp_);
  std::string text;
  try {
    text = read_header_text(fp_, where);
    if (text.empty()) return false;
    header = parse_guppi_header(text, where);
  } catch (const Error& e) {
    if (block_index_ == 0) throw;
    // Where the previous block's BLOCSIZE ends there is no header: say that, not "non-ASCII".
    fail(e.category(),
         "{}: no GUPPI header at byte {}, where block {} ends by its BLOCSIZE = {}: the block size "
         "does not match the data, or the file is corrupt ({})",
         where, start, block_index_ - 1, first_.blocsize, e.what());
  }
  if (header.obsnchan != first_.obsnchan || header.nbits != first_.nbits ||
      header.npol != first_.npol || header.nants != first_.nants ||
      header.blocsize != first_.blocsize || header.overlap != first_.overlap)
    fail(ErrorCategory::format,
         "{}: the header disagrees with block 0 (OBSNCHAN/NBITS/NPOL/NANTS/BLOCSIZE/OVERLAP)",
         where);
  std::fseek(fp_, start + static_cast<long>(header.header_bytes), SEEK_SET);
  // The block must be in the file before it is allocated (a 22 kB file declaring BLOCSIZE 4 GiB
  // took 12.8 GB).
  const std::int64_t left = std::max<std::int64_t>(0, file_bytes_ - start - header.header_bytes);
  if (left < header.blocsize) {
    warnf("{}: trailing partial block ({} of {} bytes) dropped", where, left, header.blocsize);
    return false;
  }
  data.resize(static_cast<std::size_t>(header.blocsize));
  const std::size_t n = std::fread(data.data(), 1, data.size(), fp_);
  if (n < data.size()) {
    if (std::ferror(fp_))
      fail(ErrorCategory::io, "{}: read error: {}", where, std::strerror(errno));
    warnf("{}: trailing partial block ({} of {} bytes) dropped", where, n, data.size());
    return false;
  }
  ++block_index_;
  return true;
}

bool GuppiReader::read_block(std::vector<std::uint8_t>& out, double* mjd) {
  GuppiHeader h;
  if (!read_raw_block(raw_, h)) return false;
  // [antenna][chan][time (block_samples incl. overlap)][pol] -> [chan][time (no
  // overlap)][antenna][pol]
  const int na = h.nants, nc = h.nchans(), bpc = bytes_per_complex(h.sample_type());
  const std::int64_t nt_raw = h.block_samples(), nt = nt_raw - h.overlap;
  const std::size_t elem = static_cast<std::size_t>(h.npol) * bpc;  // bytes per (time) per antenna
  out.resize(static_cast<std::size_t>(nc * nt * na) * elem);
  for (int a = 0; a < na; ++a)
    for (int c = 0; c < nc; ++c) {
      const std::uint8_t* src =
          raw_.data() + ((static_cast<std::int64_t>(a) * nc + c) * nt_raw) * elem;
      std::uint8_t* dst = out.data() + (static_cast<std::int64_t>(c) * nt * na + a) * elem;
      for (std::int64_t t = 0; t < nt; ++t)
        std::memcpy(dst + t * na * elem, src + t * elem, elem);
    }
  if (mjd) *mjd = info_.mjd_start + static_cast<double>(samples_read_) * info_.tsamp_s / 86400.0;
  samples_read_ += nt;
  return true;
}

FilterbankHeader beam_header(const VoltageStreamInfo& info, int integration, int nbeams) {
  FilterbankHeader h;
  h.source_name = info.source_name;
  h.nchans = info.nchans;
  h.nbits = 32;
  h.fch1 = info.fch1_hz / 1e6;
  h.foff = info.foff_hz / 1e6;
  h.tsamp = info.tsamp_s * integration;
  h.tstart = info.mjd_start;
  h.nbeams = nbeams;
  return h;
}

std::unique_ptr<VoltageReader> open_voltage_file(const std::string& path) {
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  char head[kCard] = {};
  const std::size_t n = std::fread(head, 1, kCard, fp);
  std::fclose(fp);
  bool cards = n == static_cast<std::size_t>(kCard) && head[8] == '=';
  for (std::size_t i = 0; i < n && cards; ++i)
    cards = head[i] >= 32 && head[i] <= 126;
  if (cards) return std::make_unique<GuppiReader>(path);
  // LWA TBF or TBX: big-endian sync word 0xDEC0DE5C (io/lwa.hpp).
  const auto* u = reinterpret_cast<const unsigned char*>(head);
  if (n >= 4 && u[0] == 0xDE && u[1] == 0xC0 && u[2] == 0xDE && u[3] == 0x5C)
    return open_lwa_voltages(path);
  fail(ErrorCategory::format,
       "'{}' is not a voltage file warpbeam reads (GUPPI raw, LWA TBF or TBX)", path);
}

// ---------------------------------------------------------------------------------------------

std::string guppi_string(const std::string& s) {
  std::string v = s;
  for (auto& ch : v)
    if (ch == '\'' || ch < 32 || ch > 126) ch = '_';
  if (v.size() < 8) v.resize(8, ' ');
  return "'" + v + "'";
}

std::string guppi_card(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > 8)
    fail(ErrorCategory::invalid_argument, "GUPPI keyword '{}' must have 1 to 8 characters", key);
  std::string card = key;
  card.resize(8, ' ');
  card += "= ";
  // Numbers right-aligned in 20 columns as FITS fixed format; strings left-aligned.
  std::string v = value;
  if (!v.empty() && v[0] != '\'' && v.size() < 20) v = std::string(20 - v.size(), ' ') + v;
  card += v;
  if (card.size() > static_cast<std::size_t>(kCard))
    fail(ErrorCategory::invalid_argument, "GUPPI card {} is longer than 80 characters", key);
  card.resize(kCard, ' ');
  return card;
}

GuppiWriter::GuppiWriter(const std::string& path, GuppiWriterConfig config)
    : out_(path), c_(std::move(config)) {
  require_range("nchans", c_.nchans, 1, 1 << 24);
  require_range("nantennas", c_.nantennas, 1, 1 << 16);
  require_range("npol", c_.npol, 1, 2);
  if (c_.block_samples <= 0)
    fail(ErrorCategory::invalid_argument, "block_samples = {} must be > 0", c_.block_samples);
  if (!(c_.tbin_s > 0) || c_.chan_bw_mhz == 0 || !std::isfinite(c_.obsfreq_mhz))
    fail(ErrorCategory::invalid_argument, "TBIN {} s / CHAN_BW {} MHz / OBSFREQ {} MHz are invalid",
         c_.tbin_s, c_.chan_bw_mhz, c_.obsfreq_mhz);
}

std::string GuppiWriter::header_text() const {
  const int nbits = bits_per_component(c_.sample_type);
  const std::int64_t blocsize = static_cast<std::int64_t>(c_.nchans) * c_.nantennas *
                                c_.block_samples * c_.npol * bytes_per_complex(c_.sample_type);
  const double imjd = std::floor(c_.mjd_start);
  const double secs = (c_.mjd_start - imjd) * 86400.0;
  const double smjd = std::floor(secs);
  std::string h;
  auto num = [](auto v) { return fmt::format("{}", v); };
  h += guppi_card("BACKEND", guppi_string("WARPBEAM"));
  h += guppi_card("TELESCOP", guppi_string(c_.telescope));
  h += guppi_card("SRC_NAME", guppi_string(c_.source_name));
  h += guppi_card("OBS_MODE", guppi_string("RAW"));
  h += guppi_card("OBSFREQ", num(c_.obsfreq_mhz));
  h += guppi_card("OBSBW", num(c_.chan_bw_mhz * c_.nchans));
  h += guppi_card("CHAN_BW", num(c_.chan_bw_mhz));
  h += guppi_card("OBSNCHAN", num(c_.nchans * c_.nantennas));
  h += guppi_card("NANTS", num(c_.nantennas));
  h += guppi_card("NPOL", num(c_.npol == 2 ? 4 : 1));
  h += guppi_card("NBITS", num(nbits));
  if (c_.sample_type == SampleType::cf16 || c_.sample_type == SampleType::cf32)
    h += guppi_card("DATATYPE", guppi_string("FLOAT"));
  h += guppi_card("TBIN", fmt::format("{:.17g}", c_.tbin_s));
  h += guppi_card("BLOCSIZE", num(blocsize));
  h += guppi_card("OVERLAP", "0");
  h += guppi_card("DIRECTIO", "0");
  h += guppi_card("STT_IMJD", num(static_cast<std::int64_t>(imjd)));
  h += guppi_card("STT_SMJD", num(static_cast<std::int64_t>(smjd)));
  h += guppi_card("STT_OFFS", fmt::format("{:.9f}", secs - smjd));
  h += guppi_card("PKTIDX", num(blocks_ * c_.block_samples));
  for (const auto& [k, v] : c_.extra_cards)
    h += guppi_card(k, v);
  h += std::string("END") + std::string(kCard - 3, ' ');
  return h;
}

void GuppiWriter::write_block(const std::uint8_t* data) {
  const std::string h = header_text();
  out_.write(h.data(), h.size());
  // [chan][time][antenna][pol] -> [antenna][chan][time][pol]
  const int na = c_.nantennas, nc = c_.nchans;
  const std::int64_t nt = c_.block_samples;
  const std::size_t elem = static_cast<std::size_t>(c_.npol) * bytes_per_complex(c_.sample_type);
  buf_.resize(static_cast<std::size_t>(nc * nt * na) * elem);
  for (int a = 0; a < na; ++a)
    for (int c = 0; c < nc; ++c) {
      std::uint8_t* dst = buf_.data() + ((static_cast<std::int64_t>(a) * nc + c) * nt) * elem;
      const std::uint8_t* src = data + (static_cast<std::int64_t>(c) * nt * na + a) * elem;
      for (std::int64_t t = 0; t < nt; ++t)
        std::memcpy(dst + t * elem, src + t * na * elem, elem);
    }
  out_.write(buf_.data(), buf_.size());
  ++blocks_;
}

void GuppiWriter::commit() {
  out_.commit();
}

}  // namespace warpbeam::io
