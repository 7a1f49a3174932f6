#pragma once
// Long Wavelength Array (LWA) station files: TBF channelised-voltage frames (read and written)
// and the SSMIF station description (read). Engine-neutral: the EPIC imager and the beamformer
// both read voltages through TbfReader, as ci4 [chan][time][stand][pol].
//
// TBF frame (LWA DP/ADP ICD; LSL's lsl/reader/tbf.py and tbf.c describe the same layout), all
// fields big-endian:
//   bytes  0-3   sync word 0xDEC0DE5C
//   bytes  4-7   id (8 bits, most significant byte: 1 = TBF) and frame count (low 24 bits)
//   bytes  8-11  second count (whole seconds since 1970-01-01 UTC)
//   bytes 12-13  first_chan (int16): channel number of the frame's first channel
//   bytes 14-15  nstand (int16): stands in the payload; 0 means 256 (every LWA-SV file)
//   bytes 16-23  time tag (int64): ticks of fS = 196 MHz since 1970-01-01 UTC
//   bytes 24-    payload: 12 channels x nstand stands x 2 pols, one byte each, 4+4-bit complex
//                two's complement, real part in the high nibble, imaginary in the low nibble.
// A frame is 24 + 24*nstand bytes (6168 for 256 stands). Channel k has the centre frequency
// k * 25 kHz. One spectrum (one time step, 40 us) is a set of frames with the same time tag and
// different first_chan; consecutive spectra are 7840 ticks (1 / 25 kHz) apart. The stand index
// of the payload is the F-engine's input order, not the SSMIF stand number (see Ssmif).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace warpbeam::io {

// ---------------------------------------------------------------------------------------------
// TBF
// ---------------------------------------------------------------------------------------------

inline constexpr double kLwaClockHz = 196e6;                ///< fS: time-tag ticks per second
inline constexpr double kLwaChannelWidthHz = 25e3;          ///< fC: TBF channel width
inline constexpr std::int64_t kTbfTicksPerSpectrum = 7840;  ///< fS / fC
inline constexpr std::uint32_t kTbfSyncWord = 0xDEC0DE5Cu;
inline constexpr int kTbfId = 1;  ///< the id byte of a TBF frame (LSL: is_tbf)
inline constexpr int kTbfChannelsPerFrame = 12;
inline constexpr int kTbfHeaderBytes = 24;  ///< 16-byte header + 8-byte time tag

/// Bytes of one frame holding `nstand` stands (6168 for 256).
constexpr std::int64_t tbf_frame_bytes(int nstand) {
  return kTbfHeaderBytes + std::int64_t{kTbfChannelsPerFrame} * nstand * 2;
}

/// The decoded header of one TBF frame.
struct TbfFrameHeader {
  std::uint32_t sync_word = kTbfSyncWord;
  int id = kTbfId;                ///< 8 bits
  std::uint32_t frame_count = 0;  ///< 24 bits
  std::uint32_t second_count = 0;
  int first_chan = 0;
  int nstand = 256;  ///< already mapped: a header value of 0 reads as 256
  std::int64_t time_tag = 0;
};

/// The kind of LWA frame an id byte names ("LWA TBF" for 1, "LWA COR (correlator visibility)"
/// for 2, "LWA TBX" for 8, "unknown LWA" otherwise): frames of one sync word, told apart by it.
std::string lwa_frame_name(int id);

/// Decodes the 24 header bytes of a frame. Does not validate (TbfReader does).
TbfFrameHeader decode_tbf_header(const std::uint8_t* bytes);
/// Encodes a header into 24 bytes (nstand 256 is written as 0, as the LWA-SV F-engine does).
void encode_tbf_header(const TbfFrameHeader& h, std::uint8_t* bytes);

/// What a TBF file holds, found by reading every frame header.
struct TbfInfo {
  std::string path;
  int nstand = 0;
  std::vector<int> channels;  ///< channel numbers, ascending; frequency = channel * 25 kHz
  std::int64_t ntime = 0;     ///< complete spectra (time steps)
  std::vector<std::int64_t> time_tags;  ///< [ntime], ticks of 196 MHz since 1970-01-01 UTC
  std::int64_t dropped_bytes = 0;       ///< a partial frame at the end of the file
  std::int64_t dropped_frames = 0;      ///< frames of incomplete first/last spectra

