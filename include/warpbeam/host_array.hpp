#pragma once
// Host arrays for the CPU engines' large outputs, allocated as NumPy allocates its arrays on
// Linux.
//
// Why. NumPy advises MADV_HUGEPAGE for its arrays of 4 MiB and more on Linux >= 4.6 (NumPy's
// "Global state" page, "madvise hugepage on Linux"), so a Python caller's output already sits on
// 2 MiB transparent huge pages where the kernel's policy (/sys/kernel/mm/transparent_hugepage/
// enabled: always or madvise) allows them; a std::vector's does not. The CPU beamformer writes one
// 64-byte line per 4 KiB page per (unit, beam row): on 4 KiB pages its output stores' page walks
// cost ~8 points of the FMA rate on B1 (docs/PERFORMANCE.md, "CPU, B1"). The CLI and the benchmarks
// allocate their outputs here so that they measure what a NumPy caller gets.

#include <cstddef>
#include <memory>

namespace warpbeam {

namespace detail {
/// `bytes` zeroed bytes: 64-byte aligned; from 4 MiB on 2 MiB aligned, rounded up to whole 2
/// MiB, and advised MADV_HUGEPAGE (ignored where the kernel has no transparent huge pages).
/// Throws std::bad_alloc.
void* host_alloc(std::size_t bytes);
void host_free(void* p) noexcept;
/// Arrays of at least this many bytes are advised huge pages (NumPy's threshold).
inline constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;
}  // namespace detail

/// A zero-initialised host array of n elements of a trivially copyable T (detail::host_alloc).
/// Move-only, as DeviceArray.
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(std::size_t n)
      : n_(n), p_(static_cast<T*>(detail::host_alloc(n * sizeof(T)))) {}
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  bool empty() const { return n_ == 0; }
  T& operator[](std::size_t i) { return p_.get()[i]; }
  const T& operator[](std::size_t i) const { return p_.get()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + n_; }

 private:
  struct Free {
    void operator()(T* p) const noexcept { detail::host_free(p); }
  };
  std::size_t n_ = 0;
  std::unique_ptr<T, Free> p_;
};

}  // namespace warpbeam
