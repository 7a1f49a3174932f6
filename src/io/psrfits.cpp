// PSRFITS search-mode files as a FilterbankSource (cfitsio), read one SUBINT row at a time.
//
// Sources: the ATNF PSRFITS definition (v6.1: primary header and SUBINT binary table), read
// alongside the search-mode readers of `your` (your/formats/psrfits.py) and sigpyproc
// (sigpyproc/io/pfits.py). What is read and how is in docs/FORMATS.md, "PSRFITS search mode".
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "io/fits_check.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/unpack.hpp"

#ifdef WARPBEAM_HAVE_CFITSIO
#include <fitsio.h>
#endif

namespace warpbeam::io {

#ifndef WARPBEAM_HAVE_CFITSIO

bool psrfits_supported() {
  return false;
}

std::unique_ptr<FilterbankSource> open_psrfits(const std::string& path) {
  fail(ErrorCategory::unsupported, "'{}' is a FITS file, but this build has no cfitsio to read it",
       path);
}

#else

bool psrfits_supported() {
  return true;
}

namespace {

constexpr int kMaxChannels = 1 << 24;
constexpr std::int64_t kMaxRowSamples = std::int64_t{1} << 24;  // NSBLK
constexpr double kSecondsPerDay = 86400.0;

// a * b, or -1 when the product overflows (both >= 0).
std::int64_t mul_checked(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) return -1;
  return a * b;
}

std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

// "hh:mm:ss.ss" / "-dd:mm:ss.ss" -> SIGPROC's packed hhmmss.s / ddmmss.s; 0 when unparsable.
double sexagesimal_to_sigproc(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) return 0;
  double a = 0, b = 0, c = 0;
  const bool negative = s.front() == '-';
  if (std::sscanf(negative || s.front() == '+' ? s.c_str() + 1 : s.c_str(), "%lf:%lf:%lf", &a, &b,
                  &c) < 1)
    return 0;
  const double v = a * 1e4 + b * 1e2 + c;
  return negative ? -v : v;
}

// SIGPROC telescope_id for the TELESCOP names whose ids the SIGPROC aliases table fixes.
int sigproc_telescope_id(std::string name) {
  for (auto& ch : name)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  struct Alias {
    const char* prefix;
    int id;
  };
  static constexpr Alias aliases[] = {{"arecibo", 1}, {"ooty", 2},      {"nancay", 3},
                                      {"parkes", 4},  {"jodrell", 5},   {"gbt", 6},
                                      {"gmrt", 7},    {"effelsberg", 8}};
  for (const auto& a : aliases)
    if (name.rfind(a.prefix, 0) == 0) return a.id;
  return 0;
}

// How the polarisation products of a row become total intensity.
enum class PolSum { first, first_two };

// The DATA column's storage.
enum class Storage { bytes, bits, int16, float32 };

class PsrfitsSource final : public FilterbankSource {
 public:
  explicit PsrfitsSource(const std::string& path) : path_(path) {
    open();
    try {
      read_primary();
      read_subint_header();
      read_columns();
      check_length();
      read_frequencies();
      decide_output();
    } catch (...) {
      close();
      throw;
    }
  }
  ~PsrfitsSource() override { close(); }
  PsrfitsSource(const PsrfitsSource&) = delete;
  PsrfitsSource& operator=(const PsrfitsSource&) = delete;

  const FilterbankHeader& header() const override { return header_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "PSRFITS search mode"; }
  std::vector<std::pair<std::string, std::string> > details() const override {
    return {
        {"psrfits_rows", fmt::format("{} of NSBLK {}", nrows_, nsblk_)},
        {"psrfits_nbits", fmt::format("{}{}", nbits_, is_signed_ ? " (signed)" : "")},
        {"psrfits_npol", fmt::format("{} ({}{})", npol_, pol_type_,
                                     npol_ == 1                  ? ""
                                     : pol_sum_ == PolSum::first ? ": the first product (I) is read"
                                                                 : ": AA+BB is read")},
        {"psrfits_scaling", passthrough_ ? "none (samples read as stored)"
                                         : "(DATA - ZERO_OFF) * DAT_SCL + DAT_OFFS, "
                                           "* DAT_WTS -> float32"}};
  }
  std::int64_t position() const override { return position_; }

