// What each executor allocates, computed from the method's tables before it exists
// (DedispersionPlan::estimate_workspace() and preview()): the file search sizes its DM chunks
// and refuses budgets with it. Plain C++ (in every build, as tile_geometry.cpp's brute-force
// estimate), so it mirrors the allocations of cpu_subband.cpp, cpu_fdmt.cpp, cuda_subband.cpp
// and cuda_fdmt.cpp; the tests check each executor's workspace() against it (exactly on the
// CPU, as an upper bound within a factor on CUDA).
#include <algorithm>

#include "dedisp/cpu_common.hpp"
#include "dedisp/cuda_methods.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr std::int64_t kI32 = sizeof(std::int32_t), kF32 = sizeof(float);

// An uploaded table of n elements (cuda_*.cpp's upload(): at least one element).
std::int64_t table(std::int64_t n, std::int64_t elem) {
  return std::max<std::int64_t>(n, 1) * elem;
}

bool kept(const DedispersionConfig& c, int ch) {
  return c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)] != 0;
}

// Kept channels of the listed sub-bands (the rows the sub-band executors corner-turn).
std::int64_t subband_rows(const SubbandTables& t) {
  std::int64_t rows = 0;
  for (const auto& ch : t.channels)
    rows += static_cast<std::int64_t>(ch.size());
  return rows;
}

Workspace cpu_subband(const DedispersionConfig& c, const SubbandTables& t, std::int64_t nout) {
  const std::int64_t rows = subband_rows(t);
  std::int64_t macro =
      c.cpu_tuning.samples_per_tile > 0 ? c.cpu_tuning.samples_per_tile : kSubbandMacroBlock;
  macro = std::max<std::int64_t>(1, std::min(macro, nout));
  const auto ns = static_cast<std::size_t>(t.nsub());
  std::int64_t series = 0;
  for (std::size_t q = 0; q < static_cast<std::size_t>(t.nrows1()); ++q)
    for (std::size_t s = 0; s < ns; ++s)
      if (t.used[q * ns + s])
        series += padded_row(macro + t.max_shift[q * ns + s] - t.min_shift[q * ns + s]);
  // 8-bit codes: the corner turn in bytes and the stage-1 rows in uint16 (cpu_subband.cpp).
  const bool codes = cpu_subband_sums_codes(c, t.channels);
  return {std::max<std::int64_t>(rows, 1) * padded_row(c.nsamples_in) * (codes ? 1 : kF32) +
              std::max<std::int64_t>(series, 1) * (codes ? 2 : kF32) + t.nrows1() * rows * kI32,
          0};
}

Workspace cpu_fdmt(const DedispersionConfig& c, const FdmtTables& t) {
  std::int64_t rows = 0;
  for (int ch = 0; ch < c.nchans; ++ch)
    rows += kept(c, ch) ? 1 : 0;
  return {(std::max<std::int64_t>(rows, 1) * padded_row(c.nsamples_in) + 2 * t.max_level_elements) *
              kF32,
          0};
}

Workspace cuda_subband(const DedispersionConfig& c, const SubbandTables& t, std::int64_t nout) {
  const int nsub = t.nsub();
  const std::int64_t nq = t.nrows1(), ndm = static_cast<std::int64_t>(c.dms.size());
  std::int64_t dev = 0, series = 0;
  for (int s = 0; s < nsub; ++s) {
    std::int32_t maxshift = 0;
    for (std::int64_t q = 0; q < nq; ++q)
      maxshift = std::max(maxshift, t.max_shift[static_cast<std::size_t>(q) * nsub + s]);
    series += nq * (nout + maxshift);
    // Stage-1 delays [row][channel] and the tile tables base and span [tiles][channel], at most
    // one tile per row.
    const auto n = static_cast<std::int64_t>(t.channels[static_cast<std::size_t>(s)].size());
    dev += 3 * table(nq * n, kI32);
  }
  dev += table(series + 4, kF32);  // + the padding of cuda_subband.cpp
  // Stage-2 tiles of at least kSubbandGroupTrialsPerWarp fine trials (either kernel).
  std::int64_t tiles = 0;
  for (int j = 0; j < t.ncoarse(); ++j)
    tiles += (t.group_begin[j + 1] - t.group_begin[j] + kSubbandGroupTrialsPerWarp - 1) /
             kSubbandGroupTrialsPerWarp;
  // Either the first kernel's tables (phase_begin, phase, shift, min/max shift, used, sub-band
  // offsets and lengths) or the packed schedule's (stage_begin, offset, at most one window per
  // stage-1 row and sub-band, at most one stage per coarse DM and sub-band).
  const std::int64_t tile_kernel = table(t.ncoarse() + 1, kI32) + 2 * table(ndm * nsub, kI32) +
                                   2 * table(nq * nsub, kI32) + table(nq * nsub, 1) +
                                   2 * table(nsub, 8);
  const std::int64_t group_kernel =
      table(t.ncoarse() + 1, kI32) + table(ndm * nsub, kI32) +
      table(nq * nsub, static_cast<std::int64_t>(sizeof(SubbandGroupRow))) +
      table(static_cast<std::int64_t>(t.ncoarse()) * nsub,
            static_cast<std::int64_t>(sizeof(SubbandGroupStage)));
  dev += 3 * table(tiles, kI32) + std::max(tile_kernel, group_kernel);
  if (!c.channel_major) {
    const bool floats = c.nbits > 8;
    const std::int64_t n = c.nsamples_in;
    const std::int64_t stride = floats ? (n + 4 + 3) / 4 * 4 : (n + 8 + 15) / 16 * 16;
    dev += table(c.nchans, kI32) +
           std::max<std::int64_t>(subband_rows(t), 1) * stride * (floats ? 4 : 1);
    // Codes: the one-launch stage 1's bands, base and span [nsub][32], rel [nsub][row][32]
    // (made whether or not the sub-bands are narrow enough for it to run).
    if (!floats)
      dev += table(nsub, static_cast<std::int64_t>(sizeof(SubbandStage1Band))) +
             2 * table(nsub * kSubbandStage1MaxChannels, kI32) +
             table(nsub * nq * kSubbandStage1MaxChannels, kI32);
  }
  return {0, dev};
}

