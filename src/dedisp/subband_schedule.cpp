// The packed schedule of the CUDA sub-band method's stage 2 (cuda_subband_group.cu): which
// stage-1 row windows a block of a coarse group stages, where, and in how many stages.
//
// Why packed. The first layout gave every sub-band max_phases rows of block + the largest span
// of the whole plan (D1: 2 x (256 + 785) words), so 11 sub-bands fitted a stage and every block
// ran 6 stages, each with its barriers and copy latency, although D1's windows are 256 + 86
// samples on average and a third of its groups have one phase. Packed to their own lengths a
// group's windows take 70-146 KiB (D1, measured by the plan): one or two stages.
//
// Why aligned. Each window starts at a 16-byte aligned element (min_shift rounded down: up to 3
// samples before it, of the row or of the one before, staged and never read) and is a multiple
// of 4 words long at a multiple of 4 words, so that the kernel stages it 16 bytes per cp.async:
// a quarter of the staging instructions of 4-byte copies, which took ~30 % of the kernel's.
#include <algorithm>
#include <cstdio>

#include "dedisp/method_tables.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp::detail {
namespace {

// The window of stage-1 row q of sub-band s (dst left 0): from min_shift rounded down to a
// 16-byte aligned element of the series buffer, a multiple of 4 words long.
SubbandGroupRow window_of(const SubbandTables& t, const std::vector<std::int64_t>& sub_offset,
                          const std::vector<std::int64_t>& sub_len, int block, std::int64_t q,
                          int s) {
  const std::size_t qs = static_cast<std::size_t>(q) * static_cast<std::size_t>(t.nsub()) +
                         static_cast<std::size_t>(s);
  const std::int64_t len = sub_len[static_cast<std::size_t>(s)];
  const std::int64_t e = sub_offset[static_cast<std::size_t>(s)] + q * len + t.min_shift[qs];
  SubbandGroupRow r;
  const std::int32_t lo = t.min_shift[qs] - static_cast<std::int32_t>(e & 3);
  r.src = e - (e & 3);
  r.limit = len - lo;
  r.len = (block + t.max_shift[qs] - lo + 3) / 4 * 4;
  if (r.src < 0)  // shifts are >= 0 (delays at DM >= 0 relative to the sub-band's top)
    fail(ErrorCategory::unsupported,
         "sub-band stage 2: a negative shift (a window before its row's start)");
  return r;
}

}  // namespace

