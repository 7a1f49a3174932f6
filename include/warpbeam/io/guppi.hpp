#pragma once
// GUPPI raw files: a sequence of blocks, each an ASCII header of 80-character FITS-like cards
// ("KEYWORD = value", ending with an END card; padded to 512 bytes when DIRECTIO is non-zero)
// followed by BLOCSIZE bytes of channelised complex voltages.
//
// Sources: P. Demorest, "GUPPI raw data format" (NRAO), and the readers of DSPSR and baseband
// (mhvk/baseband, docs/guppi). Multi-antenna files (Breakthrough Listen / COSMIC / ATA hpguppi
// convention) add NANTS: OBSNCHAN = NANTS x channels per antenna, and the block is
// [antenna][chan][time][pol] of complex samples. Conventions warpbeam reads and writes
// (docs/FORMATS.md):
//   NPOL   4 (GUPPI: 4 real components of dual-pol complex data) or 2 -> 2 pols; 1 -> 1 pol;
//   NBITS  4 -> ci4 (one byte per complex, real in the high nibble), 8 -> ci8 (real, imag);
//          16 / 32 with DATATYPE = 'FLOAT' -> cf16 / cf32;
//   samples per block = BLOCSIZE / (OBSNCHAN x npol x 2 x NBITS / 8); the last OVERLAP of them
//   repeat the next block's first samples and are dropped when the file is read as a stream;
//   channel i of each antenna is at OBSFREQ + (i - (nchan - 1) / 2) x CHAN_BW (MHz);
//   TBIN is the sampling time (s); STT_IMJD + (STT_SMJD + STT_OFFS) / 86400 the start (MJD UTC).

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/voltages.hpp"

namespace warpbeam::io {

/// One block header: the cards in file order, and the values warpbeam uses.
struct GuppiHeader {
  std::vector<std::pair<std::string, std::string>> cards;  ///< keyword -> raw value text

  std::int64_t blocsize = 0;
  int nbits = 0;
  int npol_keyword = 0;  ///< NPOL as written
  int npol = 0;          ///< polarisations: 1 or 2
  int obsnchan = 0;
  int nants = 1;  ///< NANTS (1 when absent)
  int overlap = 0;
  bool directio = false;
  bool is_float = false;  ///< DATATYPE = 'FLOAT'
  double tbin_s = 0, obsfreq_mhz = 0, obsbw_mhz = 0, chan_bw_mhz = 0;
  double mjd_start = 0;           ///< from STT_IMJD, STT_SMJD, STT_OFFS (0 when absent)
  std::int64_t header_bytes = 0;  ///< bytes before the data (padding included)

  int nchans() const { return obsnchan / nants; }
  SampleType sample_type() const;
  /// Time samples in one block (overlap included).
  std::int64_t block_samples() const;
  /// The value of `key` (quotes and trailing blanks removed); "" when absent.
  std::string get(const std::string& key) const;
  bool has(const std::string& key) const;
};

/// Parses one header from `text` (at least the bytes up to END). `where` names the file and
/// block in messages. Throws Error(format) for a missing required keyword (BLOCSIZE, NBITS, NPOL,
/// OBSNCHAN, TBIN, OBSFREQ, and CHAN_BW or OBSBW), a malformed card, an unsupported NBITS/NPOL,
/// a NANTS that does not divide OBSNCHAN, or a BLOCSIZE that is not a whole number of samples.
GuppiHeader parse_guppi_header(const std::string& text, const std::string& where);

/// Reads GUPPI raw block by block; as a VoltageReader it reorders each block to
/// [chan][time][antenna][pol] and drops the overlap.
class GuppiReader final : public VoltageReader {
 public:
  /// Opens and parses the first header. Throws Error(io) for a missing file, Error(format) for
  /// a bad first header.
  explicit GuppiReader(const std::string& path);
  ~GuppiReader() override;
  GuppiReader(const GuppiReader&) = delete;
  GuppiReader& operator=(const GuppiReader&) = delete;

  const VoltageStreamInfo& info() const override { return info_; }
  bool read_block(std::vector<std::uint8_t>& out, double* mjd = nullptr) override;
  /// Reads the next whole block as stored ([antenna][chan][time][pol], overlap included) and its
  /// header; false at the end (a trailing partial block: warning).
  bool read_raw_block(std::vector<std::uint8_t>& data, GuppiHeader& header);
  /// The first block's header.
  const GuppiHeader& first_header() const { return first_; }
  /// Whole blocks in the file (counted on opening; a partial last block is not counted).
  std::int64_t nblocks() const { return nblocks_; }

 private:
  void open_first_header();  // the constructor's work once the file is open

  std::string path_;
  std::FILE* fp_ = nullptr;
  GuppiHeader first_;
  VoltageStreamInfo info_;
  std::int64_t nblocks_ = 0, block_index_ = 0, samples_read_ = 0, file_bytes_ = 0;
  std::vector<std::uint8_t> raw_;
};

/// What a writer needs to start a file.
struct GuppiWriterConfig {
  int nchans = 0, nantennas = 1, npol = 1;
  SampleType sample_type = SampleType::ci4;
  double obsfreq_mhz = 0;  ///< centre of the band
  double chan_bw_mhz = 0;  ///< channel width (negative for a reversed band)
  double tbin_s = 0;
  double mjd_start = 0;
  std::int64_t block_samples = 0;  ///< time samples per block
  std::string source_name = "UNKNOWN", telescope = "UNKNOWN";
  /// Extra cards (keyword <= 8 characters, value already formatted: numbers as is, strings
  /// quoted) appended to every header, e.g. provenance or simulation parameters.
  std::vector<std::pair<std::string, std::string>> extra_cards;
};

/// Writes GUPPI raw with NANTS atomically (temporary name, renamed by commit()).
class GuppiWriter {
 public:
  /// Throws invalid_argument for impossible values.
  GuppiWriter(const std::string& path, GuppiWriterConfig config);
  /// Writes one block from data in [chan][time][antenna][pol] (block_samples samples).
  void write_block(const std::uint8_t* data);
  void commit();
  std::int64_t blocks_written() const { return blocks_; }

 private:
  std::string header_text() const;
  OutputFile out_;
  GuppiWriterConfig c_;
  std::int64_t blocks_ = 0;
  std::vector<std::uint8_t> buf_;
};

/// Formats one 80-character header card (strings quoted and padded to 8 characters as GUPPI does).
std::string guppi_card(const std::string& key, const std::string& value);
std::string guppi_string(const std::string& s);

}  // namespace warpbeam::io
