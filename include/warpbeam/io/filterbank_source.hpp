#pragma once
// A filterbank read in time samples, whatever its file format: SIGPROC filterbank (sigproc.hpp)
// or PSRFITS search mode. The file search, `warpbeam info` and the Python reader open every
// input through open_filterbank(), so a new format is one new FilterbankSource.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
  /// What the file's own layout adds to header() (key, text), for `warpbeam info`: for PSRFITS
  /// the rows, NSBLK, the stored NBITS, the polarisations and the scaling applied.
  virtual std::vector<std::pair<std::string, std::string>> details() const { return {}; }
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
  /// How many threads one large read_raw() may use (a hint; 1: one thread). SIGPROC splits a
  /// read of more than a few MiB into positional reads; other formats read as they do.
  virtual void set_read_threads(int /*threads*/) {}
};

/// Opens `path` as a filterbank by its content (not its name): a FITS file (first card
/// "SIMPLE  =") as PSRFITS search mode, anything else as SIGPROC (HEADER_START). Throws
/// Error(io) for a missing or unreadable file, Error(format) for a file of no known filterbank
/// format or a malformed one, Error(unsupported) for a FITS file in a build without cfitsio.
std::unique_ptr<FilterbankSource> open_filterbank(const std::string& path);

/// True when this build reads PSRFITS (cfitsio was found at configure time).
bool psrfits_supported();

/// Opens a PSRFITS search-mode file (src/io/psrfits.cpp; docs/FORMATS.md says what is read):
/// the SUBINT table's rows of NSBLK samples, 1/2/4/8/16-bit or float, NPOL 1 (or 2/4 summed to
/// total intensity). header() is in SIGPROC's conventions: channel i at fch1 + i*foff in the
/// file's channel order (foff > 0 for an ascending band), tstart the MJD of the first sample,
/// nbits 32 (float32 rows) when scales, offsets, weights, ZERO_OFF or a polarisation sum apply,
/// else the stored nbits (rows repacked as SIGPROC packs them). Reads one row at a time.
/// Throws Error(format) naming the keyword or column for a malformed file (no SUBINT table,
/// NBITS 3, NSBLK 0, a DATA column of the wrong size, rows missing from the end of the file),
/// Error(unsupported) for fold mode or an unsupported polarisation layout.
std::unique_ptr<FilterbankSource> open_psrfits(const std::string& path);

}  // namespace warpbeam::io
