#pragma once
// SIGPROC filterbank files: header, gulped reader, atomic writer.
//
// Format: SIGPROC user guide (Lorimer), "header" section: the file starts with the string
// HEADER_START and ends the header with HEADER_END; each string is an int32 length followed by
// its bytes; each keyword is followed by an int32, a double or a string according to its name.
// The data follow as [time][ifs][chan] samples of nbits (lowest bits first for nbits < 8).
// Channel i has the frequency fch1 + i*foff (MHz); foff may be negative (the usual case).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "warpbeam/io/output_file.hpp"

namespace warpbeam::io {

/// The SIGPROC header keywords warpbeam understands. Units as in SIGPROC: MHz, seconds, MJD,
/// src_raj/src_dej as hhmmss.s / ddmmss.s packed in a double.
struct FilterbankHeader {
  std::string source_name;
  std::string rawdatafile;
  int telescope_id = 0;
  int machine_id = 0;
  int data_type = 1;  ///< 1 = filterbank; 0 (seen in real files) is read as filterbank too
  int nchans = 0;
  int nbits = 8;
  int nifs = 1;
  int nbeams = 1;
  int ibeam = 0;
  int barycentric = 0;
  int pulsarcentric = 0;
  bool is_signed = false;  ///< the `signed` keyword: integer samples are two's complement
  double fch1 = 0;         ///< MHz, centre of channel 0
  double foff = 0;         ///< MHz, channel step (negative: frequency falls with channel)
  double tstart = 0;       ///< MJD of the first sample
  double tsamp = 0;        ///< s
  double src_raj = 0, src_dej = 0, az_start = 0, za_start = 0, refdm = 0, period = 0;

  std::int64_t header_bytes = 0;  ///< size of the header in the file (set by the reader)
  std::int64_t nsamples = 0;      ///< whole time samples in the data section (set by the reader)

  double frequency_mhz(int chan) const { return fch1 + chan * foff; }
  double fmax_mhz() const { return foff < 0 ? fch1 : fch1 + (nchans - 1) * foff; }
  double fmin_mhz() const { return foff < 0 ? fch1 + (nchans - 1) * foff : fch1; }
  double bandwidth_mhz() const { return std::abs(foff) * nchans; }
  double duration_s() const { return static_cast<double>(nsamples) * tsamp; }
  /// Bytes of one time sample (all channels and IFs).
  std::size_t bytes_per_sample() const;
  /// Throws Error(format) for values no real file has (nchans 0, nbits 3, tsamp <= 0, ...),
  /// naming the keyword; Error(unsupported) for nifs != 1.
  void validate() const;
};

/// The header as JSON (keyword -> value), for candidate files and `warpbeam info`.
nlohmann::json to_json(const FilterbankHeader& h);

/// Reads and validates the header of `path` (and counts nsamples from the file size).
FilterbankHeader read_filterbank_header(const std::string& path);

/// Reads a SIGPROC filterbank file in gulps of time samples, so files larger than memory work.
/// A data section that ends in a partial row is read up to the last whole row, with a warning.
/// (open_filterbank() in filterbank_source.hpp reads any supported format.)
class FilterbankReader {
 public:
  /// Opens and validates; throws Error(io) for a missing file, Error(format) for a bad header.
  explicit FilterbankReader(const std::string& path);
  ~FilterbankReader();
  FilterbankReader(const FilterbankReader&) = delete;
  FilterbankReader& operator=(const FilterbankReader&) = delete;

  const FilterbankHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  /// Index of the next time sample read() returns.
  std::int64_t position() const { return position_; }
  /// Moves to time sample `sample` (0 <= sample <= nsamples).
  void seek(std::int64_t sample);
  /// Reads up to `nsamp` time samples as float32 into out[nsamp][nchans]; returns how many.
  std::int64_t read(std::int64_t nsamp, float* out);
  /// Reads up to `nsamp` time samples of packed bytes into out (nsamp * bytes_per_sample()).
  /// A read of more than a few MiB is split among read_threads() threads (positional reads).
  std::int64_t read_raw(std::int64_t nsamp, std::uint8_t* out);
  /// Threads of one large read_raw() (1, the default: one fread); clamped to 1-64.
  void set_read_threads(int threads);
  int read_threads() const { return read_threads_; }
  /// Reads the whole data section as float32 [nsamples][nchans].
  std::vector<float> read_all();

 private:
  std::string path_;
  FilterbankHeader header_;
  std::FILE* fp_ = nullptr;
  std::int64_t position_ = 0;
  int read_threads_ = 1;
  std::vector<std::uint8_t> raw_;
};

/// Writes a filterbank file atomically (temporary name, renamed by commit()).
class FilterbankWriter {
 public:
  /// Validates `header` and writes it. `history` (optional) is not a SIGPROC keyword and is
  /// not written; provenance goes in side files (JSON).
  FilterbankWriter(const std::string& path, const FilterbankHeader& header);
  /// Writes `nsamp` time samples from data[nsamp][nchans], quantising to the header's nbits:
  /// rounded to nearest and clipped to the representable range (float32 is written as is).
  void write(const float* data, std::int64_t nsamp);
  /// Writes already-packed bytes (a whole number of time samples).
  void write_raw(const std::uint8_t* data, std::size_t bytes);
  /// Finishes the file; without it the destructor removes the partial file.
  void commit();
  std::int64_t samples_written() const { return written_; }

 private:
  OutputFile out_;
  FilterbankHeader header_;
  std::int64_t written_ = 0;
  std::vector<std::uint8_t> packed_;
};

/// Quantises and packs `count` float samples to `nbits` (lowest bits first), as the writer does.
void pack_samples(const float* in, int nbits, std::size_t count, std::uint8_t* out,
                  bool is_signed = false);

}  // namespace warpbeam::io
