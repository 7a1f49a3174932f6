// SIGPROC filterbank (through open_filterbank, as the search and `info` open it): the header, the
// derived figures `info` prints, and the data read in gulps.
#include <vector>

#include "fuzz_common.hpp"
#include "warpbeam/io/filterbank_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  wbfuzz::run([&] {
    auto src = warpbeam::io::open_filterbank(wbfuzz::write_input(data, size, ".fil"));
    const auto& h = src->header();
    volatile double figures = h.fmin_mhz() + h.fmax_mhz() + h.bandwidth_mhz() + h.duration_s();
    (void)figures;
    std::vector<float> gulp(static_cast<std::size_t>(h.nchans) * 64);
    while (src->read(64, gulp.data()) > 0) {
    }
  });
  return 0;
}
