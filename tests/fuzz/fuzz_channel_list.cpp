// Channel lists (search/pipeline --zap-chans 0-10,200,300-310).
#include <string>

#include "fuzz_common.hpp"
#include "warpbeam/search.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(wbfuzz::text(data, size));
  wbfuzz::run([&] { (void)warpbeam::search::ChannelMask::parse(text); });
  return 0;
}
