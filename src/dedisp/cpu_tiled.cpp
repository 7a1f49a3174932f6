// CPU dedispersion: the ARTEMIS idea (Armour et al. 2012) on a CPU.
//
// 1. Unpack the gulp once into a [chan][time] float32 scratch (only the channels the killmask
//    keeps), so that the inner loop reads each channel contiguously in time.
// 2. Cover the (DM, time) output plane with tiles of `dms_per_tile` x `samples_per_tile`. A tile's
//    rows (its accumulators) stay in L1 while every channel is added into them; neighbouring DM
//    trials read overlapping stretches of each channel row, so the input is reused from cache.
// 3. Threads (OpenMP) take the DM tiles of one time block in turn, so they work on neighbouring
//    DMs whose input windows overlap in the shared L3; the time loop is vectorised (AVX2 with
//    -march=x86-64-v3), four channels per pass to cut accumulator loads and stores.
//
// Sums run over channels in ascending order, four at a time: ((a + b) + (c + d)) added to the
// accumulator. Integer samples are summed exactly (below 2^24); floats agree with a sequential
// sum to float rounding.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dedisp/executor.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

// Defaults measured with `warpbeam bench dedisp --config D1 --backend cpu` on the development
// machine (AMD EPYC, 32 KiB L1d, 512 KiB L2 per core): see docs/PERFORMANCE.md.
constexpr int kDefaultDmsPerTile = 16;
constexpr int kDefaultSamplesPerTile = 1024;
constexpr std::int64_t kUnpackRows = 64;  // time rows unpacked (then transposed) at a time

int thread_count(const DedispersionConfig& c) {
  return c.threads > 0 ? c.threads : omp_get_max_threads();
}

// Float buffer whose rows start on 64-byte boundaries.
std::int64_t padded(std::int64_t n) {
  return (n + 15) / 16 * 16;
}

// out[t] = s0[t] + ... over `nsrc` (1..4) source rows, added into the accumulator row.
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

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(const PlanData& p) {
    const auto& c = p.config;
    for (int ch = 0; ch < c.nchans; ++ch)
      if (c.killmask.empty() || c.killmask[ch]) active_.push_back(ch);
    const auto ndm = static_cast<std::int64_t>(c.dms.size());
    const auto nact = static_cast<std::int64_t>(active_.size());
    delays_.resize(static_cast<std::size_t>(ndm * nact));
    for (std::int64_t d = 0; d < ndm; ++d)
      for (std::int64_t i = 0; i < nact; ++i)
        delays_[d * nact + i] = p.delays[d * c.nchans + active_[i]];
    stride_ = padded(c.nsamples_in);
    scratch_.resize(static_cast<std::size_t>(std::max<std::int64_t>(nact, 1) * stride_));
    dms_per_tile_ = c.cpu_tuning.dms_per_tile > 0 ? c.cpu_tuning.dms_per_tile : kDefaultDmsPerTile;
    samples_per_tile_ =
        c.cpu_tuning.samples_per_tile > 0 ? c.cpu_tuning.samples_per_tile : kDefaultSamplesPerTile;
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    unpack_transposed(p.config, in);
    dedisperse(p, out);
  }

 private:
  // scratch_[i][t] = sample t of active channel i, for t < nsamples_in.
  void unpack_transposed(const DedispersionConfig& c, const std::uint8_t* in) {
    const std::int64_t row = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
    const std::int64_t nblocks = (c.nsamples_in + kUnpackRows - 1) / kUnpackRows;
    const auto nact = static_cast<std::int64_t>(active_.size());
#pragma omp parallel num_threads(thread_count(c))
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
          const float* src = rows.data() + active_[i];
          float* dst = scratch_.data() + i * stride_ + t0;
          for (std::int64_t j = 0; j < nt; ++j)
            dst[j] = src[j * c.nchans];
        }
      }
    }
  }

  void dedisperse(const PlanData& p, float* out) const {
    const auto& c = p.config;
    const auto ndm = static_cast<std::int64_t>(c.dms.size());
    const auto nact = static_cast<std::int64_t>(active_.size());
    const std::int64_t nt = p.nsamples_out;
    const std::int64_t T = samples_per_tile_;
    const std::int64_t D = dms_per_tile_;
    const std::int64_t ntime_blocks = (nt + T - 1) / T;
    const std::int64_t ndm_blocks = (ndm + D - 1) / D;
#pragma omp parallel num_threads(thread_count(c))
    for (std::int64_t tb = 0; tb < ntime_blocks; ++tb) {
      const std::int64_t t0 = tb * T;
      const std::int64_t n = std::min(T, nt - t0);
#pragma omp for schedule(dynamic)
      for (std::int64_t db = 0; db < ndm_blocks; ++db) {
        const std::int64_t d1 = std::min(ndm, (db + 1) * D);
        for (std::int64_t d = db * D; d < d1; ++d)
          std::memset(out + d * nt + t0, 0, static_cast<std::size_t>(n) * sizeof(float));
        // Four channels per pass over the tile's accumulator rows.
        for (std::int64_t i0 = 0; i0 < nact; i0 += 4) {
          const int nsrc = static_cast<int>(std::min<std::int64_t>(4, nact - i0));
          for (std::int64_t d = db * D; d < d1; ++d) {
            const std::int32_t* dl = delays_.data() + d * nact + i0;
            const float* src[4];
            for (int k = 0; k < nsrc; ++k)
              src[k] = scratch_.data() + (i0 + k) * stride_ + dl[k] + t0;
            accumulate(out + d * nt + t0, src, nsrc, n);
          }
        }
      }
    }
  }

  Workspace workspace() const override {
    return {static_cast<std::int64_t>(delays_.size() * sizeof(std::int32_t) +
                                      scratch_.size() * sizeof(float)),
            0};
  }

  std::vector<int> active_;           // channels the killmask keeps
  std::vector<std::int32_t> delays_;  // [ndm][active] (samples)
  std::int64_t stride_ = 0;           // scratch row length (floats)
  std::vector<float> scratch_;        // [active][stride_]
  int dms_per_tile_ = 0, samples_per_tile_ = 0;
};

}  // namespace

Workspace estimate_cpu_workspace(const DedispersionConfig& c) {
  const auto ndm = static_cast<std::int64_t>(c.dms.size());
  if (c.algorithm == Algorithm::direct)  // cpu_direct.cpp: the unpacked gulp [time][chan]
    return {c.nsamples_in * c.nchans * static_cast<std::int64_t>(sizeof(float)), 0};
  std::int64_t nact = c.nchans;
  if (!c.killmask.empty()) nact = std::count(c.killmask.begin(), c.killmask.end(), 1);
  return {ndm * nact * static_cast<std::int64_t>(sizeof(std::int32_t)) +
              std::max<std::int64_t>(nact, 1) * padded(c.nsamples_in) *
                  static_cast<std::int64_t>(sizeof(float)),
          0};
}

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan) {
  if (plan.config.algorithm == Algorithm::direct) return make_cpu_direct_executor(plan);
  return std::make_unique<CpuExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
