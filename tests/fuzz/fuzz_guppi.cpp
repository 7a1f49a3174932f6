// GUPPI raw voltages: the header cards and every block, as beamform and the pipeline read them.
#include <vector>

#include "fuzz_common.hpp"
#include "warpbeam/io/guppi.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  wbfuzz::run([&] {
    warpbeam::io::GuppiReader r(wbfuzz::write_input(data, size, ".raw"));
    std::vector<std::uint8_t> block;
    double mjd = 0;
    while (r.read_block(block, &mjd)) {
    }
  });
  return 0;
}
