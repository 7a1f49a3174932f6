#pragma once
// Channelised voltage files, whatever their format, as the beamformer reads them: a stream of
// blocks in the canonical layout [chan][time][antenna][pol]. Formats: GUPPI raw (io/guppi.hpp)
// and LWA TBF and TBX frames (io/lwa.hpp; antennas = the frames' stands, two pols).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/sample_type.hpp"

namespace warpbeam::io {

/// What a consumer of voltages needs to know about a recording.
struct VoltageStreamInfo {
  std::string format;  ///< "guppi", "lwa-tbf" or "lwa-tbx"
  int nchans = 0;      ///< channels per antenna
  int nantennas = 0;
  int npol = 1;
  SampleType sample_type = SampleType::ci8;
  double fch1_hz = 0;              ///< centre frequency of channel 0
  double foff_hz = 0;              ///< channel step (negative for a reversed band)
  double tsamp_s = 0;              ///< sampling time of one channel
  double mjd_start = 0;            ///< UTC MJD of the first sample (0 when unknown)
  std::int64_t block_samples = 0;  ///< time samples per block (after any overlap is dropped)
  std::string source_name, telescope;
  /// Bytes of one block in [chan][time][antenna][pol].
  std::int64_t block_bytes() const {
    return static_cast<std::int64_t>(nchans) * block_samples * nantennas * npol *
           bytes_per_complex(sample_type);
  }
};

/// Reads a voltage recording block by block.
class VoltageReader {
 public:
  virtual ~VoltageReader() = default;
  virtual const VoltageStreamInfo& info() const = 0;
  /// Reads the next whole block into `out` ([chan][time][antenna][pol], resized to
  /// info().block_bytes()) and sets *mjd to the UTC MJD of its first sample; returns false at
  /// the end (a trailing partial block is dropped with a warning). Throws Error(format) for a
  /// block whose header disagrees with the first one, Error(io) on a read failure.
  virtual bool read_block(std::vector<std::uint8_t>& out, double* mjd = nullptr) = 0;
};

/// The SIGPROC header of a float32 power beam formed from these voltages with `integration`
/// voltage samples per beam sample: source_name, nchans, fch1/foff (MHz), tsamp = tsamp_s x
/// integration, tstart = mjd_start, nbits 32, nbeams; the caller sets ibeam, the pointing and
/// nsamples (SIGPROC's keywords: Lorimer, "SIGPROC user guide").
FilterbankHeader beam_header(const VoltageStreamInfo& info, int integration, int nbeams);

/// Opens `path`, recognising the format from its first bytes (GUPPI raw: 80-character header
/// cards; LWA TBF or TBX: the sync word 0xDEC0DE5C). Throws Error(io) when it cannot be read,
/// Error(format) when no reader recognises it.
std::unique_ptr<VoltageReader> open_voltage_file(const std::string& path);

/// Opens an LWA TBF or TBX file (io/lwa.hpp's open_lwa_voltage_file) as a voltage stream: ci4,
/// npol 2, nantennas = the frames' stands (payload order; the SSMIF maps them to stands), the
/// file's channels (fch1 = first channel x fC, foff = fC: 25 kHz for TBF, NDP's fS / 8192 for
/// TBX; they must be contiguous, else Error(unsupported)), tsamp = 1 / fC (40 us for TBF),
/// mjd_start from the first time tag. Blocks of `block_samples` spectra (0: min(ntime, 1024));
/// spectra after the last whole block are dropped with a warning, as is a trailing partial
/// frame. Throws as TbfReader / TbxReader, and invalid_argument for block_samples < 0.
std::unique_ptr<VoltageReader> open_lwa_voltages(const std::string& path,
                                                 std::int64_t block_samples = 0);

}  // namespace warpbeam::io
