#pragma once
// Internal: the pieces every CPU dedispersion method shares: the corner turn of a gulp into
// float32 channel rows, and the vectorised sum of shifted rows into an accumulator row.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "warpbeam/dedisp.hpp"

namespace warpbeam::dedisp::detail {

/// A float buffer left uninitialised: its pages are committed when first written, so a plan
/// that is made (e.g. to read its report) but never run costs no memory. Executors write every
/// element before they read it.
class FloatBuffer {
 public:
  void resize(std::size_t n) {
    data_.reset(n ? new float[n] : nullptr);
    size_ = n;
  }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<float[]> data_;
  std::size_t size_ = 0;
};

/// CPU threads of a config (0: OpenMP's default).
int cpu_thread_count(const DedispersionConfig& config);

/// `n` rounded up to a multiple of 16 floats (64-byte rows).
inline std::int64_t padded_row(std::int64_t n) {
  return (n + 15) / 16 * 16;
}

/// Unpacks the gulp `in` (packed [nsamples_in][row bytes]) into scratch[i][t] = sample t of
/// channel channels[i], t < nsamples_in, rows `stride` floats apart (OpenMP over time blocks).
void unpack_channel_major(const DedispersionConfig& config, const std::uint8_t* in,
                          const std::vector<int>& channels, float* scratch, std::int64_t stride);

/// acc[t] += s0[t] + ... over `nsrc` (1..4) source rows, t < n: ((a + b) + (c + d)) per pass,
/// vectorised (AVX2 with -march=x86-64-v3).
inline void accumulate(float* __restrict__ acc, const float* const* src, int nsrc,
                       std::int64_t n) {
  const float* __restrict__ a = src[0];
  switch (nsrc) {
    case 4: {
      const float* __restrict__ b = src[1];
      const float* __restrict__ c = src[2];
      const float* __restrict__ d = src[3];
#pragma omp simd
      for (std::int64_t t = 0; t < n; ++t)
        acc[t] += (a[t] + b[t]) + (c[t] + d[t]);
      return;
    }
    case 3: {
      const float* __restrict__ b = src[1];
      const float* __restrict__ c = src[2];
#pragma omp simd
      for (std::int64_t t = 0; t < n; ++t)
        acc[t] += (a[t] + b[t]) + c[t];
      return;
    }
    case 2: {
      const float* __restrict__ b = src[1];
#pragma omp simd
      for (std::int64_t t = 0; t < n; ++t)
        acc[t] += a[t] + b[t];
      return;
    }
    default:
#pragma omp simd
      for (std::int64_t t = 0; t < n; ++t)
        acc[t] += a[t];
  }
}

}  // namespace warpbeam::dedisp::detail
