// send_tbf: a TBF file's spectra as UDP datagrams, one frame each, paced, with injected faults.
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "stream/udp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/stream/send.hpp"

namespace warpbeam::stream {

void Faults::validate() const {
  require_range("--drop", drop, 0.0, 0.5);
  require_range("--reorder", reorder, 0.0, 0.5);
  require_range("--duplicate", duplicate, 0.0, 0.5);
  require_range("the reorder displacement", max_displacement, 1, 1024);
}

void SendConfig::validate() const {
  require_loopback(to, "the destination");
  require_range("--rate (GB/s)", rate_gbytes, 0.0, 1000.0);
  require_range("--loops", loops, 1, 1 << 30);
  require_range("--duration", duration_s, 0.0, 1e7);
  require_range("--heap-samples", heap_samples, std::int64_t{0}, std::int64_t{1} << 20);
  faults.validate();
}

nlohmann::json SendRecord::to_json() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& [a, b] : dropped_packets)
    d.push_back({a, b});
  return {{"packets", packets},
          {"sent", sent},
          {"dropped", dropped},
          {"reordered", reordered},
          {"duplicated", duplicated},
          {"bytes_sent", bytes_sent},
          {"blocks", blocks},
          {"seconds", seconds},
          {"rate_gbytes_per_s", seconds > 0 ? static_cast<double>(bytes_sent) / seconds / 1e9 : 0},
          {"dropped_packets", d}};
}

SendRecord send_tbf(const std::string& path, const SendConfig& cfg) {
  cfg.validate();
  const io::TbfReader reader(path);
  const io::TbfInfo& info = reader.info();
  if (!info.contiguous())
    fail(ErrorCategory::unsupported, "'{}': the channels are not contiguous", path);
  const int nchan = info.nchan(), nblk = nchan / io::kTbfChannelsPerFrame;
  const std::size_t row = static_cast<std::size_t>(info.nstand) * 2;
  const std::size_t fb = static_cast<std::size_t>(io::tbf_frame_bytes(info.nstand));
  const std::size_t nframes = static_cast<std::size_t>(info.ntime) * nblk;
  if (nframes * fb > (std::size_t{8} << 30))
    fail(ErrorCategory::invalid_argument,
         "'{}' holds {} GB of frames: the sender holds the file in memory (8 GB at most); send "
         "a shorter file with --loops",
         path, nframes * fb / 1e9);
  // Every frame of the file, in order, built once: the loops only rewrite the headers, so that
  // the sender reaches the rates a capture is tested at.
  std::vector<std::uint8_t> frames(nframes * fb), spectra;
  const std::int64_t batch = cfg.heap_samples > 0 ? cfg.heap_samples : 256;
  for (std::int64_t s0 = 0; s0 < info.ntime; s0 += batch) {
    const std::int64_t nt = std::min(batch, info.ntime - s0);
    spectra.resize(static_cast<std::size_t>(nchan * nt) * row);
    reader.read(s0, nt, 0, nchan, spectra.data());  // [chan][time][stand][pol]
    for (std::int64_t t = 0; t < nt; ++t)
      for (int b = 0; b < nblk; ++b) {
        std::uint8_t* f = frames.data() + (static_cast<std::size_t>(s0 + t) * nblk + b) * fb;
        for (int k = 0; k < io::kTbfChannelsPerFrame; ++k) {
          const std::size_t c = static_cast<std::size_t>(b) * io::kTbfChannelsPerFrame + k;
          std::memcpy(f + io::kTbfHeaderBytes + k * row,
                      spectra.data() + (c * static_cast<std::size_t>(nt) + t) * row, row);
        }
      }
  }
  SendRecord r;
  detail::FaultInjector faults(cfg.faults, r);
  detail::Pacer pacer(cfg.rate_gbytes * 1e9);
  const int fd = detail::connect_udp(cfg.to, 16);
  std::vector<detail::FaultInjector::Packet> out;
  std::vector<const std::uint8_t*> ptrs;
  std::vector<std::size_t> sizes;
  auto send = [&] {
    std::size_t bytes = 0;
    for (std::size_t s : sizes)
      bytes += s;
    if (ptrs.empty()) return;
    pacer.wait(bytes);
    detail::send_all(fd, ptrs, sizes);
    r.sent += static_cast<std::int64_t>(ptrs.size());
    r.bytes_sent += static_cast<std::int64_t>(bytes);
    ptrs.clear();
    sizes.clear();
  };
  auto send_faulty = [&] {
    for (const auto& p : out) {
      ptrs.push_back(p.bytes.data());
      sizes.push_back(p.bytes.size());
    }
    send();
    out.clear();
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  constexpr std::size_t kBatch = 64;
  bool done = false;
  try {
    for (int loop = 0; loop < cfg.loops && !done; ++loop) {
      for (std::int64_t t = 0; t < info.ntime && !done; ++t) {
        const std::int64_t n = loop * info.ntime + t;  // spectrum index of the stream
        io::TbfFrameHeader h;
        h.time_tag = info.time_tags[0] + n * io::kTbfTicksPerSpectrum;
        h.second_count =
            static_cast<std::uint32_t>(std::floor(static_cast<double>(h.time_tag) / 196e6));
        h.frame_count = static_cast<std::uint32_t>(n & 0xFFFFFF);
        h.nstand = info.nstand;
        for (int b = 0; b < nblk; ++b) {
          std::uint8_t* f = frames.data() + (static_cast<std::size_t>(t) * nblk + b) * fb;
          h.first_chan = info.channels[static_cast<std::size_t>(b) * io::kTbfChannelsPerFrame];
          io::encode_tbf_header(h, f);
          if (faults.passthrough()) {
            ptrs.push_back(f);
            sizes.push_back(fb);
            ++r.packets;
            if (ptrs.size() == kBatch) send();
          } else {
            faults.feed({std::vector<std::uint8_t>(f, f + fb), {h.time_tag, h.first_chan}}, out);
            if (out.size() >= kBatch) send_faulty();
          }
        }
        ++r.blocks;
        // The buffer's frames are rewritten next loop: send what points into it first.
        if (t == info.ntime - 1) send();
        if (cfg.duration_s > 0 && (n & 255) == 0 && elapsed() >= cfg.duration_s) done = true;
      }
    }
    send();
    faults.flush(out);
    send_faulty();
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  r.seconds = elapsed();
  return r;
}

}  // namespace warpbeam::stream