SubbandGroupSchedule plan_subband_group_schedule(const SubbandTables& t,
                                                 const std::vector<std::int64_t>& sub_offset,
                                                 const std::vector<std::int64_t>& sub_len,
                                                 int block, std::int64_t area_words,
                                                 int max_subbands) {
  const int nsub = t.nsub();
  const auto at = [nsub](std::int64_t row, int s) {
    return static_cast<std::size_t>(row) * static_cast<std::size_t>(nsub) +
           static_cast<std::size_t>(s);
  };
  SubbandGroupSchedule g;
  // dst of (row q, sub-band s) in its stage: -1 when unused; lo_a: its window's first sample,
  // min_shift rounded down to a 16-byte aligned element of the series buffer.
  std::vector<std::int32_t> dst(t.used.size(), -1), lo_a(t.used.size(), 0);
  g.stage_begin.push_back(0);
  for (int j = 0; j < t.ncoarse(); ++j) {
    const std::int32_t q0 = t.phase_begin[static_cast<std::size_t>(j)];
    const std::int32_t np = t.phase_begin[static_cast<std::size_t>(j) + 1] - q0;
    const auto first_row = static_cast<std::int32_t>(g.rows.size());
    SubbandGroupStage st{0, 0, first_row, first_row};
    std::int64_t words = 0;
    const auto close = [&] {
      if (st.sub_hi > st.sub_lo) {
        g.stages.push_back(st);
        g.max_stage_subbands = std::max(g.max_stage_subbands, st.sub_hi - st.sub_lo);
        g.max_stage_words = std::max(g.max_stage_words, static_cast<int>(words));
      }
      st = {st.sub_hi, st.sub_hi, st.row_hi, st.row_hi};
      words = 0;
    };
    for (int s = 0; s < nsub; ++s) {
      std::vector<SubbandGroupRow> windows;  // sub-band s's used windows, phase by phase
      std::int64_t need = 0;                 // and their words
      for (int p = 0; p < np; ++p) {
        const std::size_t qs = at(q0 + p, s);
        if (!t.used[qs]) continue;
        windows.push_back(window_of(t, sub_offset, sub_len, block, q0 + p, s));
        lo_a[qs] =
            static_cast<std::int32_t>(sub_len[static_cast<std::size_t>(s)] - windows.back().limit);
        need += windows.back().len;
      }
      if (need > area_words)
        fail(ErrorCategory::unsupported,
             "sub-band stage 2: the rows of sub-band {} at coarse DM {} take {} words, more than "
             "the {} that shared memory holds",
             s, t.coarse_dms[static_cast<std::size_t>(j)], need, area_words);
      if (words + need > area_words || st.sub_hi - st.sub_lo == max_subbands) close();
      std::size_t k = 0;
      for (int p = 0; p < np; ++p) {
        const std::size_t qs = at(q0 + p, s);
        if (!t.used[qs]) continue;
        SubbandGroupRow r = windows[k++];
        r.dst = static_cast<std::int32_t>(words);
        dst[qs] = r.dst;
        words += r.len;
        g.rows.push_back(r);
        ++st.row_hi;
      }
      ++st.sub_hi;
    }
    close();
    g.stage_begin.push_back(static_cast<std::int32_t>(g.stages.size()));
  }
  const std::size_t ndm = t.coarse_of.size();
  g.offset.resize(ndm * static_cast<std::size_t>(nsub));
  for (std::size_t i = 0; i < ndm; ++i) {
    const std::int32_t q0 = t.phase_begin[static_cast<std::size_t>(t.coarse_of[i])];
    for (int s = 0; s < nsub; ++s) {
      const std::size_t is = at(static_cast<std::int64_t>(i), s);
      const std::size_t qs = at(q0 + t.phase[is], s);
      g.offset[is] = dst[qs] + t.shift[is] - lo_a[qs];
    }
  }
  return g;
}

SubbandGroupSchedule plan_subband_group_schedule_fitting(
    const SubbandTables& t, const std::vector<std::int64_t>& sub_offset,
    const std::vector<std::int64_t>& sub_len, int block, int max_subbands, int blocks,
    const std::function<std::int64_t(int)>& area_of, int* blocks_used) {
  // The words of the largest sub-band's windows of any coarse group: what a stage must hold.
  std::int64_t most = 0;
  for (int j = 0; j < t.ncoarse(); ++j)
    for (int s = 0; s < t.nsub(); ++s) {
      std::int64_t need = 0;
      for (std::int32_t q = t.phase_begin[static_cast<std::size_t>(j)];
           q < t.phase_begin[static_cast<std::size_t>(j) + 1]; ++q)
        if (t.used[static_cast<std::size_t>(q) * static_cast<std::size_t>(t.nsub()) +
                   static_cast<std::size_t>(s)])
          need += window_of(t, sub_offset, sub_len, block, q, s).len;
      most = std::max(most, need);
    }
  int b = std::max(blocks, 1);
  while (b > 1 && area_of(b) < most)
    --b;
  *blocks_used = b;
  // Throws unsupported, naming the sub-band, where even one block per SM is too small.
  return plan_subband_group_schedule(t, sub_offset, sub_len, block, area_of(b), max_subbands);
}

void parse_subband_group_override(const char* value, int max_warps, int* warps, int* blocks) {
  if (std::sscanf(value, "%d,%d", warps, blocks) != 2 || *warps < 1 || *warps > max_warps ||
      *blocks < 1 || *blocks > 32)
    fail(ErrorCategory::invalid_argument,
         "WARPBEAM_SUBBAND_GROUP = '{}': expected WARPS (1-{}),BLOCKS_PER_SM (1-32)", value,
         max_warps);
}

}  // namespace warpbeam::dedisp::detail
