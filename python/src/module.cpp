// warpbeam._warpbeam: the compiled half of the Python package (the pure-Python half in
// python/warpbeam/ gives it its Python names, defaults and array handling).
//
// warpbeam::Error's categories become Python exceptions: invalid_argument -> ValueError,
// format -> warpbeam.FormatError, io -> OSError, cuda and unsupported -> RuntimeError.
#include <nanobind/stl/string.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace nb = nanobind;

namespace {

PyObject* g_format_error = nullptr;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const warpbeam::Error& e) {
    switch (e.category()) {
      case warpbeam::ErrorCategory::invalid_argument:
        PyErr_SetString(PyExc_ValueError, e.what());
        break;
      case warpbeam::ErrorCategory::format:
        PyErr_SetString(g_format_error, e.what());
        break;
      case warpbeam::ErrorCategory::io:
        PyErr_SetString(PyExc_OSError, e.what());
        break;
      default:
        PyErr_SetString(PyExc_RuntimeError, e.what());
        break;
    }
  }
}

}  // namespace

NB_MODULE(_warpbeam, m) {
  m.doc() = "warpbeam's compiled core; import warpbeam, not this module.";
  g_format_error = PyErr_NewExceptionWithDoc(
      "warpbeam.FormatError", "A file that does not follow its format (malformed header, ...).",
      PyExc_Exception, nullptr);
  m.attr("FormatError") = nb::handle(g_format_error);
  nb::register_exception_translator(translate);

  m.def(
      "version", [] { return std::string(warpbeam::version()); },
      "warpbeam's version, e.g. '0.1.0'.");
  m.def(
      "git_commit", [] { return std::string(warpbeam::git_commit()); },
      "The git commit the library was built from.");
  m.def("cuda_built", &warpbeam::cuda_built, "True when this build has the CUDA backend.");
  m.def("cuda_available", &warpbeam::cuda_available,
        "True when this build has the CUDA backend and a CUDA device is visible.");
  m.def("device_count", &warpbeam::device_count, "Number of visible CUDA devices.");
  m.def(
      "device_description", [](int d) { return warpbeam::device_description(d); },
      nb::arg("device") = 0, "One line describing CUDA device `device`.");
  m.def(
      "synchronize",
      [](std::uintptr_t stream) {
        nb::gil_scoped_release g;
        wbpy::borrowed_stream(stream).synchronize();
      },
      nb::arg("stream"), "Waits for the CUDA stream (a cudaStream_t as an int).");

  wbpy::bind_io(m);
  wbpy::bind_dedisp(m);
  wbpy::bind_search(m);
  wbpy::bind_das(m);
  wbpy::bind_beamform(m);
  wbpy::bind_epic(m);
  wbpy::bind_sim(m);
}
