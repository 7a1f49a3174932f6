// TbfCapture: LWA TBF frames over UDP (one frame per datagram) into a BlockRing, each frame
// placed by its time tag and first channel (warpbeam/stream/capture.hpp).
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "stream/udp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/stream/capture.hpp"

namespace warpbeam::stream {

void TbfStreamConfig::validate() const {
  if (nchan <= 0 || nchan % io::kTbfChannelsPerFrame != 0)
    fail(ErrorCategory::invalid_argument,
         "the stream's channel count {} must be a positive multiple of {}", nchan,
         io::kTbfChannelsPerFrame);
  require_range("the stream's first channel", first_chan, 0, 32767 - nchan);
  require_range("--stands", nstand, 1, 4096);
  require_range("spectra per block (--gulp)", spectra_per_block, std::int64_t{1},
                std::int64_t{1} << 24);
  require_range("--ring-blocks", ring_blocks, 2, 1 << 16);
  require_range("the capture window", window, 1, 64);
  if (window >= ring_blocks)
    fail(ErrorCategory::invalid_argument,
         "--ring-blocks {} must exceed the capture's window of {} open blocks", ring_blocks,
         window);
  require_range("--socket-buffer (MiB)", socket_buffer_mib, 1, 1024);  // SO_RCVBUF is an int
  require_range("--idle-timeout", idle_timeout_s, 0.0, 1e9);
  require_range("the settle count", settle_packets, 1, 1 << 20);
  if (capture_core != -1) detail::require_core(capture_core);
}

namespace {

// One block of the capture's window.
struct Slot {
  Block* block = nullptr;
  bool dropped = false;     // the ring was full when its first packet came
  std::int64_t max_t = -1;  // the latest spectrum (within the block) with a packet
};

// The placement state: the stream's origin, the window of open blocks and the counters. The
// per-packet counts are tallied here and published once per batch (publish()), so that a packet
// costs no atomic read-modify-write.
class Placer {
 public:
  Placer(const TbfStreamConfig& cfg, BlockRing& ring, StreamCounters& c)
      : cfg_(cfg),
        ring_(ring),
        c_(c),
        nblk_(cfg.frames_per_spectrum()),
        row_(static_cast<std::size_t>(cfg.nstand) * 2),
        frame_bytes_(static_cast<std::size_t>(io::tbf_frame_bytes(cfg.nstand))) {}

  void start(std::int64_t tag0) { tag0_ = tag0; }

  // Checks a datagram's header; its time tag or -1 when it is not a frame of this stream.
  std::int64_t check(const std::uint8_t* p, std::size_t len, int* block_index) const {
    if (len != frame_bytes_) return -1;
    const io::TbfFrameHeader h = io::decode_tbf_header(p);
    if (h.sync_word != io::kTbfSyncWord || h.id != io::kTbfId || h.nstand != cfg_.nstand) return -1;
    const int off = h.first_chan - cfg_.first_chan;
    if (off < 0 || off % io::kTbfChannelsPerFrame != 0 || off / io::kTbfChannelsPerFrame >= nblk_ ||
        h.time_tag < 0)
      return -1;
    *block_index = off / io::kTbfChannelsPerFrame;
    return h.time_tag;
  }

  void place(const std::uint8_t* p, std::size_t len) {
    int b = 0;
    const std::int64_t tag = check(p, len, &b);
    if (tag < 0 || (tag - tag0_) % io::kTbfTicksPerSpectrum != 0) {
      ++n_.invalid;
      return;
    }
    if (tag < tag0_) {  // before the stream's first spectrum
      ++n_.late;
      return;
    }
    const std::int64_t s = (tag - tag0_) / io::kTbfTicksPerSpectrum;
    const std::int64_t seq = s / cfg_.spectra_per_block, t = s % cfg_.spectra_per_block;
    if (seq < base_) {
      ++n_.late;
      return;
    }
    advance_to(seq);
    Slot& slot = slots_[static_cast<std::size_t>(seq - base_)];
    if (!slot.block && !slot.dropped) open(slot);
    if (slot.dropped) {
      ++n_.dropped;
      return;
    }
    const std::size_t idx = static_cast<std::size_t>(t * nblk_ + b);
    if (slot.block->present[idx]) {
      ++n_.duplicates;
      return;
    }
    slot.block->present[idx] = 1;
    ++slot.block->info.packets_received;
    slot.max_t = std::max(slot.max_t, t);
    const std::uint8_t* payload = p + io::kTbfHeaderBytes;
    for (int k = 0; k < io::kTbfChannelsPerFrame; ++k) {
      const std::size_t c = static_cast<std::size_t>(b) * io::kTbfChannelsPerFrame + k;
      std::memcpy(slot.block->data + (c * cfg_.spectra_per_block + t) * row_, payload + k * row_,
                  row_);
    }
    ++n_.placed;
  }

