// CPU sub-band dedispersion (Algorithm::subband; the tables are subband_plan.cpp's).
//
// 1. Unpack the gulp once into [channel][time] float32 rows, the kept channels of each
//    sub-band next to each other (cpu_common.hpp).
// 2. Tasks (OpenMP, dynamic) are (time block of T output samples, coarse DM j), ordered so that
//    the threads work on neighbouring coarse DMs of one time block at a time, whose input
//    windows overlap in the shared L3. A task
//    - stage 1: sums each sub-band's channels at DM_j (each phase) into a per-thread series
//      S[p][s] covering only what its fine trials read: T + (max - min shift over them)
//      samples from t0 + min shift (a few hundred KiB: it stays in L2);
//    - stage 2: for every fine trial of the group, adds the sub-band series at their shifts
//      into the output row: nsub additions per output sample instead of nchans.
//    Both sums use the vectorised four-row accumulate of the brute-force kernel.
// Sums run in order (channels within a sub-band, then sub-bands), four at a time, so integer
// samples are summed exactly (below 2^24).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dedisp/cpu_common.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"

namespace warpbeam::dedisp::detail {
namespace {

// Output samples per task; measured on the development VM (docs/PERFORMANCE.md).
constexpr int kDefaultBlock = 2048;

class CpuSubbandExecutor final : public Executor {
 public:
  explicit CpuSubbandExecutor(const PlanData& p) : t_(*p.tables->subband) {
    const auto& c = p.config;
    const int nsub = t_.nsub();
    first_row_.assign(static_cast<std::size_t>(nsub) + 1, 0);
    for (int s = 0; s < nsub; ++s) {
      for (int ch : t_.channels[static_cast<std::size_t>(s)])
        rows_.push_back(ch);
      first_row_[s + 1] = static_cast<int>(rows_.size());
    }
    const auto nrows = static_cast<std::int64_t>(rows_.size());
    const int nq = t_.nrows1();
    off1_.resize(static_cast<std::size_t>(nq * nrows));
    for (int q = 0; q < nq; ++q)
      for (std::int64_t r = 0; r < nrows; ++r)
        off1_[q * nrows + r] = t_.off1[static_cast<std::size_t>(q) * c.nchans + rows_[r]];
    block_ = c.cpu_tuning.samples_per_tile > 0 ? c.cpu_tuning.samples_per_tile : kDefaultBlock;
    std::int32_t span = 0;
    for (std::size_t q = 0; q < t_.min_shift.size(); ++q)
      span = std::max(span, t_.max_shift[q] - t_.min_shift[q]);
    series_stride_ = padded_row(block_ + span);
    stride_ = padded_row(c.nsamples_in);
    scratch_.resize(static_cast<std::size_t>(std::max<std::int64_t>(nrows, 1) * stride_));
    threads_ = cpu_thread_count(c);
    series_per_thread_ = static_cast<std::size_t>(t_.phases) * std::max(nsub, 1) * series_stride_;
    series_.resize(static_cast<std::size_t>(threads_) * series_per_thread_);
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    unpack_channel_major(p.config, in, rows_, scratch_.data(), stride_);
    const std::int64_t nt = p.nsamples_out;
    const std::int64_t ntb = (nt + block_ - 1) / block_;
    const int ncoarse = t_.ncoarse();
    const std::int64_t ntasks = ntb * ncoarse;
#pragma omp parallel num_threads(threads_)
    {
      float* series =
          series_.data() + static_cast<std::size_t>(omp_get_thread_num()) * series_per_thread_;
#pragma omp for schedule(dynamic)
      for (std::int64_t task = 0; task < ntasks; ++task)
        run_task(task / ncoarse, static_cast<int>(task % ncoarse), nt, series, out);
    }
  }

  Workspace workspace() const override {
    return {static_cast<std::int64_t>((scratch_.size() + series_.size()) * sizeof(float) +
                                      off1_.size() * sizeof(std::int32_t)),
            0};
  }

  std::string description(const PlanData&) const override {
    return "cpu subband: " + std::to_string(t_.nsub()) + " sub-bands, " +
           std::to_string(t_.ncoarse()) + " coarse DMs x " + std::to_string(t_.phases) +
           " phases, blocks of " + std::to_string(block_) +
           " samples";
  }

 private:
  void run_task(std::int64_t tb, int j, std::int64_t nt, float* series, float* out) const {
    const int nsub = t_.nsub();
    const int P = t_.phases;
    const auto nrows = static_cast<std::int64_t>(rows_.size());
    const std::int64_t t0 = tb * block_;
    const std::int64_t n = std::min<std::int64_t>(block_, nt - t0);
    auto S_of = [&](int p, int s) {
      return series + (static_cast<std::int64_t>(p) * nsub + s) * series_stride_;
    };

    // Stage 1: S[p][s][x] = sum over the sub-band's channels of x_c[t0 + min_shift + off1 + x].
    for (int p = 0; p < P; ++p) {
      const std::size_t q = static_cast<std::size_t>(j) * P + p;
      const std::int32_t* off1 = off1_.data() + static_cast<std::int64_t>(q) * nrows;
      for (int s = 0; s < nsub; ++s) {
        const std::size_t qs = q * nsub + s;
        if (!t_.used[qs]) continue;
        float* S = S_of(p, s);
        const std::int64_t len = n + t_.max_shift[qs] - t_.min_shift[qs];
        std::memset(S, 0, static_cast<std::size_t>(len) * sizeof(float));
        const std::int64_t origin = t0 + t_.min_shift[qs];
        for (int r0 = first_row_[s]; r0 < first_row_[s + 1]; r0 += 4) {
          const int nsrc = std::min(4, first_row_[s + 1] - r0);
          const float* src[4];
          for (int k = 0; k < nsrc; ++k)
            src[k] = scratch_.data() + (r0 + k) * stride_ + origin + off1[r0 + k];
          accumulate(S, src, nsrc, len);
        }
      }
    }
    // Stage 2: out[i][t0 + x] = sum_s S[phase][s][shift[i][s] - min_shift + x].
    for (std::int32_t i = t_.group_begin[j]; i < t_.group_begin[j + 1]; ++i) {
      float* o = out + static_cast<std::int64_t>(i) * nt + t0;
      std::memset(o, 0, static_cast<std::size_t>(n) * sizeof(float));
      const std::size_t row = static_cast<std::size_t>(i) * nsub;
      for (int s0 = 0; s0 < nsub; s0 += 4) {
        const int nsrc = std::min(4, nsub - s0);
        const float* src[4];
        for (int k = 0; k < nsrc; ++k) {
          const int s = s0 + k, p = t_.phase[row + s];
          const std::size_t qs = (static_cast<std::size_t>(j) * P + p) * nsub + s;
          src[k] = S_of(p, s) + t_.shift[row + s] - t_.min_shift[qs];
        }
        accumulate(o, src, nsrc, n);
      }
    }
  }

  const SubbandTables& t_;
  std::vector<int> rows_;       // scratch row -> channel, sub-band by sub-band
  std::vector<int> first_row_;  // [nsub + 1]
  std::vector<std::int32_t> off1_;  // [ncoarse * phases][rows]
  std::int64_t block_ = 0, stride_ = 0, series_stride_ = 0;
  std::size_t series_per_thread_ = 0;
  int threads_ = 1;
  FloatBuffer scratch_;  // [rows][stride_]
  FloatBuffer series_;   // per thread [phases][nsub][series_stride_]
};

}  // namespace

std::unique_ptr<Executor> make_cpu_subband_executor(const PlanData& plan) {
  return std::make_unique<CpuSubbandExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
