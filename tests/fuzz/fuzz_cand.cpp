// heimdall .cand candidate lists, and the figures derived from each candidate.
#include "fuzz_common.hpp"
#include "warpbeam/io/candidates.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  wbfuzz::run([&] {
    for (const auto& c : warpbeam::io::read_cand(wbfuzz::write_input(data, size, ".cand")))
      (void)c.width();
  });
  return 0;
}