  void seek(std::int64_t sample) override {
    if (sample < 0 || sample > header_.nsamples)
      fail(ErrorCategory::invalid_argument, "seek to sample {} outside [0, {}]", sample,
           header_.nsamples);
    position_ = sample;
  }

  std::int64_t read_raw(std::int64_t nsamp, std::uint8_t* out) override {
    nsamp = std::clamp<std::int64_t>(nsamp, 0, header_.nsamples - position_);
    const std::size_t row_bytes = header_.bytes_per_sample();
    for (std::int64_t done = 0; done < nsamp;) {
      const std::int64_t row = (position_ + done) / nsblk_;
      const std::int64_t first = (position_ + done) - row * nsblk_;
      const std::int64_t n = std::min(nsamp - done, nsblk_ - first);
      load_row(row);
      const std::uint8_t* src =
          passthrough_ ? packed_.data() : reinterpret_cast<const std::uint8_t*>(values_.data());
      std::memcpy(out + done * row_bytes, src + first * row_bytes,
                  static_cast<std::size_t>(n) * row_bytes);
      done += n;
    }
    position_ += nsamp;
    return nsamp;
  }

  std::int64_t read(std::int64_t nsamp, float* out) override {
    nsamp = std::clamp<std::int64_t>(nsamp, 0, header_.nsamples - position_);
    if (!passthrough_) return read_raw(nsamp, reinterpret_cast<std::uint8_t*>(out));
    // Packed rows, unpacked a row at a time (each SIGPROC row starts on a byte boundary).
    const auto nchan = static_cast<std::size_t>(nchan_);
    const std::size_t row_bytes = header_.bytes_per_sample();
    const std::int64_t chunk = std::min(nsamp, nsblk_);
    unpack_.resize(static_cast<std::size_t>(chunk) * row_bytes);
    for (std::int64_t done = 0; done < nsamp;) {
      const std::int64_t n = read_raw(std::min(chunk, nsamp - done), unpack_.data());
      for (std::int64_t t = 0; t < n; ++t)
        unpack_samples(unpack_.data() + t * row_bytes, header_.nbits, nchan,
                       out + (done + t) * nchan, header_.is_signed);
      done += n;
    }
    return nsamp;
  }

 private:
  // --- cfitsio helpers ------------------------------------------------------------------------

  void check(int status, const std::string& what) const {
    if (status == 0) return;
    char text[FLEN_STATUS] = {};
    fits_get_errstatus(status, text);
    fits_clear_errmsg();
    fail(ErrorCategory::format, "'{}': {}: {}", path_, what, text);
  }

  bool has_key(const char* key) {
    char card[FLEN_CARD];
    int status = 0;
    fits_read_card(fp_, key, card, &status);
    fits_clear_errmsg();
    return status == 0;
  }
  std::string key_string(const char* key, const std::string& fallback) {
    char value[FLEN_VALUE] = {};
    int status = 0;
    fits_read_key(fp_, TSTRING, key, value, nullptr, &status);
    if (status == KEY_NO_EXIST) {
      fits_clear_errmsg();
      return fallback;
    }
    check(status, fmt::format("keyword {}", key));
    return trim(value);
  }
  double key_double(const char* key) {
    double v = 0;
    int status = 0;
    fits_read_key(fp_, TDOUBLE, key, &v, nullptr, &status);
    if (status == KEY_NO_EXIST)
      fail(ErrorCategory::format, "'{}': the keyword {} is missing", path_, key);
    check(status, fmt::format("keyword {}", key));
    return v;
  }
  double key_double(const char* key, double fallback) {
    return has_key(key) ? key_double(key) : fallback;
  }
  std::int64_t key_int(const char* key) {
    const double v = key_double(key);
    if (!(std::abs(v) < 9e15) || v != std::floor(v))
      fail(ErrorCategory::format, "'{}': {} = {} is not an integer", path_, key, v);
    return static_cast<std::int64_t>(v);
  }
  std::int64_t key_int(const char* key, std::int64_t fallback) {
    return has_key(key) ? key_int(key) : fallback;
  }
  // Column number of `name`, or 0 when the table has none.
  int column(const char* name) {
    int col = 0, status = 0;
    fits_get_colnum(fp_, CASEINSEN, const_cast<char*>(name), &col, &status);
    if (status != 0) {
      fits_clear_errmsg();
      return 0;
    }
    return col;
  }

