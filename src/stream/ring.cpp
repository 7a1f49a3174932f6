// BlockRing: the pool of blocks between a capture thread and the engine (warpbeam/stream.hpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

// The memory behind the blocks: one page-locked allocation when a device is visible (the
// engine copies blocks to the GPU by DMA), else one page-aligned ordinary allocation.
struct BlockRing::Storage {
  PinnedArray<std::uint8_t> pinned;
  std::uint8_t* plain = nullptr;
  ~Storage() { std::free(plain); }
};

BlockRing::BlockRing(std::size_t nblocks, std::size_t block_bytes, std::size_t packets_per_block)
    : block_bytes_(block_bytes), storage_(std::make_unique<Storage>()) {
  if (nblocks == 0 || block_bytes == 0)
    fail(ErrorCategory::invalid_argument, "a ring of {} blocks of {} bytes", nblocks, block_bytes);
  // Blocks start on 4 KiB boundaries (page-aligned DMA, no false sharing between blocks).
  const std::size_t stride = (block_bytes + 4095) / 4096 * 4096;
  if (stride > (std::size_t{1} << 62) / nblocks)
    fail(ErrorCategory::invalid_argument, "a ring of {} blocks of {} bytes is too large", nblocks,
         block_bytes);
  std::uint8_t* base = nullptr;
  if (device_count() > 0) {
    storage_->pinned = PinnedArray<std::uint8_t>(stride * nblocks);
    base = storage_->pinned.data();
    pinned_ = true;
  } else {
    storage_->plain = static_cast<std::uint8_t*>(std::aligned_alloc(4096, stride * nblocks));
    if (!storage_->plain)
      fail(ErrorCategory::io, "cannot allocate a ring of {} blocks of {} bytes ({} MiB)", nblocks,
           block_bytes, (stride * nblocks) >> 20);
    base = storage_->plain;
  }
  blocks_.resize(nblocks);
  for (std::size_t i = 0; i < nblocks; ++i) {
    blocks_[i].data = base + i * stride;
    blocks_[i].bytes = block_bytes;
    blocks_[i].present.assign(packets_per_block, 0);
    free_.push_back(&blocks_[nblocks - 1 - i]);
  }
}

BlockRing::~BlockRing() = default;

Block* BlockRing::try_acquire() {
  Block* b = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return nullptr;
    b = free_.back();
    free_.pop_back();
  }
  std::fill(b->present.begin(), b->present.end(), std::uint8_t{0});
  b->info = BlockInfo{};
  return b;
}

void BlockRing::publish(Block* b) {
  {
    std::lock_guard lock(mutex_);
    ready_.push_back(b);
  }
  ready_cv_.notify_one();
}

void BlockRing::abandon(Block* b) {
  std::lock_guard lock(mutex_);
  free_.push_back(b);
}

void BlockRing::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_cv_.notify_all();
}

Block* BlockRing::next(std::chrono::milliseconds timeout, bool* closed) {
  std::unique_lock lock(mutex_);
  ready_cv_.wait_for(lock, timeout, [&] { return !ready_.empty() || closed_; });
  if (closed) *closed = closed_ && ready_.empty();
  if (ready_.empty()) return nullptr;
  Block* b = ready_.front();
  ready_.pop_front();
  ++in_hand_;
  return b;
}

void BlockRing::release(Block* b) {
  std::lock_guard lock(mutex_);
  --in_hand_;
  free_.push_back(b);
}

std::size_t BlockRing::filled() const {
  std::lock_guard lock(mutex_);
  return blocks_.size() - free_.size();
}

}  // namespace warpbeam::stream
