// LWA TBX frames (NDP's channelised voltages): header codec, a validating reader and a writer
// (for tests and simulations). The format, as LSL's lsl/reader/tbx.py/.cpp and ldp.py read it,
// is described at the top of include/warpbeam/io/lwa.hpp; the index and read() are shared with
// TBF (LwaVoltageFile in lwa_tbf.cpp).
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "io/big_endian.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/output_file.hpp"

namespace warpbeam::io {

namespace {

using detail::be16;
using detail::be32;
using detail::be64s;

constexpr std::int64_t kAdpTicksPerSpectrum = kTbfTicksPerSpectrum;  // TBF data in TBX frames
constexpr std::uint32_t kMaxChannel = 4096;  // fS / 2 / fC: the F-engine's channels (NDP)
constexpr int kMaxStands = 4096;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

TbxFrameHeader decode_tbx_header(const std::uint8_t* b) {
  TbxFrameHeader h;
  h.sync_word = be32(b);
  const std::uint32_t word = be32(b + 4);
  h.id = static_cast<int>(word >> 24);
  h.frame_count = word & 0xFFFFFFu;
  h.second_count = be32(b + 8);
  h.first_chan = be32(b + 12);
  h.nstand = be16(b + 16);
  h.nchan = be16(b + 18);
  h.time_tag = be64s(b + 20);
  return h;
}

void encode_tbx_header(const TbxFrameHeader& h, std::uint8_t* b) {
  detail::put32(b, h.sync_word);
  detail::put32(b + 4,
                (static_cast<std::uint32_t>(h.id & 0xFF) << 24) | (h.frame_count & 0xFFFFFFu));
  detail::put32(b + 8, h.second_count);
  detail::put32(b + 12, h.first_chan);
  detail::put16(b + 16, static_cast<std::uint16_t>(h.nstand));
  detail::put16(b + 18, static_cast<std::uint16_t>(h.nchan));
  detail::put64(b + 20, h.time_tag);
}

TbxReader::TbxReader(const std::string& path) {
  info_.path = path;
  info_.format = "TBX";
  info_.header_bytes = kTbxHeaderBytes;
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fileno(f.get()), &st) != 0)
    fail(ErrorCategory::io, "cannot read '{}': {}", path, std::strerror(errno));
  const auto size = static_cast<std::int64_t>(st.st_size);
  std::uint8_t hb[kTbxHeaderBytes];
  if (size < kTbxHeaderBytes || std::fread(hb, 1, sizeof hb, f.get()) != sizeof hb)
    fail(ErrorCategory::format, "'{}' ({} bytes) holds no TBX frame header", path, size);

  // The first header fixes the frame size (nstand, nchan); every other frame must agree.
  const TbxFrameHeader first = decode_tbx_header(hb);
  if (first.sync_word != kTbfSyncWord)
    fail(ErrorCategory::format,
         "'{}': frame 0 has sync word 0x{:08X}, not 0x{:08X}: not a TBX file (or misaligned)", path,
         first.sync_word, kTbfSyncWord);
  if (first.id != kTbxId)
    fail(ErrorCategory::format, "'{}': frame 0 has id {}, not {} (TBX)", path, first.id, kTbxId);
  if (first.nstand < 1 || first.nstand > kMaxStands)
    fail(ErrorCategory::format, "'{}': frame 0 says nstand = {} (1 to {})", path, first.nstand,
         kMaxStands);
  if (first.nchan < 1 || first.nchan > kTbxMaxChannelsPerFrame)
    fail(ErrorCategory::format, "'{}': frame 0 says nchan = {} (1 to {} channels per frame)", path,
         first.nchan, kTbxMaxChannelsPerFrame);
  info_.nstand = first.nstand;
  info_.channels_per_frame = first.nchan;
  info_.frame_bytes = tbx_frame_bytes(first.nstand, first.nchan);  // <= 28 + 2 * 16 * 4096
  const std::int64_t nframes = size / info_.frame_bytes;
  info_.dropped_bytes = size - nframes * info_.frame_bytes;
  if (nframes == 0)
    fail(ErrorCategory::format, "'{}' ({} bytes) holds no whole TBX frame of {} bytes", path, size,
         info_.frame_bytes);

