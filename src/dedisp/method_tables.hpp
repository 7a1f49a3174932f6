#pragma once
// Internal: the host-side tables of the methods that sum along their own delays (subband, fdmt),
// shared by the CPU and CUDA executors, and the TrialReport every plan gives. Plain C++ (no
// CUDA), so that the derivations are tested on the CPU.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "warpbeam/dedisp.hpp"

namespace warpbeam::dedisp::detail {

// ---------------------------------------------------------------------------------------------
// Sub-band (subband_plan.cpp)
// ---------------------------------------------------------------------------------------------

/// The two stages of Algorithm::subband for one config (see SubbandConfig). Stage-1 rows are
/// q = phase_begin[j] + p (coarse DM j, phase p < phase_begin[j + 1] - phase_begin[j]):
///   stage 1: S[q][s][t] = sum_{c in s} x_c[t + off1[q][c]]
///   stage 2: out[i][t]  = sum_s S[phase_begin[j(i)] + phase[i][s]][s][t + shift[i][s]]
/// Only sub-bands with a kept channel are listed. The coarse trials' groups of fine trials are
/// consecutive: coarse j serves fine trials group_begin[j] .. group_begin[j + 1] - 1. A stage-1
/// row (q, s) is needed only over [min_shift, max_shift + block) of the fine trials that use it
/// (used[q][s] = 0: none does).
struct SubbandTables {
  int subbands = 0;                        ///< sub-bands cut (as configured or chosen)
  int phases = 1;                          ///< the most stage-1 phases of a coarse DM
  std::vector<std::vector<int>> channels;  ///< [nsub] kept channels of each listed sub-band
  std::vector<double> sweep_s_per_dm;      ///< [nsub] k (f_lo^-2 - f_hi^-2) over its channels
  std::vector<float> coarse_dms;           ///< [ncoarse]
  std::vector<std::int32_t> group_begin;   ///< [ncoarse + 1]
  std::vector<std::int32_t> coarse_of;     ///< [ndm]
  std::vector<std::int32_t> phase_begin;   ///< [ncoarse + 1] first stage-1 row of each coarse DM
  /// [nrows1][nchans]: round(exact delay at DM_j of c - that of the sub-band's highest channel +
  /// p / (phases of j)). Every channel of a listed sub-band.
  std::vector<std::int32_t> off1;
  std::vector<std::int32_t> phase;                 ///< [ndm][nsub]
  std::vector<std::int32_t> shift;                 ///< [ndm][nsub]
  std::vector<std::int32_t> min_shift, max_shift;  ///< [nrows1][nsub]
  std::vector<std::uint8_t> used;                  ///< [nrows1][nsub]
  std::vector<float> smearing_s;                   ///< [ndm] max_s t_sb(i, s)
  std::vector<int> sub_of_chan;                    ///< [nchans] listed sub-band, or -1
  std::vector<float> snr_fraction;                 ///< [ndm] trial_snr_fraction of each fine trial

