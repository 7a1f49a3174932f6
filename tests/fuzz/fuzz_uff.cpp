// UFF (HDF5) channel data, as `das` reads them.
#include "fuzz_common.hpp"
#include "warpbeam/io/ultrasound.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  wbfuzz::run(
      [&] { (void)warpbeam::io::read_ultrasound(wbfuzz::write_input(data, size, ".uff")); });
  return 0;
}
