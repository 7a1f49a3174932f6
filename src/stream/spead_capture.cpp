// SpeadVoltageCapture: a SPEAD voltage stream (warpbeam/stream/spead.hpp) into a BlockRing
// through spead2's chunking receiver: spead2 places each heap's payload straight into a block of
// the ring (the chunk's memory is the block), our place callback decides where.
#include "stream/udp.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/stream/capture.hpp"
#include "warpbeam/stream/spead.hpp"

#ifdef WARPBEAM_HAVE_SPEAD2
// Boost 1.74's asio with GCC 12 in C++20 needs <utility> first.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
#include <spead2/common_thread_pool.h>
#include <spead2/recv_chunk_stream.h>
#include <spead2/recv_packet.h>
#include <spead2/recv_udp.h>
// clang-format on

#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <optional>
#include <set>
#endif

namespace warpbeam::stream {

void SpeadCaptureConfig::validate() const {
  require_range("--ring-blocks", ring_blocks, 2, 1 << 16);
  require_range("the capture window", window, 1, 64);
  if (window >= ring_blocks)
    fail(ErrorCategory::invalid_argument,
         "--ring-blocks {} must exceed the capture's window of {} open blocks", ring_blocks,
         window);
  require_range("--socket-buffer (MiB)", socket_buffer_mib, 1, 1024);  // SO_RCVBUF is an int
  require_range("--idle-timeout", idle_timeout_s, 0.0, 1e9);
  if (capture_core != -1) detail::require_core(capture_core);
}

#ifdef WARPBEAM_HAVE_SPEAD2

bool spead_supported() {
  return true;
}

namespace {

// A chunk whose memory is a block of the ring (not owned: the ring owns it).
struct RingChunk : spead2::recv::chunk {
  Block* block = nullptr;
};

spead2::memory_allocator::pointer borrow(std::uint8_t* p) {
  return spead2::memory_allocator::pointer(p, [](std::uint8_t*) {});
}

using Clock = std::chrono::steady_clock;

}  // namespace

struct SpeadVoltageCapture::Impl {
  class Stream : public spead2::recv::chunk_stream {
   public:
    Stream(Impl& impl, spead2::io_context_ref io, const spead2::recv::stream_config& sc,
           const spead2::recv::chunk_stream_config& cc)
        : chunk_stream(std::move(io), sc, cc), impl_(impl) {}
    void stop_received() override {
      impl_.stopping = true;  // the chunks flushed now are the stream's last
      chunk_stream::stop_received();
      impl_.end();
    }

   private:
    Impl& impl_;
  };

  Impl(SpeadCaptureConfig config, StreamCounters& counters)
      : cfg(std::move(config)),
        c(counters),
        // spead2's receiving thread on --capture-core when given.
        pool(1, cfg.capture_core >= 0 ? std::vector<int>{cfg.capture_core} : std::vector<int>{}) {}

  SpeadCaptureConfig cfg;
  StreamCounters& c;
  spead2::thread_pool pool;
  std::unique_ptr<Stream> stream;
  int port = 0;

  // Set once, by the description heap (spead2's thread); read after wait_for_info().
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<spead::StreamDescription> desc;
  std::exception_ptr error;
  std::unique_ptr<BlockRing> ring;
  std::int64_t slices = 0, heaps = 0, bytes_per_sample = 0;

  // The window's bookkeeping (spead2's thread only).
  struct Seen {
    std::vector<std::uint8_t> heap;
    std::int64_t max_slice = -1;
  };
  std::map<std::int64_t, Seen> seen;
  std::set<std::int64_t> dropped;
  std::int64_t placing = -1;  // the chunk of the heap place() is placing
  std::int64_t head = 0;      // blocks before it have been handed over (or dropped)
  std::atomic<bool> stopping{false}, ended{false}, timed_out{false};
  std::atomic<Clock::rep> last_packet{0};
  std::thread watchdog;
  std::atomic<bool> quit{false};
  // A duplicate of the socket spead2 reads, to read the kernel's drop count (SO_MEMINFO):
  // spead2's reader does not ask for SO_RXQ_OVFL, and datagrams dropped in the kernel never
  // reach place(), so without it a whole block lost in the socket buffer went uncounted.
  int kernel_fd = -1;

  ~Impl() {
    if (kernel_fd >= 0) ::close(kernel_fd);
  }

  void read_kernel_drops() {
    if (kernel_fd < 0) return;
    const std::int64_t d = detail::socket_drops(kernel_fd);
    if (d >= 0) c.kernel_drops = d;
  }

