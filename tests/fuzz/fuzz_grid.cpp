// The das imaging grid (--grid x0:x1:dx,z0:z1:dz or with y): parsed, then its voxel list built.
#include <string>

#include "fuzz_common.hpp"
#include "warpbeam/das.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(wbfuzz::text(data, size));
  wbfuzz::run([&] {
    const auto g = warpbeam::das::parse_grid(text);
    (void)g.voxels();
  });
  return 0;
}