Workspace cuda_fdmt(const DedispersionConfig& c, const FdmtTables& t) {
  std::int64_t dev = 0;
  for (const FdmtLevel& L : t.levels)
    dev += 4 * table(L.nrows(), kI32) + table(L.nrows() + 1, 8);
  dev += table(static_cast<std::int64_t>(t.out_row.size()), kI32) +
         2 * table(t.max_level_elements, kF32) + table(c.nchans, kI32);
  if (!c.channel_major) {
    const bool floats = c.nbits > 8;
    std::int64_t rows = 0;
    for (int ch = 0; ch < c.nchans; ++ch)
      rows += kept(c, ch) ? 1 : 0;
    const std::int64_t n = c.nsamples_in;
    const std::int64_t stride = floats ? (n + 3) / 4 * 4 : (n + 15) / 16 * 16;
    dev += std::max<std::int64_t>(rows, 1) * stride * (floats ? 4 : 1);
  }
  return {0, dev};
}

template <class T>
std::int64_t bytes(const std::vector<T>& v) {
  return static_cast<std::int64_t>(v.size() * sizeof(T));
}

}  // namespace

Workspace estimate_method_workspace(const DedispersionConfig& c, Backend backend,
                                    const MethodTables& m, std::int64_t nout) {
  const bool cuda = backend == Backend::cuda;
  Workspace w;
  if (m.subband)
    w = cuda ? cuda_subband(c, *m.subband, nout) : cpu_subband(c, *m.subband, nout);
  else if (m.fdmt)
    w = cuda ? cuda_fdmt(c, *m.fdmt) : cpu_fdmt(c, *m.fdmt);
  else
    return cuda ? estimate_cuda_workspace(c) : estimate_cpu_workspace(c);
  w.host_bytes += method_table_bytes(m);
  return w;
}

std::int64_t method_table_bytes(const MethodTables& m) {
  if (!m.subband && !m.fdmt) return 0;
  const TrialReport& r = m.report;
  std::int64_t n = bytes(r.dms) + bytes(r.delays) + bytes(r.max_delay_error) + bytes(r.smearing_s) +
                   bytes(r.snr_fraction) + bytes(r.coarse_phases) + bytes(r.coarse_dms) +
                   bytes(r.coarse_trial) + bytes(r.subband_smearing_s) + bytes(r.fdmt_delay);
  if (m.subband) {
    const SubbandTables& t = *m.subband;
    n += bytes(t.off1) + bytes(t.phase) + bytes(t.shift) + bytes(t.min_shift) + bytes(t.max_shift) +
         bytes(t.used) + bytes(t.coarse_of) + bytes(t.smearing_s) + bytes(t.snr_fraction) +
         bytes(t.sub_of_chan);
    for (const auto& ch : t.channels)
      n += bytes(ch);
  }
  if (m.fdmt) {
    const FdmtTables& t = *m.fdmt;
    n += bytes(t.curves) + bytes(t.chan_of_pos) + bytes(t.chan_ext) + bytes(t.out_row) +
         bytes(t.out_delay);
    for (const FdmtLevel& L : t.levels)
      n += bytes(L.a) + bytes(L.b) + bytes(L.shift) + bytes(L.ext) + bytes(L.node) + bytes(L.delay);
  }
  return n;
}

}  // namespace warpbeam::dedisp::detail
