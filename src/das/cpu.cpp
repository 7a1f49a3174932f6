// CPU delay-and-sum: the reference path. The input is permuted once per execute to
// [tx][rx][sample][re, im][batch] (batch innermost, real and imaginary planes apart), so the loop
// over frames of one (voxel, tx, rx) term is a contiguous SIMD loop of fused multiply-adds; voxels
// are spread over OpenMP threads. Delays and weights come from das/delay.hpp, computed once per
// (voxel, tx, rx) and shared by all frames, by host_coefficients (delay_host.cpp, compiled without
// FMA contraction so that the delays match the CUDA kernels bit for bit).
#include <omp.h>

#include <algorithm>
#include <vector>

#include "das/executor.hpp"

namespace warpbeam::das::detail {
namespace {

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(const PlanData& p) {
    const auto& c = p.config;
    bp_ = (c.batch + 7) / 8 * 8;
    planes_ = c.signal == Signal::iq ? 2 : 1;
    buf_.assign(static_cast<std::size_t>(c.ntx() * c.nrx() * c.nsamples * planes_ * bp_), 0.f);
  }

  void execute(const PlanData& p, const void* in, std::complex<float>* out, const Stream*,
               Event*) override {
    const auto& c = p.config;
    permute(c, in);
    const std::int64_t nv = c.nvoxels(), nrx = c.nrx(), ntx = c.ntx(), K = c.nsamples;
    const std::int64_t B = c.batch, bp = bp_, planes = planes_;
    const std::int64_t row = planes * bp;  // floats per sample
    const float* buf = buf_.data();
    const bool has_w = !c.tx_weights.empty();
    const int nthreads = c.threads > 0 ? c.threads : omp_get_max_threads();
#pragma omp parallel num_threads(nthreads)
    {
      std::vector<float> acc(static_cast<std::size_t>(row));
#pragma omp for schedule(dynamic, 16)
      for (std::int64_t n = 0; n < nv; ++n) {
        std::fill(acc.begin(), acc.end(), 0.f);
        float* __restrict__ ar = acc.data();
        float* __restrict__ ai = acc.data() + bp;
        const Vec3& v = c.voxels[n];
        for (std::int64_t q = 0; q < ntx; ++q) {
          const double ttx = p.tx_delays[q * nv + n];
          const float wtx = has_w ? c.tx_weights[q * nv + n] : 1.f;
          if (wtx == 0.f) continue;
          for (std::int64_t m = 0; m < nrx; ++m) {
            const Coeff k = host_coefficients(p.params, v[0], v[1], v[2], ttx, wtx, p.elements[m]);
            if (k.k < 0) continue;
            const float* __restrict__ s0 = buf + ((q * nrx + m) * K + k.k) * row;
            const float* __restrict__ s1 = s0 + row;
            if (planes == 2) {
              const float* __restrict__ s0i = s0 + bp;
              const float* __restrict__ s1i = s1 + bp;
#pragma omp simd
              for (std::int64_t b = 0; b < bp; ++b) {
                ar[b] += k.ar * s0[b] - k.ai * s0i[b] + k.br * s1[b] - k.bi * s1i[b];
                ai[b] += k.ar * s0i[b] + k.ai * s0[b] + k.br * s1i[b] + k.bi * s1[b];
              }
            } else {
#pragma omp simd
              for (std::int64_t b = 0; b < bp; ++b)
                ar[b] += k.ar * s0[b] + k.br * s1[b];
            }
          }
        }
        for (std::int64_t b = 0; b < B; ++b)
          out[b * nv + n] = {ar[b], planes == 2 ? ai[b] : 0.f};
      }
    }
  }

 private:
  // [batch][rx][tx][sample] (complex or real) -> [tx][rx][sample][plane][bp].
  void permute(const DasConfig& c, const void* in) {
    const std::int64_t B = c.batch, nrx = c.nrx(), ntx = c.ntx(), K = c.nsamples;
    const std::int64_t row = planes_ * bp_;
    const int nthreads = c.threads > 0 ? c.threads : omp_get_max_threads();
#pragma omp parallel for collapse(2) num_threads(nthreads)
    for (std::int64_t q = 0; q < ntx; ++q)
      for (std::int64_t m = 0; m < nrx; ++m) {
        float* dst = buf_.data() + (q * nrx + m) * K * row;
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t src = ((b * nrx + m) * ntx + q) * K;
          if (planes_ == 2) {
            const auto* s = static_cast<const std::complex<float>*>(in) + src;
            for (std::int64_t k = 0; k < K; ++k) {
              dst[k * row + b] = s[k].real();
              dst[k * row + bp_ + b] = s[k].imag();
            }
          } else {
            const float* s = static_cast<const float*>(in) + src;
            for (std::int64_t k = 0; k < K; ++k)
              dst[k * row + b] = s[k];
          }
        }
      }
  }

  std::int64_t bp_ = 0, planes_ = 1;
  std::vector<float> buf_;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan) {
  return std::make_unique<CpuExecutor>(plan);
}

}  // namespace warpbeam::das::detail
