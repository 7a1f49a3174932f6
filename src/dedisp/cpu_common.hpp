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

/// Whether the CPU sub-band executor sums `config`'s input as integers: 8-bit unsigned codes,
/// every sub-band's stage-1 sum within uint16 (at most 257 channels of codes <= 255) and every
/// output sum below 2^24. Integer sums of codes are then exact and so are the float32 path's (each
/// partial sum an integer below 2^24, whatever the order): the output is bit for bit the same.
/// `channels`: the kept channels of each listed sub-band (SubbandTables::channels).
inline bool cpu_subband_sums_codes(const DedispersionConfig& config,
                                   const std::vector<std::vector<int>>& channels) {
  if (config.nbits != 8 || config.is_signed) return false;
  std::int64_t widest = 0, total = 0;
  for (const auto& ch : channels) {
    widest = std::max<std::int64_t>(widest, static_cast<std::int64_t>(ch.size()));
    total += static_cast<std::int64_t>(ch.size());
  }
  return widest * 255 <= 65535 && total * 255 < (std::int64_t{1} << 24);
}

/// CPU threads of a config (0: OpenMP's default).
int cpu_thread_count(const DedispersionConfig& config);

/// `n` rounded up to a multiple of 16 floats (64-byte rows).
inline std::int64_t padded_row(std::int64_t n) {
  return (n + 15) / 16 * 16;
}

/// Unpacks the gulp `in` (packed [nsamples][row bytes]) into scratch[i][t] = sample t of
/// channel channels[i], t < nsamples, rows `stride` floats apart (OpenMP over time blocks).
/// nsamples < 0: config.nsamples_in.
void unpack_channel_major(const DedispersionConfig& config, const std::uint8_t* in,
                          const std::vector<int>& channels, float* scratch, std::int64_t stride,
                          std::int64_t nsamples = -1);

/// Unpacks the gulp of 8-bit unsigned codes `in` into scratch[i][t] = sample t of channel
/// channels[i] (uint8, rows `stride` bytes apart), t < nsamples (OpenMP over time blocks;
/// nsamples < 0: config.nsamples_in).
void unpack_channel_major_codes(const DedispersionConfig& config, const std::uint8_t* in,
                                const std::vector<int>& channels, std::uint8_t* scratch,
                                std::int64_t stride, std::int64_t nsamples = -1);

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

/// out[x] = src[0][x] + src[1][x] + ... (nsrc rows of 8-bit codes) in uint16 for x < n, 128
/// samples at a time in eight AVX registers (16 lanes each): the caller keeps the sum below
/// 2^16 (cpu_subband_sums_codes), so it is exact.
inline void sum_code_rows(std::uint16_t* __restrict__ out, const std::uint8_t* const* src, int nsrc,
                          std::int64_t n) {
  std::int64_t x = 0;
#ifdef __AVX2__
  const auto load = [](const std::uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  };
  for (; x + 128 <= n; x += 128) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    for (int k = 0; k < nsrc; ++k) {
      const std::uint8_t* p = src[k] + x;
      a0 = _mm256_add_epi16(a0, load(p));
      a1 = _mm256_add_epi16(a1, load(p + 16));
      a2 = _mm256_add_epi16(a2, load(p + 32));
      a3 = _mm256_add_epi16(a3, load(p + 48));
      a4 = _mm256_add_epi16(a4, load(p + 64));
      a5 = _mm256_add_epi16(a5, load(p + 80));
      a6 = _mm256_add_epi16(a6, load(p + 96));
      a7 = _mm256_add_epi16(a7, load(p + 112));
    }
    auto* o = reinterpret_cast<__m256i*>(out + x);
    _mm256_storeu_si256(o, a0);
    _mm256_storeu_si256(o + 1, a1);
    _mm256_storeu_si256(o + 2, a2);
    _mm256_storeu_si256(o + 3, a3);
    _mm256_storeu_si256(o + 4, a4);
    _mm256_storeu_si256(o + 5, a5);
    _mm256_storeu_si256(o + 6, a6);
    _mm256_storeu_si256(o + 7, a7);
  }
  for (; x + 16 <= n; x += 16) {
    __m256i a = _mm256_setzero_si256();
    for (int k = 0; k < nsrc; ++k)
      a = _mm256_add_epi16(a, load(src[k] + x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), a);
  }
