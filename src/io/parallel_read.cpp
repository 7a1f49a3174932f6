#include "io/parallel_read.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

namespace warpbeam::io::detail {

namespace {

// One thread's piece: pread until done, the end of the file or an error.
ReadOutcome read_piece(int fd, std::int64_t offset, std::size_t bytes, std::uint8_t* out) {
  ReadOutcome r;
  while (r.bytes < bytes) {
    const ssize_t got = ::pread(fd, out + r.bytes, bytes - r.bytes,
                                static_cast<off_t>(offset + static_cast<std::int64_t>(r.bytes)));
    if (got > 0) {
      r.bytes += static_cast<std::size_t>(got);
    } else if (got == 0) {
      break;  // the end of the file
    } else if (errno != EINTR) {
      r.error = errno;
      break;
    }
  }
  return r;
}

}  // namespace

ReadOutcome read_at(int fd, std::int64_t offset, std::size_t bytes, std::uint8_t* out,
                    int threads) {
  const std::size_t most = std::max<std::size_t>(1, bytes / kMinReadPieceBytes);
  const std::size_t n = std::min(static_cast<std::size_t>(std::max(threads, 1)), most);
  if (n == 1) return read_piece(fd, offset, bytes, out);
  // Equal pieces, each starting on a 64 KiB boundary of the read (page-aligned copies).
  constexpr std::size_t kAlign = std::size_t{64} << 10;
  const std::size_t piece = (bytes / n + kAlign - 1) / kAlign * kAlign;
  std::vector<ReadOutcome> got(n);
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  auto run = [&](std::size_t i) {
    const std::size_t begin = std::min(bytes, i * piece);
    const std::size_t end = std::min(bytes, begin + piece);
    got[i] = read_piece(fd, offset + static_cast<std::int64_t>(begin), end - begin, out + begin);
  };
  for (std::size_t i = 1; i < n; ++i)
    pool.emplace_back(run, i);
  run(0);
  for (auto& t : pool)
    t.join();
  // What was read from the start: the pieces up to the first short one.
  ReadOutcome total;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t begin = std::min(bytes, i * piece);
    const std::size_t want = std::min(bytes, begin + piece) - begin;
    total.bytes += got[i].bytes;
    if (got[i].bytes < want) {
      total.error = got[i].error;
      break;
    }
  }
  return total;
}

}  // namespace warpbeam::io::detail
