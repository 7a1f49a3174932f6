// The das imaging grid (--grid x0:x1:dx,z0:z1:dz or with y): parsed, then its voxel list built.
#include <string>

#include "fuzz_common.hpp"
#include "warpbeam/das.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(wbfuzz::text(data, size));
  wbfuzz::run([&] {
    const auto g = warpbeam::das::parse_grid(text);
    // das checks the grid against --memory before it lists the voxels; a grid of 10^8 voxels is
    // valid, only slow to list (seconds under ASan), so the target lists those of up to 2^20.
    if (g.size() <= (1 << 20)) (void)g.voxels();
  });
  return 0;
}
