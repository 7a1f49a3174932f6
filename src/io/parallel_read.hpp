#pragma once
// Reading a large run of bytes of a file with several threads (positional reads, pread), for
// the SIGPROC reader's gulps: one thread copies from the page cache at a few GB/s, well below
// what the memory and an NVMe drive sustain, so the file search's read of each gulp was the
// longest host stage of the GPU search (docs/PERFORMANCE.md, issue 13).
#include <cstddef>
#include <cstdint>

namespace warpbeam::io::detail {

/// Pieces smaller than this are not worth a thread of their own.
inline constexpr std::size_t kMinReadPieceBytes = std::size_t{1} << 20;

/// What read_at() got: `bytes` read from the start (all of them unless the file ended or a read
/// failed) and the errno of the first failed read (0: none; the file ended early).
struct ReadOutcome {
  std::size_t bytes = 0;
  int error = 0;
};

/// Reads `bytes` bytes from byte `offset` of the open file `fd` into `out` with up to `threads`
/// threads (the calling thread and threads - 1 more), each a contiguous piece of at least
/// kMinReadPieceBytes; positional reads, so the descriptor's offset is left alone. Retries
/// interrupted and partial reads.
ReadOutcome read_at(int fd, std::int64_t offset, std::size_t bytes, std::uint8_t* out, int threads);

}  // namespace warpbeam::io::detail