  std::vector<FrameKey> frames;
  frames.reserve(static_cast<std::size_t>(nframes));
  for (std::int64_t i = 0; i < nframes; ++i) {
    const std::int64_t at = i * info_.frame_bytes;
    if (std::fseek(f.get(), static_cast<long>(at), SEEK_SET) != 0 ||
        std::fread(hb, 1, sizeof hb, f.get()) != sizeof hb)
      fail(ErrorCategory::io, "cannot read frame {} of '{}': {}", i, path, std::strerror(errno));
    const TbxFrameHeader h = decode_tbx_header(hb);
    if (h.sync_word != kTbfSyncWord)
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) has sync word 0x{:08X}, not 0x{:08X} (corrupt or misaligned)",
           path, i, at, h.sync_word, kTbfSyncWord);
    if (h.id != kTbxId)
      fail(ErrorCategory::format, "'{}': frame {} (byte {}) has id {}, not {} (TBX)", path, i, at,
           h.id, kTbxId);
    if (h.nstand != first.nstand || h.nchan != first.nchan)
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) says nstand = {}, nchan = {}, contradicting frame 0 ({}, {})",
           path, i, at, h.nstand, h.nchan, first.nstand, first.nchan);
    if (h.first_chan > kMaxChannel - static_cast<std::uint32_t>(h.nchan))
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) has first_chan {}: beyond the F-engine's {} channels", path, i,
           at, h.first_chan, kMaxChannel);
    // NDP writes second count 0; a non-zero one must agree with the time tag.
    const double sec = std::floor(static_cast<double>(h.time_tag) / kLwaClockHz);
    if (h.time_tag < 0 ||
        (h.second_count != 0 && std::abs(static_cast<double>(h.second_count) - sec) > 1))
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) has second count {} but time tag {} ({} s): the header "
           "contradicts itself",
           path, i, at, h.second_count, h.time_tag, sec);
    frames.push_back({i, h.time_tag, static_cast<int>(h.first_chan)});
  }
  if (info_.dropped_bytes > 0)
    warnf("'{}' ends with a partial TBX frame ({} of {} bytes): dropped", path, info_.dropped_bytes,
          info_.frame_bytes);
  index_frames(frames, {kTbxTicksPerSpectrum, kAdpTicksPerSpectrum});
  if (info_.channel_width_assumed)
    warnf(
        "'{}' holds one spectrum: its channel width cannot be told from the time tags; NDP's "
        "{} Hz (fS / 8192) is assumed, as LSL does",
        path, kNdpChannelWidthHz);
}

std::unique_ptr<LwaVoltageFile> open_lwa_voltage_file(const std::string& path) {
  std::uint8_t head[8] = {};
  {
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
    if (std::fread(head, 1, sizeof head, f.get()) != sizeof head)
      fail(ErrorCategory::format, "'{}' is too short for an LWA TBF or TBX frame", path);
  }
  if (be32(head) != kTbfSyncWord)
    fail(ErrorCategory::format, "'{}' does not start with the LWA sync word 0x{:08X} (TBF, TBX)",
         path, kTbfSyncWord);
  const int id = head[4];
  if (id == kTbxId) return std::make_unique<TbxReader>(path);
  if (id == kTbfId) return std::make_unique<TbfReader>(path);
  // Other frames share the sync word (COR, id 2): named by their id, not reported as broken.
  fail(ErrorCategory::unsupported,
       "'{}' holds {} frames (id {}): not supported (LWA TBF ({}) and TBX ({}) are)", path,
       lwa_frame_name(id), id, kTbfId, kTbxId);
}

void write_tbx(const std::string& path, const std::uint8_t* ci4, int nchan, std::int64_t ntime,
               int nstand, int first_chan, std::int64_t time_tag0, int chans_per_frame,
               std::int64_t ticks_per_spectrum) {
  require_range("chans_per_frame", chans_per_frame, 1, kTbxMaxChannelsPerFrame);
  if (nchan <= 0 || nchan % chans_per_frame != 0)
    fail(ErrorCategory::invalid_argument, "TBX frames of {} channels cannot hold {}",
         chans_per_frame, nchan);
  require_range("nstand", nstand, 1, kMaxStands);
  require_range("first_chan", first_chan, 0, static_cast<int>(kMaxChannel) - nchan);
  if (ntime <= 0 || time_tag0 < 0 || ticks_per_spectrum <= 0)
    fail(ErrorCategory::invalid_argument, "TBX with {} spectra from time tag {}, {} ticks apart",
         ntime, time_tag0, ticks_per_spectrum);
  OutputFile out(path);
  const std::int64_t row = std::int64_t{nstand} * 2;
  std::vector<std::uint8_t> frame(
      static_cast<std::size_t>(tbx_frame_bytes(nstand, chans_per_frame)));
  for (std::int64_t t = 0; t < ntime; ++t) {
    TbxFrameHeader h;
    h.time_tag = time_tag0 + t * ticks_per_spectrum;
    h.nstand = nstand;
    h.nchan = chans_per_frame;
    for (int b = 0; b < nchan / chans_per_frame; ++b) {
      h.first_chan = static_cast<std::uint32_t>(first_chan + b * chans_per_frame);
      encode_tbx_header(h, frame.data());
      for (int k = 0; k < chans_per_frame; ++k) {
        const int c = b * chans_per_frame + k;
        std::memcpy(frame.data() + kTbxHeaderBytes + k * row, ci4 + (c * ntime + t) * row,
                    static_cast<std::size_t>(row));
      }
      out.write(frame.data(), frame.size());
    }
  }
  out.commit();
}

}  // namespace warpbeam::io