  int nchan() const { return static_cast<int>(channels.size()); }
  double frequency_hz(int i) const { return channels.at(i) * kLwaChannelWidthHz; }
  /// Seconds since 1970-01-01 UTC of spectrum t.
  double unix_time(std::int64_t t) const {
    return static_cast<double>(time_tags.at(t)) / kLwaClockHz;
  }
  /// True when the channels are consecutive (a uniform frequency axis).
  bool contiguous() const;
};

/// Reads TBF files. The constructor reads every header and checks the file (sync word, id,
/// nstand, channel blocks, time tags, second counts); read() then copies any range of spectra
/// and channels. Throws Error(io) when the file cannot be read and Error(format) for: a wrong
/// sync word, a frame that is not TBF, a header that contradicts the others (nstand, a time tag
/// that goes backwards or skips spectra, a second count that disagrees with the time tag, a
/// repeated or unknown channel block inside a spectrum), or a file without one whole spectrum.
/// A partial frame at the end of the file, and an incomplete first or last spectrum, are
/// dropped with a warning (the real LWA-SV file tbf-test.dat ends in a partial frame).
class TbfReader {
 public:
  explicit TbfReader(const std::string& path);
  const TbfInfo& info() const { return info_; }

  /// Copies spectra [t0, t0 + nt) of channels [c0, c0 + nc) (indices into info().channels)
  /// into `out`, ci4 bytes [nc][nt][nstand][2]. Throws invalid_argument for a range outside
  /// the file, io on a read failure.
  void read(std::int64_t t0, std::int64_t nt, int c0, int nc, std::uint8_t* out) const;

 private:
  TbfInfo info_;
  std::vector<std::int64_t> block_frame_;  // [ntime][nblock]: frame index of each channel block
  std::vector<int> block_first_chan_;      // [nblock], ascending
};

/// Writes ci4 voltages [nchan][ntime][nstand][2] as TBF frames, spectrum by spectrum, frames
/// in ascending channel order. Channel numbers are first_chan .. first_chan + nchan - 1; nchan
/// must be a multiple of 12. Spectrum t gets the time tag time_tag0 + 7840 t. Written atomically
/// (no partial file on failure). Throws invalid_argument for bad sizes, io on failure.
void write_tbf(const std::string& path, const std::uint8_t* ci4, int nchan, std::int64_t ntime,
               int nstand, int first_chan, std::int64_t time_tag0);

/// Decodes one ci4 byte: real part from the high nibble, imaginary from the low, two's
/// complement (-8 .. 7).
constexpr int ci4_real(std::uint8_t b) {
  return static_cast<std::int8_t>(b & 0xF0) >> 4;
}
constexpr int ci4_imag(std::uint8_t b) {
  return static_cast<std::int8_t>(static_cast<std::uint8_t>(b << 4)) >> 4;
}
/// Encodes integers in [-8, 7] as a ci4 byte.
constexpr std::uint8_t ci4_pack(int re, int im) {
  return static_cast<std::uint8_t>(((re & 0xF) << 4) | (im & 0xF));
}

// ---------------------------------------------------------------------------------------------
// SSMIF
// ---------------------------------------------------------------------------------------------

/// SSMIF status codes (MCS0031): 0 not installed, 1 bad, 2 suspect, 3 OK.
enum SsmifStatus { kNotInstalled = 0, kBad = 1, kSuspect = 2, kOk = 3 };

/// A signal cable (RPD_*). Defaults are MCS0031's (as LSL applies them).
struct SsmifCable {
  std::string id = "UNK";
  int status = kOk;
  double length_m = 0;            ///< RPD_LENG
  double velocity_factor = 0.83;  ///< RPD_VF / 100
  double dispersion_s = 2.4e-9;   ///< RPD_DD: dispersive delay per 100 m at ref_freq_hz
  double a0 = 0.00428, a1 = 0;    ///< RPD_A0, RPD_A1: attenuation coefficients
  double ref_freq_hz = 10e6;      ///< RPD_FREF
  double stretch = 1;             ///< RPD_STR: measured electrical/physical length ratio

