#pragma once
// Test and demo senders of live streams, to loopback addresses only (127.0.0.0/8, ::1): a TBF
// file as UDP datagrams (one frame each), a voltage file as SPEAD heaps through spead2's sender.
// Both pace to a rate and can drop, reorder and duplicate packets at random (a seeded
// generator), recording exactly what they did, so that a test can compare a receiver's counts
// with the truth.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

/// Faults a sender injects, each an independent fraction of the packets.
struct Faults {
  double drop = 0;       ///< not sent
  double reorder = 0;    ///< held back and sent 1 .. max_displacement packets later
  double duplicate = 0;  ///< sent twice (the copy 1 .. max_displacement packets later)
  int max_displacement = 8;
  std::uint64_t seed = 1;
  void validate() const;  ///< fractions in [0, 0.5], displacement 1 .. 1024
};

struct SendConfig {
  Endpoint to;             ///< must be loopback
  double rate_gbytes = 0;  ///< GB/s (1e9 bytes of UDP payload per s); 0: as fast as possible
  Faults faults;
  /// Repeat the file this many times with time continuing (time tags / timestamps advance), for
  /// runs longer than the file (1: once).
  int loops = 1;
  double duration_s = 0;  ///< stop after this long (0: when the loops are done)
  /// TBF: spectra per batch read from the file. SPEAD: samples per heap (0: the largest power
  /// of 2 whose heap fits 8192 bytes of payload).
  std::int64_t heap_samples = 0;
  void validate() const;
};

/// What a sender did.
struct SendRecord {
  std::int64_t packets = 0;  ///< of the file (or loops), before faults
  std::int64_t sent = 0;     ///< datagrams sent (duplicates included)
  std::int64_t dropped = 0, reordered = 0, duplicated = 0;
  std::int64_t bytes_sent = 0;  ///< UDP payload
  std::int64_t blocks = 0;      ///< SPEAD: voltage blocks of the file sent; TBF: spectra
  double seconds = 0;
  /// The dropped packets: TBF (time tag, first channel); SPEAD (timestamp, channel).
  std::vector<std::pair<std::int64_t, std::int64_t>> dropped_packets;
  nlohmann::json to_json() const;
};

/// Sends the complete spectra of a TBF file (TbfReader) to cfg.to, frame by frame in file
/// order. Throws invalid_argument for a non-loopback address or bad settings, as TbfReader for
/// the file, io when sending fails.
SendRecord send_tbf(const std::string& path, const SendConfig& cfg);

/// Sends a voltage file (io::open_voltage_file) as SPEAD heaps (stream/spead.hpp): the
/// description heap, every whole block's heaps (one channel x heap_samples each), and a stop
/// heap. Throws unsupported without spead2, otherwise as send_tbf.
SendRecord send_voltages(const std::string& path, const SendConfig& cfg);

}  // namespace warpbeam::stream
