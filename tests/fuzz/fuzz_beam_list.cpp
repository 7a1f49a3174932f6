// Beam lists (beamform/pipeline --beams FILE) and beam grids (--grid SPEC).
#include <string>

#include "fuzz_common.hpp"
#include "warpbeam/beamform.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(wbfuzz::text(data, size));
  wbfuzz::run([&] { (void)warpbeam::beamform::parse_beam_list(text); });
  wbfuzz::run([&] { (void)warpbeam::beamform::parse_beam_grid(text); });
  return 0;
}
