// HostArray's allocation (include/warpbeam/host_array.hpp has the reasons).
#include "warpbeam/host_array.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace warpbeam::detail {

void* host_alloc(std::size_t bytes) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const bool huge = bytes >= kHugePageThreshold;
  const std::size_t align = huge ? kHuge : 64;
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (!p) throw std::bad_alloc();
  // Advised before the first touch, so that the zeroing below faults in huge pages. A kernel
  // without transparent huge pages refuses the advice: the array is then as a vector's.
  if (huge) (void)madvise(p, size, MADV_HUGEPAGE);
  std::memset(p, 0, size);
  return p;
}

void host_free(void* p) noexcept {
  std::free(p);
}

}  // namespace warpbeam::detail