  // Adds the packets' counts since the last call to the shared counters.
  void publish() {
    c_.invalid += n_.invalid;
    c_.late += n_.late;
    c_.dropped_packets += n_.dropped;
    c_.duplicates += n_.duplicates;
    c_.placed += n_.placed;
    n_ = {};
  }

  // The end of the stream (or stop): every open block is handed over or discarded.
  void finish() {
    while (!slots_.empty())
      close_front(true);
    publish();
  }

 private:
  // Makes seq part of the window: blocks that fall out of it are handed over.
  void advance_to(std::int64_t seq) {
    const std::int64_t w = cfg_.window;
    if (seq < base_ + w) {
      while (static_cast<std::int64_t>(slots_.size()) <= seq - base_)
        slots_.emplace_back();
      return;
    }
    const std::int64_t new_base = seq - w + 1;
    while (!slots_.empty() && base_ < new_base)
      close_front(false);
    if (base_ < new_base) {
      // Blocks no packet of which arrived (a gap in the stream): counted, not handed over.
      const std::int64_t skipped = new_base - base_;
      c_.empty_blocks += skipped;
      c_.lost_packets += skipped * cfg_.packets_per_block();
      base_ = new_base;
    }
    while (static_cast<std::int64_t>(slots_.size()) <= seq - base_)
      slots_.emplace_back();
  }

  void open(Slot& slot) {
    slot.block = ring_.try_acquire();
    if (!slot.block) {
      // The engine is behind: the whole block is dropped (never wait on the socket).
      slot.dropped = true;
      ++c_.dropped_blocks;
    }
    c_.ring_filled = static_cast<std::int64_t>(ring_.filled());
  }

  void close_front(bool at_end) {
    Slot slot = slots_.front();
    slots_.pop_front();
    const std::int64_t seq = base_++;
    if (slot.dropped) return;
    if (!slot.block) {
      if (!at_end) {
        ++c_.empty_blocks;
        c_.lost_packets += cfg_.packets_per_block();
      }
      return;
    }
    Block* b = slot.block;
    if (at_end && slot.max_t < cfg_.spectra_per_block - 1) {
      // The stream ended inside this block: like a file's spectra after its last whole gulp,
      // it is not imaged (and its missing spectra are not counted as lost).
      ++c_.truncated_blocks;
      ring_.abandon(b);
      return;
    }
    // Zero the missing frames' rows (the block's memory holds an older block's data).
    for (std::size_t idx = 0; idx < b->present.size(); ++idx) {
      if (b->present[idx]) continue;
      const std::int64_t t = static_cast<std::int64_t>(idx) / nblk_;
      const std::int64_t blk = static_cast<std::int64_t>(idx) % nblk_;
      for (int k = 0; k < io::kTbfChannelsPerFrame; ++k) {
        const std::size_t c = static_cast<std::size_t>(blk) * io::kTbfChannelsPerFrame + k;
        std::memset(b->data + (c * cfg_.spectra_per_block + t) * row_, 0, row_);
      }
    }
    b->info.sequence = seq;
    b->info.packets_expected = cfg_.packets_per_block();
    b->info.first_time = tag0_ + seq * cfg_.spectra_per_block * io::kTbfTicksPerSpectrum;
    c_.lost_packets += b->info.lost_packets();
    ++c_.blocks_delivered;
    ring_.publish(b);
    c_.ring_filled = static_cast<std::int64_t>(ring_.filled());
  }

  const TbfStreamConfig& cfg_;
  BlockRing& ring_;
  StreamCounters& c_;
  const std::int64_t nblk_;
  const std::size_t row_, frame_bytes_;
  std::int64_t tag0_ = 0, base_ = 0;
  std::deque<Slot> slots_;
  struct {
    std::int64_t invalid = 0, late = 0, dropped = 0, duplicates = 0, placed = 0;
  } n_;
};

}  // namespace

TbfCapture::TbfCapture(TbfStreamConfig config, StreamCounters& counters)
    : cfg_(std::move(config)), c_(counters) {
  cfg_.validate();
  ring_ =
      std::make_unique<BlockRing>(static_cast<std::size_t>(cfg_.ring_blocks), cfg_.block_bytes(),
                                  static_cast<std::size_t>(cfg_.packets_per_block()));
  c_.ring_capacity = cfg_.ring_blocks;
  std::int64_t granted = 0;
  fd_ = detail::bind_udp(cfg_.listen, cfg_.socket_buffer_mib, &port_, &granted);
  c_.socket_buffer = granted;
  // UDP GRO (Linux >= 5.0): the kernel may hand over runs of datagrams of one size as one
  // message (a NIC's receive offload, or a sender's segmentation offload on loopback, as
  // `warpbeam send` uses): one socket-buffer entry and one copy per run instead of per frame.
  // run() splits each message at the size the kernel reports. Where it is refused, one datagram
  // per message, as before.
  int one = 1;
  (void)setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &one, sizeof one);
  thread_ = std::thread([this] { run(); });
  if (cfg_.capture_core >= 0) detail::leave_core(cfg_.capture_core);
}

