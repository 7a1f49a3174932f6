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

namespace {

// Sends packets through the fault injector and the pacer, in batches of sendmmsg.
class Emitter {
 public:
  Emitter(const SendConfig& cfg, SendRecord& r)
      : r_(r),
        faults_(cfg.faults, r),
        pacer_(cfg.rate_gbytes * 1e9),
        fd_(detail::connect_udp(cfg.to, 16)) {}
  ~Emitter() { ::close(fd_); }
  void add(const std::uint8_t* p, std::size_t n, std::pair<std::int64_t, std::int64_t> key) {
    faults_.feed({std::vector<std::uint8_t>(p, p + n), key}, out_);
    if (out_.size() >= 64) send();
  }
  void finish() {
    faults_.flush(out_);
    send();
  }

 private:
  void send() {
    if (out_.empty()) return;
    std::vector<const std::uint8_t*> d;
    std::vector<std::size_t> s;
    std::size_t bytes = 0;
    for (const auto& p : out_) {
      d.push_back(p.bytes.data());
      s.push_back(p.bytes.size());
      bytes += p.bytes.size();
    }
    pacer_.wait(bytes);
    detail::send_all(fd_, d, s);
    r_.sent += static_cast<std::int64_t>(out_.size());
    r_.bytes_sent += static_cast<std::int64_t>(bytes);
    out_.clear();
  }
  SendRecord& r_;
  detail::FaultInjector faults_;
  detail::Pacer pacer_;
  int fd_;
  std::vector<detail::FaultInjector::Packet> out_;
};

}  // namespace

SendRecord send_tbf(const std::string& path, const SendConfig& cfg) {
  cfg.validate();
  const io::TbfReader reader(path);
  const io::TbfInfo& info = reader.info();
  if (!info.contiguous())
    fail(ErrorCategory::unsupported, "'{}': the channels are not contiguous", path);
  const int nchan = info.nchan(), nblk = nchan / io::kTbfChannelsPerFrame;
  const std::int64_t batch = cfg.heap_samples > 0 ? cfg.heap_samples : 64;
  const std::size_t row = static_cast<std::size_t>(info.nstand) * 2;
  std::vector<std::uint8_t> spectra,
      frame(static_cast<std::size_t>(io::tbf_frame_bytes(info.nstand)));
  SendRecord r;
  Emitter out(cfg, r);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  bool done = false;
  for (int loop = 0; loop < cfg.loops && !done; ++loop) {
    for (std::int64_t s0 = 0; s0 < info.ntime && !done; s0 += batch) {
      const std::int64_t nt = std::min(batch, info.ntime - s0);
      spectra.resize(static_cast<std::size_t>(nchan * nt) * row);
      reader.read(s0, nt, 0, nchan, spectra.data());  // [chan][time][stand][pol]
      for (std::int64_t t = 0; t < nt; ++t) {
        const std::int64_t n = loop * info.ntime + s0 + t;  // spectrum index of the stream
        io::TbfFrameHeader h;
        h.time_tag = info.time_tags[0] + n * io::kTbfTicksPerSpectrum;
        h.second_count =
            static_cast<std::uint32_t>(std::floor(static_cast<double>(h.time_tag) / 196e6));
        h.frame_count = static_cast<std::uint32_t>(n & 0xFFFFFF);
        h.nstand = info.nstand;
        for (int b = 0; b < nblk; ++b) {
          h.first_chan = info.channels[static_cast<std::size_t>(b) * io::kTbfChannelsPerFrame];
          io::encode_tbf_header(h, frame.data());
          for (int k = 0; k < io::kTbfChannelsPerFrame; ++k) {
            const std::size_t c = static_cast<std::size_t>(b) * io::kTbfChannelsPerFrame + k;
            std::memcpy(frame.data() + io::kTbfHeaderBytes + k * row,
                        spectra.data() + (c * static_cast<std::size_t>(nt) + t) * row, row);
          }
          out.add(frame.data(), frame.size(), {h.time_tag, h.first_chan});
        }
        ++r.blocks;
      }
      if (cfg.duration_s > 0 && elapsed() >= cfg.duration_s) done = true;
    }
  }
  out.finish();
  r.seconds = elapsed();
  return r;
}

}  // namespace warpbeam::stream