  // spead2's own statistics (recv::stream_stats): heaps it discarded before they reached a
  // chunk. Each of our heaps is one packet, so an incomplete heap means a corrupt or foreign
  // packet; too_old_heaps are heaps for chunks already handed over.
  void read_spead_stats() {
    if (!stream) return;
    const spead2::recv::stream_stats st = stream->get_stats();
    const auto get = [&](const char* name) -> std::int64_t {
      const auto it = st.find(name);
      return it == st.end() ? 0 : static_cast<std::int64_t>((*it).second);
    };
    c.spead_heaps = get("heaps");
    c.spead_incomplete_heaps = get("incomplete_heaps_evicted") + get("incomplete_heaps_flushed");
    c.spead_too_old_heaps = get("too_old_heaps");
    c.spead_rejected_heaps = get("rejected_heaps");
  }

  void end() {
    if (ended.exchange(true)) return;
    std::lock_guard lock(mutex);
    if (ring) ring->close();
    cv.notify_all();
  }

  void describe(const std::uint8_t* packet, std::size_t size) {
    spead2::recv::packet_header h{};
    if (spead2::recv::decode_packet(h, packet, size) == 0 || h.payload_offset != 0 ||
        h.payload_length != h.heap_length) {
      ++c.invalid;  // the description must be one whole packet
      return;
    }
    std::lock_guard lock(mutex);
    if (desc || error) return;  // repeated: the first one counts
    try {
      const auto j = nlohmann::json::parse(h.payload, h.payload + h.payload_length);
      spead::StreamDescription d = spead::StreamDescription::from_json(j);
      d.info.source_name = d.info.source_name.empty() ? cfg.listen.to_string() : d.info.source_name;
      slices = d.info.block_samples / d.heap_samples;
      heaps = d.heaps_per_block();
      bytes_per_sample = d.bytes_per_sample();
      ring = std::make_unique<BlockRing>(static_cast<std::size_t>(cfg.ring_blocks),
                                         static_cast<std::size_t>(d.info.block_bytes()),
                                         static_cast<std::size_t>(heaps));
      c.ring_capacity = cfg.ring_blocks;
      desc = d;
      c.streaming = true;
    } catch (const nlohmann::json::exception& e) {
      error = std::make_exception_ptr(
          Error(ErrorCategory::format, fmt::format("{}: the stream's description is not JSON: {}",
                                                   cfg.listen.to_string(), e.what())));
    } catch (...) {
      error = std::current_exception();
    }
    cv.notify_all();
  }

  // The time since the previous packet: the longest such gap and where it ended.
  void note_gap(std::int64_t index, Clock::rep now) {
    const Clock::rep prev = last_packet.exchange(now);
    if (prev == 0) return;
    const std::int64_t gap =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::duration(now - prev)).count();
    if (gap <= c.longest_gap_ns) return;
    c.longest_gap_ns = gap;
    c.longest_gap_at_packet = index;
  }

  void place(spead2::recv::chunk_place_data* d) {
    const std::int64_t index = c.packets++;
    c.bytes += static_cast<std::int64_t>(d->packet_size);
    note_gap(index, Clock::now().time_since_epoch().count());
    const std::int64_t ts = d->items[0], chan = d->items[1], length = d->items[2],
                       flag = d->items[3];
    if (flag == 1) {
      describe(d->packet, d->packet_size);
      return;  // chunk_id stays -1: not data
    }
    if (!desc) {
      ++c.invalid;  // data before the description: its shape is unknown
      return;
    }
    const spead::StreamDescription& s = *desc;
    const std::int64_t t = ts - s.timestamp0;
    if (ts < 0 || chan < 0 || chan >= s.info.nchans || length != s.heap_bytes() ||
        t % s.heap_samples != 0) {
      ++c.invalid;
      return;
    }
    if (t < 0) {
      ++c.late;
      return;
    }
    const std::int64_t chunk = t / s.info.block_samples;
    const std::int64_t slice = (t % s.info.block_samples) / s.heap_samples;
    if (chunk < head) {
      ++c.late;
      return;
    }
    if (dropped.count(chunk)) {
      ++c.dropped_packets;
      return;
    }
    Seen& w = seen[chunk];
    if (w.heap.empty()) w.heap.assign(static_cast<std::size_t>(heaps), 0);
    const std::size_t idx = static_cast<std::size_t>(chan * slices + slice);
    if (w.heap[idx]) {
      ++c.duplicates;
      return;
    }
    w.heap[idx] = 1;
    w.max_slice = std::max(w.max_slice, slice);
    ++c.placed;
    placing = chunk;
    d->chunk_id = chunk;
    d->heap_index = idx;
    d->heap_offset = static_cast<std::size_t>(
        (chan * s.info.block_samples + slice * s.heap_samples) * bytes_per_sample);
  }

