#pragma once
// Captures of live streams into a BlockRing (warpbeam/stream.hpp):
// - TbfCapture: LWA TBF frames over UDP, one frame per datagram (io/lwa.hpp describes the
//   frame), received with recvmmsg; a block is `spectra_per_block` spectra of every channel,
//   ci4 [chan][time][stand][pol] (what EpicPlan::execute takes).
// - SpeadVoltageCapture: channelised voltages as SPEAD heaps through spead2's chunking receiver
//   (stream/spead.hpp describes the heaps); a block is the pipeline's voltage block,
//   [chan][time][antenna][pol].
// Both place each packet by its time and channel, so reordered and duplicate packets are
// harmless; a block is handed over once packets of `window` newer blocks have arrived (or at
// the end), its missing packets zero-filled and counted.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "warpbeam/io/voltages.hpp"
#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

/// The shape of a TBF stream (the F-engine's configuration, which the frames do not carry
/// whole: each frame holds 12 channels of one spectrum).
struct TbfStreamConfig {
  Endpoint listen;                        ///< udp://HOST:PORT to bind
  int first_chan = 2348;                  ///< channel number of the stream's first channel
  int nchan = 132;                        ///< channels, a multiple of 12
  int nstand = 256;                       ///< stands per frame
  std::int64_t spectra_per_block = 1000;  ///< spectra per block (the engine's gulp)
  int ring_blocks = 8;                    ///< blocks in the ring
  int window = 2;                         ///< blocks open at once for late (reordered) packets
  /// SO_RCVBUF asked for (the kernel may cap it at net.core.rmem_max unless root). 6.2 kB
  /// frames take ~9 kB of it each, so 256 MiB holds ~0.1 s of the E1 stream (270k frames/s):
  /// the longest pause of the capture thread the stream survives.
  int socket_buffer_mib = 256;
  /// Core the capture thread runs on (-1: wherever the process may run). The constructor then
  /// takes that core out of the calling (engine) thread's affinity, so that the engine and the
  /// threads it starts later leave the capture its core.
  int capture_core = -1;
  /// The stream ends after this long without a packet once it has started (0: never; a TBF
  /// stream has no end marker).
  double idle_timeout_s = 0;
  /// Packets held before the first block is placed, to find the stream's first spectrum when
  /// the first packets arrive out of order: its start is the earliest of them.
  int settle_packets = 256;
  /// Throws invalid_argument naming the field.
  void validate() const;
  std::int64_t frames_per_spectrum() const { return nchan / 12; }
  std::int64_t packets_per_block() const { return spectra_per_block * frames_per_spectrum(); }
  std::size_t block_bytes() const {
    return static_cast<std::size_t>(nchan) * static_cast<std::size_t>(spectra_per_block) *
           static_cast<std::size_t>(nstand) * 2;
  }
};

/// Receives a TBF stream on its own thread until stop() or the end of the stream. The socket is
/// bound by the constructor (throws io when it cannot be), so a sender may start as soon as it
/// returns. Frames of another stand count, an unknown channel block, a time tag off the
/// 7840-tick grid or a bad sync word are counted as invalid and ignored.
class TbfCapture {
 public:
  TbfCapture(TbfStreamConfig config, StreamCounters& counters);
  ~TbfCapture();  ///< stops and joins
  TbfCapture(const TbfCapture&) = delete;
  TbfCapture& operator=(const TbfCapture&) = delete;

  const TbfStreamConfig& config() const { return cfg_; }
  BlockRing& ring() { return *ring_; }
  /// The port bound (the one asked for, or the kernel's choice for port 0).
  int port() const { return port_; }
  /// Time tag of the stream's first spectrum (valid once counters.streaming is true).
  std::int64_t first_time_tag() const { return tag0_.load(); }
  /// Ends the capture: the open blocks are handed over (as at the end of the stream) and the
  /// ring is closed.
  void stop();

 private:
  void run();
  TbfStreamConfig cfg_;
  StreamCounters& c_;
  std::unique_ptr<BlockRing> ring_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> tag0_{0};
  std::thread thread_;
};

/// True when this build has spead2 (SPEAD capture and sending).
bool spead_supported();

/// Receiving a SPEAD voltage stream (stream/spead.hpp): the stream's description arrives in
/// band, in its first heaps; blocks are of `block_samples` samples of every channel.
struct SpeadCaptureConfig {
  Endpoint listen;  ///< spead://HOST:PORT to bind
  int ring_blocks = 8;
  int window = 2;
  int socket_buffer_mib = 256;  ///< as TbfStreamConfig
  int capture_core = -1;        ///< spead2's receiving thread's core, as TbfStreamConfig
  double idle_timeout_s = 0;    ///< 0: until the stream's stop heap (or stop())
  void validate() const;
};

/// Receives a SPEAD voltage stream on spead2's thread. info() and ring() are there once
/// wait_for_info() has returned true.
class SpeadVoltageCapture {
 public:
  /// Binds the socket (throws io) and starts receiving; throws unsupported without spead2.
  SpeadVoltageCapture(SpeadCaptureConfig config, StreamCounters& counters);
  ~SpeadVoltageCapture();
  SpeadVoltageCapture(const SpeadVoltageCapture&) = delete;
  SpeadVoltageCapture& operator=(const SpeadVoltageCapture&) = delete;

  /// Waits until the stream's description has arrived (true), stop() or a signal (false), up
  /// to `timeout_s` (< 0: no limit).
  bool wait_for_info(double timeout_s, const std::function<bool()>& stop_requested);
  /// The stream's voltages as the pipeline sees them (source_name: the address).
  const io::VoltageStreamInfo& info() const;
  BlockRing& ring();
  int port() const;
  /// Ends the capture: the open blocks are handed over and the ring is closed.
  void stop();
  /// True when the capture ended because no packet came for idle_timeout_s.
  bool timed_out() const;
  /// Heaps per block of the stream (after wait_for_info()), 0 before.
  std::int64_t heaps_per_block() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace warpbeam::stream
