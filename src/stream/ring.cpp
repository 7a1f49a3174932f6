// BlockRing: the pool of blocks between a capture thread and the engine (warpbeam/stream.hpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

// The memory behind the blocks: a page-locked allocation per block when a device is visible
// (the engine copies blocks to the GPU by DMA), else a page-aligned ordinary one.
struct BlockRing::Storage {
  std::size_t stride = 0;  // bytes per block, a whole number of 4 KiB pages
  std::vector<PinnedArray<std::uint8_t>> pinned;
  std::vector<std::uint8_t*> plain;
  ~Storage() {
    for (std::uint8_t* p : plain)
      std::free(p);
  }
};

BlockRing::BlockRing(std::size_t nblocks, std::size_t block_bytes, std::size_t packets_per_block)
    : block_bytes_(block_bytes), storage_(std::make_unique<Storage>()) {
  if (nblocks == 0 || block_bytes == 0)
    fail(ErrorCategory::invalid_argument, "a ring of {} blocks of {} bytes", nblocks, block_bytes);
  // Blocks start on 4 KiB boundaries (page-aligned DMA, no false sharing between blocks).
  storage_->stride = (block_bytes + 4095) / 4096 * 4096;
  if (storage_->stride > (std::size_t{1} << 62) / nblocks)
    fail(ErrorCategory::invalid_argument, "a ring of {} blocks of {} bytes is too large", nblocks,
         block_bytes);
  pinned_ = device_count() > 0;
  if (pinned_)
    storage_->pinned.reserve(nblocks);
  else
    storage_->plain.reserve(nblocks);
  blocks_.resize(nblocks);
  for (std::size_t i = 0; i < nblocks; ++i) {
    blocks_[i].bytes = block_bytes;
    blocks_[i].present.assign(packets_per_block, 0);
  }
  // The first block now (its failure is the constructor's), the others on a thread of their own.
  blocks_[0].data = allocate_block();
  free_.push_back(&blocks_[0]);
  allocated_ = 1;
  if (nblocks > 1) {
    allocating_ = true;
    allocator_ = std::thread([this] { allocate_rest(); });
  }
}

BlockRing::~BlockRing() {
  stop_allocating_ = true;
  if (allocator_.joinable()) allocator_.join();
}

std::uint8_t* BlockRing::allocate_block() {
  Storage& s = *storage_;
  if (pinned_) {
    s.pinned.emplace_back(s.stride);
    return s.pinned.back().data();
  }
  auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(4096, s.stride));
  if (!p)
    fail(ErrorCategory::io, "cannot allocate a block of {} bytes for the ring ({} of {} allocated)",
         block_bytes_, allocated_, blocks_.size());
  s.plain.push_back(p);
  return p;
}

// The allocating thread. Storage's vectors are touched by it alone until it is done (the
// constructor's first block came before it started), blocks_[i] is published under the mutex.
void BlockRing::allocate_rest() {
  std::string error;
  for (std::size_t i = 1; i < blocks_.size() && !stop_allocating_; ++i) {
    std::uint8_t* p = nullptr;
    try {
      p = allocate_block();
    } catch (const std::exception& e) {
      error = e.what();
      break;
    }
    std::lock_guard lock(mutex_);
    blocks_[i].data = p;
    free_.push_back(&blocks_[i]);
    ++allocated_;
    allocated_cv_.notify_all();
  }
  std::lock_guard lock(mutex_);
  allocating_ = false;
  alloc_error_ = std::move(error);
  allocated_cv_.notify_all();
}

std::size_t BlockRing::allocated() const {
  std::lock_guard lock(mutex_);
  return allocated_;
}

std::string BlockRing::wait_allocated() {
  std::unique_lock lock(mutex_);
  allocated_cv_.wait(lock, [&] { return !allocating_; });
  return alloc_error_;
}

Block* BlockRing::try_acquire() {
  Block* b = nullptr;
  {
    std::unique_lock lock(mutex_);
    allocated_cv_.wait(lock, [&] { return !free_.empty() || !allocating_; });
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
  return allocated_ - free_.size();
}

}  // namespace warpbeam::stream
