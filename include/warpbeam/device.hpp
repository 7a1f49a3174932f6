#pragma once
// RAII handles for device memory, pinned host memory and CUDA streams/events, usable from code
// that includes no CUDA header. In a build without CUDA every constructor that needs a device
// throws Error(unsupported).

#include <cstddef>
#include <utility>

#include "warpbeam/core.hpp"

namespace warpbeam {

namespace detail {
void* device_malloc(std::size_t bytes);
void device_free(void* p) noexcept;
void* pinned_malloc(std::size_t bytes);
void pinned_free(void* p) noexcept;
}  // namespace detail

/// A CUDA stream (cudaStream_t behind a void*), non-blocking with respect to the legacy stream.
class Stream {
 public:
  Stream();  ///< creates a new stream; throws unsupported without CUDA
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept
      : handle_(std::exchange(o.handle_, nullptr)), owned_(std::exchange(o.owned_, true)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(handle_, o.handle_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  /// A Stream for a cudaStream_t made by someone else (CuPy's or PyTorch's current stream, for
  /// the Python module): the destructor leaves it alone. nullptr is the legacy default stream.
  /// Makes no CUDA call, so it works in every build.
  static Stream borrow(void* handle) { return Stream(handle, false); }
  void* handle() const { return handle_; }  ///< the cudaStream_t
  void synchronize() const;

 private:
  Stream(void* handle, bool owned) : handle_(handle), owned_(owned) {}
  void* handle_ = nullptr;
  bool owned_ = true;
};

/// A CUDA event for timing and cross-stream ordering.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream* s = nullptr);
  void synchronize() const;
  /// Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const;
  void* handle() const { return handle_; }

 private:
  void* handle_ = nullptr;
};

/// An owning, typed device allocation of `count` elements (cudaMalloc; never managed memory).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count)
      : ptr_(static_cast<T*>(detail::device_malloc(count * sizeof(T)))), count_(count) {}
  ~DeviceArray() { detail::device_free(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  T* data() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

/// An owning, typed page-locked host allocation (cudaMallocHost), for overlapped copies. Freed
/// allocations are cached by the process (up to 4 GiB) and reused for later requests of about
/// the same size: page-locking is slow and serialised by the driver (src/core/device.cpp).
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  explicit PinnedArray(std::size_t count)
      : ptr_(static_cast<T*>(detail::pinned_malloc(count * sizeof(T)))), count_(count) {}
  ~PinnedArray() { detail::pinned_free(ptr_); }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  PinnedArray(PinnedArray&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  PinnedArray& operator=(PinnedArray&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  T* data() const { return ptr_; }
  std::size_t size() const { return count_; }
  T& operator[](std::size_t i) const { return ptr_[i]; }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

/// Copies `bytes` between host and device (direction inferred by the driver; cudaMemcpyDefault).
/// With a stream the copy is asynchronous on it; without, it completes before returning.
void copy_bytes(void* dst, const void* src, std::size_t bytes, const Stream* stream = nullptr);
/// Fills `bytes` of device memory with `value` (cudaMemset).
void device_memset(void* dst, int value, std::size_t bytes, const Stream* stream = nullptr);
/// Blocks until the device has finished all work.
void device_synchronize();
/// Number of visible CUDA devices (0 in a CPU-only build or with no device).
int device_count();
/// True when `p` points into page-locked host memory the CUDA driver knows (PinnedArray,
/// cudaHostAlloc, cudaHostRegister): such memory can be copied to every device by DMA without
/// staging. False for ordinary (pageable) memory and in builds without CUDA.
bool is_pinned_host(const void* p);
/// Page-locks an existing host buffer in place (cudaHostRegister, portable to every device) for
/// as long as the object lives, so that copies from it go by DMA without staging (see
/// is_pinned_host). The buffer must outlive the object and must not move. A no-op in builds
/// without CUDA or without a device. Throws Error(cuda) when the driver refuses.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(void* p, std::size_t bytes);
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  void* data() const { return p_; }

 private:
  void* p_ = nullptr;
};
/// Selects the current device for the calling thread.
void set_device(int device);
/// A one-line description of device `device` ("NVIDIA H200, sm_90, 132 SMs, 139.8 GiB").
std::string device_description(int device = 0);

}  // namespace warpbeam
