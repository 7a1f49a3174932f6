// send_voltages: a voltage file as SPEAD heaps (warpbeam/stream/spead.hpp) through spead2's UDP
// sender, paced by spead2, with injected faults.
#include "stream/udp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/voltages.hpp"
#include "warpbeam/stream/send.hpp"
#include "warpbeam/stream/spead.hpp"

#ifdef WARPBEAM_HAVE_SPEAD2
// Boost 1.74's asio with GCC 12 in C++20 needs <utility> first.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
#include <spead2/common_thread_pool.h>
#include <spead2/send_heap.h>
#include <spead2/send_stream_config.h>
#include <spead2/send_udp.h>
// clang-format on

#include <future>
#include <thread>
#endif

namespace warpbeam::stream {

#ifdef WARPBEAM_HAVE_SPEAD2

namespace {

// The largest power of 2 that divides block_samples and keeps a heap within 8192 bytes (one
// jumbo-frame packet).
std::int64_t default_heap_samples(const spead::StreamDescription& d) {
  std::int64_t n = 1;
  while (d.info.block_samples % (2 * n) == 0 && 2 * n * d.bytes_per_sample() <= 8192)
    n *= 2;
  return n;
}

class Sender {
 public:
  Sender(const SendConfig& cfg, std::size_t max_packet)
      : pool_(1), stream_(pool_, {endpoint(cfg.to)}, config(cfg, max_packet)) {}

  void send(const std::vector<spead2::send::heap>& heaps) {
    if (heaps.empty()) return;
    auto f = stream_.async_send_heaps(heaps.begin(), heaps.end(), boost::asio::use_future,
                                      spead2::send::group_mode::SERIAL);
    f.get();  // throws boost::system::system_error on a send failure
  }

 private:
  static boost::asio::ip::udp::endpoint endpoint(const Endpoint& e) {
    const std::string host = e.host == "localhost" ? "127.0.0.1" : e.host;
    return {boost::asio::ip::make_address(host), static_cast<unsigned short>(e.port)};
  }
  static spead2::send::stream_config config(const SendConfig& cfg, std::size_t max_packet) {
    spead2::send::stream_config c;
    c.set_max_packet_size(max_packet);
    c.set_rate(cfg.rate_gbytes * 1e9);  // bytes/s of packets; 0: as fast as possible
    c.set_max_heaps(4096);
    return c;
  }
  spead2::thread_pool pool_;
  spead2::send::udp_stream stream_;
};

}  // namespace

SendRecord send_voltages(const std::string& path, const SendConfig& cfg) {
  cfg.validate();
  auto reader = io::open_voltage_file(path);
  spead::StreamDescription d;
  d.info = reader->info();
  d.heap_samples = cfg.heap_samples > 0 ? cfg.heap_samples : default_heap_samples(d);
  if (d.info.block_samples % d.heap_samples != 0)
    fail(ErrorCategory::invalid_argument,
         "--heap-samples {} must divide the file's blocks of {} samples", d.heap_samples,
         d.info.block_samples);
  if (d.heap_bytes() > 65000)
    fail(ErrorCategory::invalid_argument,
         "heaps of {} samples are {} bytes, more than a UDP datagram holds: lower --heap-samples",
         d.heap_samples, d.heap_bytes());
  d.timestamp0 = 0;
  const std::string text = d.to_json().dump();
  const std::size_t heap_bytes = static_cast<std::size_t>(d.heap_bytes());
  // Header (8) and up to 8 item pointers; one heap is one packet.
  Sender out(cfg, std::max(heap_bytes, text.size()) + 8 + 8 * 8);

  SendRecord r;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // The description, three times (a lost one would leave the receiver blind).
  for (int k = 0; k < 3; ++k) {
    std::vector<spead2::send::heap> h(1);
    h[0].add_item(spead::kDescriptionFlag, 1);
    h[0].add_item(spead::kDescription, text, false);
    out.send(h);
    r.bytes_sent += static_cast<std::int64_t>(text.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  detail::FaultInjector faults(cfg.faults, r);
  std::vector<detail::FaultInjector::Packet> batch;
  std::vector<spead2::send::heap> heaps;
  const auto emit = [&](const std::vector<detail::FaultInjector::Packet>& packets) {
    heaps.clear();
    heaps.reserve(packets.size());
    for (const auto& p : packets) {
      spead2::send::heap& h = heaps.emplace_back();
      h.add_item(spead::kTimestamp, p.key.first);
      h.add_item(spead::kChannel, p.key.second);
      h.add_item(spead::kVoltages, p.bytes.data(), p.bytes.size(), false);
      r.bytes_sent += static_cast<std::int64_t>(p.bytes.size());
    }
    out.send(heaps);
    r.sent += static_cast<std::int64_t>(packets.size());
  };
  std::vector<std::uint8_t> block;
  const std::int64_t slices = d.info.block_samples / d.heap_samples;
  const std::size_t spb = static_cast<std::size_t>(d.bytes_per_sample());
  bool done = false;
  std::int64_t sample = 0;  // of the stream
  for (int loop = 0; loop < cfg.loops && !done; ++loop) {
    if (loop > 0) reader = io::open_voltage_file(path);
    while (!done && reader->read_block(block)) {
      // Time-major, as an F-engine emits: every channel's heap of one time slice, then the next.
      for (std::int64_t s = 0; s < slices; ++s)
        for (int c = 0; c < d.info.nchans; ++c) {
          const std::uint8_t* p =
              block.data() + (static_cast<std::size_t>(c) * d.info.block_samples +
                              static_cast<std::size_t>(s * d.heap_samples)) *
                                 spb;
          faults.feed(
              {std::vector<std::uint8_t>(p, p + heap_bytes), {sample + s * d.heap_samples, c}},
              batch);
        }
      emit(batch);
      batch.clear();
      sample += d.info.block_samples;
      ++r.blocks;
      if (cfg.duration_s > 0 && elapsed() >= cfg.duration_s) done = true;
    }
  }
  faults.flush(batch);
  emit(batch);
  // The end of the stream.
  std::vector<spead2::send::heap> stop(1);
  stop[0].add_end();
  out.send(stop);
  r.seconds = elapsed();
  return r;
}

#else

SendRecord send_voltages(const std::string&, const SendConfig&) {
  fail(ErrorCategory::unsupported,
       "this build has no spead2: `send voltages` is unavailable (run scripts/build-spead2 and "
       "configure again)");
}

#endif

}  // namespace warpbeam::stream
