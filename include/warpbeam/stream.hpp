#pragma once
// Live streams (DESIGN.md, "Live streams"): a capture thread writes packets into a ring of
// host blocks (page-locked when a CUDA device is there), placing each packet by its time and
// channel; the engine reads whole blocks. Missing packets are zero-filled and counted per block;
// a capture that finds the ring full drops the whole block and counts it: it never blocks the
// socket and never hands the engine stale data. Every count is in StreamCounters, which the run
// record (JSON) and the Prometheus text at /metrics (stream/status.hpp) report.
//
// This header: the ring (BlockRing), the counters, stream addresses (udp://, spead://), the
// stop signals (SIGINT/SIGTERM finish the block in hand) and the once-a-second status line.
// Captures: stream/capture.hpp; test senders: stream/send.hpp; the status page: stream/status.hpp.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace warpbeam::stream {

// ---------------------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------------------

/// A stream address "SCHEME://HOST:PORT" (scheme udp or spead; HOST a dotted IPv4 address,
/// "localhost" or "[::1]"-style IPv6).
struct Endpoint {
  std::string scheme, host;
  int port = 0;
  std::string to_string() const;
  /// True for 127.0.0.0/8, localhost and ::1.
  bool is_loopback() const;
};

/// Parses "udp://127.0.0.1:4015"; `scheme` is the one expected ("udp" or "spead"). Throws
/// invalid_argument naming `what` (the option) for another scheme, a missing or bad port
/// (1 .. 65535; 0 too with `any_port`: the kernel picks a free one when binding) or a host that
/// is not an IP address or localhost.
Endpoint parse_endpoint(const std::string& address, const std::string& scheme,
                        const std::string& what, bool any_port = false);

/// Test senders target this machine only: throws invalid_argument unless `e` is loopback.
void require_loopback(const Endpoint& e, const std::string& what);

// ---------------------------------------------------------------------------------------------
// The ring of blocks
// ---------------------------------------------------------------------------------------------

/// What the capture knows about a block it hands over.
struct BlockInfo {
  std::int64_t sequence = 0;          ///< block index in the stream (0: the first)
  std::int64_t packets_expected = 0;  ///< packets (TBF frames, SPEAD heaps) a block holds
  std::int64_t packets_received = 0;  ///< of them, received (the rest are zero-filled)
  std::int64_t lost_packets() const { return packets_expected - packets_received; }
  /// The stream's time of the block's first sample: TBF time tag (196 MHz ticks since 1970),
  /// SPEAD timestamp (samples since the stream's epoch).
  std::int64_t first_time = 0;
};

/// One block of the ring: `bytes` of data and a presence flag per packet.
struct Block {
  std::uint8_t* data = nullptr;
  std::size_t bytes = 0;
  std::vector<std::uint8_t> present;  ///< [packets per block], 1 = received
  BlockInfo info;
};

/// A fixed pool of `nblocks` blocks of `block_bytes` between one producer (the capture) and one
/// consumer (the engine). The producer never waits for the consumer: try_acquire() returns null
/// when every block is in use (the ring is full: the capture then drops the whole block). The
/// consumer takes published blocks in order with next() and gives each back with release().
/// Thread-safe for one producer and one consumer. Memory is page-locked (PinnedArray) when a
/// CUDA device is visible, so that the engine copies blocks to the GPU by DMA; ordinary memory
/// otherwise.
///
/// The constructor allocates the first block; a thread of the ring allocates the others, one
/// at a time, while the capture runs. A SPEAD capture makes its ring when the stream's
/// description arrives, with the data right behind it, and page-locking is slow: B1's 16 blocks
/// of 268 MB are 4.3 GB to pin, while the 512 MiB socket buffer holds ~0.8 s at 0.66 GB/s; in
/// run s14-e every B1 stream lost whole blocks at its start, ~4 blocks' worth (~1.6 s of the
/// stream), which is what we infer the pinning took (not timed on its own). Since the ring pins
/// off the capture thread, run s15-a lost nothing. While blocks are still being allocated,
/// try_acquire() waits for the next one instead of reporting the ring full.
class BlockRing {
 public:
  /// Throws invalid_argument for 0 blocks or bytes, io/cuda when the memory cannot be had.
  BlockRing(std::size_t nblocks, std::size_t block_bytes, std::size_t packets_per_block);
  ~BlockRing();
  BlockRing(const BlockRing&) = delete;
  BlockRing& operator=(const BlockRing&) = delete;

  std::size_t capacity() const { return blocks_.size(); }
  std::size_t block_bytes() const { return block_bytes_; }
  bool pinned() const { return pinned_; }

  /// Producer: a free block (its presence flags cleared), or null when the ring is full (every
  /// block allocated and in use). Waits for the ring's allocating thread when every block
  /// allocated so far is in use and more are coming (one block's allocation at most).
  Block* try_acquire();
  /// Producer: hands a filled block to the consumer (FIFO).
  void publish(Block* b);
  /// Producer: gives back a block it acquired but will not publish.
  void abandon(Block* b);
  /// Producer: no more blocks; next() returns null once the published ones are taken.
  void close();

  /// Consumer: the next published block, waiting up to `timeout`; null on time-out (then
  /// *closed says whether the producer has closed the ring and every block was taken).
  Block* next(std::chrono::milliseconds timeout, bool* closed = nullptr);
  /// Consumer: returns a block taken with next().
  void release(Block* b);

  /// Blocks not free: published and waiting, or in the consumer's hands.
  std::size_t filled() const;
  /// Blocks allocated so far (capacity() once the allocating thread is done).
  std::size_t allocated() const;
  /// Waits until every block is allocated (or an allocation failed: the ring then keeps the
  /// blocks it has); the message of that failure, empty when there was none.
  std::string wait_allocated();

