// LWA SSMIF station files: the parser and the station model beamform and image build from it.
#include "fuzz_common.hpp"
#include "warpbeam/io/lwa.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  wbfuzz::run([&] {
    const auto s = warpbeam::io::read_ssmif(wbfuzz::write_input(data, size, ".txt"));
    const auto m = warpbeam::io::tbf_station_model(s, s.nstand());
    for (int st = 0; st < m.nstand(); ++st)
      (void)m.cable_delay_s(st, 1, 50e6);
  });
  return 0;
}