#endif
  for (; x < n; x += 64) {
    const std::int64_t m = std::min<std::int64_t>(64, n - x);
    std::uint16_t acc[64] = {};
    for (int k = 0; k < nsrc; ++k) {
      const std::uint8_t* __restrict__ p = src[k] + x;
      for (std::int64_t e = 0; e < m; ++e)
        acc[e] = static_cast<std::uint16_t>(acc[e] + p[e]);
    }
    for (std::int64_t e = 0; e < m; ++e)
      out[x + e] = acc[e];
  }
}

/// out[x] = float(src[0][x] + src[1][x] + ...) over `nsrc` uint16 rows (stage-1 sums of codes)
/// for x < n, summed exactly as integers: `group` rows at a time in uint16 (the caller keeps
/// group x the largest row value <= 65535), those partial sums widened into uint32 (64 samples
/// in eight AVX registers); the caller keeps the total below 2^24, so the float is exact.
inline void sum_series_rows(float* __restrict__ out, const std::uint16_t* const* src, int nsrc,
                            int group, std::int64_t n) {
  std::int64_t x = 0;
#ifdef __AVX2__
  const auto load = [](const std::uint16_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  };
  const auto lo = [](__m256i h) { return _mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)); };
  const auto hi = [](__m256i h) { return _mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)); };
  for (; x + 64 <= n; x += 64) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
            s7 = s0;
    for (int k0 = 0; k0 < nsrc; k0 += group) {
      const int k1 = std::min(nsrc, k0 + group);
      __m256i h0 = _mm256_setzero_si256(), h1 = h0, h2 = h0, h3 = h0;
      for (int k = k0; k < k1; ++k) {
        const std::uint16_t* p = src[k] + x;
        h0 = _mm256_add_epi16(h0, load(p));
        h1 = _mm256_add_epi16(h1, load(p + 16));
        h2 = _mm256_add_epi16(h2, load(p + 32));
        h3 = _mm256_add_epi16(h3, load(p + 48));
      }
      s0 = _mm256_add_epi32(s0, lo(h0));
      s1 = _mm256_add_epi32(s1, hi(h0));
      s2 = _mm256_add_epi32(s2, lo(h1));
      s3 = _mm256_add_epi32(s3, hi(h1));
      s4 = _mm256_add_epi32(s4, lo(h2));
      s5 = _mm256_add_epi32(s5, hi(h2));
      s6 = _mm256_add_epi32(s6, lo(h3));
      s7 = _mm256_add_epi32(s7, hi(h3));
    }
    _mm256_storeu_ps(out + x, _mm256_cvtepi32_ps(s0));
    _mm256_storeu_ps(out + x + 8, _mm256_cvtepi32_ps(s1));
    _mm256_storeu_ps(out + x + 16, _mm256_cvtepi32_ps(s2));
    _mm256_storeu_ps(out + x + 24, _mm256_cvtepi32_ps(s3));
    _mm256_storeu_ps(out + x + 32, _mm256_cvtepi32_ps(s4));
    _mm256_storeu_ps(out + x + 40, _mm256_cvtepi32_ps(s5));
    _mm256_storeu_ps(out + x + 48, _mm256_cvtepi32_ps(s6));
    _mm256_storeu_ps(out + x + 56, _mm256_cvtepi32_ps(s7));
  }
#else
  (void)group;
#endif
  // The rest in uint32 straight away: an exact integer sum in any order.
  for (; x < n; x += 64) {
    const std::int64_t m = std::min<std::int64_t>(64, n - x);
    std::uint32_t acc[64] = {};
    for (int k = 0; k < nsrc; ++k) {
      const std::uint16_t* __restrict__ p = src[k] + x;
      for (std::int64_t e = 0; e < m; ++e)
        acc[e] += p[e];
    }
    for (std::int64_t e = 0; e < m; ++e)
      out[x + e] = static_cast<float>(acc[e]);
  }
}

}  // namespace warpbeam::dedisp::detail