  std::unique_ptr<spead2::recv::chunk> allocate(std::int64_t chunk_id) {
    // Chunks before chunk_id - window + 1 have left spead2's window.
    advance_head(chunk_id - cfg.window + 1);
    Block* b = ring ? ring->try_acquire() : nullptr;
    if (!b) {
      dropped.insert(chunk_id);  // the engine is behind: the whole block goes
      ++c.dropped_blocks;
      if (chunk_id == placing) {  // the heap being placed opened it: it goes with the block
        --c.placed;
        ++c.dropped_packets;
      }
      return nullptr;
    }
    c.ring_filled = static_cast<std::int64_t>(ring->filled());
    auto ch = std::make_unique<RingChunk>();
    ch->block = b;
    ch->data = borrow(b->data);
    ch->present = borrow(b->present.data());
    ch->present_size = b->present.size();
    return ch;
  }

  void advance_head(std::int64_t h) {
    if (h <= head) return;
    head = h;
    seen.erase(seen.begin(), seen.lower_bound(head));
    dropped.erase(dropped.begin(), dropped.lower_bound(head));
  }

  void ready(std::unique_ptr<spead2::recv::chunk>&& chunk) {
    auto* rc = static_cast<RingChunk*>(chunk.get());
    Block* b = rc->block;
    const std::int64_t id = rc->chunk_id;
    const auto it = seen.find(id);
    const std::int64_t max_slice = it == seen.end() ? -1 : it->second.max_slice;
    advance_head(id + 1);
    const spead::StreamDescription& s = *desc;
    std::int64_t received = 0;
    for (std::uint8_t p : b->present)
      received += p != 0;
    if (received == 0) {
      // A gap (spead2 back-fills the window): nothing of this block arrived.
      if (!stopping) {
        ++c.empty_blocks;
        c.lost_packets += heaps;
      }
      ring->abandon(b);
      return;
    }
    if (stopping && max_slice < slices - 1) {
      ++c.truncated_blocks;  // the stream ended inside it
      ring->abandon(b);
      return;
    }
    const std::size_t heap_bytes = static_cast<std::size_t>(s.heap_bytes());
    for (std::int64_t idx = 0; idx < heaps; ++idx) {
      if (b->present[static_cast<std::size_t>(idx)]) continue;
      const std::int64_t chan = idx / slices, slice = idx % slices;
      std::memset(
          b->data + (chan * s.info.block_samples + slice * s.heap_samples) * bytes_per_sample, 0,
          heap_bytes);
    }
    b->info.sequence = id;
    b->info.packets_expected = heaps;
    b->info.packets_received = received;
    b->info.first_time = s.timestamp0 + id * s.info.block_samples;
    c.lost_packets += heaps - received;
    c.delivered_packets += received;
    ++c.blocks_delivered;
    ring->publish(b);
    c.ring_filled = static_cast<std::int64_t>(ring->filled());
  }
};

