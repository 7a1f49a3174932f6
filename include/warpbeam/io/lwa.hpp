#pragma once
// Long Wavelength Array (LWA) station files: TBF and TBX channelised-voltage frames (read and
// written) and the SSMIF station description (read). Engine-neutral: the EPIC imager and the
// beamformer both read voltages through open_lwa_voltage_file(), as ci4 [chan][time][stand][pol].
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
//
// TBX frame (the NDP successor of TBF; LSL's lsl/reader/tbx.py and tbx.cpp, read as the format
// reference), all fields big-endian:
//   bytes  0-3   sync word 0xDEC0DE5C
//   bytes  4-7   id (8 bits: 8 = TBX) and frame count (low 24 bits; 0 in the LWA-SV test file)
//   bytes  8-11  second count (0 in the LWA-SV test file)
//   bytes 12-15  first_chan (uint32)
//   bytes 16-17  nstand (uint16): 64, 128 or 256
//   bytes 18-19  nchan (uint16): channels per frame, up to 16 (4, 8, 12, 16 in LSL)
//   bytes 20-27  time tag (int64): ticks of fS = 196 MHz since 1970-01-01 UTC
//   bytes 28-    payload: nchan x nstand x 2 pols, one ci4 byte each (as TBF).
// A frame is 28 + 2*nchan*nstand bytes. The channel width is that of the F-engine that made the
// data, which LSL (lsl/reader/ldp.py, TBXFile) finds from the time-tag step between spectra:
// 8192 ticks for NDP (fC = fS / 8192 = 23.92578125 kHz), 7840 for TBF data converted from ADP
// (25 kHz); a file of one spectrum is taken as NDP, as LSL does. Channel k is at k * fC.
#include <array>
#include <cstdint>
#include <memory>
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

inline constexpr int kTbxId = 8;            ///< the id byte of a TBX frame (LSL: is_tbx)
inline constexpr int kTbxHeaderBytes = 28;  ///< 20-byte header + 8-byte time tag
inline constexpr int kTbxMaxChannelsPerFrame = 16;
inline constexpr std::int64_t kTbxTicksPerSpectrum = 8192;        ///< NDP: fS / fC
inline constexpr double kNdpChannelWidthHz = kLwaClockHz / 8192;  ///< NDP's fC, 23.92578125 kHz

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

/// Bytes of one TBX frame of `nchan` channels and `nstand` stands.
constexpr std::int64_t tbx_frame_bytes(int nstand, int nchan) {
  return kTbxHeaderBytes + std::int64_t{nchan} * nstand * 2;
}

/// The decoded header of one TBX frame.
struct TbxFrameHeader {
  std::uint32_t sync_word = kTbfSyncWord;
  int id = kTbxId;                ///< 8 bits
  std::uint32_t frame_count = 0;  ///< 24 bits
  std::uint32_t second_count = 0;
  std::uint32_t first_chan = 0;
  int nstand = 64;
  int nchan = 12;  ///< channels in this frame
  std::int64_t time_tag = 0;
};

/// Decodes the 28 header bytes of a TBX frame. Does not validate (TbxReader does).
TbxFrameHeader decode_tbx_header(const std::uint8_t* bytes);
/// Encodes a TBX header into 28 bytes.
void encode_tbx_header(const TbxFrameHeader& h, std::uint8_t* bytes);

/// What a TBF or TBX file holds, found by reading every frame header.
struct TbfInfo {
  std::string path;
  std::string format = "TBF";  ///< "TBF" or "TBX"
  int nstand = 0;
  /// fC: 25 kHz for TBF; for TBX from the time-tag step (NDP: fS / 8192; see the top of this
  /// file). channel_width_assumed: one spectrum, so the step could not be seen (NDP taken).
  double channel_width_hz = kLwaChannelWidthHz;
  bool channel_width_assumed = false;
  std::int64_t ticks_per_spectrum = kTbfTicksPerSpectrum;  ///< fS / fC
  int channels_per_frame = kTbfChannelsPerFrame;
  std::int64_t frame_bytes = 0, header_bytes = kTbfHeaderBytes;  ///< of every frame
  std::vector<int> channels;            ///< channel numbers, ascending; frequency = channel * fC
  std::int64_t ntime = 0;               ///< complete spectra (time steps)
  std::vector<std::int64_t> time_tags;  ///< [ntime], ticks of 196 MHz since 1970-01-01 UTC
  std::int64_t dropped_bytes = 0;       ///< a partial frame at the end of the file
  std::int64_t dropped_frames = 0;      ///< frames of incomplete first/last spectra

  int nchan() const { return static_cast<int>(channels.size()); }
  double frequency_hz(int i) const { return channels.at(i) * channel_width_hz; }
  /// Seconds of one spectrum (1 / fC).
  double spectrum_s() const { return 1.0 / channel_width_hz; }
  /// Seconds since 1970-01-01 UTC of spectrum t.
  double unix_time(std::int64_t t) const {
    return static_cast<double>(time_tags.at(t)) / kLwaClockHz;
  }
  /// True when the channels are consecutive (a uniform frequency axis).
  bool contiguous() const;
};

