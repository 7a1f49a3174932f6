#pragma once
// The file search's reader: the packed rows of each gulp are read on a thread of its own, one
// gulp ahead of the one being searched, into one of two host buffers (page-locked for the CUDA
// backend, so the searcher's copy to the device goes by DMA). search_gulps() hands each buffer
// to the GulpSearcher as the loader's own rows, which every searcher has consumed (copied to the
// device or unpacked) when submit() returns; so while the searcher works on gulp n, gulp n + 1
// is read (issue 13: the read of each gulp, one thread at a time with the GPU waiting for it,
// was the longest host stage of the D1 search).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "warpbeam/device.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search::detail {

/// Host buffers of the reader (its memory: kReadBuffers x the largest gulp's packed rows).
inline constexpr int kReadBuffers = 2;

class GulpReader {
 public:
  /// Starts reading gulps [gulp_begin, gulp_end) of `plan` from `source` (which it then uses
  /// alone until destroyed) with `read_threads` threads per read; the buffers are pinned when
  /// the plan's backend is cuda.
  GulpReader(const FileSearchPlan& plan, io::FilterbankSource& source, std::int64_t gulp_begin,
             std::int64_t gulp_end, int read_threads);
  /// Stops the thread (a read in progress finishes first).
  ~GulpReader();
  GulpReader(const GulpReader&) = delete;
  GulpReader& operator=(const GulpReader&) = delete;

  /// The rows of gulp g (gulps in order, each once), when read: waits for the thread; rethrows
  /// its error (e.g. Error(io) for a short read). Valid until release(g).
  const std::uint8_t* acquire(std::int64_t g);
  /// Gives gulp g's buffer back for the gulp after the next.
  void release(std::int64_t g);

  /// Seconds the thread spent reading (seek and read_raw of every gulp read so far).
  double read_seconds() const;
  /// Seconds acquire() waited for the thread.
  double wait_seconds() const { return wait_s_; }

 private:
  struct Slot {
    std::uint8_t* rows = nullptr;
    std::int64_t gulp = -1;  // the gulp it holds once read
    bool free = true;        // the thread may fill it
  };
  void run();

  const FileSearchPlan& plan_;
  io::FilterbankSource& source_;
  std::int64_t begin_, end_;
  std::vector<PinnedArray<std::uint8_t>> pinned_;
  std::vector<std::vector<std::uint8_t>> plain_;
  Slot slots_[kReadBuffers];
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::exception_ptr error_;
  double read_s_ = 0, wait_s_ = 0;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace warpbeam::search::detail
