#include "search/gulp_reader.hpp"

#include <algorithm>
#include <chrono>

#include "warpbeam/format.hpp"

namespace warpbeam::search::detail {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

GulpReader::GulpReader(const FileSearchPlan& plan, io::FilterbankSource& source,
                       std::int64_t gulp_begin, std::int64_t gulp_end, int read_threads)
    : plan_(plan), source_(source), begin_(gulp_begin), end_(gulp_end) {
  const auto bytes =
      static_cast<std::size_t>((plan.plane_samples() + plan.max_delay()) *
                               static_cast<std::int64_t>(plan.header().bytes_per_sample()));
  pinned_.reserve(kReadBuffers);
  plain_.reserve(kReadBuffers);
  for (int i = 0; i < kReadBuffers; ++i) {
    if (plan.backend() == Backend::cuda) {
      pinned_.emplace_back(bytes);
      slots_[i].rows = pinned_.back().data();
    } else {
      plain_.emplace_back(bytes);
      slots_[i].rows = plain_.back().data();
    }
  }
  source_.set_read_threads(read_threads);
  thread_ = std::thread([this] { run(); });
}

GulpReader::~GulpReader() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GulpReader::run() {
  try {
    for (std::int64_t g = begin_; g < end_; ++g) {
      Slot& s = slots_[(g - begin_) % kReadBuffers];
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || s.free; });
        if (stop_) return;
        s.free = false;
      }
      const auto t0 = Clock::now();
      const GulpRange r = plan_.gulp_range(g);
      const std::int64_t rows = r.len() + plan_.max_delay();
      source_.seek(r.p0);
      if (source_.read_raw(rows, s.rows) != rows)
        fail(ErrorCategory::io, "'{}': short read at sample {}", source_.path(), r.p0);
      {
        const std::lock_guard<std::mutex> lock(mutex_);
        read_s_ += since(t0);
        s.gulp = g;
      }
      changed_.notify_all();
    }
  } catch (...) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

const std::uint8_t* GulpReader::acquire(std::int64_t g) {
  if (g < begin_ || g >= end_)
    fail(ErrorCategory::invalid_argument, "gulp {} outside the reader's [{}, {})", g, begin_, end_);
  const Slot& s = slots_[(g - begin_) % kReadBuffers];
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return s.gulp == g || error_; });
  wait_s_ += since(t0);
  if (s.gulp != g) std::rethrow_exception(error_);
  return s.rows;
}

void GulpReader::release(std::int64_t g) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slots_[(g - begin_) % kReadBuffers];
    if (s.gulp != g) return;
    s.gulp = -1;
    s.free = true;
  }
  changed_.notify_all();
}

double GulpReader::read_seconds() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return read_s_;
}

}  // namespace warpbeam::search::detail
