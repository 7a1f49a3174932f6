// SIGPROC filterbank (through open_filterbank, as the search and `info` open it): the header, the
// derived figures `info` prints, and the data read in gulps.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz_common.hpp"
#include "warpbeam/io/filterbank_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  wbfuzz::run([&] {
    auto src = warpbeam::io::open_filterbank(wbfuzz::write_input(data, size, ".fil"));
    const auto& h = src->header();
    if (h.nchans < 1) return;
    volatile double figures = h.fmin_mhz() + h.fmax_mhz() + h.bandwidth_mhz() + h.duration_s();
    (void)figures;
    // The data in gulps of at most 2^16 values (nchans may be 2^24: the target's own buffer must
    // not be what exceeds the 1 GiB limit, nor what takes the time). A file with no whole sample
    // has nothing to read; one with a sample holds nchans x nbits / 8 <= -max_len bytes of it, so
    // one row always fits.
    if (h.nsamples < 1) return;
    const std::int64_t rows =
        std::max<std::int64_t>(1, std::min<std::int64_t>(64, (1 << 16) / h.nchans));
    std::vector<float> gulp(static_cast<std::size_t>(h.nchans * rows));
    while (src->read(rows, gulp.data()) > 0) {
    }
  });
  return 0;
}