  void open() {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      fail(ErrorCategory::io, "cannot open '{}': {}", path_, std::strerror(errno));
    file_bytes_ = static_cast<std::int64_t>(st.st_size);
    // Every header checked before cfitsio parses one (cfitsio 4.2 overflows a fixed-size field
    // on an unquoted 70-character TTYPEn: fits_check.hpp).
    detail::check_fits_headers(path_, file_bytes_);
    int status = 0;
    // The disk-file call: no cfitsio extended file-name syntax ("f.fits[1]", "-" for stdin).
    fits_open_diskfile(&fp_, path_.c_str(), READONLY, &status);
    if (status != 0) {
      fp_ = nullptr;
      check(status, "not a readable FITS file");
    }
  }
  void close() {
    if (!fp_) return;
    int status = 0;
    fits_close_file(fp_, &status);
    fp_ = nullptr;
  }

  // --- header ---------------------------------------------------------------------------------

  void read_primary() {
    const std::string fitstype = key_string("FITSTYPE", "");
    if (fitstype != "PSRFITS")
      fail(ErrorCategory::format, "'{}' is a FITS file but not PSRFITS (FITSTYPE = '{}')", path_,
           fitstype);
    const std::string mode = key_string("OBS_MODE", "");
    if (mode != "SEARCH" && mode != "SRCH")
      fail(ErrorCategory::unsupported,
           "'{}': OBS_MODE = '{}': only search-mode PSRFITS (SEARCH) is a filterbank", path_, mode);
    header_.source_name = key_string("SRC_NAME", "");
    header_.telescope_id = sigproc_telescope_id(key_string("TELESCOP", ""));
    header_.src_raj = sexagesimal_to_sigproc(key_string("RA", ""));
    header_.src_dej = sexagesimal_to_sigproc(key_string("DEC", ""));
    header_.ibeam = static_cast<int>(key_int("IBEAM", 0));
    header_.rawdatafile = path_.substr(path_.find_last_of('/') + 1);
    stt_imjd_ = key_int("STT_IMJD");
    stt_smjd_ = key_double("STT_SMJD");
    stt_offs_ = key_double("STT_OFFS", 0.0);
    obsfreq_ = key_double("OBSFREQ", 0.0);
    obsbw_ = key_double("OBSBW", 0.0);
    obsnchan_ = key_int("OBSNCHAN", 0);
  }

