// The CUDA executor of Algorithm::fdmt (tables: fdmt_plan.cpp; kernels: cuda_fdmt.cu).
//
// Packed input is corner-turned into [channel][time] rows (uint8 codes for nbits <= 8, float32
// otherwise; cuda_transpose.cu); channel-major float input (the GPU search) is read as it is.
// Then, one time block of FdmtTables::block output samples at a time, one launch per level:
// level 1 reads the channel rows, each further level the level below, ping-ponging between two
// level buffers of FdmtTables::max_level_elements floats; the last level writes the block's
// output rows. So at most two levels of one block exist at a time, never the integer-delay
// plane (D1 at blocks of 65,536: two buffers of ~4.8 GB instead of the plane's 68 GB).
// Everything is allocated here; execute() allocates nothing. One execute() at a time per plan.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_method_host.hpp"
#include "dedisp/cuda_methods.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

struct LevelTables {
  DeviceArray<std::int32_t> a, b, shift, ext;
  DeviceArray<std::int64_t> offsets;
  std::int64_t nrows = 0;
};

class CudaFdmtExecutor final : public Executor {
 public:
  explicit CudaFdmtExecutor(const PlanData& p) : t_(*p.tables->fdmt) {
    const auto& c = p.config;
    float_codes_ = c.nbits > 8 || c.channel_major;
    for (const FdmtLevel& L : t_.levels) {
      LevelTables d;
      d.a = upload(L.a);
      d.b = upload(L.b);
      d.shift = upload(L.shift);
      d.ext = upload(L.ext);
      d.offsets = upload(L.offsets(t_.block));
      d.nrows = L.nrows();
      levels_.push_back(std::move(d));
    }
    out_row_ = upload(t_.out_row);
    for (auto& b : buffers_)
      b = DeviceArray<float>(
          static_cast<std::size_t>(std::max<std::int64_t>(t_.max_level_elements, 1)));
    // Channel -> row of the input: the corner turn keeps the kept channels; channel-major input
    // has every channel (a zapped one is a row of zeros).
    std::vector<std::int32_t> row_of_chan(static_cast<std::size_t>(c.nchans), -1);
    int rows = 0;
    for (int ch = 0; ch < c.nchans; ++ch)
      if (c.channel_major || c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)])
        row_of_chan[static_cast<std::size_t>(ch)] = rows++;
    row_of_chan_ = upload(row_of_chan);
    if (!c.channel_major) {
      const std::int64_t n = c.nsamples_in;
      stride_ = float_codes_ ? (n + 3) / 4 * 4 : (n + 15) / 16 * 16;
      scratch_ =
          DeviceArray<std::uint8_t>(static_cast<std::size_t>(std::max(rows, 1)) *
                                    static_cast<std::size_t>(stride_) * (float_codes_ ? 4 : 1));
    }
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    run(p, in, OutputTarget{out, 32, 1.0f, 0.0f}, stream);
  }

  bool execute_scaled(const PlanData& p, const std::uint8_t* in, void* out, int out_nbits,
                      const OutputScaling& s, const Stream* stream) override {
    run(p, in, OutputTarget{out, out_nbits, s.scale, s.offset}, stream);
    return true;
  }

  void execute_channel_major(const PlanData& p, const float* in, std::int64_t stride, float* out,
                             const Stream* stream) override {
    if (!p.config.channel_major)
      fail(ErrorCategory::invalid_argument, "this plan was not made for channel-major input");
    transform(p, in, stride, true, 0u, OutputTarget{out, 32, 1.0f, 0.0f}, stream);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  Algorithm algorithm(const PlanData&) const override { return Algorithm::fdmt; }
  std::string description(const PlanData&) const override {
    std::int64_t rows = 0;
    for (const auto& L : t_.levels)
      rows += L.nrows();
    return "cuda fdmt: " + std::to_string(t_.levels.size()) + " levels, " + std::to_string(rows) +
           " rows, blocks of " + std::to_string(t_.block) + " samples";
  }
  Workspace workspace() const override {
    std::int64_t dev =
        static_cast<std::int64_t>(buffers_[0].bytes() + buffers_[1].bytes() + scratch_.bytes() +
                                  out_row_.bytes() + row_of_chan_.bytes());
    for (const auto& L : levels_)
      dev += static_cast<std::int64_t>(L.a.bytes() + L.b.bytes() + L.shift.bytes() + L.ext.bytes() +
                                       L.offsets.bytes());
    return {0, dev};
  }

 private:
  void run(const PlanData& p, const std::uint8_t* in, const OutputTarget& out,
           const Stream* stream) {
    const auto& c = p.config;
    corner_turn(c, in, row_of_chan_.data(), scratch_.data(), stride_, stream);
    const unsigned flip =
        (!float_codes_ && c.is_signed && c.nbits > 1 && c.nbits <= 8) ? 1u << (c.nbits - 1) : 0u;
    transform(p, scratch_.data(), stride_, float_codes_, flip, out, stream);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  // Every block, every level.
  void transform(const PlanData& p, const void* rows, std::int64_t stride, bool floats,
                 unsigned flip, const OutputTarget& out, const Stream* stream) {
    const int H = static_cast<int>(levels_.size());
    const std::int64_t nt = p.nsamples_out;
    for (std::int64_t t0 = 0; t0 < nt; t0 += t_.block) {
      FdmtLevelArgs a;
      a.channel_rows = rows;
      a.float_codes = floats;
      a.sign_flip = flip;
      a.in_stride = stride;
      a.row_of_chan = row_of_chan_.data();
      a.t0 = t0;
      a.block = std::min(t_.block, nt - t0);
      for (int h = 1; h <= H; ++h) {
        const LevelTables& L = levels_[static_cast<std::size_t>(h - 1)];
        a.in_channels = h == 1;
        a.a = L.a.data();
        a.b = L.b.data();
        a.shift = L.shift.data();
        a.ext = L.ext.data();
        if (h > 1) {
          a.in = buffers_[(h - 2) % 2].data();
          a.in_offsets = levels_[static_cast<std::size_t>(h - 2)].offsets.data();
        }
        if (h < H) {
          a.nrows = L.nrows;
          a.out = buffers_[(h - 1) % 2].data();
          a.out_offsets = L.offsets.data();
          a.out_row = nullptr;
        } else {
          a.nrows = static_cast<std::int64_t>(t_.out_row.size());
          a.out_row = out_row_.data();
          a.out_final = out;
          a.nsamples_out = nt;
        }
        launch_fdmt_level(a, stream);
      }
    }
  }

  const FdmtTables& t_;
  bool float_codes_ = false;
  std::vector<LevelTables> levels_;
  DeviceArray<std::int32_t> out_row_, row_of_chan_;
  DeviceArray<float> buffers_[2];
  DeviceArray<std::uint8_t> scratch_;
  std::int64_t stride_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_fdmt_executor(const PlanData& plan) {
  return std::make_unique<CudaFdmtExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