/// An LWA channelised-voltage file (TBF or TBX) whose frames have been indexed: read() copies
/// any range of spectra and channels. The index (built by the readers below) groups frames by
/// time tag into spectra and checks them: time tags one spectrum apart and never backwards,
/// channel blocks neither repeated within a spectrum nor overlapping, every spectrum complete
/// (an incomplete first or last one is dropped with a warning).
class LwaVoltageFile {
 public:
  virtual ~LwaVoltageFile() = default;
  const TbfInfo& info() const { return info_; }

  /// Copies spectra [t0, t0 + nt) of channels [c0, c0 + nc) (indices into info().channels)
  /// into `out`, ci4 bytes [nc][nt][nstand][2]. Throws invalid_argument for a range outside
  /// the file, io on a read failure.
  void read(std::int64_t t0, std::int64_t nt, int c0, int nc, std::uint8_t* out) const;

 protected:
  struct FrameKey {
    std::int64_t index;  ///< frame number in the file
    std::int64_t time_tag;
    int first_chan;
  };
  /// Builds the index from every frame's key (in file order); info_'s path, format, nstand,
  /// header_bytes, frame_bytes and channels_per_frame are set. `tick_steps`: the spectrum
  /// spacings (ticks) the format allows; the first step seen fixes ticks_per_spectrum, and
  /// tick_steps[0] is taken for a file of one spectrum (channel_width_assumed).
  void index_frames(const std::vector<FrameKey>& frames,
                    const std::vector<std::int64_t>& tick_steps);

  TbfInfo info_;

 private:
  std::vector<std::int64_t> block_frame_;  // [ntime][nblock]: frame index of each channel block
  std::vector<int> block_first_chan_;      // [nblock], ascending
};

/// Reads TBF files. The constructor reads every header and checks the file (sync word, id,
/// nstand, channel blocks, time tags, second counts). Throws Error(io) when the file cannot be
/// read and Error(format) for: a wrong sync word, a frame that is not TBF, a header that
/// contradicts the others (nstand, a time tag that goes backwards or skips spectra, a second
/// count that disagrees with the time tag, a repeated or unknown channel block inside a
/// spectrum), or a file without one whole spectrum. A partial frame at the end of the file, and
/// an incomplete first or last spectrum, are dropped with a warning (the real LWA-SV file
/// tbf-test.dat ends in a partial frame).
class TbfReader final : public LwaVoltageFile {
 public:
  explicit TbfReader(const std::string& path);
};

/// Reads TBX files (src/io/lwa_tbx.cpp), with the same checks as TbfReader plus: id 8, nstand
/// (1 to 4096) and nchan (1 to 16) the same in every frame, first_chan + nchan <= 4096, a
/// second count of 0 (as NDP writes) or within a second of the time tag, a spectrum spacing of
/// 8192 ticks (NDP) or 7840 (ADP data in TBX frames), which sets the channel width.
class TbxReader final : public LwaVoltageFile {
 public:
  explicit TbxReader(const std::string& path);
};

/// Opens a TBF or TBX file by the id byte of its first frame. Throws as the readers, and
/// Error(format) for a file that starts with neither.
std::unique_ptr<LwaVoltageFile> open_lwa_voltage_file(const std::string& path);

/// Writes ci4 voltages [nchan][ntime][nstand][2] as TBF frames, spectrum by spectrum, frames
/// in ascending channel order. Channel numbers are first_chan .. first_chan + nchan - 1; nchan
/// must be a multiple of 12. Spectrum t gets the time tag time_tag0 + 7840 t. Written atomically
/// (no partial file on failure). Throws invalid_argument for bad sizes, io on failure.
void write_tbf(const std::string& path, const std::uint8_t* ci4, int nchan, std::int64_t ntime,
               int nstand, int first_chan, std::int64_t time_tag0);

/// Writes ci4 voltages [nchan][ntime][nstand][2] as TBX frames of `chans_per_frame` channels
/// (nchan a multiple of it, at most 16), spectrum t at time tag time_tag0 + ticks_per_spectrum
/// t, frame and second counts 0 (as NDP writes them). Atomic; throws invalid_argument for bad
/// sizes, io on failure.
void write_tbx(const std::string& path, const std::uint8_t* ci4, int nchan, std::int64_t ntime,
               int nstand, int first_chan, std::int64_t time_tag0, int chans_per_frame = 12,
               std::int64_t ticks_per_spectrum = kTbxTicksPerSpectrum);

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
/// `subset`: the file may hold fewer stands than the station (TBX records 64 or 128 of them); its
/// stand s is then F-engine inputs 2s and 2s + 1, as for TBF (an assumption: LSL indexes TBX data
/// by digitiser number the same way), and only more stands than the SSMIF has is an error.
TbfStationModel tbf_station_model(const Ssmif& ssmif, int tbf_nstand, bool subset = false);

/// Parses an SSMIF text file. Throws io when it cannot be read, format for a malformed line, a
/// missing N_STD, an index out of range, a non-numeric value, more than 65536 digitiser inputs, or
/// a declared table with missing entries (N_RPD cables without RPD_LENG each; N_SNAP x N_SNAPCH
/// inputs without SNAP_ANT each).
Ssmif read_ssmif(const std::string& path);

}  // namespace warpbeam::io