  void read_subint_header() {
    int status = 0;
    fits_movnam_hdu(fp_, BINARY_TBL, const_cast<char*>("SUBINT"), 0, &status);
    if (status != 0) {
      fits_clear_errmsg();
      fail(ErrorCategory::format, "'{}': no SUBINT binary table (not search-mode PSRFITS data)",
           path_);
    }
    nbits_ = static_cast<int>(key_int("NBITS"));
    if (nbits_ != 1 && nbits_ != 2 && nbits_ != 4 && nbits_ != 8 && nbits_ != 16 && nbits_ != 32)
      fail(ErrorCategory::format, "'{}': NBITS = {} is not supported (1, 2, 4, 8, 16, 32)", path_,
           nbits_);
    nsblk_ = key_int("NSBLK");
    if (nsblk_ < 1 || nsblk_ > kMaxRowSamples)
      fail(ErrorCategory::format, "'{}': NSBLK = {} is not a valid samples-per-row (1 to {})",
           path_, nsblk_, kMaxRowSamples);
    const std::int64_t nchan = key_int("NCHAN");
    if (nchan < 1 || nchan > kMaxChannels)
      fail(ErrorCategory::format, "'{}': NCHAN = {} is not a valid channel count (1 to {})", path_,
           nchan, kMaxChannels);
    nchan_ = static_cast<int>(nchan);
    npol_ = static_cast<int>(key_int("NPOL"));
    pol_type_ = key_string("POL_TYPE", "");
    if (npol_ == 1) {
      pol_sum_ = PolSum::first;
    } else if ((npol_ == 2 || npol_ == 4) && pol_type_.rfind("IQUV", 0) == 0) {
      pol_sum_ = PolSum::first;  // Stokes I
    } else if ((npol_ == 2 &&
                (pol_type_ == "AABB" || pol_type_ == "XXYY" || pol_type_ == "LLRR")) ||
               (npol_ == 4 &&
                (pol_type_ == "AABBCRCI" || pol_type_ == "XXYYCRCI" || pol_type_ == "LLRRCRCI"))) {
      pol_sum_ = PolSum::first_two;  // AA + BB
    } else {
      fail(ErrorCategory::unsupported,
           "'{}': NPOL = {} with POL_TYPE = '{}' (read: NPOL 1; 2 AABB; 4 AABBCRCI or IQUV)", path_,
           npol_, pol_type_);
    }
    header_.tsamp = key_double("TBIN");
    zero_off_ = key_double("ZERO_OFF", 0.0);
    signint_ = key_int("SIGNINT", 0) != 0;
    nsuboffs_ = key_int("NSUBOFFS", 0);
    chan_bw_ = key_double("CHAN_BW", 0.0);
    long long rows = 0;
    fits_get_num_rowsll(fp_, &rows, &status);
    check(status, "the SUBINT table's row count");
    if (rows < 1) fail(ErrorCategory::format, "'{}': the SUBINT table has no rows", path_);
    nrows_ = rows;
    const std::int64_t total = mul_checked(nrows_, nsblk_);
    if (total < 0) fail(ErrorCategory::format, "'{}': NAXIS2 x NSBLK overflows", path_);
    header_.nsamples = total;
    // NSTOT (optional): the valid samples, when the last row is only partly filled.
    const std::int64_t nstot = key_int("NSTOT", 0);
    if (nstot > 0 && nstot < total) header_.nsamples = nstot;
  }

