// LWA TBF and TBX frames through open_voltage_file (format detection, then the LWA reader) and
// open_lwa_voltage_file's read() as the imager uses it: every header, then the voltages of the
// first spectra.
#include <algorithm>
#include <vector>

#include "fuzz_common.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/voltages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = wbfuzz::write_input(data, size, ".dat");
  wbfuzz::run([&] {
    auto r = warpbeam::io::open_voltage_file(path);
    std::vector<std::uint8_t> block;
    while (r->read_block(block)) {
    }
  });
  wbfuzz::run([&] {
    const auto r = warpbeam::io::open_lwa_voltage_file(path);
    const auto& i = r->info();
    const std::int64_t nt = std::min<std::int64_t>(i.ntime, 4);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(i.nchan() * nt * i.nstand * 2));
    if (nt > 0) r->read(0, nt, 0, i.nchan(), out.data());
  });
  return 0;
}