  /// Cable delay (s) at f_hz: L*str/(vf*c) + dd*(L*str/100)/sqrt(f/f_ref) (LSL's Cable.delay).
  double delay_s(double f_hz) const;
  /// Power gain (<= 1) at f_hz: exp(-(2*a0*L*str*sqrt(f/f_ref) + a1*L*str*f/f_ref)) (the inverse
  /// of LSL's Cable.attenuation).
  double gain(double f_hz) const;
};

/// An antenna (one polarisation of a stand).
struct SsmifAntenna {
  int stand = 0;     ///< 1-based stand number (ANT_STD; default (n-1)/2 + 1)
  int pol = 0;       ///< ANT_ORIE: 0 = N-S (called X here), 1 = E-W (Y)
  int status = kOk;  ///< ANT_STAT
  int cable = 0;     ///< 1-based cable number (RPD_ANT; default: the antenna number)
};

/// The parts of a Station Static MIB Initialization File (MCS0031) that imaging needs.
struct Ssmif {
  std::string path, station_id;
  int format_version = 0;
  double lat_deg = 0, lon_deg = 0, elevation_m = 0;  ///< GEO_N, GEO_E, GEO_EL
  std::vector<std::array<double, 3>> stand_xyz_m;    ///< [N_STD]: STD_LX (East), LY (North), LZ
  std::vector<SsmifAntenna> antennas;                ///< [2 N_STD], antenna n at index n-1
  std::vector<SsmifCable> cables;                    ///< [N_RPD], cable n at index n-1
  /// F-engine input k (0-based) -> antenna number (1-based), board-major from SNAP_ANT (the
  /// post-2025 LWA-SV digitisers), else ROACH_ANT, else DP1_ANT; identity when none is given.
  std::vector<int> input_antenna;
  /// The file gives N_RPD and an RPD_LENG for every cable (else the cables are MCS0031 defaults).
  bool cable_lengths_given = false;
  /// The file gives a digitiser map (SNAP_ANT, ROACH_ANT or DP1_ANT) for every input.
  bool input_map_given = false;

  int nstand() const { return static_cast<int>(stand_xyz_m.size()); }

  /// The antenna (1-based number) behind TBF payload stand index s (0-based), polarisation p.
  /// Assumption (stated because tbf-test.dat is from 2015 and this SSMIF from 2026): payload
  /// stand s, pol p is F-engine input 2s + p; the input -> antenna map is input_antenna.
  int tbf_antenna(int s, int p) const;
};

/// The station as a TBF file sees it: per TBF stand index s (0-based), the stand behind its two
/// inputs (2s: pol 0 = X, 2s + 1: pol 1 = Y, through Ssmif::tbf_antenna) and their cables.
struct TbfStationModel {
  std::vector<std::array<double, 3>> xyz_m;  ///< [nstand] East, North, Up (m)
  std::vector<std::uint8_t> ok;              ///< [nstand] 1 when both antennas are OK or suspect
  std::vector<int> stand_number;             ///< [nstand] SSMIF stand number (1-based)
  std::vector<SsmifCable> cables;            ///< [nstand][2]
  int nstand() const { return static_cast<int>(xyz_m.size()); }
  double cable_delay_s(int s, int p, double f_hz) const {
    return cables.at(2 * s + p).delay_s(f_hz);
  }
};

/// Builds the model of `tbf_nstand` TBF inputs. Throws format when the SSMIF describes a
/// different number of stands, lacks the cable table or the digitiser map (a truncated file), or
/// when the two inputs of a TBF stand are not the X (N-S) and Y (E-W) antennas of one stand.
TbfStationModel tbf_station_model(const Ssmif& ssmif, int tbf_nstand);

/// Parses an SSMIF text file. Throws io when it cannot be read, format for a malformed line, a
/// missing N_STD, an index out of range, a non-numeric value, more than 65536 digitiser inputs, or
/// a declared table with missing entries (N_RPD cables without RPD_LENG each; N_SNAP x N_SNAPCH
/// inputs without SNAP_ANT each).
Ssmif read_ssmif(const std::string& path);

}  // namespace warpbeam::io