  void read_columns() {
    data_col_ = column("DATA");
    if (data_col_ == 0)
      fail(ErrorCategory::format, "'{}': the SUBINT table has no DATA column", path_);
    int type = 0, status = 0;
    long long repeat = 0, width = 0;
    fits_get_coltypell(fp_, data_col_, &type, &repeat, &width, &status);
    check(status, "the DATA column");
    const std::int64_t values = mul_checked(mul_checked(nsblk_, npol_), nchan_);
    const std::int64_t bits = mul_checked(values, nbits_);
    if (values < 0 || bits < 0)
      fail(ErrorCategory::format, "'{}': NSBLK x NPOL x NCHAN x NBITS overflows", path_);
    row_values_ = values;
    const auto expect = [&](bool ok, const char* storage, std::int64_t want) {
      if (!ok)
        fail(ErrorCategory::format,
             "'{}': the DATA column holds {} elements of type {} per row; NSBLK {} x NPOL {} x "
             "NCHAN {} at NBITS {} needs {} {}",
             path_, repeat, type, nsblk_, npol_, nchan_, nbits_, want, storage);
    };
    if (type == TBYTE && nbits_ <= 8) {
      storage_ = Storage::bytes;
      expect(repeat * 8 == bits, "bytes (TFORM B)", (bits + 7) / 8);
    } else if (type == TBIT && nbits_ <= 8) {
      storage_ = Storage::bits;
      expect(repeat == bits, "bits (TFORM X)", bits);
    } else if (type == TSHORT && nbits_ == 16) {
      storage_ = Storage::int16;
      expect(repeat == values, "16-bit integers (TFORM I)", values);
    } else if (type == TFLOAT && nbits_ == 32) {
      storage_ = Storage::float32;
      expect(repeat == values, "floats (TFORM E)", values);
    } else {
      fail(ErrorCategory::format,
           "'{}': a DATA column of cfitsio type {} does not hold NBITS = {} samples (B or X for "
           "1-8 bits, I for 16, E for 32)",
           path_, type, nbits_);
    }
    data_bytes_ = storage_ == Storage::bits || storage_ == Storage::bytes ? (bits + 7) / 8
                  : storage_ == Storage::int16                            ? values * 2
                                                                          : values * 4;
    // A B column may say its samples are signed with TZERO = -128 (the FITS convention).
    char key[FLEN_KEYWORD];
    std::snprintf(key, sizeof key, "TZERO%d", data_col_);
    data_tzero_ = key_double(key, 0.0);
    std::snprintf(key, sizeof key, "TSCAL%d", data_col_);
    data_tscal_ = key_double(key, 1.0);
    if (storage_ == Storage::bytes || storage_ == Storage::bits) {
      if (data_tscal_ != 1 || (data_tzero_ != 0 && !(nbits_ == 8 && data_tzero_ == -128)))
        fail(ErrorCategory::unsupported, "'{}': DATA has TSCAL {} / TZERO {} (read: 1 / 0 or -128)",
             path_, data_tscal_, data_tzero_);
      is_signed_ = signint_ || data_tzero_ == -128;
      // Read the stored bytes as they are: cfitsio would otherwise apply TZERO and clip.
      status = 0;
      fits_set_tscale(fp_, data_col_, 1.0, 0.0, &status);
      check(status, "DATA scaling");
    } else if (storage_ == Storage::int16) {
      if (data_tscal_ != 1 || (data_tzero_ != 0 && data_tzero_ != 32768))
        fail(ErrorCategory::unsupported,
             "'{}': DATA has TSCAL {} / TZERO {} (read: 1 / 0 or 32768)", path_, data_tscal_,
             data_tzero_);
      is_signed_ = data_tzero_ == 0;
      status = 0;
      fits_set_tscale(fp_, data_col_, 1.0, 0.0, &status);
      check(status, "DATA scaling");
    }
    scl_col_ = column("DAT_SCL");
    offs_col_ = column("DAT_OFFS");
    wts_col_ = column("DAT_WTS");
    freq_col_ = column("DAT_FREQ");
    offs_sub_col_ = column("OFFS_SUB");
    scl_per_pol_ = per_pol_columns(scl_col_, "DAT_SCL");
    offs_per_pol_ = per_pol_columns(offs_col_, "DAT_OFFS");
    vector_length(wts_col_, "DAT_WTS", nchan_);
    vector_length(freq_col_, "DAT_FREQ", nchan_);
    if (scl_col_ == 0 || offs_col_ == 0 || wts_col_ == 0)
      warnf("'{}': no {} column: {} used", path_,
            scl_col_ == 0    ? "DAT_SCL"
            : offs_col_ == 0 ? "DAT_OFFS"
                             : "DAT_WTS",
            scl_col_ == 0    ? "scale 1"
            : offs_col_ == 0 ? "offset 0"
                             : "weight 1");
  }

  // Checks a per-channel column's length; returns its repeat (0 when there is no column).
  std::int64_t vector_length(int col, const char* name, std::int64_t at_least) {
    if (col == 0) return 0;
    int type = 0, status = 0;
    long long repeat = 0, width = 0;
    fits_get_coltypell(fp_, col, &type, &repeat, &width, &status);
    check(status, fmt::format("the {} column", name));
    if (repeat < at_least)
      fail(ErrorCategory::format, "'{}': the {} column has {} values per row; NCHAN is {}", path_,
           name, repeat, at_least);
    return repeat;
  }
  // DAT_SCL and DAT_OFFS hold NCHAN x NPOL values ([pol][chan]); some writers give NCHAN only.
  bool per_pol_columns(int col, const char* name) {
    const std::int64_t repeat = vector_length(col, name, nchan_);
    return repeat >= std::int64_t{nchan_} * npol_;
  }

  // The rows must all be in the file: a truncated file is an error, not a shorter one.
  void check_length() {
    long long head = 0, data = 0, end = 0;
    int status = 0;
    fits_get_hduaddrll(fp_, &head, &data, &end, &status);
    check(status, "the SUBINT table's position");
    long long naxis1 = 0;
    fits_read_key(fp_, TLONGLONG, "NAXIS1", &naxis1, nullptr, &status);
    check(status, "NAXIS1");
    const std::int64_t table = mul_checked(naxis1, nrows_);
    if (table < 0 || data + table > file_bytes_) {
      const std::int64_t whole =
          naxis1 > 0 ? std::max<std::int64_t>(0, file_bytes_ - data) / naxis1 : 0;
      fail(ErrorCategory::format,
           "'{}' is truncated: the SUBINT table has {} rows of {} bytes but the file holds {} "
           "whole rows",
           path_, nrows_, naxis1, whole);
    }
  }

