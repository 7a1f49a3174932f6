#pragma once
// Internal: the launch functions of the sub-band and FDMT CUDA kernels (cuda_subband.cu,
// cuda_fdmt.cu); their executors (cuda_subband.cpp, cuda_fdmt.cpp) own the tables and buffers.
// Plain C++: no CUDA types.
#include <cstddef>
#include <cstdint>

#include "dedisp/cuda_kernels.hpp"
#include "dedisp/method_tables.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::dedisp::detail {

/// Stage 2 of the sub-band method: out[i][t] = sum_s S(q(i, s), s)[t + shift[i][s]], with the
/// stage-1 series of sub-band s at series + sub_offset[s] as rows [nrows1][sub_len[s]] and
/// q(i, s) = phase_begin[j(i)] + phase[i][s]. A block covers one tile of fine trials of one
/// coarse DM (tile_coarse, tile_first, tile_count: up to kSubbandTrialsPerBlock trials) and
/// kSubbandBlockSamples output samples; per stage of `subbands_per_stage` sub-bands it stages
/// each used stage-1 row's window, [t0 + min_shift, + block + (max - min shift)), in shared
/// memory (row_words floats per row, max_phases rows per sub-band).
struct SubbandStage2Args {
  const float* series = nullptr;
  const std::int64_t* sub_offset = nullptr;   ///< [nsub]
  const std::int64_t* sub_len = nullptr;      ///< [nsub] samples per stage-1 row
  const std::int32_t* phase_begin = nullptr;  ///< [ncoarse + 1]
  const std::int32_t* phase = nullptr;        ///< [ndm][nsub]
  const std::int32_t* shift = nullptr;        ///< [ndm][nsub]
  const std::int32_t* min_shift = nullptr;    ///< [nrows1][nsub]
  const std::int32_t* max_shift = nullptr;    ///< [nrows1][nsub]
  const std::uint8_t* used = nullptr;         ///< [nrows1][nsub]
  const std::int32_t* tile_coarse = nullptr;  ///< [ntiles]
  const std::int32_t* tile_first = nullptr;   ///< [ntiles]
  const std::int32_t* tile_count = nullptr;   ///< [ntiles]
  int ntiles = 0;
  int nsub = 0;
  int max_phases = 1;
  int subbands_per_stage = 1;
  int row_words = 0;  ///< >= block samples + the largest (max - min shift), a multiple of 4
  std::size_t smem_bytes = 0;
  std::int64_t nsamples_out = 0;
  OutputTarget out;
};
inline constexpr int kSubbandTrialsPerBlock = 8;    ///< one warp per fine trial
inline constexpr int kSubbandSamplesPerThread = 8;  ///< output samples in registers
inline constexpr int kSubbandBlockSamples = 32 * kSubbandSamplesPerThread;
void launch_subband_stage2(const SubbandStage2Args& a, const Stream* stream);
/// Stage 2 with one block per coarse group (cuda_subband_group.cu): tiles of up to
/// 2 x `warps` trials of one coarse DM (kSubbandGroupTrialsPerWarp per warp, warps <=
/// kSubbandGroupMaxWarps) and kSubbandBlockSamples output samples, staged by the plan's packed
/// schedule (SubbandGroupSchedule): shared memory is the largest stage's row area, then
/// [2 x warps][max_stage_subbands] offsets.
inline constexpr int kSubbandGroupTrialsPerWarp = 2;
inline constexpr int kSubbandGroupMaxWarps = 16;
inline constexpr int kSubbandGroupMaxStageSubbands = 64;
struct SubbandGroupArgs {
  const float* series = nullptr;
  const SubbandGroupRow* rows = nullptr;
  const SubbandGroupStage* stages = nullptr;
  const std::int32_t* stage_begin = nullptr;  ///< [ncoarse + 1]
  const std::int32_t* offset = nullptr;       ///< [ndm][nsub]
  const std::int32_t* tile_coarse = nullptr;  ///< [ntiles]
  const std::int32_t* tile_first = nullptr;   ///< [ntiles]
  const std::int32_t* tile_count = nullptr;   ///< [ntiles]
  int ntiles = 0;
  int nsub = 0;
  int warps = kSubbandGroupMaxWarps;
  int area_words = 0;  ///< the row area: the schedule's max_stage_words, a multiple of 4
  int max_stage_subbands = 0;
  std::size_t smem_bytes = 0;
  std::int64_t nsamples_out = 0;
  OutputTarget out;
};
void launch_subband_group(const SubbandGroupArgs& a, const Stream* stream);

