// The CPU EPIC imager (the reference path): for every channel (OpenMP) and spectrum, grid X and
// Y in fp32, one FFTW 2-D forward transform of both, and accumulate XX*, YY*, XY* in fp64; then
// the shared host finalisation (autocorrelation image, grid correction, centring).
#include <omp.h>

#include <cstring>
#include <mutex>

#include "epic/tables.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"

#ifdef WARPBEAM_HAVE_FFTW3F
#include <fftw3.h>
#endif

namespace warpbeam::epic::detail {

#ifndef WARPBEAM_HAVE_FFTW3F
std::unique_ptr<Executor> make_cpu_executor(const EpicConfig&, const PlanTables&) {
  fail(ErrorCategory::unsupported, "this build has no FFTW3 (fftw3f): the CPU EPIC imager is off");
}
#else

namespace {

// FFTW's planner is not thread-safe; plans are made and destroyed under this lock.
std::mutex& fftw_mutex() {
  static std::mutex m;
  return m;
}

struct FftwBuffer {
  fftwf_complex* p = nullptr;
  explicit FftwBuffer(std::size_t n)
      : p(static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * n))) {
    if (!p) fail(ErrorCategory::io, "cannot allocate {} bytes for FFTW", sizeof(fftwf_complex) * n);
  }
  ~FftwBuffer() { fftwf_free(p); }
  FftwBuffer(const FftwBuffer&) = delete;
  FftwBuffer& operator=(const FftwBuffer&) = delete;
};

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(const EpicConfig& c, const PlanTables& t) : threads_(c.threads), t_(t) {
    const int n = t.n;
    FftwBuffer probe(static_cast<std::size_t>(n) * n * 2);
    int dims[2] = {n, n};
    std::lock_guard<std::mutex> lock(fftw_mutex());
    // Both polarisations in one call; in place; executed later with fftwf_execute_dft on
    // per-thread buffers of the same (fftwf_malloc) alignment.
    plan_ = fftwf_plan_many_dft(2, dims, 2, probe.p, nullptr, 1, n * n, probe.p, nullptr, 1, n * n,
                                FFTW_FORWARD, FFTW_ESTIMATE);
    if (!plan_) fail(ErrorCategory::unsupported, "FFTW cannot plan a {} x {} transform", n, n);
  }
  ~CpuExecutor() override {
    std::lock_guard<std::mutex> lock(fftw_mutex());
    fftwf_destroy_plan(plan_);
  }

  void execute(const std::uint8_t* in, float* out, const Stream*) override {
    const int nthreads = threads_ > 0 ? threads_ : omp_get_max_threads();
    const int n = t_.n;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
#pragma omp parallel num_threads(nthreads)
    {
      FftwBuffer grid(2 * nn);
      std::vector<double> acc(4 * nn), autos(static_cast<std::size_t>(t_.nused()) * 4);
#pragma omp for schedule(dynamic)
      for (int ch = 0; ch < t_.nchan; ++ch) {
        image_channel(ch, in, grid.p, acc.data(), autos.data());
        finalize_channel(t_, ch, acc.data(), autos.data(), out + ch * 4 * nn);
      }
    }
  }

 private:
  void image_channel(int ch, const std::uint8_t* in, fftwf_complex* grid, double* acc,
                     double* autos) const {
    const int n = t_.n, taps = t_.taps(), nu = t_.nused();
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::fill(acc, acc + 4 * nn, 0.0);
    std::fill(autos, autos + static_cast<std::size_t>(nu) * 4, 0.0);
    const std::complex<float>* cal = &t_.cal[static_cast<std::size_t>(ch) * t_.nstand * 2];
    for (std::int64_t ti = 0; ti < t_.ntime; ++ti) {
      const std::uint8_t* spec =
          in + (static_cast<std::size_t>(ch) * t_.ntime + ti) * t_.nstand * 2;
      std::memset(grid, 0, sizeof(fftwf_complex) * 2 * nn);
      for (int k = 0; k < nu; ++k) {
        const int s = t_.used[k];
        std::complex<float> e[2];
        for (int p = 0; p < 2; ++p) {
          const std::uint8_t b = spec[s * 2 + p];
          e[p] = std::complex<float>(static_cast<float>(io::ci4_real(b)),
                                     static_cast<float>(io::ci4_imag(b))) *
                 cal[s * 2 + p];
        }
        autos[k * 4 + 0] += std::norm(e[0]);
        autos[k * 4 + 1] += std::norm(e[1]);
        const std::complex<double> xy =
            std::complex<double>(e[0]) * std::conj(std::complex<double>(e[1]));
        autos[k * 4 + 2] += xy.real();
        autos[k * 4 + 3] += xy.imag();
        const std::size_t a = t_.ant(ch, k);
        const float* wx = &t_.wx[a * taps];
        const float* wy = &t_.wy[a * taps];
        for (int iy = 0; iy < taps; ++iy)
          for (int ix = 0; ix < taps; ++ix) {
            const float w = wy[iy] * wx[ix];
            const std::size_t cell = static_cast<std::size_t>(t_.y0[a] + iy) * n + t_.x0[a] + ix;
            for (int p = 0; p < 2; ++p) {
              grid[p * nn + cell][0] += w * e[p].real();
              grid[p * nn + cell][1] += w * e[p].imag();
            }
          }
      }
      fftwf_execute_dft(plan_, grid, grid);
      for (std::size_t i = 0; i < nn; ++i) {
        const double xr = grid[i][0], xi = grid[i][1];
        const double yr = grid[nn + i][0], yi = grid[nn + i][1];
        acc[i] += xr * xr + xi * xi;
        acc[nn + i] += yr * yr + yi * yi;
        acc[2 * nn + i] += xr * yr + xi * yi;  // Re X conj(Y)
        acc[3 * nn + i] += xi * yr - xr * yi;  // Im X conj(Y)
      }
    }
  }

  int threads_;
  const PlanTables& t_;  // owned by the plan (a unique_ptr: stable when the plan moves)
  fftwf_plan plan_ = nullptr;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const EpicConfig& c, const PlanTables& t) {
  return std::make_unique<CpuExecutor>(c, t);
}
#endif

}  // namespace warpbeam::epic::detail