  void read_frequencies() {
    std::vector<double> f;
    if (freq_col_ != 0) {
      f.resize(nchan_);
      int status = 0;
      fits_read_col(fp_, TDOUBLE, freq_col_, 1, 1, nchan_, nullptr, f.data(), nullptr, &status);
      check(status, "DAT_FREQ");
    }
    if (!f.empty() && nchan_ > 1 && f[0] != f[nchan_ - 1]) {
      header_.fch1 = f[0];
      header_.foff = (f[nchan_ - 1] - f[0]) / (nchan_ - 1);
      for (int i = 0; i < nchan_; ++i)
        if (std::abs(f[i] - (header_.fch1 + i * header_.foff)) > 1e-3 * std::abs(header_.foff))
          fail(ErrorCategory::unsupported,
               "'{}': DAT_FREQ is not uniformly spaced (channel {} at {} MHz, expected {})", path_,
               i, f[i], header_.fch1 + i * header_.foff);
    } else {
      // No usable DAT_FREQ: the band from OBSFREQ (centre) and CHAN_BW (or OBSBW / NCHAN), whose
      // sign says the channel order.
      const double bw = chan_bw_ != 0 ? chan_bw_ : obsnchan_ > 0 ? obsbw_ / obsnchan_ : 0;
      if (bw == 0 || obsfreq_ <= 0)
        fail(ErrorCategory::format,
             "'{}': no channel frequencies (DAT_FREQ, or OBSFREQ with CHAN_BW or OBSBW/OBSNCHAN)",
             path_);
      header_.foff = bw;
      header_.fch1 = f.empty() ? obsfreq_ - (nchan_ - 1) / 2.0 * bw : f[0];
    }
    // Start: STT_IMJD + (STT_SMJD + STT_OFFS) s, plus the start of row 1, which is OFFS_SUB (the
    // centre of the row) minus half a row; without OFFS_SUB, NSUBOFFS rows.
    double first_row_start = static_cast<double>(nsuboffs_) * nsblk_ * header_.tsamp;
    if (offs_sub_col_ != 0) {
      double offs_sub = 0;
      int status = 0;
      fits_read_col(fp_, TDOUBLE, offs_sub_col_, 1, 1, 1, nullptr, &offs_sub, nullptr, &status);
      check(status, "OFFS_SUB");
      first_row_start = offs_sub - 0.5 * static_cast<double>(nsblk_) * header_.tsamp;
    }
    header_.tstart =
        static_cast<double>(stt_imjd_) + (stt_smjd_ + stt_offs_ + first_row_start) / kSecondsPerDay;
    const int az = column("TEL_AZ"), zen = column("TEL_ZEN");
    int status = 0;
    if (az != 0)
      fits_read_col(fp_, TDOUBLE, az, 1, 1, 1, nullptr, &header_.az_start, nullptr, &status);
    if (zen != 0)
      fits_read_col(fp_, TDOUBLE, zen, 1, 1, 1, nullptr, &header_.za_start, nullptr, &status);
    fits_clear_errmsg();
  }

  // Samples stay packed (header nbits = NBITS) only when nothing has to be applied to them:
  // one polarisation, no ZERO_OFF, and every row's scales 1, offsets 0 and weights 1. Otherwise
  // the search gets float32 rows (nbits 32) of the scaled values.
  void decide_output() {
    bool plain = npol_ == 1 && zero_off_ == 0 && storage_ != Storage::float32 &&
                 (nbits_ >= 8 || (std::int64_t{nchan_} * nbits_) % 8 == 0);
    for (std::int64_t row = 0; plain && row < nrows_; ++row) {
      read_row_scales(row);
      for (int i = 0; i < nchan_ && plain; ++i)
        plain = scl_[i] == 1.0f && offs_[i] == 0.0f && wts_[i] == 1.0f;
    }
    passthrough_ = plain;
    header_.nbits = passthrough_ ? nbits_ : 32;
    header_.is_signed = passthrough_ && is_signed_;
    header_.nchans = nchan_;
    header_.nifs = 1;
    header_.data_type = 1;
    header_.header_bytes = 0;
    try {
      header_.validate();
    } catch (const Error& e) {
      throw Error(e.category(), fmt::format("'{}': {}", path_, e.what()));
    }
    raw_.resize(static_cast<std::size_t>(data_bytes_));
    if (passthrough_)
      packed_.resize(static_cast<std::size_t>(nsblk_) * header_.bytes_per_sample());
    else
      values_.resize(static_cast<std::size_t>(nsblk_) * nchan_);
  }

