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

#include "dedisp/method_tables.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp::detail {

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
      std::int64_t need = 0;  // words of sub-band s's used windows
      for (int p = 0; p < np; ++p) {
        const std::size_t qs = at(q0 + p, s);
        if (!t.used[qs]) continue;
        const std::int64_t e =
            sub_offset[static_cast<std::size_t>(s)] +
            static_cast<std::int64_t>(q0 + p) * sub_len[static_cast<std::size_t>(s)] +
            t.min_shift[qs];
        lo_a[qs] = t.min_shift[qs] - static_cast<std::int32_t>(e & 3);
        need += (block + t.max_shift[qs] - lo_a[qs] + 3) / 4 * 4;
      }
      if (need > area_words)
        fail(ErrorCategory::unsupported,
             "sub-band stage 2: the rows of sub-band {} at coarse DM {} take {} words, more than "
             "the {} that shared memory holds",
             s, t.coarse_dms[static_cast<std::size_t>(j)], need, area_words);
      if (words + need > area_words || st.sub_hi - st.sub_lo == max_subbands) close();
      for (int p = 0; p < np; ++p) {
        const std::size_t qs = at(q0 + p, s);
        if (!t.used[qs]) continue;
        SubbandGroupRow r;
        const std::int32_t lo = lo_a[qs];
        const std::int64_t len = sub_len[static_cast<std::size_t>(s)];
        r.src =
            sub_offset[static_cast<std::size_t>(s)] + static_cast<std::int64_t>(q0 + p) * len + lo;
        r.limit = len - lo;
        r.len = (block + t.max_shift[qs] - lo + 3) / 4 * 4;
        if (r.src < 0)  // shifts are >= 0 (delays at DM >= 0 relative to the sub-band's top)
          fail(ErrorCategory::unsupported,
               "sub-band stage 2: a negative shift (a window before its row's start)");
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
  for (int b = std::max(blocks, 1);; --b) {
    try {
      SubbandGroupSchedule g =
          plan_subband_group_schedule(t, sub_offset, sub_len, block, area_of(b), max_subbands);
      *blocks_used = b;
      return g;
    } catch (const Error& e) {
      if (b == 1 || e.category() != ErrorCategory::unsupported) throw;
    }
  }
}

}  // namespace warpbeam::dedisp::detail