SpeadVoltageCapture::SpeadVoltageCapture(SpeadCaptureConfig config, StreamCounters& counters)
    : impl_((config.validate(), std::make_unique<Impl>(std::move(config), counters))) {
  Impl& m = *impl_;
  if (m.cfg.capture_core >= 0) detail::leave_core(m.cfg.capture_core);
  // The CUDA context now, before the socket is bound: else the ring's first page-locked block
  // would make it on spead2's thread when the description arrives, with the data behind it.
  if (device_count() > 0) device_synchronize();
  namespace asio = boost::asio;
  asio::ip::udp::socket socket(m.pool.get_io_context());
  try {
    const std::string host = m.cfg.listen.host == "localhost" ? "127.0.0.1" : m.cfg.listen.host;
    const asio::ip::udp::endpoint ep(asio::ip::make_address(host),
                                     static_cast<unsigned short>(m.cfg.listen.port));
    socket.open(ep.protocol());
    // Past net.core.rmem_max when the process may (root), as capture tools do.
    m.c.socket_buffer = detail::set_socket_buffer(socket.native_handle(), SO_RCVBUF,
                                                  m.cfg.socket_buffer_mib, m.cfg.listen);
    socket.bind(ep);
    m.port = socket.local_endpoint().port();
  } catch (const std::exception& e) {
    fail(ErrorCategory::io, "cannot listen on {}: {}", m.cfg.listen.to_string(), e.what());
  }
  spead2::recv::chunk_stream_config cc;
  cc.set_items(
      {spead::kTimestamp, spead::kChannel, spead2::HEAP_LENGTH_ID, spead::kDescriptionFlag});
  cc.set_max_chunks(static_cast<std::size_t>(m.cfg.window));
  cc.set_place([&m](spead2::recv::chunk_place_data* d, std::size_t) { m.place(d); });
  cc.set_allocate([&m](std::int64_t id, std::uint64_t*) { return m.allocate(id); });
  cc.set_ready(
      [&m](std::unique_ptr<spead2::recv::chunk>&& ch, std::uint64_t*) { m.ready(std::move(ch)); });
  m.kernel_fd = ::dup(socket.native_handle());
  spead2::recv::stream_config sc;
  sc.set_max_heaps(8);
  m.stream = std::make_unique<Impl::Stream>(m, m.pool, sc, cc);
  // The largest UDP datagram, not spead2's default of 9,200 bytes (a jumbo frame): a sender's
  // larger heaps (--heap-samples) were truncated and rejected, every one of them.
  constexpr std::size_t kMaxDatagram = 65536;
  m.stream->emplace_reader<spead2::recv::udp_reader>(std::move(socket), kMaxDatagram);
  // The watchdog: the kernel's drop count ten times a second, and the idle time-out.
  m.watchdog = std::thread([&m] {
    while (!m.quit && !m.ended) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      m.read_kernel_drops();
      const auto last = m.last_packet.load();
      if (m.cfg.idle_timeout_s <= 0 || last == 0) continue;
      const double idle =
          std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(last))
              .count();
      if (idle > m.cfg.idle_timeout_s && m.desc) {
        m.timed_out = true;
        m.stopping = true;
        m.stream->stop();
        m.end();
      }
    }
  });
}

SpeadVoltageCapture::~SpeadVoltageCapture() {
  stop();
}

bool SpeadVoltageCapture::wait_for_info(double timeout_s,
                                        const std::function<bool()>& stop_requested) {
  Impl& m = *impl_;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(std::max(timeout_s, 0.0)));
  std::unique_lock lock(m.mutex);
  for (;;) {
    if (m.error) std::rethrow_exception(m.error);
    if (m.desc) return true;
    if (m.ended || (stop_requested && stop_requested())) return false;
    if (timeout_s >= 0 && Clock::now() >= until) return false;
    m.cv.wait_for(lock, std::chrono::milliseconds(100));
  }
}

const io::VoltageStreamInfo& SpeadVoltageCapture::info() const {
  return impl_->desc->info;
}

BlockRing& SpeadVoltageCapture::ring() {
  return *impl_->ring;
}

int SpeadVoltageCapture::port() const {
  return impl_->port;
}

bool SpeadVoltageCapture::timed_out() const {
  return impl_->timed_out;
}

std::int64_t SpeadVoltageCapture::heaps_per_block() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->desc ? impl_->heaps : 0;
}

void SpeadVoltageCapture::stop() {
  Impl& m = *impl_;
  m.quit = true;
  if (m.watchdog.joinable()) m.watchdog.join();
  if (m.stream) {
    m.stopping = true;
    m.stream->stop();
    m.read_spead_stats();
  }
  m.read_kernel_drops();
  m.end();
}

#else

bool spead_supported() {
  return false;
}

struct SpeadVoltageCapture::Impl {};

SpeadVoltageCapture::SpeadVoltageCapture(SpeadCaptureConfig, StreamCounters&) {
  fail(ErrorCategory::unsupported,
       "this build has no spead2: SPEAD capture is unavailable (run scripts/build-spead2 and "
       "configure again)");
}
SpeadVoltageCapture::~SpeadVoltageCapture() = default;
bool SpeadVoltageCapture::wait_for_info(double, const std::function<bool()>&) {
  return false;
}
const io::VoltageStreamInfo& SpeadVoltageCapture::info() const {
  fail(ErrorCategory::unsupported, "this build has no spead2");
}
BlockRing& SpeadVoltageCapture::ring() {
  fail(ErrorCategory::unsupported, "this build has no spead2");
}
int SpeadVoltageCapture::port() const {
  return 0;
}
bool SpeadVoltageCapture::timed_out() const {
  return false;
}
std::int64_t SpeadVoltageCapture::heaps_per_block() const {
  return 0;
}
void SpeadVoltageCapture::stop() {}

#endif

}  // namespace warpbeam::stream
