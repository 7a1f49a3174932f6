// LWA TBF frames: header codec, a validating reader, and a writer (used by the station
// simulator, so that simulated and real data go through the same reader).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "io/big_endian.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/output_file.hpp"

namespace warpbeam::io {

namespace {

using detail::be16s;
using detail::be32;
using detail::be64s;
using detail::put32;
using detail::put64;
void put16(std::uint8_t* p, std::int16_t s) {
  detail::put16(p, static_cast<std::uint16_t>(s));
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_read(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  return f;
}

}  // namespace

std::string lwa_frame_name(int id) {
  switch (id) {  // the id byte of the frames behind the sync word 0xDEC0DE5C (LSL's readers)
    case 1:
      return "LWA TBF";
    case 2:
      return "LWA COR (correlator visibility)";
    case 8:
      return "LWA TBX";
    default:
      return "unknown LWA";
  }
}

TbfFrameHeader decode_tbf_header(const std::uint8_t* b) {
  TbfFrameHeader h;
  h.sync_word = be32(b);
  const std::uint32_t word = be32(b + 4);
  h.id = static_cast<int>(word >> 24);
  h.frame_count = word & 0xFFFFFFu;
  h.second_count = be32(b + 8);
  h.first_chan = be16s(b + 12);
  const int nstand = be16s(b + 14);
  h.nstand = nstand == 0 ? 256 : nstand;
  h.time_tag = be64s(b + 16);
  return h;
}

void encode_tbf_header(const TbfFrameHeader& h, std::uint8_t* b) {
  put32(b, h.sync_word);
  put32(b + 4, (static_cast<std::uint32_t>(h.id & 0xFF) << 24) | (h.frame_count & 0xFFFFFFu));
  put32(b + 8, h.second_count);
  put16(b + 12, static_cast<std::int16_t>(h.first_chan));
  put16(b + 14, static_cast<std::int16_t>(h.nstand == 256 ? 0 : h.nstand));
  put64(b + 16, h.time_tag);
}

bool TbfInfo::contiguous() const {
  for (std::size_t i = 1; i < channels.size(); ++i)
    if (channels[i] != channels[i - 1] + 1) return false;
  return !channels.empty();
}

TbfReader::TbfReader(const std::string& path) {
  info_.path = path;
  info_.format = "TBF";
  File f = open_read(path);
  if (std::fseek(f.get(), 0, SEEK_END) != 0)
    fail(ErrorCategory::io, "cannot seek in '{}': {}", path, std::strerror(errno));
  const std::int64_t size = std::ftell(f.get());
  std::rewind(f.get());
  if (size < kTbfHeaderBytes)
    fail(ErrorCategory::format, "'{}' ({} bytes) holds no TBF frame", path, size);

  // The first header fixes the frame size (through nstand); every other frame must agree.
  std::uint8_t hb[kTbfHeaderBytes];
  if (std::fread(hb, 1, sizeof hb, f.get()) != sizeof hb)
    fail(ErrorCategory::io, "cannot read '{}': {}", path, std::strerror(errno));
  const TbfFrameHeader first = decode_tbf_header(hb);
  if (first.sync_word != kTbfSyncWord)
    fail(ErrorCategory::format,
         "'{}': frame 0 has sync word 0x{:08X}, not 0x{:08X}: not a TBF file (or misaligned)", path,
         first.sync_word, kTbfSyncWord);
  if (first.id != kTbfId)
    fail(ErrorCategory::unsupported, "'{}' holds {} frames (id {}), not TBF: not supported here",
         path, lwa_frame_name(first.id), first.id);
  if (first.nstand < 1 || first.nstand > 4096)
    fail(ErrorCategory::format, "'{}': frame 0 says nstand = {}", path, first.nstand);
  info_.nstand = first.nstand;
  const std::int64_t frame_bytes = tbf_frame_bytes(info_.nstand);
  info_.frame_bytes = frame_bytes;
  info_.header_bytes = kTbfHeaderBytes;
  info_.channels_per_frame = kTbfChannelsPerFrame;
  const std::int64_t nframes = size / frame_bytes;
  info_.dropped_bytes = size - nframes * frame_bytes;
  if (nframes == 0)
    fail(ErrorCategory::format, "'{}' ({} bytes) holds no whole TBF frame of {} bytes", path, size,
         frame_bytes);

  // Read and check every header; index_frames groups them into spectra.
  std::vector<FrameKey> frames;
  frames.reserve(static_cast<std::size_t>(nframes));
  for (std::int64_t i = 0; i < nframes; ++i) {
    if (std::fseek(f.get(), static_cast<long>(i * frame_bytes), SEEK_SET) != 0 ||
        std::fread(hb, 1, sizeof hb, f.get()) != sizeof hb)
      fail(ErrorCategory::io, "cannot read frame {} of '{}': {}", i, path, std::strerror(errno));
    const TbfFrameHeader h = decode_tbf_header(hb);
    const std::int64_t at = i * frame_bytes;
    if (h.sync_word != kTbfSyncWord)
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) has sync word 0x{:08X}, not 0x{:08X} (corrupt or misaligned)",
           path, i, at, h.sync_word, kTbfSyncWord);
    if (h.id != kTbfId)
      fail(ErrorCategory::format, "'{}': frame {} (byte {}) has id {}, not {} (TBF)", path, i, at,
           h.id, kTbfId);
    if (h.nstand != info_.nstand)
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) says nstand = {}, contradicting frame 0 (nstand = {})", path,
           i, at, h.nstand, info_.nstand);
    if (h.first_chan < 0)
      fail(ErrorCategory::format, "'{}': frame {} (byte {}) has first_chan {}", path, i, at,
           h.first_chan);
    const double sec = std::floor(static_cast<double>(h.time_tag) / kLwaClockHz);
    if (h.time_tag < 0 || std::abs(static_cast<double>(h.second_count) - sec) > 1)
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) has second count {} but time tag {} ({} s): the header "
           "contradicts itself",
           path, i, at, h.second_count, h.time_tag, sec);
    frames.push_back({i, h.time_tag, h.first_chan});
  }
  if (info_.dropped_bytes > 0)
    warnf("'{}' ends with a partial TBF frame ({} of {} bytes): dropped", path, info_.dropped_bytes,
          frame_bytes);
  index_frames(frames, {kTbfTicksPerSpectrum});
}

