#pragma once
// warpbeam core: errors, backends, memory spaces and array views shared by every engine.
//
// Every engine follows one idiom (see DESIGN.md): XxxConfig (plain struct, validate()) ->
// XxxPlan(config, Backend) (precomputed tables, scratch) -> plan.execute(in, out[, stream]).

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace warpbeam {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// What went wrong, so that callers (and the CLI's exit code) can tell a bad argument from a bad
/// file or a failing device.
enum class ErrorCategory {
  invalid_argument,  ///< a parameter outside its allowed range (CLI exit 2 when it is an option)
  format,            ///< a file that does not follow its format
  io,                ///< a file that cannot be opened, read or written
  cuda,              ///< a failing CUDA call or kernel launch
  unsupported,       ///< valid but not supported here (e.g. CUDA asked for in a CPU-only build)
};

std::string_view to_string(ErrorCategory c);

/// The one exception type warpbeam throws. what() is a one-line message naming the problem.
class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message)
      : std::runtime_error(message), category_(category) {}
  ErrorCategory category() const noexcept { return category_; }

 private:
  ErrorCategory category_;
};

/// Throws Error(category, message). The formatting overloads (fmt) are in warpbeam/format.hpp;
/// this header stays free of fmt so that CUDA files (nvcc) can include it.
[[noreturn]] void fail(ErrorCategory category, const std::string& message);

/// Reports a non-fatal problem (e.g. a trailing partial sample row that was dropped). The default
/// handler prints "warpbeam: warning: MESSAGE" to stderr; tests may install their own.
void warn(const std::string& message);
/// This process's rank when an MPI launcher started it (OMPI_COMM_WORLD_RANK, PMIX_RANK or
/// PMI_RANK in the environment), else 0; readable before MPI is initialised.
int launcher_rank();
using WarningHandler = void (*)(const std::string& message);
/// Installs `h` (nullptr restores the default) and returns the previous handler.
WarningHandler set_warning_handler(WarningHandler h);

// ---------------------------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------------------------

/// Where a plan runs. `automatic` resolves to cuda when a device is present, else cpu.
enum class Backend { cpu, cuda, automatic };

std::string_view to_string(Backend b);
/// Parses "cpu", "cuda" or "auto"; throws invalid_argument otherwise.
Backend parse_backend(std::string_view s);

/// True when this build has the CUDA backend and at least one device is visible.
bool cuda_available();
/// True when this build was compiled with the CUDA backend (whether or not a device is present).
bool cuda_built();
/// Resolves `automatic`; throws unsupported when cuda is asked for and cannot be had.
Backend resolve_backend(Backend b);

// ---------------------------------------------------------------------------------------------
// Array views
// ---------------------------------------------------------------------------------------------

/// Where the bytes of a view live.
enum class Space { host, device };

/// A non-owning view of a strided array: shape and strides in elements, slowest axis first.
/// A plan checks shape and space on entry and throws invalid_argument on a mismatch.
template <class T, std::size_t Rank>
struct View {
  T* data = nullptr;
  std::array<std::int64_t, Rank> shape{};
  std::array<std::int64_t, Rank> strides{};
  Space space = Space::host;

  View() = default;
  /// A contiguous (row-major) view.
  View(T* ptr, std::array<std::int64_t, Rank> shp, Space sp = Space::host)
      : data(ptr), shape(shp), space(sp) {
    std::int64_t s = 1;
    for (std::size_t i = Rank; i-- > 0;) {
      strides[i] = s;
      s *= shape[i];
    }
  }
  std::int64_t size() const {
    std::int64_t n = 1;
    for (auto d : shape)
      n *= d;
    return n;
  }
  bool contiguous() const {
    std::int64_t s = 1;
    for (std::size_t i = Rank; i-- > 0;) {
      if (shape[i] != 1 && strides[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  /// Read-only view of the same array.
  operator View<const T, Rank>() const {
    View<const T, Rank> v;
    v.data = data;
    v.shape = shape;
    v.strides = strides;
    v.space = space;
    return v;
  }
};

namespace detail {
void check_view(const void* data, const std::int64_t* shape, const std::int64_t* expected,
                std::size_t rank, bool contiguous, Space space, Space expected_space,
                std::string_view what);
}

/// Throws invalid_argument unless the view has the expected shape, is contiguous and lives in
/// `space`. `what` names the argument in the message.
template <class T, std::size_t Rank>
void require_view(const View<T, Rank>& v, const std::array<std::int64_t, Rank>& shape, Space space,
                  std::string_view what) {
  detail::check_view(v.data, v.shape.data(), shape.data(), Rank, v.contiguous(), v.space, space,
                     what);
}

// ---------------------------------------------------------------------------------------------
// Workspace
// ---------------------------------------------------------------------------------------------

/// Memory a plan holds besides its caller's input and output (tables, scratch), as cuFFT's
/// cufftGetSize() reports a plan's work area: plan.workspace() is what a made plan holds,
/// Plan::estimate_workspace(config, backend) an upper bound before making one (cufftEstimate*).
/// Callers size memory budgets from these reports, never from constants guessed outside the
/// engine (DESIGN.md).
struct Workspace {
  std::int64_t host_bytes = 0;
  std::int64_t device_bytes = 0;
  Workspace& operator+=(const Workspace& o) {
    host_bytes += o.host_bytes;
    device_bytes += o.device_bytes;
    return *this;
  }
  friend Workspace operator+(Workspace a, const Workspace& b) { return a += b; }
  friend Workspace operator*(std::int64_t n, Workspace w) {
    w.host_bytes *= n;
    w.device_bytes *= n;
    return w;
  }
};

// ---------------------------------------------------------------------------------------------
// Version and provenance
// ---------------------------------------------------------------------------------------------

/// warpbeam's version ("0.1.0").
std::string_view version();
/// The git commit the library was built from (12 hex digits, "-dirty" when modified).
std::string_view git_commit();

}  // namespace warpbeam