 private:
  void allocate_rest();
  std::uint8_t* allocate_block();
  std::size_t block_bytes_;
  bool pinned_ = false;
  struct Storage;
  std::unique_ptr<Storage> storage_;
  std::vector<Block> blocks_;
  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::vector<Block*> free_;
  std::deque<Block*> ready_;
  std::size_t in_hand_ = 0;
  bool closed_ = false;
  // The allocating thread (allocate_rest); allocated_, allocating_ and alloc_error_ under mutex_.
  std::condition_variable allocated_cv_;
  std::size_t allocated_ = 0;
  bool allocating_ = false;
  std::atomic<bool> stop_allocating_{false};
  std::string alloc_error_;
  std::thread allocator_;
};

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

/// Every count of a live run, updated by the capture, the engine and the products (relaxed
/// atomics: each is exact once its writer has stopped; a snapshot during the run may mix
/// instants a few packets apart).
struct StreamCounters {
  // Capture.
  std::atomic<std::int64_t> packets{0};       ///< datagrams / heaps received (valid or not)
  std::atomic<std::int64_t> bytes{0};         ///< their bytes (UDP payload)
  std::atomic<std::int64_t> placed{0};        ///< packets placed into a block (unique)
  std::atomic<std::int64_t> duplicates{0};    ///< a packet already placed (ignored)
  std::atomic<std::int64_t> late{0};          ///< for a block already handed over (ignored)
  std::atomic<std::int64_t> invalid{0};       ///< not of this stream (bad header, size, channel)
  std::atomic<std::int64_t> lost_packets{0};  ///< missing from delivered blocks (zeroed)
  std::atomic<std::int64_t> delivered_packets{0};  ///< placed into blocks handed to the engine
  std::atomic<std::int64_t> blocks_delivered{0};   ///< handed to the engine
  std::atomic<std::int64_t> dropped_blocks{0};     ///< the ring was full: the block was dropped
  std::atomic<std::int64_t> dropped_packets{0};    ///< packets received for dropped blocks
  std::atomic<std::int64_t> empty_blocks{0};       ///< skipped over: no packet of them arrived
  std::atomic<std::int64_t> truncated_blocks{0};   ///< incomplete at the end of the stream
  std::atomic<std::int64_t> kernel_drops{0};       ///< dropped by the kernel (socket buffer full)
  std::atomic<std::int64_t> socket_buffer{0};      ///< bytes of receive buffer the kernel granted
  // spead2's receive statistics (SPEAD capture only; recv::stream_stats, read at the end).
  std::atomic<std::int64_t> spead_heaps{0};             ///< complete heaps spead2 assembled
  std::atomic<std::int64_t> spead_incomplete_heaps{0};  ///< evicted or flushed incomplete
  std::atomic<std::int64_t> spead_too_old_heaps{0};     ///< for a chunk already handed over
  std::atomic<std::int64_t> spead_rejected_heaps{0};    ///< placed nowhere (descriptions, invalid)
  /// Time the capture thread spent placing packets (not receiving): with the packet rate, how
  /// close the capture is to its limit (TBF capture only).
  std::atomic<std::int64_t> capture_place_ns{0};
  /// The longest time between two packets the capture received, once the stream had started,
  /// and the packet (its index, 0-based) that ended it: a stall of the receiving thread (the
  /// socket buffer holds what arrives meanwhile, up to its size) shows here (SPEAD capture).
  std::atomic<std::int64_t> longest_gap_ns{0}, longest_gap_at_packet{0};
  // Engine and products.
  std::atomic<std::int64_t> blocks_processed{0};
  std::atomic<std::int64_t> bytes_processed{0};
  std::atomic<std::int64_t> images{0};
  std::atomic<std::int64_t> candidates{0};
  // Gauges set by the run.
  std::atomic<std::int64_t> ring_filled{0}, ring_capacity{0};
  std::atomic<bool> streaming{false};  ///< the first packet has arrived

  nlohmann::json to_json() const;
};

/// Rates between two readings of the counters.
struct RateMeter {
  std::int64_t bytes_in = 0, bytes_done = 0;
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
  double in_bytes_per_s = 0, done_bytes_per_s = 0;
  /// Updates the rates from `c` since the previous call.
  void update(const StreamCounters& c);
};

/// Prints the status line once a second on a stream (stderr) while it lives: rate in, rate
/// processed, ring fill, packets lost, blocks dropped. A line per second, not redrawn in place,
/// so that logs of a run of days keep it.
class StatusLine {
 public:
  StatusLine(const StreamCounters& c, std::string label, std::FILE* out = stderr,
             double period_s = 1.0);
  ~StatusLine();
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;
  /// The latest rates (for the status page and the run record).
  RateMeter rates() const;

 private:
  void loop();
  void print_line() const;  // one status line to out_ (throws where it cannot be written)
  const StreamCounters& c_;
  std::string label_;
  std::FILE* out_;
  double period_s_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  RateMeter meter_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Stop signals
// ---------------------------------------------------------------------------------------------

/// While it lives, SIGINT, SIGTERM and SIGHUP set a flag instead of ending the process, so that
/// a live run finishes the block in hand and closes every product; a second signal ends the
/// process as before (removing temporary files: io::remove_temps_on_signals). Restores the
/// previous handlers when destroyed. SIGPIPE (stderr piped to a reader that has gone) sets the
/// flag too but never escalates: each later write to the pipe raises it again. One at a time per
/// process.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
  /// True once a signal has arrived.
  static bool requested();
  /// The signal that arrived (0: none).
  static int signal();
};

}  // namespace warpbeam::stream
