#pragma once
// Private to src/stream: UDP sockets, pacing and fault injection shared by the captures and the
// senders.
#include <chrono>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "warpbeam/stream.hpp"
#include "warpbeam/stream/send.hpp"

namespace warpbeam::stream::detail {

/// A bound UDP socket (IPv4 or IPv6 by the host's form) with a receive buffer of `buffer_mib`
/// (the kernel may grant less: a warning says so), a 100 ms receive time-out (so that a capture
/// looks at its stop flag) and SO_RXQ_OVFL (the kernel's drop count). Throws io. *port: the
/// port bound; *granted (if not null): the receive buffer's bytes the kernel granted.
int bind_udp(const Endpoint& at, int buffer_mib, int* port, std::int64_t* granted = nullptr);
/// Asks for a socket buffer (SO_RCVBUF or SO_SNDBUF) of `mib` MiB, past net.core.*mem_max when
/// the process may (root); warns when the kernel grants less. Returns the bytes granted.
std::int64_t set_socket_buffer(int fd, int option, int mib, const Endpoint& e);

/// The datagrams the kernel dropped on this socket so far (SO_MEMINFO's SK_MEMINFO_DROPS: the
/// count SO_RXQ_OVFL reports, but readable when no later datagram carries it), -1 if unknown.
std::int64_t socket_drops(int fd);

/// Throws invalid_argument naming --capture-core unless `core` is one this process may run on.
void require_core(int core);
/// Runs the calling thread on `core` alone (a core require_core() accepted); false if it could
/// not.
bool pin_this_thread(int core);
/// Takes `core` out of the calling thread's affinity (when other cores remain), so that it and
/// the threads it starts later leave that core to the capture.
void leave_core(int core);
/// A UDP socket connected to `to` (send() then needs no address). Throws io.
int connect_udp(const Endpoint& to, int buffer_mib);

/// Sends `n` datagrams (sendmmsg); retries on ENOBUFS/EAGAIN and EINTR. Throws io. Runs of
/// consecutive datagrams of one size go as one UDP_SEGMENT send each (segmentation offload: the
/// kernel's cost per send, not per datagram; what spead2's sender does), each still a datagram
/// on the wire; without the offload, one datagram per message.
void send_all(int fd, const std::vector<const std::uint8_t*>& data,
              const std::vector<std::size_t>& sizes);

/// Paces a sender to `bytes_per_s` (0: no pacing): wait(bytes) sleeps until those bytes are
/// due, so that the average rate from start holds (bursts of one batch).
class Pacer {
 public:
  explicit Pacer(double bytes_per_s) : rate_(bytes_per_s) {}
  void wait(std::size_t bytes);

 private:
  double rate_;
  double due_s_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Decides each packet's fate from one seeded generator: dropped, sent now, held back (sent
/// after 1 .. max_displacement later packets), and duplicated. feed() takes the packets in
/// order and returns those to send now, in order; flush() returns the held ones at the end.
/// Packets are carried with a key (for the record of what was dropped).
class FaultInjector {
 public:
  struct Packet {
    std::vector<std::uint8_t> bytes;
    std::pair<std::int64_t, std::int64_t> key;
  };
  FaultInjector(const Faults& f, SendRecord& record);
  /// True when no fault can happen (then the sender may send packets straight from its buffers).
  bool passthrough() const { return passthrough_; }
  void feed(Packet&& p, std::vector<Packet>& out);
  void flush(std::vector<Packet>& out);

 private:
  void release_due(std::vector<Packet>& out);
  Faults f_;
  SendRecord& r_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> u_{0.0, 1.0};
  bool passthrough_;
  std::int64_t position_ = 0;  // packets sent in order so far
  struct Held {
    std::int64_t due;
    Packet p;
  };
  std::deque<Held> held_;
};

}  // namespace warpbeam::stream::detail
