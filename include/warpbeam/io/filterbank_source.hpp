#pragma once
// A filterbank read in time samples, whatever its file format: SIGPROC filterbank (sigproc.hpp)
// or PSRFITS search mode. The file search, `warpbeam info` and the Python reader open every
// input through open_filterbank(), so a new format is one new FilterbankSource.

#include <cstdint>
#include <memory>
#include <string>

#include "warpbeam/io/sigproc.hpp"

namespace warpbeam::io {

/// Time samples [time][chan] of one filterbank, read in gulps so that files larger than memory
/// work. header() describes the rows read_raw() returns (nbits, signedness, nchans, fch1, foff,
/// tsamp, tstart, nsamples), in SIGPROC's conventions, whatever the file's own layout is.
class FilterbankSource {
 public:
  virtual ~FilterbankSource() = default;
  virtual const FilterbankHeader& header() const = 0;
  virtual const std::string& path() const = 0;
  /// The file format's name ("SIGPROC filterbank", "PSRFITS search mode", ...).
  virtual std::string format() const = 0;
  /// Index of the next time sample read_raw() returns.
  virtual std::int64_t position() const = 0;
  /// Moves to time sample `sample` (0 <= sample <= nsamples); throws invalid_argument outside.
  virtual void seek(std::int64_t sample) = 0;
  /// Reads up to `nsamp` time samples as packed rows (header().bytes_per_sample() each) into
  /// `out`; returns how many (fewer only at the end of the data). Throws Error(io) on a failed
  /// read, Error(format) on malformed data.
  virtual std::int64_t read_raw(std::int64_t nsamp, std::uint8_t* out) = 0;
  /// Reads up to `nsamp` time samples as float32 [nsamp][nchans]; returns how many.
  virtual std::int64_t read(std::int64_t nsamp, float* out) = 0;
};

/// Opens `path` as a filterbank by its content (not its name): SIGPROC (HEADER_START) or, where
/// supported, another format. Throws Error(io) for a missing or unreadable file, Error(format)
/// for a file of no known filterbank format or a malformed one.
std::unique_ptr<FilterbankSource> open_filterbank(const std::string& path);

}  // namespace warpbeam::io