  // --- rows -----------------------------------------------------------------------------------

  // scl_/offs_ [npol][nchan] and wts_ [nchan] of one row (0-based); defaults when absent.
  void read_row_scales(std::int64_t row) {
    const auto nv = static_cast<std::size_t>(nchan_) * npol_;
    scl_.assign(nv, 1.0f);
    offs_.assign(nv, 0.0f);
    wts_.assign(nchan_, 1.0f);
    int status = 0;
    // n values of `col` into v; a per-channel (not per-polarisation) scale or offset is
    // repeated for every polarisation (`repeat`).
    const auto get = [&](int col, long long n, bool repeat, std::vector<float>& v,
                         const char* name) {
      if (col == 0) return;
      fits_read_col(fp_, TFLOAT, col, row + 1, 1, n, nullptr, v.data(), nullptr, &status);
      check(status, fmt::format("{} of row {}", name, row + 1));
      if (repeat)
        for (int p = 1; p < npol_; ++p)
          std::copy_n(v.begin(), nchan_, v.begin() + std::int64_t{p} * nchan_);
    };
    const auto per_pol = static_cast<long long>(nv);
    get(scl_col_, scl_per_pol_ ? per_pol : nchan_, !scl_per_pol_, scl_, "DAT_SCL");
    get(offs_col_, offs_per_pol_ ? per_pol : nchan_, !offs_per_pol_, offs_, "DAT_OFFS");
    get(wts_col_, nchan_, false, wts_, "DAT_WTS");
  }

  // Stored value k of the row (in [nsblk][npol][nchan] order), before any scaling.
  float stored_value(std::int64_t k) const {
    switch (storage_) {
      case Storage::float32: {
        float v;
        std::memcpy(&v, raw_.data() + 4 * k, 4);
        return v;
      }
      case Storage::int16: {
        std::int16_t v;
        std::memcpy(&v, raw_.data() + 2 * k, 2);
        return static_cast<float>(v) + static_cast<float>(data_tzero_);
      }
      default: {
        // Sub-byte samples are packed first-sample-in-the-high-bits, as every PSRFITS writer
        // and reader (PRESTO, your, DSPSR) has it; the bits run on across samples and rows.
        const std::int64_t bit = k * nbits_;
        const unsigned byte = raw_[static_cast<std::size_t>(bit / 8)];
        const unsigned mask = nbits_ == 8 ? 0xFFu : (1u << nbits_) - 1u;
        const unsigned v = (byte >> (8 - nbits_ - bit % 8)) & mask;
        if (!is_signed_) return static_cast<float>(v);
        const int sv =
            v >= (1u << (nbits_ - 1)) ? static_cast<int>(v) - (1 << nbits_) : static_cast<int>(v);
        return static_cast<float>(sv);
      }
    }
  }

  void load_row(std::int64_t row) {
    if (row == cached_row_) return;
    int status = 0;
    const int type = storage_ == Storage::float32 ? TFLOAT
                     : storage_ == Storage::int16 ? TSHORT
                                                  : TBYTE;
    // For a bit (X) column cfitsio reads whole bytes with TBYTE: 8 bits per element.
    const long long n = storage_ == Storage::bytes || storage_ == Storage::bits
                            ? static_cast<long long>(data_bytes_)
                            : static_cast<long long>(row_values_);
    fits_read_col(fp_, type, data_col_, row + 1, 1, n, nullptr, raw_.data(), nullptr, &status);
    if (status != 0) {
      char text[FLEN_STATUS] = {};
      fits_get_errstatus(status, text);
      fits_clear_errmsg();
      fail(ErrorCategory::io, "cannot read row {} of '{}': {}", row + 1, path_, text);
    }
    cached_row_ = row;
    if (passthrough_)
      repack_row();
    else
      scale_row(row);
  }

