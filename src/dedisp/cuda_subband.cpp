// The CUDA executor of Algorithm::subband (tables: subband_plan.cpp).
//
// 1. Packed input is corner-turned into [channel][time] rows (cuda_transpose.cu), the kept
//    channels of each sub-band next to each other in ascending channel order: uint8 codes for
//    nbits <= 8, float32 otherwise. Channel-major float input (the GPU search) is used as it is:
//    a sub-band's channels are consecutive rows there (no killmask on that path).
// 2. Stage 1: each sub-band is a small brute-force problem (its channels, the stage-1 rows as
//    DM trials, delays off1), into the series buffer [sub-band][row][len_s] with len_s =
//    nsamples_out + the largest stage-2 shift of the sub-band. Codes in sub-bands of <= 32
//    channels: one launch for every sub-band (cuda_subband_stage1.cu, exact integers); else one
//    launch per sub-band of the packed kernel (codes) or the tiled kernel (floats).
// 3. Stage 2: cuda_subband_group.cu (or cuda_subband.cu, WARPBEAM_SUBBAND_STAGE2=tile).
// A gulp shorter than planned (DedispersionPlan::accepts_shorter_input(): m input rows, m -
// max_delay output samples) runs in the planned buffers: only its rows are corner-turned, stage
// 1 runs the time tiles that cover the series samples stage 2 reads (m - max_delay + the
// sub-band's largest shift; the rows keep their planned length as pitch) and stage 2 writes
// [ndm][m - max_delay]. Every output sample is the same sum in the same order as in a plan of
// m rows (the packed kernel's sums are exact integers, the tiled kernel's and stage 2's run
// over channels and sub-bands in order whatever the tile), and the series samples it reads
// depend on input rows < m only (a trial's shift plus its stage-1 delays never exceed its
// largest delay); samples past them may hold anything and feed only outputs not written.
// All buffers and tables are made here, in the plan; execute() allocates nothing. One
// execute() at a time per plan (the series buffer and corner-turn scratch are the plan's).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_method_host.hpp"
#include "dedisp/cuda_methods.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"
#include "dedisp/tile_geometry.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

