// The corner turn shared by the CPU dedispersion methods (cpu_common.hpp).
#include "dedisp/cpu_common.hpp"

#include <omp.h>

#include <algorithm>

#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {
constexpr std::int64_t kUnpackRows = 64;  // time rows unpacked (then transposed) at a time
}

int cpu_thread_count(const DedispersionConfig& c) {
  return c.threads > 0 ? c.threads : omp_get_max_threads();
}

void unpack_channel_major(const DedispersionConfig& c, const std::uint8_t* in,
                          const std::vector<int>& channels, float* scratch, std::int64_t stride) {
  const std::int64_t row = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
  const std::int64_t nblocks = (c.nsamples_in + kUnpackRows - 1) / kUnpackRows;
  const auto nact = static_cast<std::int64_t>(channels.size());
#pragma omp parallel num_threads(cpu_thread_count(c))
  {
    std::vector<float> rows(static_cast<std::size_t>(kUnpackRows * c.nchans));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < nblocks; ++b) {
      const std::int64_t t0 = b * kUnpackRows;
      const std::int64_t nt = std::min(kUnpackRows, c.nsamples_in - t0);
      for (std::int64_t j = 0; j < nt; ++j)
        unpack_samples(in + (t0 + j) * row, c.nbits, static_cast<std::size_t>(c.nchans),
                       rows.data() + j * c.nchans, c.is_signed);
      for (std::int64_t i = 0; i < nact; ++i) {
        const float* src = rows.data() + channels[static_cast<std::size_t>(i)];
        float* dst = scratch + i * stride + t0;
        for (std::int64_t j = 0; j < nt; ++j)
          dst[j] = src[j * c.nchans];
      }
    }
  }
}

}  // namespace warpbeam::dedisp::detail
