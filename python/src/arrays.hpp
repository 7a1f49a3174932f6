#pragma once
// Arrays in and out of the Python module: any object with __dlpack__ (NumPy, CuPy, PyTorch,
// JAX) arrives as an nb::ndarray without a copy; these helpers check its dtype, shape, strides
// and device (raising TypeError / ValueError that name the argument) and turn it into the
// library's View. Host arrays (cpu, cuda_host) map to Space::host, CUDA arrays to Space::device.
#include <array>
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace wbpy {

namespace nb = nanobind;
using warpbeam::Space;
using warpbeam::View;

/// An input array (read-only allowed) and an output array (writable).
using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

/// "float32", "complex64", "uint8" ... for messages.
std::string dtype_name(nb::dlpack::dtype d);

/// Where `a` lives: Space::host for CPU (and CUDA page-locked host) memory, Space::device for
/// CUDA device (or managed) memory; TypeError naming `name` for any other device (ROCm, ...).
template <class A>
Space space_of(const A& a, const char* name);

/// The CUDA device of a device array, -1 for a host array.
template <class A>
int device_of(const A& a, const char* name) {
  return space_of(a, name) == Space::device ? a.device_id() : -1;
}

/// TypeError unless a's dtype is T's.
template <class T, class A>
void require_dtype(const A& a, const char* name) {
  if (a.dtype() != nb::dtype<T>())
    throw nb::type_error((std::string(name) + ": dtype " + dtype_name(a.dtype()) + ", expected " +
                          dtype_name(nb::dtype<T>()))
                             .c_str());
}

/// ValueError unless `a` has shape `shape` (-1: any size) and is C-contiguous (row-major).
template <class A>
void require_shape(const A& a, const std::vector<std::int64_t>& shape, const char* name);

/// A View of `a` after require_dtype and require_shape (-1 entries: any size).
template <class T, std::size_t R, class A>
View<T, R> view_of(const A& a, const std::array<std::int64_t, R>& shape, const char* name) {
  require_dtype<std::remove_const_t<T>>(a, name);
  require_shape(a, std::vector<std::int64_t>(shape.begin(), shape.end()), name);
  View<T, R> v;
  v.data = static_cast<T*>(const_cast<void*>(static_cast<const void*>(a.data())));
  for (std::size_t i = 0; i < R; ++i)
    v.shape[i] = static_cast<std::int64_t>(a.shape(i));
  std::int64_t s = 1;
  for (std::size_t i = R; i-- > 0;) {
    v.strides[i] = s;
    s *= v.shape[i];
  }
  v.space = space_of(a, name);
  return v;
}

/// ValueError unless every array has the same space and (device arrays) device as the first.
void require_same_place(const InArray& in, const char* in_name, const OutArray& out,
                        const char* out_name);

/// Makes `device` current for the calling thread (a no-op for host data, -1).
void use_device(int device);

/// The caller's stream as the library's (non-owning) Stream: the cudaStream_t `ptr` the Python
/// layer found (CuPy's or PyTorch's current stream, or `stream=`); 0 is the legacy stream.
inline warpbeam::Stream borrowed_stream(std::uintptr_t ptr) {
  return warpbeam::Stream::borrow(reinterpret_cast<void*>(ptr));
}

/// Runs `run(in_ptr, out_ptr)` on device pointers: device arrays as they are; host arrays staged
/// through device buffers (copied in, run, copied back) for a CUDA plan given host data.
/// `in_bytes` / `out_bytes` are the sizes to copy. Synchronous when staged.
template <class F>
void run_on_device(const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
                   bool staged, const warpbeam::Stream* stream, F&& run) {
  if (!staged) {
    run(in, out, stream);
    return;
  }
  warpbeam::DeviceArray<std::uint8_t> din(in_bytes), dout(out_bytes);
  warpbeam::copy_bytes(din.data(), in, in_bytes);
  run(static_cast<const void*>(din.data()), static_cast<void*>(dout.data()), nullptr);
  warpbeam::copy_bytes(out, dout.data(), out_bytes);
}

/// nlohmann JSON text -> Python object (through the json module: these are small documents).
nb::object json_to_python(const std::string& text);
/// Python object -> JSON text.
std::string python_to_json(const nb::handle& obj);

}  // namespace wbpy
