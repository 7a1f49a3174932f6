// CPU FDMT (Algorithm::fdmt; the tables are fdmt_plan.cpp's).
//
// The gulp is unpacked once into [channel][time] float32 rows. The output is made one time
// block of B samples at a time: level 1 adds pairs of channel rows, each further level pairs of
// rows of the level below (row = A[t] + B[t + shift], one vectorised loop per row, rows shared
// among the threads), ping-ponging between two buffers that hold one level of one block
// (FdmtTables::max_level_elements floats each, rows of B + ext samples); the last level writes
// the output rows of the block directly. So the integer-delay plane is never held whole: at
// most two levels of one block.
//
// Every level streams its rows through memory (two loads and a store per addition, the rows of
// a level of D1 are ~1 GB at B = 8192): this path is bound by memory bandwidth, not by adds.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dedisp/cpu_common.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"

namespace warpbeam::dedisp::detail {
namespace {

// dst[t] = A[t] + B[t] for t < n; a null row reads as zeros.
inline void combine(float* __restrict__ dst, const float* __restrict__ A,
                    const float* __restrict__ B, std::int64_t n) {
  if (A && B) {
#pragma omp simd
    for (std::int64_t t = 0; t < n; ++t)
      dst[t] = A[t] + B[t];
  } else if (A || B) {
    std::memcpy(dst, A ? A : B, static_cast<std::size_t>(n) * sizeof(float));
  } else {
    std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(float));
  }
}

class CpuFdmtExecutor final : public Executor {
 public:
  explicit CpuFdmtExecutor(const PlanData& p) : t_(*p.tables->fdmt) {
    const auto& c = p.config;
    row_of_chan_.assign(static_cast<std::size_t>(c.nchans), -1);
    for (int ch = 0; ch < c.nchans; ++ch)
      if (c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)]) {
        row_of_chan_[static_cast<std::size_t>(ch)] = static_cast<int>(channels_.size());
        channels_.push_back(ch);
      }
    stride_ = padded_row(c.nsamples_in);
    scratch_.resize(static_cast<std::size_t>(std::max<std::size_t>(channels_.size(), 1)) *
                    static_cast<std::size_t>(stride_));
    for (const auto& L : t_.levels)
      offsets_.push_back(L.offsets(t_.block));
    for (auto& b : buffers_)
      b.resize(static_cast<std::size_t>(t_.max_level_elements));
    threads_ = cpu_thread_count(c);
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    unpack_channel_major(p.config, in, channels_, scratch_.data(), stride_);
    const std::int64_t nt = p.nsamples_out;
    const int H = static_cast<int>(t_.levels.size());
    const auto ndm = static_cast<std::int64_t>(t_.out_row.size());
#pragma omp parallel num_threads(threads_)
    for (std::int64_t t0 = 0; t0 < nt; t0 += t_.block) {
      const std::int64_t n = std::min(t_.block, nt - t0);
      for (int h = 1; h < H; ++h) {
        const FdmtLevel& L = t_.levels[static_cast<std::size_t>(h - 1)];
        float* dst = buffers_[(h - 1) % 2].data();
#pragma omp for schedule(dynamic, 8)
        for (std::int64_t r = 0; r < L.nrows(); ++r)
          combine(dst + offsets_[h - 1][r], row(h - 1, L.a[r], t0, 0),
                  row(h - 1, L.b[r], t0, L.shift[r]), n + L.ext[r]);
      }
      const FdmtLevel& L = t_.levels[static_cast<std::size_t>(H - 1)];
#pragma omp for schedule(dynamic, 4)
      for (std::int64_t i = 0; i < ndm; ++i) {
        const std::int32_t r = t_.out_row[i];
        combine(out + i * nt + t0, row(H - 1, L.a[r], t0, 0), row(H - 1, L.b[r], t0, L.shift[r]),
                n);
      }
    }
  }

  Workspace workspace() const override {
    return {static_cast<std::int64_t>((scratch_.size() + buffers_[0].size() + buffers_[1].size()) *
                                      sizeof(float)),
            0};
  }

  std::string description(const PlanData&) const override {
    std::int64_t rows = 0;
    for (const auto& L : t_.levels)
      rows += L.nrows();
    return "cpu fdmt: " + std::to_string(t_.levels.size()) + " levels, " + std::to_string(rows) +
           " rows, blocks of " + std::to_string(t_.block) + " samples";
  }

 private:
  // Row `r` of level `h` (0: the input channels) for the block at t0, read from `shift`; null
  // for r < 0 (no such term).
  const float* row(int h, std::int32_t r, std::int64_t t0, std::int32_t shift) const {
    if (r < 0) return nullptr;
    if (h == 0) {
      const int k = row_of_chan_[static_cast<std::size_t>(r)];
      return k < 0 ? nullptr : scratch_.data() + k * stride_ + t0 + shift;
    }
    return buffers_[(h - 1) % 2].data() + offsets_[h - 1][r] + shift;
  }

  const FdmtTables& t_;
  std::vector<int> channels_;     // scratch row -> channel (kept channels)
  std::vector<int> row_of_chan_;  // channel -> scratch row or -1
  std::int64_t stride_ = 0;
  FloatBuffer scratch_;
  std::vector<std::vector<std::int64_t>> offsets_;  // [level][row + 1]
  FloatBuffer buffers_[2];
  int threads_ = 1;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_fdmt_executor(const PlanData& plan) {
  return std::make_unique<CpuFdmtExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
