// `warpbeam send tbf FILE udp://127.0.0.1:PORT` and `warpbeam send voltages FILE
// spead://127.0.0.1:PORT`: test and demo senders of live streams, to this machine only
// (warpbeam/stream/send.hpp). --json records what was sent and dropped.
#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/stream/send.hpp"

namespace warpbeam::cli {

namespace {

struct SendOptions {
  std::string in, to, json;
  stream::SendConfig config;
};

void run_send(SendOptions& o, bool tbf) {
  auto& c = o.config;
  c.to = stream::parse_endpoint(o.to, tbf ? "udp" : "spead", "the destination");
  c.validate();
  io::check_outputs({o.json}, {o.in});  // before the work: output_file.hpp's rule
  const stream::SendRecord r = tbf ? stream::send_tbf(o.in, c) : stream::send_voltages(o.in, c);
  fmt::print(stderr,
             "warpbeam send: {} packets of '{}' to {}: {} sent ({} dropped, {} reordered, {} "
             "duplicated), {:.3f} GB in {:.2f} s ({:.3f} GB/s)\n",
             r.packets, o.in, c.to.to_string(), r.sent, r.dropped, r.reordered, r.duplicated,
             r.bytes_sent / 1e9, r.seconds, r.seconds > 0 ? r.bytes_sent / r.seconds / 1e9 : 0.0);
  if (!o.json.empty()) {
    nlohmann::json j = {{"provenance", provenance()},
                        {"input", o.in},
                        {"to", c.to.to_string()},
                        {"kind", tbf ? "tbf" : "voltages"},
                        {"parameters",
                         {{"rate_gbytes_per_s", c.rate_gbytes},
                          {"drop", c.faults.drop},
                          {"reorder", c.faults.reorder},
                          {"duplicate", c.faults.duplicate},
                          {"max_displacement", c.faults.max_displacement},
                          {"seed", c.faults.seed},
                          {"loops", c.loops},
                          {"duration_s", c.duration_s},
                          {"heap_samples", c.heap_samples}}},
                        {"record", r.to_json()}};
    io::write_text_file(o.json, j.dump(2) + "\n");
  }
}

void add_options(CLI::App* cmd, SendOptions& o, bool tbf) {
  cmd->add_option("FILE", o.in, tbf ? "TBF file" : "Voltage file (GUPPI raw or TBF)")->required();
  cmd->add_option(
         "TO", o.to,
         tbf ? "udp://127.0.0.1:PORT (loopback only)" : "spead://127.0.0.1:PORT (loopback only)")
      ->required();
  auto& c = o.config;
  cmd->add_option("--rate", c.rate_gbytes,
                  "GB/s (1e9 bytes of UDP payload per second; 0: as fast as possible)")
      ->capture_default_str();
  cmd->add_option("--drop", c.faults.drop, "Fraction of packets not sent")->capture_default_str();
  cmd->add_option("--reorder", c.faults.reorder,
                  "Fraction of packets sent 1 .. --displacement packets late")
      ->capture_default_str();
  cmd->add_option("--duplicate", c.faults.duplicate, "Fraction of packets sent twice")
      ->capture_default_str();
  cmd->add_option("--displacement", c.faults.max_displacement,
                  "Largest displacement of a reordered or duplicated packet (packets)")
      ->capture_default_str();
  cmd->add_option("--seed", c.faults.seed, "Seed of the faults")->capture_default_str();
  cmd->add_option("--loops", c.loops, "Send the file this many times, time running on")
      ->capture_default_str();
  cmd->add_option("--duration", c.duration_s, "Stop after this many seconds (0: when done)")
      ->capture_default_str();
  cmd->add_option("--heap-samples", c.heap_samples,
                  tbf ? "Spectra read from the file at a time (0: 64)"
                      : "Time samples per heap (0: the largest power of 2 within 8192 bytes)")
      ->capture_default_str();
  cmd->add_option("--json", o.json, "Write the record of what was sent and dropped here");
}

}  // namespace

void add_capture_options(CLI::App& cmd, int& socket_buffer_mib, int& capture_core) {
  cmd.add_option("--socket-buffer", socket_buffer_mib,
                 "--listen: the receive socket's buffer (MiB; the kernel caps it at "
                 "net.core.rmem_max unless root): the capture's slack for pauses")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd.add_option("--capture-core", capture_core,
                 "--listen: run the capture thread on this core alone and keep the engine off "
                 "it (-1: no pinning)")
      ->check(CLI::Range(-1, 1 << 16))
      ->capture_default_str();
}

void add_send_command(CLI::App& app) {
  auto* send = app.add_subcommand("send", "Send a file as a live stream to this machine (tests)");
  send->require_subcommand(1);
  auto t = std::make_shared<SendOptions>();
  auto* tbf = send->add_subcommand("tbf", "A TBF file as UDP datagrams, one frame each");
  add_options(tbf, *t, true);
  tbf->callback([t] { run_send(*t, true); });
  auto v = std::make_shared<SendOptions>();
  auto* volt = send->add_subcommand("voltages", "A voltage file as SPEAD heaps (spead2)");
  add_options(volt, *v, false);
  volt->callback([v] { run_send(*v, false); });
}

}  // namespace warpbeam::cli
