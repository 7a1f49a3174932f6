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

#include <deque>
#include <filesystem>
#include <future>
#include <iterator>
#include <memory>
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

// spead2's send queue holds at most max_heaps heaps and refuses (would_block) a group that does
// not fit whole: a block of the B1 stream is 32768 heaps. So heaps go in groups of kGroupHeaps,
// at most kGroups of them in flight; submit() waits for the oldest group before it queues one
// more (the sender's backpressure: it never drops a heap it was not asked to drop). Each group
// owns the bytes its heaps point to until spead2 has sent them.
class Sender {
 public:
  static constexpr std::size_t kGroupHeaps = 1024, kGroups = 8;
  struct Group {
    std::vector<detail::FaultInjector::Packet> packets;
    // A description heap's JSON, on the heap so that moving the group keeps its address.
    std::unique_ptr<std::string> text;
    std::vector<spead2::send::heap> heaps;
    std::future<spead2::item_pointer_t> done;
  };

  Sender(const SendConfig& cfg, std::size_t max_packet, SendRecord& record)
      : to_(cfg.to),
        record_(record),
        pool_(1),
        stream_(pool_, {endpoint(cfg.to)}, config(cfg, max_packet)) {}
  ~Sender() {
    // On an error the groups still queued must be waited for: spead2 reads their bytes.
    for (auto& g : in_flight_)
      if (g.done.valid()) g.done.wait();
  }

  /// Queues a group (its heaps built over its own packets/text), waiting for room first.
  void submit(Group&& g) {
    if (g.heaps.empty()) return;
    if (in_flight_.size() >= kGroups) wait_oldest();
    g.done = stream_.async_send_heaps(g.heaps.begin(), g.heaps.end(), boost::asio::use_future,
                                      spead2::send::group_mode::SERIAL);
    in_flight_.push_back(std::move(g));
  }
  /// Waits until every queued heap has been sent.
  void drain() {
    while (!in_flight_.empty())
      wait_oldest();
  }

 private:
  void wait_oldest() {
    Group g = std::move(in_flight_.front());
    in_flight_.pop_front();
    try {
      // The bytes spead2 put on the wire for the group (the UDP payload: SPEAD headers too).
      record_.bytes_sent += static_cast<std::int64_t>(g.done.get());
    } catch (const boost::system::system_error& e) {
      fail(ErrorCategory::io, "sending SPEAD heaps to {} failed: {}", to_.to_string(),
           e.code().message());
    }
  }
  static boost::asio::ip::udp::endpoint endpoint(const Endpoint& e) {
    const std::string host = e.host == "localhost" ? "127.0.0.1" : e.host;
    return {boost::asio::ip::make_address(host), static_cast<unsigned short>(e.port)};
  }
  static spead2::send::stream_config config(const SendConfig& cfg, std::size_t max_packet) {
    spead2::send::stream_config c;
    c.set_max_packet_size(max_packet);
    c.set_rate(cfg.rate_gbytes * 1e9);  // bytes/s of packets; 0: as fast as possible
    // Bursts of 1 ms of the rate rather than spead2's 64 KiB: spead2 sleeps between bursts, and
    // a wake-up late by tens of microseconds per 100 us burst (0.66 GB/s) left the stream 18 %
    // short of its rate on this VM (0.54 GB/s of 0.66); the burst rate (1.05x) catches up.
    c.set_burst_size(std::max<std::size_t>(spead2::send::stream_config::default_burst_size,
                                           static_cast<std::size_t>(cfg.rate_gbytes * 1e6)));
    // Room for every group in flight, so that a queued group is never refused.
    c.set_max_heaps(kGroupHeaps * kGroups + 16);
    return c;
  }
  Endpoint to_;
  SendRecord& record_;
  std::deque<Group> in_flight_;
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
  SendRecord r;
  Sender out(cfg, std::max(heap_bytes, text.size()) + 8 + 8 * 8, r);