SmemLimits smem_limits() {
  int dev = 0, per_block = 0, per_sm = 0;
  WB_CUDA_CHECK(cudaGetDevice(&dev));
  WB_CUDA_CHECK(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  WB_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  return {static_cast<std::size_t>(per_block), static_cast<std::size_t>(per_sm)};
}

// The stage-2 kernel: one block per coarse group (cuda_subband_group.cu, the default) or per 8
// trials (cuda_subband.cu, the first kernel), the latter kept for comparison on the GPU:
// WARPBEAM_SUBBAND_STAGE2=tile picks it (a benchmarking override, read when a plan is made).
bool stage2_group_kernel() {
  const char* v = std::getenv("WARPBEAM_SUBBAND_STAGE2");
  return v == nullptr || std::string_view(v) != "tile";
}

// Stage 1 through the brute-force kernels (codes in sub-bands wider than 32 channels, or float
// input) runs with the plan's tuning; WARPBEAM_SUBBAND_STAGE1="DMS,THREADS,K" replaces it and
// keeps codes off the one-launch kernel (cuda_subband_stage1.cu): a benchmarking override, read
// when a plan is made (docs/PERFORMANCE.md, run s17: 8 DMs x 64 lanes x 16 was the best of the
// brute-force geometries for D1's 16-channel sub-bands, 48-51 ms, the one-launch kernel 39 ms).
CudaTuning stage1_tuning(const CudaTuning& requested) {
  CudaTuning t = requested;
  if (const char* v = std::getenv("WARPBEAM_SUBBAND_STAGE1")) {
    int d = 0, n = 0, k = 0;
    if (std::sscanf(v, "%d,%d,%d", &d, &n, &k) != 3)
      fail(ErrorCategory::invalid_argument,
           "WARPBEAM_SUBBAND_STAGE1 = '{}': expected DMS,THREADS,SAMPLES_PER_THREAD", v);
    t.dms_per_block = d;
    t.threads_per_block = n;
    t.samples_per_thread = k;
    validate(t);
  }
  return t;
}

// One sub-band's stage-1 launch: its geometry and tables on the device.
struct Stage1 {
  int first_row = 0, nrows = 0;  // its rows in the corner-turned scratch (packed input)
  int first_chan = 0;            // its lowest channel index (channel-major input)
  std::int64_t len = 0;          // samples per series row
  std::int64_t offset = 0;       // of its rows in the series buffer
  TileGeometry geo;
  DeviceArray<std::int32_t> delays, base, span;
};

class CudaSubbandExecutor final : public Executor {
 public:
  explicit CudaSubbandExecutor(const PlanData& p) : t_(*p.tables->subband) {
    const auto& c = p.config;
    validate(c.tuning);
    float_codes_ = c.nbits > 8;
    const int nsub = t_.nsub();
    const int nq = t_.nrows1();
    const SmemLimits limits = smem_limits();
    const CudaTuning tuning1 = stage1_tuning(c.tuning);
    // Channel -> scratch row, sub-band by sub-band in ascending channel order.
    std::vector<std::int32_t> chan_row(static_cast<std::size_t>(c.nchans), -1);
    int row = 0;
    std::int64_t offset = 0;
    std::vector<std::int64_t> sub_offset, sub_len;
    for (int s = 0; s < nsub; ++s) {
      std::vector<int> chans = t_.channels[static_cast<std::size_t>(s)];
      std::sort(chans.begin(), chans.end());
      Stage1 st;
      st.first_row = row;
      st.nrows = static_cast<int>(chans.size());
      st.first_chan = chans.front();
      if (c.channel_major && chans.back() - chans.front() + 1 != st.nrows)
        fail(ErrorCategory::invalid_argument,
             "channel-major sub-band input needs consecutive channels in every sub-band");
      for (int ch : chans)
        chan_row[static_cast<std::size_t>(ch)] = row++;
      std::int32_t maxshift = 0;
      for (int q = 0; q < nq; ++q)
        maxshift = std::max(maxshift, t_.max_shift[static_cast<std::size_t>(q) * nsub + s]);
      st.len = p.nsamples_out + maxshift;
      st.offset = offset;
      offset += static_cast<std::int64_t>(nq) * st.len;
      // Stage-1 delays [row q][channel of the sub-band, ascending].
      std::vector<std::int32_t> d(static_cast<std::size_t>(nq) * st.nrows);
      for (int q = 0; q < nq; ++q)
        for (int k = 0; k < st.nrows; ++k)
          d[static_cast<std::size_t>(q) * st.nrows + k] =
              t_.off1[static_cast<std::size_t>(q) * c.nchans + chans[static_cast<std::size_t>(k)]];
      const Algorithm kernel =
          float_codes_ || c.channel_major ? Algorithm::tiled : Algorithm::packed;
      st.geo = plan_tile_geometry(kernel, tuning1, d, nq, st.nrows, st.len, limits);
      std::vector<std::int32_t> base, span;
      tile_tables(d, nq, st.nrows, st.geo.dms_per_block, base, span);
      st.delays = upload(d);
      st.base = upload(base);
      st.span = upload(span);
      add_fused_band(d, nq, st, static_cast<std::int64_t>(st.first_row) * stride_of(c));
      sub_offset.push_back(st.offset);
      sub_len.push_back(st.len);
      stage1_.push_back(std::move(st));
    }
    // 4 floats of padding: stage 2 stages windows 16 bytes per cp.async, and the last row's
    // last copy, although it reads only the bytes left in the row, is checked (compute-
    // sanitizer) as a 16-byte access.
    series_ = DeviceArray<float>(static_cast<std::size_t>(offset + 4));
    plan_fused_stage1(c, limits);

    planned_out_ = p.nsamples_out;
    group_kernel_ = stage2_group_kernel();
    if (group_kernel_)
      plan_group_stage2(p, sub_offset, sub_len, limits);
    else
      plan_tile_stage2(p, sub_offset, sub_len, limits);

    if (!c.channel_major) {
      chan_row_ = upload(chan_row);
      stride_ = stride_of(c);
      const std::size_t elem = float_codes_ ? 4 : 1;
      scratch_ = DeviceArray<std::uint8_t>(static_cast<std::size_t>(std::max(row, 1)) *
                                           static_cast<std::size_t>(stride_) * elem);
      device_memset(scratch_.data(), 0, scratch_.bytes());  // the padding past nsamples_in
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
    for (const Stage1& st : stage1_)
      launch_stage1(p, in + static_cast<std::int64_t>(st.first_chan) * stride, stride, true, st,
                    stream);
    stage2(p, OutputTarget{out, 32, 1.0f, 0.0f}, stream);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  Algorithm algorithm(const PlanData&) const override { return Algorithm::subband; }
  std::string description(const PlanData&) const override {
    return "cuda subband: " + std::to_string(t_.nsub()) + " sub-bands, " +
           std::to_string(t_.ncoarse()) + " coarse DMs (" + std::to_string(t_.nrows1()) +
           " stage-1 rows), stage 1 " +
           (fused_.nsub > 0
                ? fmt::format("in one launch, all rows of a sub-band per block of {} samples "
                              "({} warps, {:.1f} KiB shared)",
                              kSubbandStage1Samples, kSubbandStage1Warps,
                              static_cast<double>(fused_.smem_bytes) / 1024.0)
            : stage1_.empty() ? std::string("-")
                              : stage1_.front().geo.describe()) +
           "; stage 2 " +
           (group_kernel_
                ? fmt::format("per group ({} tiles of <= {} trials, {} warps; {} stages of <= {} "
                              "sub-bands, {:.1f} KiB shared, {} blocks per SM)",
                              ntiles_, kSubbandGroupTrialsPerWarp * g2_.warps, g2_.warps, nstages_,
                              g2_.max_stage_subbands, static_cast<double>(g2_.smem_bytes) / 1024.0,
                              blocks_per_sm_)
                : fmt::format("per 8 trials ({} tiles), {} sub-bands per stage", ntiles_,
                              s2_.subbands_per_stage));
  }
  Workspace workspace() const override {
    std::int64_t dev = static_cast<std::int64_t>(
        series_.bytes() + scratch_.bytes() + used_.bytes() + chan_row_.bytes() +
        sub_offset_.bytes() + sub_len_.bytes() + rows_dev_.bytes() + stages_dev_.bytes());
    for (const auto& t : tables_)
      dev += static_cast<std::int64_t>(t.bytes());
    for (const auto& st : stage1_)
      dev += static_cast<std::int64_t>(st.delays.bytes() + st.base.bytes() + st.span.bytes());
    dev += static_cast<std::int64_t>(fused_bands_dev_.bytes() + fused_base_dev_.bytes() +
                                     fused_span_dev_.bytes() + fused_rel_dev_.bytes());
    return {0, dev};
  }

 private:
  // Stage-2 tiles: up to per_tile fine trials of one coarse DM each, uploaded; returns the
  // device tables (coarse, first, count).
  std::array<const std::int32_t*, 3> plan_tiles(int per_tile) {
    std::vector<std::int32_t> tc, tf, tn;
    for (int j = 0; j < t_.ncoarse(); ++j)
      for (std::int32_t i = t_.group_begin[j]; i < t_.group_begin[j + 1]; i += per_tile) {
        tc.push_back(j);
        tf.push_back(i);
        tn.push_back(std::min<std::int32_t>(per_tile, t_.group_begin[j + 1] - i));
      }
    ntiles_ = static_cast<int>(tc.size());
    std::array<const std::int32_t*, 3> d{};
    for (std::size_t k = 0; k < 3; ++k) {
      tables_.push_back(upload(k == 0 ? tc : k == 1 ? tf : tn));
      d[k] = tables_.back().data();
    }
    return d;
  }

  // Stage 2 by cuda_subband_group.cu: tiles of 2 x warps trials, the packed schedule in
  // shared memory of a size that lets blocks_per_sm blocks share an SM (the benchmarking
  // override WARPBEAM_SUBBAND_GROUP="WARPS,BLOCKS_PER_SM", read when a plan is made). Default
  // 10 warps, 3 blocks: the best of 12 pairs on D1 (H200, 2026-12-04, docs/results/s19-b),
  // 28.7 ms against 30.5 ms for 16 warps x 2 blocks; fewer, larger stages (16 x 1) or more
  // blocks of fewer warps (8 x 4, 6 x 5) were slower. Where one sub-band's windows do not fit
  // that share of the SM (wide spans), fewer blocks per SM (plan_subband_group_schedule_fitting).
  void plan_group_stage2(const PlanData& p, const std::vector<std::int64_t>& sub_offset,
                         const std::vector<std::int64_t>& sub_len, const SmemLimits& limits) {
    int warps = 10, blocks_per_sm = 3;
    if (const char* v = std::getenv("WARPBEAM_SUBBAND_GROUP"))
      parse_subband_group_override(v, kSubbandGroupMaxWarps, &warps, &blocks_per_sm);
    const int per_tile = kSubbandGroupTrialsPerWarp * warps;
    const int max_sub = std::min(std::max(t_.nsub(), 1), kSubbandGroupMaxStageSubbands);
    const std::size_t off_bytes = static_cast<std::size_t>(per_tile) * max_sub * 4;
    // The row area of a block when b blocks share an SM (each also reserves 1 KiB of it).
    const auto area_of = [&](int b) -> std::int64_t {
      const std::size_t block_bytes =
          std::min(limits.per_block, limits.per_sm / static_cast<std::size_t>(b) - 1024);
      return block_bytes > off_bytes ? static_cast<std::int64_t>((block_bytes - off_bytes) / 16 * 4)
                                     : 0;
    };
    const SubbandGroupSchedule sch =
        plan_subband_group_schedule_fitting(t_, sub_offset, sub_len, kSubbandBlockSamples, max_sub,
                                            blocks_per_sm, area_of, &blocks_per_sm_);
    const auto tiles = plan_tiles(per_tile);
    g2_.tile_coarse = tiles[0];
    g2_.tile_first = tiles[1];
    g2_.tile_count = tiles[2];
    g2_.ntiles = ntiles_;
    g2_.nsub = t_.nsub();
    g2_.warps = warps;
    g2_.area_words = (sch.max_stage_words + 3) / 4 * 4;
    g2_.max_stage_subbands = sch.max_stage_subbands;
    g2_.smem_bytes = static_cast<std::size_t>(g2_.area_words) * 4 +
                     static_cast<std::size_t>(per_tile) * sch.max_stage_subbands * 4;
    g2_.nsamples_out = p.nsamples_out;
    nstages_ = static_cast<int>(sch.stages.size());
    rows_dev_ = upload(sch.rows);
    stages_dev_ = upload(sch.stages);
    tables_.push_back(upload(sch.stage_begin));
    g2_.stage_begin = tables_.back().data();
    tables_.push_back(upload(sch.offset));
    g2_.offset = tables_.back().data();
    g2_.rows = rows_dev_.data();
    g2_.stages = stages_dev_.data();
    g2_.series = series_.data();
  }

  // Stage 2 by cuda_subband.cu (the first kernel, WARPBEAM_SUBBAND_STAGE2=tile): tiles of 8
  // trials, rows of max_phases x (block + the plan's largest span) words per sub-band.
  void plan_tile_stage2(const PlanData& p, const std::vector<std::int64_t>& sub_offset,
                        const std::vector<std::int64_t>& sub_len, const SmemLimits& limits) {
    const int nsub = t_.nsub();
    std::int32_t span = 0;
    for (std::size_t q = 0; q < t_.min_shift.size(); ++q)
      span = std::max(span, t_.max_shift[q] - t_.min_shift[q]);
    s2_.row_words = (kSubbandBlockSamples + span + 3) / 4 * 4;
    s2_.max_phases = std::max(t_.phases, 1);
    const std::size_t per_sub =
        static_cast<std::size_t>(s2_.max_phases) * s2_.row_words * 4 + kSubbandTrialsPerBlock * 4;
    const std::size_t budget = std::min<std::size_t>(limits.per_block, 96 * 1024);
    if (per_sub > budget)
      fail(ErrorCategory::unsupported,
           "sub-band stage 2: a group's shifts span {} samples, more than shared memory holds",
           span);
    s2_.subbands_per_stage = static_cast<int>(
        std::min<std::size_t>(static_cast<std::size_t>(std::max(nsub, 1)), budget / per_sub));
    s2_.smem_bytes = static_cast<std::size_t>(s2_.subbands_per_stage) * per_sub;
    s2_.nsub = nsub;
    s2_.nsamples_out = p.nsamples_out;
    const auto tiles = plan_tiles(kSubbandTrialsPerBlock);
    s2_.tile_coarse = tiles[0];
    s2_.tile_first = tiles[1];
    s2_.tile_count = tiles[2];
    s2_.ntiles = ntiles_;
    const std::size_t k0 = tables_.size();
    for (const auto* v : {&t_.phase_begin, &t_.phase, &t_.shift, &t_.min_shift, &t_.max_shift})
      tables_.push_back(upload(*v));
    used_ = upload(t_.used);
    sub_offset_ = upload(sub_offset);
    sub_len_ = upload(sub_len);
    s2_.series = series_.data();
    s2_.sub_offset = sub_offset_.data();
    s2_.sub_len = sub_len_.data();
    s2_.phase_begin = tables_[k0].data();
    s2_.phase = tables_[k0 + 1].data();
    s2_.shift = tables_[k0 + 2].data();
    s2_.min_shift = tables_[k0 + 3].data();
    s2_.max_shift = tables_[k0 + 4].data();
    s2_.used = used_.data();
  }

  void run(const PlanData& p, const std::uint8_t* in, const OutputTarget& out,
           const Stream* stream) {
    const auto& c = p.config;
    corner_turn(c, in, chan_row_.data(), scratch_.data(), stride_, stream,
                p.nsamples_out + p.max_delay);  // this gulp's rows (fewer than planned: see top)
    const std::size_t elem = float_codes_ ? 4 : 1;
    if (fused_.nsub > 0)
      launch_fused_stage1(p, stream);
    else
      for (const Stage1& st : stage1_)
        launch_stage1(p, scratch_.data() + static_cast<std::size_t>(st.first_row) * stride_ * elem,
                      stride_, float_codes_, st, stream);
    stage2(p, out, stream);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  // Elements per corner-turned row: the input's samples and a zero tail the kernels may read.
  std::int64_t stride_of(const DedispersionConfig& c) const {
    const std::int64_t n = c.nsamples_in;
    return float_codes_ ? (n + 4 + 3) / 4 * 4 : (n + 8 + 15) / 16 * 16;
  }

  // The one-launch stage 1 (cuda_subband_stage1.cu) for codes of <= 8 bits: its tables, gathered
  // per sub-band here (delays of rows [nq][nch] with their smallest per channel taken out).
  void add_fused_band(const std::vector<std::int32_t>& d, int nq, const Stage1& st,
                      std::int64_t in_offset) {
    constexpr int M = kSubbandStage1MaxChannels;
    const int nch = st.nrows;
    SubbandStage1Band b;
    b.in_offset = in_offset;
    b.out_offset = st.offset;
    b.len = st.len;
    b.nch = nch;
    fused_bands_.push_back(b);
    if (nch > M) return;  // plan_fused_stage1() then keeps the per-sub-band launches
    const std::size_t at = fused_base_.size();
    fused_base_.resize(at + M, 0);
    fused_span_.resize(at + M, 0);
    const std::size_t rel_at = fused_rel_.size();
    fused_rel_.resize(rel_at + static_cast<std::size_t>(nq) * M, 0);
    for (int k = 0; k < nch; ++k) {
      std::int32_t lo = d[static_cast<std::size_t>(k)], hi = lo;
      for (int q = 0; q < nq; ++q) {
        lo = std::min(lo, d[static_cast<std::size_t>(q) * nch + k]);
        hi = std::max(hi, d[static_cast<std::size_t>(q) * nch + k]);
      }
      fused_base_[at + k] = lo;
      fused_span_[at + k] = hi - lo;
      for (int q = 0; q < nq; ++q)
        fused_rel_[rel_at + static_cast<std::size_t>(q) * M + k] =
            d[static_cast<std::size_t>(q) * nch + k] - lo;
    }
  }

  // Uses the one-launch stage 1 when the input is codes of <= 8 bits in scratch rows, every
  // sub-band has at most kSubbandStage1MaxChannels channels and its window fits in shared memory,
  // and WARPBEAM_SUBBAND_STAGE1 does not ask for the brute-force kernels' geometry (the
  // benchmarking override of stage1_tuning()); else stage 1 stays one launch per sub-band.
  void plan_fused_stage1(const DedispersionConfig& c, const SmemLimits& limits) {
    const int nsub = static_cast<int>(fused_bands_.size());
    bool ok =
        !float_codes_ && !c.channel_major && std::getenv("WARPBEAM_SUBBAND_STAGE1") == nullptr;
    int most = 0;
    for (const auto& b : fused_bands_) {
      ok = ok && b.nch <= kSubbandStage1MaxChannels;
      most = std::max(most, b.nch);
    }
    const std::int32_t span =
        fused_span_.empty() ? 0 : *std::max_element(fused_span_.begin(), fused_span_.end());
    const int R = ((span >> 1) + kSubbandStage1Samples / 2 + 1) / 2 * 2;
    const std::size_t smem = static_cast<std::size_t>(most) * 2 * R * 4;
    if (ok && smem <= limits.per_block) {
      fused_.nsub = nsub;
      fused_.nrows = t_.nrows1();
      fused_.row_words = R;
      fused_.smem_bytes = smem;
      fused_.sign_flip = c.is_signed && c.nbits > 1 && c.nbits <= 8 ? 1u << (c.nbits - 1) : 0u;
      fused_base_dev_ = upload(fused_base_);
      fused_span_dev_ = upload(fused_span_);
      fused_rel_dev_ = upload(fused_rel_);
      fused_bands_dev_ = upload(fused_bands_);
    }
    fused_base_.clear();
    fused_span_.clear();
    fused_rel_.clear();
  }

  void launch_fused_stage1(const PlanData& p, const Stream* stream) {
    // This gulp's series samples per sub-band: len - short_by (see launch_stage1()).
    const std::int64_t short_by = planned_out_ - p.nsamples_out;
    std::int64_t tiles = 0;
    for (const auto& b : fused_bands_)
      tiles =
          std::max(tiles, (b.len - short_by + kSubbandStage1Samples - 1) / kSubbandStage1Samples);
    SubbandStage1Args a = fused_;
    a.scratch = scratch_.data();
    a.stride = stride_;
    a.bands = fused_bands_dev_.data();
    a.base = fused_base_dev_.data();
    a.span = fused_span_dev_.data();
    a.rel = fused_rel_dev_.data();
    a.ntime_tiles = tiles;
    a.short_by = short_by;
    a.series = series_.data();
    launch_subband_stage1(a, stream);
  }

  void launch_stage1(const PlanData& p, const void* rows, std::int64_t stride, bool floats,
                     const Stage1& st, const Stream* stream) {
    const auto& c = p.config;
    TileArgs a;
    a.scratch = rows;
    a.stride = stride;
    a.float_codes = floats;
    a.nused = st.nrows;
    a.ndm = t_.nrows1();
    a.nsamples_out = st.len;
    a.delays = st.delays.data();
    a.base = st.base.data();
    a.span = st.span.data();
    a.dms_per_block = st.geo.dms_per_block;
    a.lanes = st.geo.lanes;
    a.samples_per_thread = st.geo.samples_per_thread;
    a.channels_per_stage = st.geo.channels_per_stage;
    a.row_words = st.geo.row_words;
    a.ndm_tiles = st.geo.ndm_tiles;
    // The tiles covering this gulp's series samples: st.len - (planned - this gulp's output
    // samples); a.nsamples_out stays st.len, the rows' pitch in the series buffer.
    const std::int64_t need = st.len - (planned_out_ - p.nsamples_out);
    a.ntime_tiles = std::min<std::int64_t>(
        st.geo.ntime_tiles, (need + st.geo.block_samples - 1) / st.geo.block_samples);
    a.smem_bytes = st.geo.smem_bytes;
    a.stages_per_flush = st.geo.stages_per_flush;
    a.sign_flip =
        (!floats && c.is_signed && c.nbits > 1 && c.nbits <= 8) ? 1u << (c.nbits - 1) : 0u;
    a.out = OutputTarget{series_.data() + st.offset, 32, 1.0f, 0.0f};
    if (st.geo.algorithm == Algorithm::packed)
      launch_packed(a, stream);
    else
      launch_tiled(a, stream);
  }

  void stage2(const PlanData& p, const OutputTarget& out, const Stream* stream) {
    if (group_kernel_) {
      SubbandGroupArgs a = g2_;
      a.nsamples_out = p.nsamples_out;  // this gulp's (<= the planned g2_.nsamples_out)
      a.out = out;
      launch_subband_group(a, stream);
      return;
    }
    SubbandStage2Args a = s2_;
    a.nsamples_out = p.nsamples_out;  // this gulp's (<= the planned s2_.nsamples_out)
    a.out = out;
    launch_subband_stage2(a, stream);
  }

  const SubbandTables& t_;
  bool float_codes_ = false;
  std::vector<Stage1> stage1_;
  DeviceArray<float> series_;
  std::vector<DeviceArray<std::int32_t>> tables_;
  DeviceArray<std::uint8_t> used_;
  DeviceArray<std::int64_t> sub_offset_, sub_len_;
  DeviceArray<std::int32_t> chan_row_;
  DeviceArray<std::uint8_t> scratch_;
  std::int64_t stride_ = 0;
  // The one-launch stage 1 (fused_.nsub > 0 when used): its arguments, bands and tables.
  SubbandStage1Args fused_;
  std::vector<SubbandStage1Band> fused_bands_;
  std::vector<std::int32_t> fused_base_, fused_span_, fused_rel_;
  DeviceArray<SubbandStage1Band> fused_bands_dev_;
  DeviceArray<std::int32_t> fused_base_dev_, fused_span_dev_, fused_rel_dev_;
  SubbandStage2Args s2_;  // stage 2 by cuda_subband.cu
  SubbandGroupArgs g2_;   // stage 2 by cuda_subband_group.cu
  DeviceArray<SubbandGroupRow> rows_dev_;
  DeviceArray<SubbandGroupStage> stages_dev_;
  int ntiles_ = 0, nstages_ = 0;
  int blocks_per_sm_ = 0;  // blocks of the group kernel per SM that the schedule was made for
  std::int64_t planned_out_ = 0;  // output samples the plan was made for
  bool group_kernel_ = true;      // stage 2 by cuda_subband_group.cu, else cuda_subband.cu
};

}  // namespace

std::unique_ptr<Executor> make_cuda_subband_executor(const PlanData& plan) {
  return std::make_unique<CudaSubbandExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