void LwaVoltageFile::index_frames(const std::vector<FrameKey>& frames,
                                  const std::vector<std::int64_t>& tick_steps) {
  const std::string& path = info_.path;
  const std::string& fmt_name = info_.format;
  const int per_frame = info_.channels_per_frame;
  // Group frames into spectra by time tag; the first step between spectra fixes the spacing.
  struct Step {
    std::int64_t time_tag;
    std::map<int, std::int64_t> blocks;  // first_chan -> frame index
  };
  std::vector<Step> steps;
  std::int64_t spacing = 0;
  for (const FrameKey& k : frames) {
    const std::int64_t at = k.index * info_.frame_bytes;
    if (steps.empty() || k.time_tag != steps.back().time_tag) {
      if (!steps.empty()) {
        const std::int64_t dt = k.time_tag - steps.back().time_tag;
        if (spacing == 0 && std::find(tick_steps.begin(), tick_steps.end(), dt) != tick_steps.end())
          spacing = dt;
        if (dt != (spacing ? spacing : tick_steps.front()))
          fail(ErrorCategory::format,
               "'{}': frame {} (byte {}) has time tag {}, {} ticks after the previous spectrum "
               "(expected {}: frames out of order or spectra missing)",
               path, k.index, at, k.time_tag, dt, spacing ? spacing : tick_steps.front());
      }
      steps.push_back({k.time_tag, {}});
    }
    if (!steps.back().blocks.emplace(k.first_chan, k.index).second)
      fail(ErrorCategory::format,
           "'{}': frame {} (byte {}) repeats channel block {} of the spectrum at time tag {}", path,
           k.index, at, k.first_chan, k.time_tag);
  }
  // Only a format that allows several spacings (TBX) has to see one to know its channel width.
  info_.channel_width_assumed = spacing == 0 && tick_steps.size() > 1;
  info_.ticks_per_spectrum = spacing ? spacing : tick_steps.front();
  info_.channel_width_hz = kLwaClockHz / static_cast<double>(info_.ticks_per_spectrum);

  // The channel blocks: every block any spectrum holds. Blocks must not overlap.
  std::map<int, int> all;
  for (const auto& s : steps)
    for (const auto& [fc, idx] : s.blocks)
      all.emplace(fc, 0);
  int prev = -per_frame;
  bool first_block = true;
  for (const auto& [fc, unused] : all) {
    if (!first_block && fc < prev + per_frame)
      fail(ErrorCategory::format, "'{}': channel blocks starting at {} and {} overlap", path, prev,
           fc);
    first_block = false;
    prev = fc;
    block_first_chan_.push_back(fc);
  }
  const std::size_t nblock = block_first_chan_.size();

  // Spectra must hold every block; an incomplete first or last one (a recording that starts or
  // ends mid-spectrum) is dropped with a warning, an incomplete one inside is an error.
  std::size_t s0 = 0, s1 = steps.size();
  auto complete = [&](const Step& s) { return s.blocks.size() == nblock; };
  if (s1 > s0 && !complete(steps[s1 - 1])) {
    info_.dropped_frames += static_cast<std::int64_t>(steps[s1 - 1].blocks.size());
    warnf("'{}': the last spectrum holds {} of {} channel blocks: dropped", path,
          steps[s1 - 1].blocks.size(), nblock);
    --s1;
  }
  if (s1 > s0 && !complete(steps[s0])) {
    info_.dropped_frames += static_cast<std::int64_t>(steps[s0].blocks.size());
    warnf("'{}': the first spectrum holds {} of {} channel blocks: dropped", path,
          steps[s0].blocks.size(), nblock);
    ++s0;
  }
  for (std::size_t s = s0; s < s1; ++s)
    if (!complete(steps[s]))
      fail(ErrorCategory::format,
           "'{}': the spectrum at time tag {} holds {} of the file's {} channel blocks", path,
           steps[s].time_tag, steps[s].blocks.size(), nblock);
  if (s1 <= s0) fail(ErrorCategory::format, "'{}' holds no complete {} spectrum", path, fmt_name);

  info_.ntime = static_cast<std::int64_t>(s1 - s0);
  for (std::size_t s = s0; s < s1; ++s) {
    info_.time_tags.push_back(steps[s].time_tag);
    for (int fc : block_first_chan_)
      block_frame_.push_back(steps[s].blocks.at(fc));
  }
  for (int fc : block_first_chan_)
    for (int k = 0; k < per_frame; ++k)
      info_.channels.push_back(fc + k);
}