  std::vector<std::uint8_t> block;
  // The file's blocks in memory before the first heap goes out, when they fit in kPreloadBytes:
  // a GUPPI block is transposed to [chan][time][antenna] one sample at a time on reading, ~0.3 s
  // per B1 block, so a sender that read while it sent fell far behind its --rate (H200,
  // 2026-12-02: B1 at 0.66 GB/s asked went out at 0.14 GB/s; this VM: 0.10-0.14 GB/s whatever
  // the rate asked).
  constexpr std::int64_t kPreloadBytes = std::int64_t{16} << 30;
  std::vector<std::vector<std::uint8_t>> preloaded;
  if (std::filesystem::file_size(path) <= static_cast<std::uintmax_t>(kPreloadBytes)) {
    while (reader->read_block(block))
      preloaded.push_back(block);
    // Not one whole block: say so (reading again after the reader's end reported the block's
    // data as a header without END).
    if (preloaded.empty())
      fail(ErrorCategory::format, "'{}' holds no whole block of voltages to send", path);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // The description, three times (a lost one would leave the receiver blind).
  for (int k = 0; k < 3; ++k) {
    Sender::Group g;
    g.text = std::make_unique<std::string>(text);
    g.heaps.resize(1);
    g.heaps[0].add_item(spead::kDescriptionFlag, 1);
    g.heaps[0].add_item(spead::kDescription, g.text->data(), g.text->size(), false);
    out.submit(std::move(g));
    out.drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  detail::FaultInjector faults(cfg.faults, r);
  std::vector<detail::FaultInjector::Packet> batch;
  // The packets the injector released, in groups of at most kGroupHeaps heaps.
  const auto emit = [&](std::vector<detail::FaultInjector::Packet>& packets, bool all) {
    while (packets.size() >= Sender::kGroupHeaps || (all && !packets.empty())) {
      const std::size_t n = std::min(packets.size(), Sender::kGroupHeaps);
      Sender::Group g;
      g.packets.assign(std::make_move_iterator(packets.begin()),
                       std::make_move_iterator(packets.begin() + static_cast<std::ptrdiff_t>(n)));
      packets.erase(packets.begin(), packets.begin() + static_cast<std::ptrdiff_t>(n));
      g.heaps.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const auto& p = g.packets[i];
        spead2::send::heap& h = g.heaps[i];
        h.add_item(spead::kTimestamp, p.key.first);
        h.add_item(spead::kChannel, p.key.second);
        h.add_item(spead::kVoltages, p.bytes.data(), p.bytes.size(), false);
      }
      r.sent += static_cast<std::int64_t>(n);
      out.submit(std::move(g));
    }
  };
  const std::int64_t slices = d.info.block_samples / d.heap_samples;
  const std::size_t spb = static_cast<std::size_t>(d.bytes_per_sample());
  std::size_t next_preloaded = 0;
  const auto next_block = [&]() -> bool {
    if (preloaded.empty()) return reader->read_block(block);
    if (next_preloaded == preloaded.size()) return false;
    block.swap(preloaded[next_preloaded++]);  // swapped back below
    return true;
  };
  bool done = false;
  std::int64_t sample = 0;  // of the stream
  for (int loop = 0; loop < cfg.loops && !done; ++loop) {
    if (loop > 0) {
      if (preloaded.empty())
        reader = io::open_voltage_file(path);
      else
        next_preloaded = 0;
    }
    while (!done && next_block()) {
      // Time-major, as an F-engine emits: every channel's heap of one time slice, then the next.
      for (std::int64_t s = 0; s < slices; ++s) {
        for (int c = 0; c < d.info.nchans; ++c) {
          const std::uint8_t* p =
              block.data() + (static_cast<std::size_t>(c) * d.info.block_samples +
                              static_cast<std::size_t>(s * d.heap_samples)) *
                                 spb;
          faults.feed(
              {std::vector<std::uint8_t>(p, p + heap_bytes), {sample + s * d.heap_samples, c}},
              batch);
        }
        emit(batch, false);
      }
      emit(batch, true);
      if (!preloaded.empty()) block.swap(preloaded[next_preloaded - 1]);
      sample += d.info.block_samples;
      ++r.blocks;
      if (cfg.duration_s > 0 && elapsed() >= cfg.duration_s) done = true;
    }
  }
  faults.flush(batch);
  emit(batch, true);
  // The end of the stream.
  Sender::Group stop;
  stop.heaps.resize(1);
  stop.heaps[0].add_end();
  out.submit(std::move(stop));
  out.drain();
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