  // The stored samples as SIGPROC packs them: sub-byte samples first-in-the-low-bits, 16-bit
  // little-endian (host order) with the signedness of the column.
  void repack_row() {
    if (storage_ == Storage::int16) {
      for (std::int64_t k = 0; k < row_values_; ++k) {
        std::int16_t v;
        std::memcpy(&v, raw_.data() + 2 * k, 2);
        const auto u = static_cast<std::uint16_t>(
            is_signed_ ? static_cast<std::uint16_t>(v) : static_cast<std::uint16_t>(v) ^ 0x8000u);
        std::memcpy(packed_.data() + 2 * k, &u, 2);
      }
      return;
    }
    if (nbits_ == 8) {
      std::memcpy(packed_.data(), raw_.data(), raw_.size());
      return;
    }
    // nchan * nbits is a whole number of bytes here, so rows map byte for byte; only the order
    // of the samples inside each byte is reversed.
    const int per_byte = 8 / nbits_;
    const unsigned mask = (1u << nbits_) - 1u;
    for (std::size_t i = 0; i < raw_.size(); ++i) {
      unsigned out = 0;
      for (int j = 0; j < per_byte; ++j) {
        const unsigned v = (raw_[i] >> (8 - nbits_ * (j + 1))) & mask;
        out |= v << (nbits_ * j);
      }
      packed_[i] = static_cast<std::uint8_t>(out);
    }
  }

  // values_[t][chan] = sum over the read products p of ((DATA - ZERO_OFF) * DAT_SCL + DAT_OFFS),
  // times DAT_WTS (the order of your's and sigpyproc's readers).
  void scale_row(std::int64_t row) {
    read_row_scales(row);
    const int nsum = pol_sum_ == PolSum::first_two ? 2 : 1;
    const auto zero = static_cast<float>(zero_off_);
    for (std::int64_t t = 0; t < nsblk_; ++t) {
      float* out = values_.data() + t * nchan_;
      for (int c = 0; c < nchan_; ++c) {
        float v = 0;
        for (int p = 0; p < nsum; ++p) {
          const std::int64_t k = (t * npol_ + p) * nchan_ + c;
          const std::size_t s = static_cast<std::size_t>(p) * nchan_ + c;
          v += (stored_value(k) - zero) * scl_[s] + offs_[s];
        }
        out[c] = v * wts_[c];
      }
    }
  }

  std::string path_;
  fitsfile* fp_ = nullptr;
  std::int64_t file_bytes_ = 0;
  FilterbankHeader header_;
  // Primary header.
  std::int64_t stt_imjd_ = 0, obsnchan_ = 0;
  double stt_smjd_ = 0, stt_offs_ = 0, obsfreq_ = 0, obsbw_ = 0;
  // SUBINT header and columns.
  int nbits_ = 8, nchan_ = 0, npol_ = 1;
  std::string pol_type_;
  PolSum pol_sum_ = PolSum::first;
  std::int64_t nsblk_ = 0, nrows_ = 0, nsuboffs_ = 0, row_values_ = 0, data_bytes_ = 0;
  double zero_off_ = 0, chan_bw_ = 0, data_tzero_ = 0, data_tscal_ = 1;
  bool signint_ = false, is_signed_ = false, scl_per_pol_ = true, offs_per_pol_ = true;
  Storage storage_ = Storage::bytes;
  int data_col_ = 0, scl_col_ = 0, offs_col_ = 0, wts_col_ = 0, freq_col_ = 0, offs_sub_col_ = 0;
  bool passthrough_ = false;
  // The row in hand.
  std::int64_t cached_row_ = -1, position_ = 0;
  std::vector<std::uint8_t> raw_, packed_, unpack_;
  std::vector<float> values_, scl_, offs_, wts_;
};

}  // namespace

std::unique_ptr<FilterbankSource> open_psrfits(const std::string& path) {
  return std::make_unique<PsrfitsSource>(path);
}

#endif  // WARPBEAM_HAVE_CFITSIO

}  // namespace warpbeam::io
