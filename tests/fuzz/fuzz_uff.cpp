// UFF (HDF5) channel data, as `das` reads them.
#include "fuzz_common.hpp"
#include "warpbeam/io/ultrasound.hpp"

#ifdef WB_FUZZ_HDF5
#include <hdf5.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
#ifdef WB_FUZZ_HDF5
  // libhdf5 keeps freed blocks in its own free lists: every input then ends with more mallocs
  // than frees, and libFuzzer runs a whole LeakSanitizer scan after it (most of this target's
  // time). No free-list memory is kept, so what the reader leaves behind is a real leak.
  static const bool once = [] { return H5set_free_list_limits(0, 0, 0, 0, 0, 0) >= 0; }();
  (void)once;
#endif
  wbfuzz::run(
      [&] { (void)warpbeam::io::read_ultrasound(wbfuzz::write_input(data, size, ".uff")); });
  return 0;
}
