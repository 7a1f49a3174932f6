// CPU dedispersion, direct variant (Algorithm::direct): the first, untiled loop, kept as the
// baseline that `warpbeam bench dedisp` measures the tiled kernel (cpu_tiled.cpp) against. The gulp
// is unpacked to [time][chan] float32; each DM trial (OpenMP) adds whole channel rows read with a
// stride of nchans, so nothing is reused from cache.
#include <omp.h>

#include <vector>

#include "dedisp/executor.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

class CpuDirectExecutor final : public Executor {
 public:
  explicit CpuDirectExecutor(const PlanData& p)
      : unpacked_(static_cast<std::size_t>(p.config.nsamples_in) * p.config.nchans) {}

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    const auto& c = p.config;
    const std::int64_t nt = p.nsamples_out;
    const auto row = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
    const int threads = c.threads > 0 ? c.threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t t = 0; t < c.nsamples_in; ++t)
      unpack_samples(in + t * row, c.nbits, static_cast<std::size_t>(c.nchans),
                     unpacked_.data() + t * c.nchans, c.is_signed);
    const auto ndm = static_cast<std::int64_t>(c.dms.size());
#pragma omp parallel for schedule(dynamic) num_threads(threads)
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
  Workspace workspace() const override {
    return {static_cast<std::int64_t>(unpacked_.size() * sizeof(float)), 0};
  }

  std::vector<float> unpacked_;  // [nsamples_in][nchans]
};

}  // namespace

std::unique_ptr<Executor> make_cpu_direct_executor(const PlanData& plan) {
  return std::make_unique<CpuDirectExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