TbfCapture::~TbfCapture() {
  stop();
  if (fd_ >= 0) ::close(fd_);
}

void TbfCapture::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void TbfCapture::run() {
  using Clock = std::chrono::steady_clock;
  if (cfg_.capture_core >= 0 && !detail::pin_this_thread(cfg_.capture_core))
    warnf("--capture-core {}: the capture thread could not be pinned", cfg_.capture_core);
  constexpr int kBatch = 64;
  // A slot holds the largest UDP message, a GRO run of datagrams (at most 65,507 bytes).
  constexpr std::size_t slot_bytes = 65536;
  std::vector<std::uint8_t> buf(slot_bytes * kBatch);
  std::vector<iovec> iov(kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  // SO_RXQ_OVFL's drop count and UDP_GRO's datagram size.
  constexpr std::size_t kControl = CMSG_SPACE(sizeof(std::uint32_t)) + CMSG_SPACE(sizeof(int));
  std::vector<std::uint8_t> control(kControl * kBatch);
  Placer placer(cfg_, *ring_, c_);
  bool started = false;
  std::vector<std::vector<std::uint8_t>> pending;  // before the start is known
  Clock::time_point first_at{}, last_at{};

  auto start = [&] {
    // The stream's first spectrum: the earliest time tag among the first packets (the very
    // first datagram may be a reordered later one).
    std::int64_t tag0 = -1;
    for (const auto& p : pending) {
      int b = 0;
      const std::int64_t tag = placer.check(p.data(), p.size(), &b);
      if (tag >= 0 && (tag0 < 0 || tag < tag0)) tag0 = tag;
    }
    placer.start(tag0);
    tag0_ = tag0;
    started = true;
    c_.streaming = true;
    for (const auto& p : pending)
      placer.place(p.data(), p.size());
    placer.publish();
    pending.clear();
  };

  while (!stop_) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {buf.data() + i * slot_bytes, slot_bytes};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = control.data() + i * kControl;
      msgs[i].msg_hdr.msg_controllen = kControl;
    }
    const int n = ::recvmmsg(fd_, msgs.data(), kBatch, MSG_WAITFORONE, nullptr);
    const auto now = Clock::now();
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        warnf("{}: receive failed: {}: the capture stops", cfg_.listen.to_string(),
              std::strerror(errno));
        break;
      }
    }
    std::int64_t bytes = 0, datagrams = 0;
    std::uint32_t drops = 0;
    bool have_drops = false;
    const auto take = [&](const std::uint8_t* p, std::size_t len) {
      ++datagrams;
      if (started) {
        placer.place(p, len);
        return;
      }
      int b = 0;
      if (placer.check(p, len, &b) < 0) {
        ++c_.invalid;
        return;
      }
      if (pending.empty()) first_at = now;
      pending.emplace_back(p, p + len);
    };
    for (int i = 0; i < n; ++i) {
      const std::uint8_t* p = buf.data() + i * slot_bytes;
      const std::size_t len = msgs[i].msg_len;
      bytes += static_cast<std::int64_t>(len);
      int segment = 0;  // a GRO run's datagram size; 0: one datagram
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
           cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
          std::memcpy(&drops, CMSG_DATA(cm), sizeof drops);  // the socket's running total
          have_drops = true;
        }
        if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO)
          std::memcpy(&segment, CMSG_DATA(cm), sizeof segment);
      }
      last_at = now;
      if (segment <= 0) {
        take(p, len);
        continue;
      }
      const auto seg = static_cast<std::size_t>(segment);
      for (std::size_t off = 0; off < len; off += seg)
        take(p + off, std::min(seg, len - off));
    }
    if (n > 0) {
      placer.publish();
      c_.packets += datagrams;
      c_.bytes += bytes;
      if (have_drops) c_.kernel_drops = drops;
      c_.capture_place_ns +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - now).count();
    }
    if (!started && !pending.empty() &&
        (static_cast<int>(pending.size()) >= cfg_.settle_packets ||
         now - first_at > std::chrono::milliseconds(50)))
      start();
    if (started && cfg_.idle_timeout_s > 0 &&
        std::chrono::duration<double>(now - last_at).count() > cfg_.idle_timeout_s)
      break;  // the end of the stream
  }
  if (!started && !pending.empty()) start();
  // Drops after the last datagram received reach no SO_RXQ_OVFL message: ask the socket.
  const std::int64_t drops = detail::socket_drops(fd_);
  if (drops > c_.kernel_drops) c_.kernel_drops = drops;
  placer.finish();
  ring_->close();
}

}  // namespace warpbeam::stream
