// The corner turn shared by the CPU dedispersion methods (cpu_common.hpp).
#include "dedisp/cpu_common.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {
constexpr std::int64_t kUnpackRows = 16;  // time rows unpacked (then transposed) at a time
constexpr std::int64_t kCodeRows = 64;    // 8-bit codes: one cache line of each channel's row
}  // namespace

int cpu_thread_count(const DedispersionConfig& c) {
  return c.threads > 0 ? c.threads : omp_get_max_threads();
}

void unpack_channel_major(const DedispersionConfig& c, const std::uint8_t* in,
                          const std::vector<int>& channels, float* scratch, std::int64_t stride,
                          std::int64_t nsamples) {
  const std::int64_t row = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
  const std::int64_t n = nsamples < 0 ? c.nsamples_in : nsamples;
  const std::int64_t nblocks = (n + kUnpackRows - 1) / kUnpackRows;
  const auto nact = static_cast<std::int64_t>(channels.size());
  if ((c.nbits == 8 && !c.is_signed) || c.nbits == 32) {
    // Whole-byte samples: read each channel's column straight from the packed rows (the 64
    // rows of a block stay in L1/L2 while every channel is copied out), no unpacked copy.
#pragma omp parallel for schedule(static) num_threads(cpu_thread_count(c))
    for (std::int64_t b = 0; b < nblocks; ++b) {
      const std::int64_t t0 = b * kUnpackRows;
      const std::int64_t nt = std::min(kUnpackRows, n - t0);
      const std::uint8_t* blk = in + t0 * row;
      for (std::int64_t i = 0; i < nact; ++i) {
        const int ch = channels[static_cast<std::size_t>(i)];
        float* dst = scratch + i * stride + t0;
        if (c.nbits == 8) {
          for (std::int64_t j = 0; j < nt; ++j)
            dst[j] = static_cast<float>(blk[j * row + ch]);
        } else {
          for (std::int64_t j = 0; j < nt; ++j)
            std::memcpy(dst + j, blk + j * row + 4 * static_cast<std::int64_t>(ch), 4);
        }
      }
    }
    return;
  }
#pragma omp parallel num_threads(cpu_thread_count(c))
  {
    std::vector<float> rows(static_cast<std::size_t>(kUnpackRows * c.nchans));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < nblocks; ++b) {
      const std::int64_t t0 = b * kUnpackRows;
      const std::int64_t nt = std::min(kUnpackRows, n - t0);
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

void unpack_channel_major_codes(const DedispersionConfig& c, const std::uint8_t* in,
                                const std::vector<int>& channels, std::uint8_t* scratch,
                                std::int64_t stride, std::int64_t nsamples) {
  const auto row = static_cast<std::int64_t>(c.nchans);  // one byte per sample
  const std::int64_t n = nsamples < 0 ? c.nsamples_in : nsamples;
  const std::int64_t nblocks = (n + kCodeRows - 1) / kCodeRows;
  const auto nact = static_cast<std::int64_t>(channels.size());
#pragma omp parallel for schedule(static) num_threads(cpu_thread_count(c))
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const std::int64_t t0 = b * kCodeRows;
    const std::int64_t nt = std::min(kCodeRows, n - t0);
    const std::uint8_t* blk = in + t0 * row;
    for (std::int64_t i = 0; i < nact; ++i) {
      const int ch = channels[static_cast<std::size_t>(i)];
      std::uint8_t* dst = scratch + i * stride + t0;
      for (std::int64_t j = 0; j < nt; ++j)
        dst[j] = blk[j * row + ch];
    }
  }
}

}  // namespace warpbeam::dedisp::detail