void LwaVoltageFile::read(std::int64_t t0, std::int64_t nt, int c0, int nc,
                          std::uint8_t* out) const {
  const auto& in = info_;
  if (t0 < 0 || nt < 0 || t0 + nt > in.ntime)
    fail(ErrorCategory::invalid_argument, "spectra [{}, {}) are outside '{}' (0 .. {})", t0,
         t0 + nt, in.path, in.ntime);
  if (c0 < 0 || nc < 0 || c0 + nc > in.nchan())
    fail(ErrorCategory::invalid_argument, "channels [{}, {}) are outside '{}' (0 .. {})", c0,
         c0 + nc, in.path, in.nchan());
  if (nt == 0 || nc == 0) return;
  File f = open_read(in.path);
  const std::int64_t row = std::int64_t{in.nstand} * 2;  // bytes of one channel of one frame
  const int per_frame = in.channels_per_frame;
  const std::size_t nblock = block_first_chan_.size();
  const int b0 = c0 / per_frame, b1 = (c0 + nc - 1) / per_frame;
  std::vector<std::uint8_t> frame(static_cast<std::size_t>(in.frame_bytes));
  for (std::int64_t t = 0; t < nt; ++t) {
    for (int b = b0; b <= b1; ++b) {
      const std::int64_t idx = block_frame_[static_cast<std::size_t>(t0 + t) * nblock + b];
      if (std::fseek(f.get(), static_cast<long>(idx * in.frame_bytes), SEEK_SET) != 0 ||
          std::fread(frame.data(), 1, frame.size(), f.get()) != frame.size())
        fail(ErrorCategory::io, "cannot read frame {} of '{}': {}", idx, in.path,
             std::strerror(errno));
      for (int k = 0; k < per_frame; ++k) {
        const int c = b * per_frame + k;  // index into info().channels
        if (c < c0 || c >= c0 + nc) continue;
        std::memcpy(out + ((c - c0) * nt + t) * row, frame.data() + in.header_bytes + k * row,
                    static_cast<std::size_t>(row));
      }
    }
  }
}

void write_tbf(const std::string& path, const std::uint8_t* ci4, int nchan, std::int64_t ntime,
               int nstand, int first_chan, std::int64_t time_tag0) {
  if (nchan <= 0 || nchan % kTbfChannelsPerFrame != 0)
    fail(ErrorCategory::invalid_argument, "TBF needs a multiple of {} channels, not {}",
         kTbfChannelsPerFrame, nchan);
  require_range("nstand", nstand, 1, 4096);
  require_range("first_chan", first_chan, 0, 32767 - nchan);
  if (ntime <= 0 || time_tag0 < 0)
    fail(ErrorCategory::invalid_argument, "TBF with {} spectra from time tag {}", ntime, time_tag0);
  OutputFile out(path);
  const std::int64_t row = std::int64_t{nstand} * 2;
  std::vector<std::uint8_t> frame(static_cast<std::size_t>(tbf_frame_bytes(nstand)));
  for (std::int64_t t = 0; t < ntime; ++t) {
    TbfFrameHeader h;
    h.time_tag = time_tag0 + t * kTbfTicksPerSpectrum;
    h.second_count =
        static_cast<std::uint32_t>(std::floor(static_cast<double>(h.time_tag) / kLwaClockHz));
    h.frame_count = static_cast<std::uint32_t>(t & 0xFFFFFF);
    h.nstand = nstand;
    for (int b = 0; b < nchan / kTbfChannelsPerFrame; ++b) {
      h.first_chan = first_chan + b * kTbfChannelsPerFrame;
      encode_tbf_header(h, frame.data());
      for (int k = 0; k < kTbfChannelsPerFrame; ++k) {
        const int c = b * kTbfChannelsPerFrame + k;
        std::memcpy(frame.data() + kTbfHeaderBytes + k * row, ci4 + (c * ntime + t) * row,
                    static_cast<std::size_t>(row));
      }
      out.write(frame.data(), frame.size());
    }
  }
  out.commit();
}

}  // namespace warpbeam::io
