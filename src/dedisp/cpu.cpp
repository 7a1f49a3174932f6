// CPU dedispersion (the reference path). First version: unpack the gulp to float32, then for
// every DM trial accumulate channel rows shifted by their delay (OpenMP over DM trials).
#include <omp.h>

#include <vector>

#include "dedisp/executor.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(const PlanData& p)
      : unpacked_(static_cast<std::size_t>(p.config.nsamples_in) * p.config.nchans) {}

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    const auto& c = p.config;
    const std::int64_t nt = p.nsamples_out;
    const std::int64_t row = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
    for (std::int64_t t = 0; t < c.nsamples_in; ++t)
      unpack_samples(in + t * row, c.nbits, c.nchans, unpacked_.data() + t * c.nchans, c.is_signed);
    const auto ndm = static_cast<std::int64_t>(c.dms.size());
#pragma omp parallel for schedule(dynamic) num_threads(c.threads > 0 ? c.threads : omp_threads())
    for (std::int64_t d = 0; d < ndm; ++d) {
      float* o = out + d * nt;
      for (std::int64_t t = 0; t < nt; ++t)
        o[t] = 0;
      for (int ch = 0; ch < c.nchans; ++ch) {
        if (!c.killmask.empty() && !c.killmask[ch]) continue;
        const float* src = unpacked_.data() + p.delays[d * c.nchans + ch] * c.nchans + ch;
        for (std::int64_t t = 0; t < nt; ++t)
          o[t] += src[t * c.nchans];
      }
    }
  }

 private:
  static int omp_threads() {
    return omp_get_max_threads();
  }
  std::vector<float> unpacked_;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan) {
  return std::make_unique<CpuExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