  int nsub() const { return static_cast<int>(channels.size()); }
  int ncoarse() const { return static_cast<int>(coarse_dms.size()); }
  int nrows1() const { return phase_begin.empty() ? 0 : phase_begin.back(); }  ///< stage-1 rows
  /// The delays each fine trial sums along, [ndm][nchans] (killed channels get their sub-band's
  /// formula too; channels of a sub-band with no kept channel, which is not summed, the
  /// brute-force `delays`).
  std::vector<std::int32_t> effective_delays(const std::vector<std::int32_t>& delays) const;
};

/// Derives the sub-bands, the coarse grid and both stages' delays for `config` (validated) with
/// brute-force delays `delays` [ndm][nchans]. Throws invalid_argument for settings the bound
/// refuses (a coarse step too coarse, naming the largest allowed), and for more sub-bands than
/// channels.
SubbandTables plan_subbands(const DedispersionConfig& config,
                            const std::vector<std::int32_t>& delays);

/// Stage 2 of the CUDA sub-band method (cuda_subband_group.cu) stages, per coarse group, the
/// used stage-1 rows' windows packed to their own lengths: one window is `len` >= block +
/// max_shift - lo series samples of its row from sample lo on, at word `dst` of its stage's row
/// area, where lo is min_shift rounded down to a multiple of 4 elements of the series buffer
/// (src, len and dst are multiples of 4: 16-byte copies). The block at output sample t0 copies
/// series[src + t0 + x] for x < len (zero where t0 + x >= limit, past the row's end).
struct SubbandGroupRow {
  std::int64_t src = 0;    ///< element of the series buffer: the row's sample lo
  std::int64_t limit = 0;  ///< the row's length - lo
  std::int32_t len = 0;    ///< words staged
  std::int32_t dst = 0;    ///< word offset in the stage's row area
};
/// One stage of a coarse group: its sub-bands [sub_lo, sub_hi), their rows [row_lo, row_hi).
struct SubbandGroupStage {
  std::int32_t sub_lo = 0, sub_hi = 0, row_lo = 0, row_hi = 0;
};
/// The packed stage-2 schedule (subband_schedule.cpp).
struct SubbandGroupSchedule {
  std::vector<SubbandGroupRow> rows;      ///< every group's windows, stage by stage
  std::vector<SubbandGroupStage> stages;  ///< every group's stages, group by group
  std::vector<std::int32_t> stage_begin;  ///< [ncoarse + 1] first stage of each coarse group
  /// [ndm][nsub]: word of trial i's sample t0 + 0 of sub-band s in its stage's row area,
  /// dst + shift[i][s] - lo of its row's window.
  std::vector<std::int32_t> offset;
  int max_stage_subbands = 0;  ///< the most sub-bands of one stage
  int max_stage_words = 0;     ///< the largest row area of one stage
};

/// Packs the used rows of each coarse group of `t` into stages of at most `area_words` words
/// and `max_subbands` sub-bands, sub-bands in order, the rows of one sub-band in one stage, for
/// tiles of `block` output samples. `sub_offset` and `sub_len` [nsub]: where sub-band s's rows
/// start in the series buffer and their length (rows [nrows1][sub_len[s]]). Throws unsupported
/// when one sub-band's rows do not fit.
SubbandGroupSchedule plan_subband_group_schedule(const SubbandTables& t,
                                                 const std::vector<std::int64_t>& sub_offset,
                                                 const std::vector<std::int64_t>& sub_len,
                                                 int block, std::int64_t area_words,
                                                 int max_subbands);

/// The schedule for the most blocks per SM, from `blocks` down to 1, whose row area
/// `area_of(b)` holds each sub-band's windows (wide spans need more of the SM per block); sets
/// *blocks_used. Throws unsupported, naming the sub-band, when area_of(1) does not hold them.
SubbandGroupSchedule plan_subband_group_schedule_fitting(
    const SubbandTables& t, const std::vector<std::int64_t>& sub_offset,
    const std::vector<std::int64_t>& sub_len, int block, int max_subbands, int blocks,
    const std::function<std::int64_t(int)>& area_of, int* blocks_used);

/// The benchmarking override WARPBEAM_SUBBAND_GROUP = "WARPS,BLOCKS_PER_SM" of the group
/// kernel's launch: sets *warps (1..max_warps) and *blocks (1..32), or throws invalid_argument
/// naming the variable.
void parse_subband_group_override(const char* value, int max_warps, int* warps, int* blocks);

// ---------------------------------------------------------------------------------------------
// FDMT (fdmt_plan.cpp)
// ---------------------------------------------------------------------------------------------

/// One level of the transform: every row is  row[t] = A[t] + B[t + shift]  of two rows of the
/// level below (level 0 is the input channels). b < 0: row = A (a node with one child); a < 0
/// (level 1 only: a killed channel): that term is zero.
struct FdmtLevel {
  std::vector<std::int32_t> a, b, shift;  ///< [nrows]
  /// [nrows] samples each row needs beyond the block (its readers' largest shift downstream).
  std::vector<std::int32_t> ext;
  /// [nrows] the (node, delay) of each row: node index at this level, delay across it.
  std::vector<std::int32_t> node, delay;
  std::int64_t nrows() const { return static_cast<std::int64_t>(a.size()); }
  /// Row r starts at element offset(r, block) of this level's buffer: rows are laid out with
  /// block + ext samples, rounded up to a multiple of 16 floats (64-byte aligned rows).
  std::vector<std::int64_t> offsets(std::int64_t block) const;
};

/// The tree: positions p = 0 .. N-1 are the channels in order of descending frequency; node k
/// of level h covers positions [k 2^h, min((k+1) 2^h, N)); a row (node, delta) sums each of
/// its positions at its offset from the node's first position, the last one at delta. A
/// node's two children meet where the dispersion curve of its delta reaches the lower child's
/// first channel (ZO17's split, here on channel centres):
///   delta_u = round(delta (F(p_m) - F(p_0)) / (F(p_1) - F(p_0))),   F(p) = f(p)^-2,
///   split   = round(delta (F(p_m + 1) - F(p_0)) / (F(p_1) - F(p_0))),  delta_l = delta - split,
/// row(delta) = upper(delta_u)[t] + lower(delta_l)[t + split]. Only rows that feed an output
/// are computed (the rows of each level are pruned from the outputs downwards).
struct FdmtTables {
  std::vector<int> chan_of_pos;         ///< [N] channel at each position
  std::vector<FdmtLevel> levels;        ///< levels[0] is level 1 (it reads the channels)
  std::vector<std::int32_t> chan_ext;   ///< [nchans] samples read beyond the block per channel
  std::vector<std::int32_t> out_row;    ///< [ndm] the last level's row of each output trial
  std::vector<std::int32_t> out_delay;  ///< [ndm] its integer delay across the band
  std::vector<std::int32_t> curves;     ///< [ndm][nchans] the delay of every channel
  std::int64_t block = 0;               ///< output samples per block
  std::int64_t max_level_elements = 0;  ///< floats of the largest level buffer at `block`
};

/// The FDMT of `config` (validated) whose outputs are the rows at each trial's brute-force
/// delay of the lowest channel (so max_delay is brute force's). `block` output samples per time
/// block (> 0).
FdmtTables plan_fdmt(const DedispersionConfig& config, const std::vector<std::int32_t>& delays,
                     std::int64_t block);

// ---------------------------------------------------------------------------------------------
// All methods
// ---------------------------------------------------------------------------------------------

struct MethodTables {
  TrialReport report;
  std::optional<SubbandTables> subband;
  std::optional<FdmtTables> fdmt;
};

/// The tables and the report of `config` (validated) on `backend` (cpu or cuda) for brute-force
/// delays `delays` and valid output samples `nsamples_out`.
MethodTables make_method_tables(const DedispersionConfig& config, Backend backend,
                                const std::vector<std::int32_t>& delays, std::int64_t nsamples_out);

/// Variance over kept channels of (delays[ch] - exact delay at `dm` in samples), samples^2:
/// how far a row's whole-sample delays scatter about the true dispersion curve (a constant
/// offset does not count: it only shifts the time).
double delay_variance(const DedispersionConfig& config, const std::int32_t* delays, double dm);

/// The S/N model of TrialReport::snr_fraction: a Gaussian pulse of the config's width at `dm`
/// summed along delays scattered by `v` against brute force's `v_bf` (samples^2).
double snr_model(const DedispersionConfig& config, double dm, double v, double v_bf);

/// The DMs at which trial i's S/N is judged: its own and the midpoints to its neighbours (a
/// pulse between two trials is found by either), where the DM error of the trial adds to the
/// method's own scatter.
std::array<double, 3> judged_dms(const std::vector<float>& dms, std::size_t i);

/// snr_model of a trial summed along `delays` against brute force's `bf` (both [nchans]), the
/// worst over judged_dms(); `bf_var` (optional) holds brute force's variances at those DMs.
double trial_snr_fraction(const DedispersionConfig& config, std::size_t i,
                          const std::int32_t* delays, const std::int32_t* bf,
                          const double* bf_var = nullptr);

/// Fills report.max_delay_error, smearing_s and snr_fraction from report.dms and report.delays
/// against the brute-force `delays` (see TrialReport).
void fill_report_errors(const DedispersionConfig& config, const std::vector<std::int32_t>& delays,
                        TrialReport& report);

/// make_method_tables() of `config`, shared with every earlier call of the same band, trials,
/// killmask, pulse width and method settings (the samples per execute do not matter but for
/// FDMT's block): a few recent configurations are kept (method_cache.cpp). Thread-safe.
std::shared_ptr<const MethodTables> cached_method_tables(const DedispersionConfig& config,
                                                         Backend backend,
                                                         const std::vector<std::int32_t>& delays,
                                                         std::int64_t nsamples_out);

/// Additions and minimum bytes of one execute() (see OperationCount).
OperationCount count_operations(const DedispersionConfig& config, const MethodTables& tables,
                                std::int64_t nsamples_out);

/// What the executor of `config` on `backend` allocates (its workspace()), from the tables alone
/// (method_workspace.cpp): brute force as estimate_cpu/cuda_workspace(); the CPU subband and
/// fdmt executors exactly; the CUDA ones with their stage-1 tile tables counted for one-DM
/// tiles (an upper bound, as for brute force); plus method_table_bytes().
Workspace estimate_method_workspace(const DedispersionConfig& config, Backend backend,
                                    const MethodTables& tables, std::int64_t nsamples_out);

/// Host bytes of the subband / fdmt tables and of their TrialReport that a plan keeps (0 for
/// brute force, whose report is its delay table).
std::int64_t method_table_bytes(const MethodTables& tables);

/// The FDMT block of `config` on `backend` for `nsamples_out` valid output samples.
std::int64_t fdmt_block(const DedispersionConfig& config, Backend backend,
                        std::int64_t nsamples_out);

}  // namespace warpbeam::dedisp::detail
