#pragma once
// Internal: the pieces every CPU dedispersion method shares: the corner turn of a gulp into
// float32 channel rows, and the vectorised sum of shifted rows into an accumulator row.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "warpbeam/dedisp.hpp"

#ifdef __AVX2__
#include <immintrin.h>
#endif

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

/// The CPU sub-band executor's default macro block (output samples whose stage-1 series are
/// held at once), measured on the development VM (docs/PERFORMANCE.md).
inline constexpr int kSubbandMacroBlock = 8192;

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
inline void accumulate(float* __restrict__ acc, const float* const* src, int nsrc, std::int64_t n) {
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

/// out[x] = src[0][x] + src[1][x] + ... (nsrc rows, added in order) for x < n, 64 samples at a
/// time held in eight AVX registers: one load and one add per term and no accumulator traffic,
/// where accumulate() loads and stores its accumulator every four rows. For sums of many rows
/// that sit in cache (the sub-band stages).
inline void sum_rows(float* __restrict__ out, const float* const* src, int nsrc, std::int64_t n) {
  std::int64_t x = 0;
#ifdef __AVX2__
  for (; x + 64 <= n; x += 64) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int k = 0; k < nsrc; ++k) {
      const float* p = src[k] + x;
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 24));
      a4 = _mm256_add_ps(a4, _mm256_loadu_ps(p + 32));
      a5 = _mm256_add_ps(a5, _mm256_loadu_ps(p + 40));
      a6 = _mm256_add_ps(a6, _mm256_loadu_ps(p + 48));
      a7 = _mm256_add_ps(a7, _mm256_loadu_ps(p + 56));
    }
    _mm256_storeu_ps(out + x, a0);
    _mm256_storeu_ps(out + x + 8, a1);
    _mm256_storeu_ps(out + x + 16, a2);
    _mm256_storeu_ps(out + x + 24, a3);
    _mm256_storeu_ps(out + x + 32, a4);
    _mm256_storeu_ps(out + x + 40, a5);
    _mm256_storeu_ps(out + x + 48, a6);
    _mm256_storeu_ps(out + x + 56, a7);
  }
#endif
  for (; x < n; x += 64) {
    const std::int64_t m = std::min<std::int64_t>(64, n - x);
    float acc[64] = {};
    for (int k = 0; k < nsrc; ++k) {
      const float* __restrict__ p = src[k] + x;
      for (std::int64_t e = 0; e < m; ++e)
        acc[e] += p[e];
    }
    for (std::int64_t e = 0; e < m; ++e)
      out[x + e] = acc[e];
  }
}

}  // namespace warpbeam::dedisp::detail