/// Stage 1 of the sub-band method for codes of <= 8 bits (cuda_subband_stage1.cu): for every
/// sub-band b and stage-1 row r, series[b.out_offset + r * b.len + t] =
/// sum over its channels k of code(k, t + base[b][k] + rel[b][r][k]) (signed codes offset back),
/// for t < b.len, in tiles of kSubbandStage1Samples up to b.len - short_by (a gulp shorter than
/// planned by short_by output samples needs that many fewer). The channels of b are rows
/// k = 0 .. b.nch - 1 of `stride` bytes at scratch + b.in_offset; tables padded to
/// kSubbandStage1MaxChannels channels.
struct SubbandStage1Band {
  std::int64_t in_offset = 0;   ///< bytes: its first channel row in the scratch
  std::int64_t out_offset = 0;  ///< floats: its first series row
  std::int64_t len = 0;         ///< samples per series row (the pitch)
  int nch = 0;                  ///< channels, <= kSubbandStage1MaxChannels
};
struct SubbandStage1Args {
  const std::uint8_t* scratch = nullptr;
  std::int64_t stride = 0;                   ///< bytes per channel row, a multiple of 16
  const SubbandStage1Band* bands = nullptr;  ///< [nsub]
  const std::int32_t* base = nullptr;        ///< [nsub][max channels]: smallest delay over rows
  const std::int32_t* span = nullptr;        ///< [nsub][max channels]: largest - smallest
  const std::int32_t* rel = nullptr;         ///< [nsub][nrows][max channels]: delay - base
  int nsub = 0, nrows = 0;
  int row_words = 0;  ///< per E or O row: >= max span / 2 + samples / 2, even
  std::int64_t ntime_tiles = 0;
  std::int64_t short_by = 0;   ///< planned - this gulp's output samples
  std::size_t smem_bytes = 0;  ///< max channels of a sub-band x 2 x row_words x 4
  unsigned sign_flip = 0;      ///< 2^(nbits-1) for signed codes, else 0
  float* series = nullptr;
};
inline constexpr int kSubbandStage1MaxChannels = 32;  ///< 16-bit lanes: 32 x 255 < 65536
inline constexpr int kSubbandStage1Samples = 512;     ///< per block: 32 lanes x 8 pair words
inline constexpr int kSubbandStage1Warps = 8;
void launch_subband_stage1(const SubbandStage1Args& a, const Stream* stream);

/// One level of the FDMT for one time block: row r = A[t] + B[t + shift[r]] for
/// t < block + ext[r] (the last level: t < block, written to output row r of `out` at t0).
/// Level 1 (in_channels) reads input channel rows: `channel_rows` + row_of_chan[a] * in_stride
/// + t0, uint8 codes (sign_flip as the tiled kernels) or float32 (float_codes); a row of -1
/// reads as zero. Other levels read float rows of the level below at in_offsets.
struct FdmtLevelArgs {
  bool in_channels = false;
  const void* channel_rows = nullptr;
  bool float_codes = false;
  unsigned sign_flip = 0;
  std::int64_t in_stride = 0;                 ///< elements per channel row
  const std::int32_t* row_of_chan = nullptr;  ///< [nchans] (level 1)
  const float* in = nullptr;                  ///< level >= 2
  const std::int64_t* in_offsets = nullptr;
  const std::int32_t* a = nullptr;
  const std::int32_t* b = nullptr;
  const std::int32_t* shift = nullptr;
  const std::int32_t* ext = nullptr;
  std::int64_t nrows = 0;
  std::int64_t t0 = 0;     ///< the block's first output sample
  std::int64_t block = 0;  ///< output samples of this block
  float* out = nullptr;    ///< intermediate levels: the level buffer at out_offsets
  const std::int64_t* out_offsets = nullptr;
  /// The last level: output trial i takes row out_row[i]; written to out_final at
  /// [i][t0 + t] (nsamples_out per row); nrows is then the number of trials.
  const std::int32_t* out_row = nullptr;
  OutputTarget out_final;
  std::int64_t nsamples_out = 0;
};
void launch_fdmt_level(const FdmtLevelArgs& a, const Stream* stream);

}  // namespace warpbeam::dedisp::detail
