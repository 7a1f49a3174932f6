#pragma once
// Monitoring of a live run over HTTP (cpp-httplib): Prometheus text at /metrics (the exposition
// format 0.0.4: "# HELP", "# TYPE", "name value" lines), the counters as JSON at /status.json,
// the latest EPIC image at /latest.png and a small live page at / that reads /status.json once
// a second (rates, losses, the latest candidates, the latest image).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

/// What the page shows besides the counters: the run's name, its latest candidates and image.
/// Thread-safe.
class StatusBoard {
 public:
  explicit StatusBoard(std::string title) : title_(std::move(title)) {}
  /// Adds candidate lines (newest last; the board keeps the latest 20).
  void add_candidates(const std::vector<nlohmann::json>& c);
  /// The latest image's PNG file (served at /latest.png) and its caption.
  void set_image(const std::string& png_path, const std::string& caption);
  nlohmann::json to_json() const;
  std::string image_path() const;
  const std::string& title() const { return title_; }

 private:
  std::string title_;
  mutable std::mutex mutex_;
  std::vector<nlohmann::json> candidates_;
  std::string png_, caption_;
};

/// Prometheus text of the counters: warpbeam_stream_* counters and gauges.
std::string prometheus_text(const StreamCounters& c, const RateMeter& rates);

/// True when this build has cpp-httplib (--http).
bool http_supported();

/// Serves the page on its own thread from construction to destruction. Throws unsupported
/// without cpp-httplib, invalid_argument for a non-loopback address (the page has no access
/// control), io when the port cannot be bound.
class StatusServer {
 public:
  StatusServer(const Endpoint& at, const StreamCounters& counters, const StatusLine* rates,
               const StatusBoard& board);
  ~StatusServer();
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;
  int port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Parses "--http 127.0.0.1:PORT" (or http://127.0.0.1:PORT); throws invalid_argument.
Endpoint parse_http_address(const std::string& s);

}  // namespace warpbeam::stream
