// StatusBoard and the Prometheus text of the counters (warpbeam/stream/status.hpp).
#include <fmt/format.h>

#include "warpbeam/stream/status.hpp"

namespace warpbeam::stream {

void StatusBoard::add_candidates(const std::vector<nlohmann::json>& c) {
  std::lock_guard lock(mutex_);
  candidates_.insert(candidates_.end(), c.begin(), c.end());
  constexpr std::size_t kKeep = 20;
  if (candidates_.size() > kKeep)
    candidates_.erase(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(
                                                                     candidates_.size() - kKeep));
}

void StatusBoard::set_image(const std::string& png_path, const std::string& caption) {
  std::lock_guard lock(mutex_);
  png_ = png_path;
  caption_ = caption;
}

nlohmann::json StatusBoard::to_json() const {
  std::lock_guard lock(mutex_);
  return {{"title", title_},
          {"candidates", candidates_},
          {"image", png_.empty() ? nlohmann::json(nullptr) : nlohmann::json(caption_)}};
}

std::string StatusBoard::image_path() const {
  std::lock_guard lock(mutex_);
  return png_;
}

std::string prometheus_text(const StreamCounters& c, const RateMeter& rates) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP warpbeam_stream_{} {}\n# TYPE warpbeam_stream_{} {}\n", name, help,
                       name, type);
    out += fmt::format("warpbeam_stream_{} {}\n", name, value);
  };
  auto counter = [&](const char* name, const char* help, const std::atomic<std::int64_t>& v) {
    metric(name, "counter", help, static_cast<double>(v.load()));
  };
  counter("packets_total", "Packets (datagrams, heaps) received, valid or not.", c.packets);
  counter("bytes_total", "Bytes received (UDP payload).", c.bytes);
  counter("placed_packets_total", "Packets placed into a block.", c.placed);
  counter("lost_packets_total", "Packets missing from delivered blocks (zero-filled).",
          c.lost_packets);
  counter("duplicate_packets_total", "Packets received twice (ignored).", c.duplicates);
  counter("late_packets_total", "Packets for a block already handed over (ignored).", c.late);
  counter("invalid_packets_total", "Packets not of this stream (ignored).", c.invalid);
  counter("kernel_dropped_packets_total", "Packets the kernel dropped (socket buffer full).",
          c.kernel_drops);
  counter("blocks_delivered_total", "Blocks handed to the engine.", c.blocks_delivered);
  counter("dropped_blocks_total", "Blocks dropped because the ring was full.", c.dropped_blocks);
  counter("empty_blocks_total", "Blocks of which no packet arrived (a gap).", c.empty_blocks);
  counter("blocks_processed_total", "Blocks the engine finished.", c.blocks_processed);
  counter("bytes_processed_total", "Bytes of blocks the engine finished.", c.bytes_processed);
  counter("images_total", "Images written.", c.images);
  counter("candidates_total", "Candidates written.", c.candidates);
  metric("ring_filled_blocks", "gauge", "Blocks of the ring in use.",
         static_cast<double>(c.ring_filled.load()));
  metric("ring_blocks", "gauge", "Blocks in the ring.",
         static_cast<double>(c.ring_capacity.load()));
  metric("rate_in_bytes_per_second", "gauge", "Rate received over the last second.",
         rates.in_bytes_per_s);
  metric("rate_processed_bytes_per_second", "gauge", "Rate processed over the last second.",
         rates.done_bytes_per_s);
  return out;
}

Endpoint parse_http_address(const std::string& s) {
  std::string a = s;
  if (a.rfind("http://", 0) != 0) a = "http://" + a;
  while (!a.empty() && a.back() == '/')
    a.pop_back();
  return parse_endpoint(a, "http", "--http", true);
}

}  // namespace warpbeam::stream
