#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"

#include <map>
#include <mutex>
#include <utility>

#ifdef WARPBEAM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#endif

namespace warpbeam {

#ifdef WARPBEAM_HAVE_CUDA

namespace detail {
void* device_malloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free allocation error
    fail(ErrorCategory::cuda, "cannot allocate {:.3f} GiB of device memory: {}",
         static_cast<double>(bytes) / (1 << 30), cudaGetErrorString(e));
  }
  return p;
}
void device_free(void* p) noexcept {
  if (p) cudaFree(p);
}
// Pinned host memory is cached: page-locking costs ~0.1 s per 300 MB and the driver does it one
// allocation at a time, so workers that set up at once (several GPUs of one process) wait for
// each other, and a worker that searches file after file would pay it per file. Freed blocks
// (up to kPinnedCacheBytes) are kept and handed out again for a request of at most their size
// and at least 3/4 of it; the cache is never returned to the driver at exit (the process's end
// does that), so no static destructor races the CUDA runtime's teardown.
namespace {
constexpr std::size_t kPinnedCacheBytes = std::size_t{4} << 30;
struct PinnedCache {
  std::mutex mutex;
  std::multimap<std::size_t, void*> free;  // size -> block
  std::map<void*, std::size_t> live;       // block -> size
  std::size_t free_bytes = 0;
};
PinnedCache& pinned_cache() {
  static auto* cache = new PinnedCache;  // never destroyed: see above
  return *cache;
}
}  // namespace

void* pinned_malloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  PinnedCache& c = pinned_cache();
  {
    const std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.free.lower_bound(bytes);
    if (it != c.free.end() && it->first / 4 * 3 <= bytes) {
      void* p = it->second;
      c.live[p] = it->first;
      c.free_bytes -= it->first;
      c.free.erase(it);
      return p;
    }
  }
  void* p = nullptr;
  WB_CUDA_CHECK(cudaMallocHost(&p, bytes));
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.live[p] = bytes;
  return p;
}
void pinned_free(void* p) noexcept {
  if (!p) return;
  PinnedCache& c = pinned_cache();
  std::unique_lock<std::mutex> lock(c.mutex);
  const auto it = c.live.find(p);
  if (it == c.live.end()) return;  // not ours: cannot happen through PinnedArray
  const std::size_t bytes = it->second;
  c.live.erase(it);
  if (c.free_bytes + bytes <= kPinnedCacheBytes) {
    c.free.emplace(bytes, p);
    c.free_bytes += bytes;
    return;
  }
  lock.unlock();
  cudaFreeHost(p);
}
}  // namespace detail

namespace detail {
void allow_dynamic_smem(const void* kernel, std::size_t bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, std::size_t> limits;  // (kernel, device) -> bytes
  int device = 0;
  WB_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  std::size_t& limit = limits[{kernel, device}];
  if (bytes <= limit) return;
  WB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
  limit = bytes;
}
}  // namespace detail

HostRegistration::HostRegistration(void* p, std::size_t bytes) {
  if (!p || bytes == 0 || device_count() == 0) return;
  WB_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
  p_ = p;
}
HostRegistration::~HostRegistration() {
  if (p_) cudaHostUnregister(p_);
}

bool is_pinned_host(const void* p) {
  if (!p) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is not an error here
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

Stream::Stream() {
  cudaStream_t s{};
  WB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  handle_ = s;
}
Stream::~Stream() {
  if (handle_ && owned_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}
void Stream::synchronize() const {
  WB_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
}

Event::Event() {
  cudaEvent_t e{};
  WB_CUDA_CHECK(cudaEventCreate(&e));
  handle_ = e;
}
Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}
void Event::record(const Stream* s) {
  WB_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), WB_STREAM(s)));
}
void Event::synchronize() const {
  WB_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  WB_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_),
                                     static_cast<cudaEvent_t>(handle_)));
  return ms;
}

void copy_bytes(void* dst, const void* src, std::size_t bytes, const Stream* stream) {
  if (bytes == 0) return;
  if (stream) {
    WB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, WB_STREAM(stream)));
  } else {
    // From pageable host memory cudaMemcpy may return once the bytes are in the driver's staging
    // buffer, before the DMA to the device ends; the streams are non-blocking (Stream::Stream), so
    // a kernel launched next on one could read the old bytes (seen on the H200: a GPU test read a
    // stale tail of its input, 2026-12-03). The sync makes "completes before returning" true.
    WB_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
}
void device_memset(void* dst, int value, std::size_t bytes, const Stream* stream) {
  if (bytes == 0) return;
  WB_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, WB_STREAM(stream)));
  if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}
void device_synchronize() {
  WB_CUDA_CHECK(cudaDeviceSynchronize());
}
int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}
void set_device(int device) {
  WB_CUDA_CHECK(cudaSetDevice(device));
}
std::string device_description(int device) {
  cudaDeviceProp p{};
  WB_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return fmt::format("{}, sm_{}{}, {} SMs, {:.1f} GiB", p.name, p.major, p.minor,
                     p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1 << 30));
}

#else  // no CUDA in this build

namespace {
[[noreturn]] void no_cuda() {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
}  // namespace
namespace detail {
void* device_malloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  no_cuda();
}
void device_free(void*) noexcept {}
void* pinned_malloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  no_cuda();
}
void pinned_free(void*) noexcept {}
}  // namespace detail
bool is_pinned_host(const void*) {
  return false;
}
HostRegistration::HostRegistration(void*, std::size_t) {}
HostRegistration::~HostRegistration() = default;
Stream::Stream() {
  no_cuda();
}
Stream::~Stream() = default;
void Stream::synchronize() const {
  no_cuda();
}
Event::Event() {
  no_cuda();
}
Event::~Event() = default;
void Event::record(const Stream*) {
  no_cuda();
}
void Event::synchronize() const {
  no_cuda();
}
float Event::elapsed_ms_since(const Event&) const {
  no_cuda();
}
void copy_bytes(void*, const void*, std::size_t, const Stream*) {
  no_cuda();
}
void device_memset(void*, int, std::size_t, const Stream*) {
  no_cuda();
}
void device_synchronize() {}
int device_count() {
  return 0;
}
void set_device(int) {
  no_cuda();
}
std::string device_description(int) {
  return "no CUDA in this build";
}

#endif

}  // namespace warpbeam
