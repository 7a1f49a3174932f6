// StatusServer: /metrics, /status.json, /latest.png and the live page, with cpp-httplib.
#include "warpbeam/format.hpp"
#include "warpbeam/stream/status.hpp"

#ifdef WARPBEAM_HAVE_HTTPLIB
#include <httplib.h>

#include <fstream>
#include <sstream>
#include <thread>
#endif

namespace warpbeam::stream {

#ifdef WARPBEAM_HAVE_HTTPLIB

namespace {

// The page: the counters are filled in (and refreshed once a second) from /status.json by the
// script, so what a browser shows is live, never the values of the moment the page was served.
constexpr const char* kPage = R"(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>warpbeam live</title>
<style>
body { font-family: sans-serif; margin: 1.5em; background: #fafafa; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; }
td.v { text-align: right; font-family: monospace; }
.bad { color: #b00; } #img { max-width: 384px; image-rendering: pixelated; }
</style></head><body>
<h1 id="title">warpbeam live</h1>
<p>Updated <span id="updated">never</span> (<span id="state">waiting for the first update</span>)</p>
<table>
<tr><th>rate in</th><td class="v" id="rate_in">-</td><td>GB/s</td></tr>
<tr><th>rate processed</th><td class="v" id="rate_done">-</td><td>GB/s</td></tr>
<tr><th>ring</th><td class="v" id="ring">-</td><td>blocks in use</td></tr>
<tr><th>packets</th><td class="v" id="packets">-</td><td>received</td></tr>
<tr><th>lost packets</th><td class="v" id="lost_packets">-</td><td>zero-filled</td></tr>
<tr><th>late / duplicate / invalid</th><td class="v" id="odd">-</td><td>ignored</td></tr>
<tr><th>blocks processed</th><td class="v" id="blocks_processed">-</td><td></td></tr>
<tr><th>dropped blocks</th><td class="v" id="dropped_blocks">-</td><td>ring full</td></tr>
<tr><th>images</th><td class="v" id="images">-</td><td></td></tr>
<tr><th>candidates</th><td class="v" id="candidates">-</td><td></td></tr>
</table>
<h2>Latest candidates</h2><table id="cands"><tr><td>none yet</td></tr></table>
<h2>Latest image</h2><p id="caption">none yet</p><img id="img" alt="">
<script>
function set(id, v) { document.getElementById(id).textContent = v; }
async function tick() {
  try {
    const s = await (await fetch('status.json', {cache: 'no-store'})).json();
    const c = s.counters;
    set('title', s.board.title);
    set('rate_in', (s.rates.in_bytes_per_s / 1e9).toFixed(3));
    set('rate_done', (s.rates.processed_bytes_per_s / 1e9).toFixed(3));
    set('ring', c.ring_filled + ' / ' + c.ring_blocks);
    for (const k of ['packets', 'lost_packets', 'blocks_processed', 'dropped_blocks', 'images',
                     'candidates']) set(k, c[k]);
    set('odd', c.late_packets + ' / ' + c.duplicate_packets + ' / ' + c.invalid_packets);
    document.getElementById('lost_packets').className = c.lost_packets ? 'v bad' : 'v';
    document.getElementById('dropped_blocks').className = c.dropped_blocks ? 'v bad' : 'v';
    const rows = s.board.candidates.slice().reverse().map(x =>
      '<tr>' + Object.entries(x).map(([k, v]) => '<td>' + k + ' ' + v + '</td>').join('') + '</tr>');
    if (rows.length) document.getElementById('cands').innerHTML = rows.join('');
    if (s.board.image) {
      set('caption', s.board.image);
      document.getElementById('img').src = 'latest.png?n=' + c.images;
    }
    set('updated', new Date().toISOString());
    set('state', 'live');
  } catch (e) { set('state', 'no answer: ' + e); }
}
tick(); setInterval(tick, 1000);
</script></body></html>
)";

}  // namespace

struct StatusServer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
};

StatusServer::StatusServer(const Endpoint& at, const StreamCounters& counters,
                           const StatusLine* rates, const StatusBoard& board)
    : impl_(std::make_unique<Impl>()) {
  if (!at.is_loopback())
    fail(ErrorCategory::invalid_argument,
         "--http {}: the status page has no access control: serve it on a loopback address "
         "(127.0.0.1; reach it from elsewhere through an SSH tunnel)",
         at.to_string());
  auto current_rates = [rates, &counters] {
    if (rates) return rates->rates();
    RateMeter m;
    m.update(counters);
    return m;
  };
  auto& s = impl_->server;
  s.Get("/metrics", [&counters, current_rates](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(counters, current_rates()), "text/plain; version=0.0.4");
  });
  s.Get("/status.json", [&counters, &board, current_rates](const httplib::Request&,
                                                           httplib::Response& res) {
    const RateMeter r = current_rates();
    const nlohmann::json j = {
        {"counters", counters.to_json()},
        {"rates",
         {{"in_bytes_per_s", r.in_bytes_per_s}, {"processed_bytes_per_s", r.done_bytes_per_s}}},
        {"board", board.to_json()}};
    res.set_header("Cache-Control", "no-store");
    res.set_content(j.dump(), "application/json");
  });
  s.Get("/latest.png", [&board](const httplib::Request&, httplib::Response& res) {
    std::ifstream f(board.image_path(), std::ios::binary);
    if (!f) {
      res.status = 404;
      return;
    }
    std::stringstream b;
    b << f.rdbuf();
    res.set_header("Cache-Control", "no-store");
    res.set_content(b.str(), "image/png");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kPage, "text/html; charset=utf-8");
  });
  const std::string host = at.host == "localhost" ? "127.0.0.1" : at.host;
  if (at.port == 0) {
    impl_->port = s.bind_to_any_port(host.c_str());
    if (impl_->port < 0) fail(ErrorCategory::io, "--http {}: cannot bind a port", at.to_string());
  } else {
    if (!s.bind_to_port(host.c_str(), at.port))
      fail(ErrorCategory::io, "--http {}: cannot bind the port (in use?)", at.to_string());
    impl_->port = at.port;
  }
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

StatusServer::~StatusServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int StatusServer::port() const {
  return impl_->port;
}

bool http_supported() {
  return true;
}

#else

struct StatusServer::Impl {};

StatusServer::StatusServer(const Endpoint&, const StreamCounters&, const StatusLine*,
                           const StatusBoard&) {
  fail(ErrorCategory::unsupported, "this build has no cpp-httplib: --http is unavailable");
}
StatusServer::~StatusServer() = default;
int StatusServer::port() const {
  return 0;
}
bool http_supported() {
  return false;
}

#endif

}  // namespace warpbeam::stream
