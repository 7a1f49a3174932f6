#pragma once
// Internal: the host-side geometry of the CUDA tiled and packed kernels (cuda_tiled.cu,
// cuda_packed.cu): which channels are used, the (DM, time) tile, the shared-memory rows that hold
// the staged input, and the per-tile delay tables. Plain C++ (no CUDA) so that it is tested on
// the CPU (tests/test_dedisp_gpu.cpp, suite DedispTileGeometry).
//
// The tile. A block covers dms_per_block (BD) DM trials x BT = TX * K output samples, where TX
// (32 or 64) threads lie along time and K samples sit in each thread's registers; every warp lies
// along time, so its DM trial, and with it the channel's shift, is the same for all its lanes.
// For a block whose first DM is d0 and last (valid) DM is d1, channel k needs the input samples
// t0 + D(d0,k) .. t0 + D(d1,k) + BT - 1: the block's BT samples plus the channel's span
// D(d1,k) - D(d0,k) (delays grow with DM). The span is largest at the lowest frequency and the
// highest DM tile (max_span); the shared-memory rows are sized for it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "warpbeam/dedisp.hpp"

namespace warpbeam::dedisp::detail {

/// Default tile of one kernel variant: the winners of the D1 sweep on the H200 (8-bit, 1024
/// channels, 1122 DMs; docs/PERFORMANCE.md): packed 32 DMs x 16 samples per thread x 32 lanes
/// (1024 threads, 0.143 s against 0.151 s for 16 x 16 x 32); tiled 16 DMs x 32 samples x 32
/// lanes (512 threads, 0.197 s against 0.221 s). The tiled kernel stages float32 rows for every
/// nbits, so its inner loop is the same for float input.
struct DefaultTile {
  int dms_per_block;
  int samples_per_thread;
  int lanes;
};
inline constexpr DefaultTile kDefaultPackedTile{32, 16, 32};
inline constexpr DefaultTile kDefaultTiledTile{16, 32, 32};
/// The default tile of `algorithm` (tiled or packed).
inline constexpr DefaultTile default_tile(Algorithm algorithm) {
  return algorithm == Algorithm::packed ? kDefaultPackedTile : kDefaultTiledTile;
}
/// Channels summed in 16-bit lanes between flushes: 256 * 255 = 65280 <= 65535, so an 8-bit
/// (or narrower) code can never overflow its lane.
inline constexpr int kPackedFlushChannels = 256;

/// Indices of the channels the killmask keeps (all when it is empty), ascending.
std::vector<int> used_channels(const DedispersionConfig& config);

/// The delay table restricted to `used` channels: [ndm][used.size()] from [ndm][nchans].
/// Throws invalid_argument unless each channel's delay is non-decreasing in DM (the tiles rely
/// on it; delay_table() guarantees it for an ascending DM list).
std::vector<std::int32_t> compact_delays(const std::vector<std::int32_t>& delays, int ndm,
                                         int nchans, const std::vector<int>& used);

/// The largest span (largest - smallest delay of a channel within a tile) over all tiles of `bd`
/// DMs and channels k.
int max_tile_span(const std::vector<std::int32_t>& compact, int ndm, int nused, int bd);

/// Per tile of `bd` DMs and per used channel: base = the smallest delay of channel k over the
/// tile's DMs and span = the largest - base (for delays that grow with DM: the first and the
/// last valid DM's). Both [ndm_tiles][nused].
void tile_tables(const std::vector<std::int32_t>& compact, int ndm, int nused, int bd,
                 std::vector<std::int32_t>& base, std::vector<std::int32_t>& span);

/// Shared-memory limits of the device (bytes).
struct SmemLimits {
  std::size_t per_block = 232448;  ///< opt-in maximum of one block (H100/H200: 227 KiB)
  std::size_t per_sm = 233472;     ///< one SM (H100/H200: 228 KiB)
};

/// Everything a launch of the tiled or packed kernel needs besides pointers.
struct TileGeometry {
  Algorithm algorithm = Algorithm::tiled;  ///< tiled or packed
  int dms_per_block = 0;                   ///< BD (after fitting shared memory)
  int lanes = 0;                           ///< TX: threads along time, 32 or 64
  int samples_per_thread = 0;              ///< K
  int channels_per_stage = 0;              ///< CC
  int threads = 0;                         ///< TX * BD
  int block_samples = 0;                   ///< BT = TX * K
  int max_span = 0;                        ///< the largest channel span of a DM tile (samples)
  /// Words of one staged row. packed: 32-bit pair words of one of the two rows (even/odd pairs)
  /// of a channel, even, >= max_span / 2 + BT / 2. tiled: floats of the channel's row, a multiple
  /// of 4, >= max_span + BT.
  int row_words = 0;
  std::size_t smem_bytes = 0;  ///< dynamic shared memory of one block
  int stages_per_flush = 0;    ///< packed: stages between flushes of the 16-bit lanes
  int ndm_tiles = 0;
  std::int64_t ntime_tiles = 0;

  /// The tile sizes as a CudaTuning (what DedispersionPlan::tuning() reports).
  CudaTuning tuning() const {
    return {dms_per_block, samples_per_thread, threads, channels_per_stage};
  }
  /// Shared memory of one staged channel (rows + its per-DM offsets), bytes.
  std::size_t bytes_per_channel() const;
  /// One line for logs: "packed 16 DM x 512 samples (32 lanes x 16), 11 channels/stage, ...".
  std::string describe() const;
};

/// Resolves `requested` (0 = default_tile(algorithm); samples_per_thread defaults to at most 16
/// when the requested DMs and lanes make more than 512 threads) on this shape:
/// dms_per_block is capped at ndm and halved until one channel's rows fit in `limits.per_block`;
/// channels_per_stage (0 = automatic) fills the block's share of the SM's shared memory at 1024
/// threads per SM, in a multiple of the block's warps when one fits, at most 64 and nused.
/// Throws invalid_argument for
/// a tuning that no shape allows (naming the field) and unsupported when the grid is too large.
TileGeometry plan_tile_geometry(Algorithm algorithm, const CudaTuning& requested,
                                const std::vector<std::int32_t>& compact, int ndm, int nused,
                                std::int64_t nsamples_out, const SmemLimits& limits);

}  // namespace warpbeam::dedisp::detail
