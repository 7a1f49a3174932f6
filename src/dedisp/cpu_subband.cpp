// CPU sub-band dedispersion (Algorithm::subband; the tables are subband_plan.cpp's).
//
// 1. Unpack the gulp once into [channel][time] float32 rows, the kept channels of each
//    sub-band next to each other (cpu_common.hpp).
// 2. The output is made in macro blocks of M samples. Stage-1 row (q, s) (coarse DM and phase q,
//    sub-band s) is needed over M + (max - min shift) samples from t0 + min shift: the stage-1
//    series of one macro block are held in one buffer (rows x (M + span) floats).
//    - Stage 1 runs in the sub-band's own time tau, not the output's: tasks are (sub-band,
//      tau tile of kTauTile samples), and each sums its channels into every row whose window
//      covers the tile (sum_rows: 64 samples in registers, one load and one add per channel).
//      All rows of a sub-band read a channel at tau + off1, and off1 differs between coarse DMs
//      only by the sub-band's own sweep, so the channel windows stay in L2 while every row reads
//      them (ordering by output time instead would skew the rows by the whole band's delay,
//      and each row would fetch its windows from memory).
//    - Stage 2: tasks are (coarse DM, slice of kSlice output samples); every fine trial of the
//      group sums its sub-band series at their shifts (sum_rows: 64 samples in registers, one
//      load and one add per sub-band), the group's slices shared through L1/L2.
// Sums run in order (channels within a sub-band, then sub-bands), so integer samples are summed
// exactly (below 2^24).
//
// 8-bit unsigned codes (cpu_subband_sums_codes: a sub-band's sum fits in uint16, the output's
// below 2^24) take an integer path: the corner turn keeps the codes as bytes, stage 1 sums them
// in uint16 (16 lanes per AVX register, a quarter of the input bytes and half of the stage-1
// series' bytes of the float path) and stage 2 sums the uint16 series as integers
// (sum_series_rows) and converts each output sample to float once. The float path's partial
// sums of such input are integers below 2^24 too, so every one of its additions is exact and
// both paths give the same exact sum: the output is bit for bit the same.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "dedisp/cpu_common.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr std::int64_t kTauTile = 1024;  // stage-1 samples per task
constexpr int kMaxSubbandRows = 64;      // channels summed in registers per stage-1 pass
constexpr std::int64_t kSlice = 256;     // stage-2 samples per task
constexpr int kMaxCodeRows = 257;        // cpu_subband_sums_codes: channels of a sub-band

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
    macro_ = c.cpu_tuning.samples_per_tile > 0 ? c.cpu_tuning.samples_per_tile : kSubbandMacroBlock;
    macro_ = std::max<std::int64_t>(1, std::min(macro_, p.nsamples_out));

    // The used stage-1 rows of each sub-band, in order of their window's start, and where each
    // row lives in the macro block's buffer.
    series_of_.assign(static_cast<std::size_t>(nq) * nsub, -1);
    by_sub_.resize(static_cast<std::size_t>(nsub));
    std::int64_t off = 0;
    for (int s = 0; s < nsub; ++s) {
      for (int q = 0; q < nq; ++q) {
        const std::size_t qs = static_cast<std::size_t>(q) * nsub + s;
        if (!t_.used[qs]) continue;
        series_of_[qs] = static_cast<std::int64_t>(series_offset_.size());
        series_offset_.push_back(off);
        off += padded_row(macro_ + t_.max_shift[qs] - t_.min_shift[qs]);
        by_sub_[s].push_back(q);
      }
      std::stable_sort(by_sub_[s].begin(), by_sub_[s].end(), [&](int a, int b) {
        return t_.min_shift[static_cast<std::size_t>(a) * nsub + s] <
               t_.min_shift[static_cast<std::size_t>(b) * nsub + s];
      });
    }
    stride_ = padded_row(c.nsamples_in);
    codes_ = cpu_subband_sums_codes(c, t_.channels);
    const auto nseries = static_cast<std::size_t>(std::max<std::int64_t>(off, 1));
    const auto nscratch = static_cast<std::size_t>(std::max<std::int64_t>(nrows, 1) * stride_);
    if (codes_) {
      std::int64_t widest = 1;
      for (int s = 0; s < nsub; ++s)
        widest = std::max<std::int64_t>(widest, first_row_[s + 1] - first_row_[s]);
      group_ = static_cast<int>(std::max<std::int64_t>(1, 65535 / (255 * widest)));
      series16_.reset(new std::uint16_t[nseries]);
      scratch8_.reset(new std::uint8_t[nscratch]);
      series16_size_ = nseries;
      scratch8_size_ = nscratch;
    } else {
      series_.resize(nseries);
      scratch_.resize(nscratch);
    }
    threads_ = cpu_thread_count(c);
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    // The rows of this execute(): the planned nsamples_in, or fewer (accepts_shorter_input():
    // the buffers are the planned gulp's, every sample is summed as in a plan of this length).
    const std::int64_t nt = p.nsamples_out;
    const std::int64_t nin = nt + p.max_delay;
    if (codes_)
      unpack_channel_major_codes(p.config, in, rows_, scratch8_.get(), stride_, nin);
    else
      unpack_channel_major(p.config, in, rows_, scratch_.data(), stride_, nin);
    const int nsub = t_.nsub();
    // Stage-1 tasks of one macro block: (sub-band, tau tile) over each sub-band's tau range.
    std::vector<std::pair<int, std::int64_t>> tasks1;
    for (std::int64_t t0 = 0; t0 < nt; t0 += macro_) {
      const std::int64_t n = std::min(macro_, nt - t0);
      tasks1.clear();
      for (int s = 0; s < nsub; ++s) {
        if (by_sub_[s].empty()) continue;
        const auto [lo, hi] = tau_range(s, n);
        for (std::int64_t a = lo; a < hi; a += kTauTile)
          tasks1.emplace_back(s, a);
      }
      const auto ntasks1 = static_cast<std::int64_t>(tasks1.size());
      const std::int64_t nslices = (n + kSlice - 1) / kSlice;
      const std::int64_t ntasks2 = static_cast<std::int64_t>(t_.ncoarse()) * nslices;
#pragma omp parallel num_threads(threads_)
      {
        std::vector<const float*> src(static_cast<std::size_t>(std::max(nsub, 4)));
        std::vector<const std::uint16_t*> src16(codes_ ? static_cast<std::size_t>(nsub) : 0);
#pragma omp for schedule(dynamic)
        for (std::int64_t k = 0; k < ntasks1; ++k) {
          if (codes_)
            stage1_codes(tasks1[k].first, tasks1[k].second, t0, n);
          else
            stage1(tasks1[k].first, tasks1[k].second, t0, n);
        }
#pragma omp for schedule(dynamic)
        for (std::int64_t k = 0; k < ntasks2; ++k) {
          const auto j = static_cast<int>(k / nslices);
          if (codes_)
            stage2(j, (k % nslices) * kSlice, t0, n, nt, out, src16);
          else
            stage2(j, (k % nslices) * kSlice, t0, n, nt, out, src);
        }
      }
    }
  }

  Workspace workspace() const override {
    return {static_cast<std::int64_t>((scratch_.size() + series_.size()) * sizeof(float) +
                                      scratch8_size_ + series16_size_ * sizeof(std::uint16_t) +
                                      off1_.size() * sizeof(std::int32_t)),
            0};
  }

  std::string description(const PlanData&) const override {
    return "cpu subband: " + std::to_string(t_.nsub()) + " sub-bands, " +
           std::to_string(t_.ncoarse()) + " coarse DMs (" + std::to_string(t_.nrows1()) +
           " stage-1 rows with their phases), macro blocks of " + std::to_string(macro_) +
           " samples" + (codes_ ? ", 8-bit codes summed in 16-bit integers" : "");
  }

 private:
  // Row (q, s)'s window in relative tau (tau - t0): [min_shift, n + max_shift).
  std::int64_t win_lo(int q, int s) const {
    return t_.min_shift[static_cast<std::size_t>(q) * t_.nsub() + s];
  }
  std::int64_t win_hi(int q, int s, std::int64_t n) const {
    return n + t_.max_shift[static_cast<std::size_t>(q) * t_.nsub() + s];
  }
  std::pair<std::int64_t, std::int64_t> tau_range(int s, std::int64_t n) const {
    std::int64_t lo = INT64_MAX, hi = 0;
    for (int q : by_sub_[s]) {
      lo = std::min(lo, win_lo(q, s));
      hi = std::max(hi, win_hi(q, s, n));
    }
    return {lo, hi};
  }
  float* series(int q, int s) {
    return series_.data() + series_offset_[series_of_[static_cast<std::size_t>(q) * t_.nsub() + s]];
  }
  std::uint16_t* series16(int q, int s) {
    return series16_.get() +
           series_offset_[series_of_[static_cast<std::size_t>(q) * t_.nsub() + s]];
  }

  // Stage 1 of sub-band s over relative tau [a, a + kTauTile): every row whose window covers
  // part of it, a tile of rows at a time, four channels per pass.
  void stage1(int s, std::int64_t a, std::int64_t t0, std::int64_t n) {
    const auto nrows = static_cast<std::int64_t>(rows_.size());
    const std::int64_t b = a + kTauTile;
    const auto& qs = by_sub_[s];
    const int r0 = first_row_[s], r1 = first_row_[s + 1];
    // The rows that overlap [a, b) (windows sorted by start; each is shorter than
    // n + span, so scan them all: a sub-band has at most a few hundred).
    std::vector<int> active;
    for (int q : qs)
      if (win_lo(q, s) < b && win_hi(q, s, n) > a) active.push_back(q);
    const float* src[kMaxSubbandRows];
    for (int q : active) {
      const std::int64_t x0 = std::max(a, win_lo(q, s)), x1 = std::min(b, win_hi(q, s, n));
      const std::int32_t* off1 = off1_.data() + static_cast<std::int64_t>(q) * nrows;
      float* S = series(q, s) + (x0 - win_lo(q, s));
      // At most kMaxSubbandRows channels per register pass; wider sub-bands add passes.
      for (int r = r0; r < r1; r += kMaxSubbandRows) {
        const int nsrc = std::min(kMaxSubbandRows, r1 - r);
        for (int i = 0; i < nsrc; ++i)
          src[i] = scratch_.data() + (r + i) * stride_ + t0 + x0 + off1[r + i];
        if (r == r0) {
          sum_rows(S, src, nsrc, x1 - x0);
        } else {
          for (int i = 0; i < nsrc; i += 4)
            accumulate(S, src + i, std::min(4, nsrc - i), x1 - x0);
        }
      }
    }
  }

  // stage1() on 8-bit codes: every channel of the sub-band (at most 257) in one uint16 pass.
  void stage1_codes(int s, std::int64_t a, std::int64_t t0, std::int64_t n) {
    const auto nrows = static_cast<std::int64_t>(rows_.size());
    const std::int64_t b = a + kTauTile;
    const int r0 = first_row_[s], r1 = first_row_[s + 1];
    const std::uint8_t* src[kMaxCodeRows];
    for (int q : by_sub_[s]) {
      if (!(win_lo(q, s) < b && win_hi(q, s, n) > a)) continue;
      const std::int64_t x0 = std::max(a, win_lo(q, s)), x1 = std::min(b, win_hi(q, s, n));
      const std::int32_t* off1 = off1_.data() + static_cast<std::int64_t>(q) * nrows;
      for (int r = r0; r < r1; ++r)
        src[r - r0] = scratch8_.get() + r * stride_ + t0 + x0 + off1[r];
      sum_code_rows(series16(q, s) + (x0 - win_lo(q, s)), src, r1 - r0, x1 - x0);
    }
  }

  // Stage 2 of coarse DM j over output samples [t0 + x0, t0 + x0 + kSlice): each fine trial of
  // the group sums its sub-bands' series, shifted. T = float, or std::uint16_t for the series of
  // stage1_codes() (summed in integers, converted to float once: sum_series_rows).
  template <typename T>
  void stage2(int j, std::int64_t x0, std::int64_t t0, std::int64_t n, std::int64_t nt, float* out,
              std::vector<const T*>& src) {
    const int nsub = t_.nsub();
    const std::int64_t m = std::min(kSlice, n - x0);
    for (std::int32_t i = t_.group_begin[j]; i < t_.group_begin[j + 1]; ++i) {
      const std::size_t row = static_cast<std::size_t>(i) * nsub;
      for (int s = 0; s < nsub; ++s) {
        const int q = t_.phase_begin[j] + t_.phase[row + s];
        const std::int64_t offset = (t_.shift[row + s] - win_lo(q, s)) + x0;
        if constexpr (std::is_same_v<T, float>)
          src[s] = series(q, s) + offset;
        else
          src[s] = series16(q, s) + offset;
      }
      float* o = out + static_cast<std::int64_t>(i) * nt + t0 + x0;
      if constexpr (std::is_same_v<T, float>)
        sum_rows(o, src.data(), nsub, m);
      else
        sum_series_rows(o, src.data(), nsub, group_, m);
    }
  }

  const SubbandTables& t_;
  std::vector<int> rows_;           // scratch row -> channel, sub-band by sub-band
  std::vector<int> first_row_;      // [nsub + 1]
  std::vector<std::int32_t> off1_;  // [stage-1 rows][rows]
  std::int64_t macro_ = 0, stride_ = 0;
  int threads_ = 1;
  std::vector<std::vector<int>> by_sub_;     // [nsub] used stage-1 rows, by window start
  std::vector<std::int64_t> series_of_;      // [q][s] index into series_offset_, -1: unused
  std::vector<std::int64_t> series_offset_;  // element offset of each used row
  FloatBuffer scratch_;                      // [rows][stride_]
  FloatBuffer series_;                       // one macro block's stage-1 rows
  // 8-bit codes (codes_): the corner-turned codes and the uint16 stage-1 rows instead, and the
  // stage-1 rows stage 2 sums in uint16 before widening.
  bool codes_ = false;
  int group_ = 1;
  std::unique_ptr<std::uint8_t[]> scratch8_;  // [rows][stride_]
  std::unique_ptr<std::uint16_t[]> series16_;
  std::size_t scratch8_size_ = 0, series16_size_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_subband_executor(const PlanData& plan) {
  return std::make_unique<CpuSubbandExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
