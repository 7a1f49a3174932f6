// The counters of a live run, their rates and the once-a-second status line.
#include <fmt/format.h>

#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

nlohmann::json StreamCounters::to_json() const {
  return {{"packets", packets.load()},
          {"bytes", bytes.load()},
          {"placed_packets", placed.load()},
          {"duplicate_packets", duplicates.load()},
          {"late_packets", late.load()},
          {"invalid_packets", invalid.load()},
          {"lost_packets", lost_packets.load()},
          {"delivered_packets", delivered_packets.load()},
          {"blocks_delivered", blocks_delivered.load()},
          {"dropped_blocks", dropped_blocks.load()},
          {"dropped_block_packets", dropped_packets.load()},
          {"empty_blocks", empty_blocks.load()},
          {"truncated_blocks", truncated_blocks.load()},
          {"kernel_dropped_packets", kernel_drops.load()},
          {"socket_buffer_bytes", socket_buffer.load()},
          {"spead_heaps", spead_heaps.load()},
          {"spead_incomplete_heaps", spead_incomplete_heaps.load()},
          {"spead_too_old_heaps", spead_too_old_heaps.load()},
          {"spead_rejected_heaps", spead_rejected_heaps.load()},
          {"capture_place_seconds", static_cast<double>(capture_place_ns.load()) * 1e-9},
          {"longest_receive_gap_seconds", static_cast<double>(longest_gap_ns.load()) * 1e-9},
          {"longest_receive_gap_at_packet", longest_gap_at_packet.load()},
          {"blocks_processed", blocks_processed.load()},
          {"bytes_processed", bytes_processed.load()},
          {"images", images.load()},
          {"candidates", candidates.load()},
          {"ring_filled", ring_filled.load()},
          {"ring_blocks", ring_capacity.load()}};
}

void RateMeter::update(const StreamCounters& c) {
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::chrono::duration<double>(now - at).count();
  const std::int64_t in = c.bytes.load(), done = c.bytes_processed.load();
  if (dt > 0) {
    in_bytes_per_s = static_cast<double>(in - bytes_in) / dt;
    done_bytes_per_s = static_cast<double>(done - bytes_done) / dt;
  }
  bytes_in = in;
  bytes_done = done;
  at = now;
}

StatusLine::StatusLine(const StreamCounters& c, std::string label, std::FILE* out, double period_s)
    : c_(c), label_(std::move(label)), out_(out), period_s_(period_s) {
  meter_.update(c_);
  thread_ = std::thread([this] { loop(); });
}

StatusLine::~StatusLine() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

RateMeter StatusLine::rates() const {
  std::lock_guard lock(mutex_);
  return meter_;
}

void StatusLine::loop() {
  std::unique_lock lock(mutex_);
  const auto period = std::chrono::duration<double>(period_s_);
  while (!cv_.wait_for(lock, period, [&] { return stop_; })) {
    meter_.update(c_);
    if (!out_) continue;
    // One line per second (not redrawn): an unattended run's log keeps every one. A stream that
    // cannot be written (a closed pipe: EPIPE) ends the line, not the process: an exception leaving
    // this thread would terminate it before the run's clean-up.
    try {
      print_line();
    } catch (const std::exception&) {
      out_ = nullptr;
    }
  }
}

// Before the first packet there is no ring yet (a SPEAD capture sizes it from the stream's
// description): the line says what the run waits for rather than "ring 0/0".
void StatusLine::print_line() const {
  if (c_.packets.load() == 0 && c_.ring_capacity.load() == 0) {
    fmt::print(out_, "{}: waiting for the stream (no packet yet)\n", label_);
    std::fflush(out_);
    return;
  }
  fmt::print(out_,
             "{}: in {:.3f} GB/s, processed {:.3f} GB/s, ring {}/{}, {} packets ({} lost, {} "
             "late, {} dup), {} blocks ({} dropped)\n",
             label_, meter_.in_bytes_per_s / 1e9, meter_.done_bytes_per_s / 1e9,
             c_.ring_filled.load(), c_.ring_capacity.load(), c_.packets.load(),
             c_.lost_packets.load(), c_.late.load(), c_.duplicates.load(),
             c_.blocks_processed.load(), c_.dropped_blocks.load());
  std::fflush(out_);
}

}  // namespace warpbeam::stream
