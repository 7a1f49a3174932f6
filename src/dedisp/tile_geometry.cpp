// Host-side geometry of the CUDA tiled and packed kernels (see tile_geometry.hpp).
#include "dedisp/tile_geometry.hpp"

#include <algorithm>
#include <climits>

#include "dedisp/executor.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {

std::vector<int> used_channels(const DedispersionConfig& config) {
  std::vector<int> used;
  used.reserve(static_cast<std::size_t>(config.nchans));
  for (int c = 0; c < config.nchans; ++c)
    if (config.killmask.empty() || config.killmask[static_cast<std::size_t>(c)]) used.push_back(c);
  return used;
}

std::vector<std::int32_t> compact_delays(const std::vector<std::int32_t>& delays, int ndm,
                                         int nchans, const std::vector<int>& used) {
  const auto nused = used.size();
  std::vector<std::int32_t> out(static_cast<std::size_t>(ndm) * nused);
  for (int d = 0; d < ndm; ++d)
    for (std::size_t k = 0; k < nused; ++k) {
      const std::int32_t v = delays[static_cast<std::size_t>(d) * nchans + used[k]];
      if (v < 0 || (d > 0 && v < out[(d - 1) * nused + k]))
        fail(ErrorCategory::invalid_argument,
             "the delay of channel {} at DM trial {} ({}) is negative or below the previous "
             "trial's: the tiled kernels need delays that grow with DM",
             used[k], d, v);
      out[d * nused + k] = v;
    }
  return out;
}

int max_tile_span(const std::vector<std::int32_t>& compact, int ndm, int nused, int bd) {
  int best = 0;
  for (int d0 = 0; d0 < ndm; d0 += bd) {
    const int d1 = std::min(ndm, d0 + bd) - 1;
    const auto* a = compact.data() + static_cast<std::size_t>(d0) * nused;
    const auto* b = compact.data() + static_cast<std::size_t>(d1) * nused;
    for (int k = 0; k < nused; ++k)
      best = std::max(best, b[k] - a[k]);
  }
  return best;
}

void tile_tables(const std::vector<std::int32_t>& compact, int ndm, int nused, int bd,
                 std::vector<std::int32_t>& base, std::vector<std::int32_t>& span) {
  const int ntiles = (ndm + bd - 1) / bd;
  base.assign(static_cast<std::size_t>(ntiles) * nused, 0);
  span.assign(base.size(), 0);
  for (int t = 0; t < ntiles; ++t) {
    const int d0 = t * bd, d1 = std::min(ndm, d0 + bd) - 1;
    for (int k = 0; k < nused; ++k) {
      const auto lo = compact[static_cast<std::size_t>(d0) * nused + k];
      const auto hi = compact[static_cast<std::size_t>(d1) * nused + k];
      base[static_cast<std::size_t>(t) * nused + k] = lo;
      span[static_cast<std::size_t>(t) * nused + k] = hi - lo;
    }
  }
}

namespace {
int round_up(int x, int m) {
  return (x + m - 1) / m * m;
}

// Words of one staged row (see TileGeometry::row_words).
int row_words_for(Algorithm a, int span, int block_samples) {
  if (a == Algorithm::packed) return round_up((span >> 1) + block_samples / 2, 2);
  return round_up(span + block_samples, 4);
}
}  // namespace

std::size_t TileGeometry::bytes_per_channel() const {
  const std::size_t rows = algorithm == Algorithm::packed ? 2 : 1;
  return (rows * static_cast<std::size_t>(row_words) + static_cast<std::size_t>(dms_per_block)) * 4;
}

std::string TileGeometry::describe() const {
  return fmt::format(
      "{} {} DM x {} samples per block ({} lanes x {} samples, {} threads), {} channels per "
      "stage, {:.1f} KiB shared, max span {} samples",
      to_string(algorithm), dms_per_block, block_samples, lanes, samples_per_thread, threads,
      channels_per_stage, static_cast<double>(smem_bytes) / 1024.0, max_span);
}

TileGeometry plan_tile_geometry(Algorithm algorithm, const CudaTuning& req,
                                const std::vector<std::int32_t>& compact, int ndm, int nused,
                                std::int64_t nsamples_out, const SmemLimits& limits) {
  validate(req);
  if (algorithm != Algorithm::tiled && algorithm != Algorithm::packed)
    fail(ErrorCategory::invalid_argument, "tile geometry asked for algorithm {}",
         to_string(algorithm));
  if (ndm < 1 || nused < 0 || nsamples_out < 1)
    fail(ErrorCategory::invalid_argument, "tile geometry of {} DMs, {} channels, {} samples", ndm,
         nused, nsamples_out);
  TileGeometry g;
  g.algorithm = algorithm;
  const DefaultTile def = default_tile(algorithm);
  int bd = def.dms_per_block, tx = def.lanes;
  if (req.dms_per_block && req.threads_per_block) {
    bd = req.dms_per_block;
    tx = req.threads_per_block / bd;
    if (req.threads_per_block % bd != 0 || (tx != 32 && tx != 64))
      fail(ErrorCategory::invalid_argument,
           "threads_per_block = {} must be dms_per_block ({}) x 32 or x 64", req.threads_per_block,
           bd);
  } else if (req.dms_per_block) {
    bd = req.dms_per_block;
  } else if (req.threads_per_block) {
    bd = req.threads_per_block / 32;
  }
  // K = 32 needs <= 512 threads (registers): a default K yields to a larger requested block.
  g.samples_per_thread = req.samples_per_thread ? req.samples_per_thread
                         : tx * bd > 512        ? std::min(def.samples_per_thread, 16)
                                                : def.samples_per_thread;
  if (!req.dms_per_block && !req.threads_per_block && g.samples_per_thread >= 32 && tx * bd > 512)
    bd = 512 / tx;  // ... and a default block yields to a requested K = 32
  const int max_threads = g.samples_per_thread >= 32 ? 512 : 1024;
  if (tx * bd > max_threads)
    fail(ErrorCategory::invalid_argument,
         "threads_per_block = {} exceeds {} with samples_per_thread = {} (registers)", tx * bd,
         max_threads, g.samples_per_thread);
  g.lanes = tx;
  g.block_samples = tx * g.samples_per_thread;
  bd = std::min(bd, ndm);
  // Halve the DM tile until one channel's rows fit in a block's shared memory; with one DM the
  // span is 0 and a row is 4 * BT <= 8 KiB, so this ends.
  for (;;) {
    g.dms_per_block = bd;
    g.max_span = max_tile_span(compact, ndm, nused, bd);
    g.row_words = row_words_for(algorithm, g.max_span, g.block_samples);
    if (g.bytes_per_channel() <= limits.per_block) break;
    if (bd == 1)
      fail(ErrorCategory::unsupported,
           "one channel's input span ({} samples) exceeds shared memory", g.max_span);
    bd = (bd + 1) / 2;
  }
  g.threads = tx * g.dms_per_block;
  const std::size_t bpc = g.bytes_per_channel();
  const int fit = static_cast<int>(limits.per_block / bpc);
  const int most = std::max(nused, 1);
  if (req.channels_per_stage) {
    g.channels_per_stage = std::min({req.channels_per_stage, most, fit});
  } else {
    // The block's share of the SM's shared memory when the SM holds 1024 threads (the kernels
    // use ~50-64 registers: 1024-1280 threads per SM): fuller stages mean fewer __syncthreads
    // per channel, but two or more blocks per SM hide each other's barrier stalls. Each warp
    // stages whole channels, so a multiple of the warps keeps them all busy.
    const std::size_t share =
        std::min(limits.per_block, limits.per_sm * static_cast<std::size_t>(g.threads) / 1024);
    const int nwarps = g.threads / 32;
    const int want = static_cast<int>(std::max<std::size_t>(share / bpc, 1));
    const int warps_multiple = want / nwarps * nwarps;
    g.channels_per_stage = std::min({warps_multiple > 0 ? warps_multiple : want, 64, most, fit});
  }
  g.smem_bytes = static_cast<std::size_t>(g.channels_per_stage) * bpc;
  g.stages_per_flush =
      algorithm == Algorithm::packed ? std::max(1, kPackedFlushChannels / g.channels_per_stage) : 0;
  g.ndm_tiles = (ndm + g.dms_per_block - 1) / g.dms_per_block;
  g.ntime_tiles = (nsamples_out + g.block_samples - 1) / g.block_samples;
  if (static_cast<std::int64_t>(g.ndm_tiles) * g.ntime_tiles > INT_MAX)
    fail(ErrorCategory::unsupported, "{} x {} tiles exceed one CUDA grid; use smaller gulps",
         g.ndm_tiles, g.ntime_tiles);
  return g;
}

// What cuda_dispatch.cpp's CudaExecutor allocates, with the tile tables counted for tiles of one
// DM (the most tiles any device's shared memory can force): an upper bound of its workspace().
Workspace estimate_cuda_workspace(const DedispersionConfig& c) {
  const auto ndm = static_cast<std::int64_t>(c.dms.size());
  const std::int64_t nchans = c.nchans, n = c.nsamples_in, i32 = sizeof(std::int32_t);
  const Algorithm a = c.algorithm == Algorithm::automatic
                          ? (c.nbits <= 8 ? Algorithm::packed : Algorithm::tiled)
                          : c.algorithm;
  if (a == Algorithm::direct) {
    const auto row_bytes = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
    return {0, ndm * nchans * i32 + (c.killmask.empty() ? 0 : nchans) +
                   (row_bytes + 3) / 4 * ((n + 3) / 4 * 4) * 4};
  }
  std::int64_t nused = nchans;
  if (!c.killmask.empty()) nused = std::count(c.killmask.begin(), c.killmask.end(), 1);
  // compact delays [ndm][nused], base and span [ndm tiles][nused] each, chan_row [nchans]
  std::int64_t bytes = 3 * ndm * nused * i32 + nchans * i32;
  if (!c.channel_major)  // the corner-turn scratch: float32 rows above 8 bits, 1-byte codes else
    bytes += c.nbits > 8 ? nused * ((n + 4 + 3) / 4 * 4) * 4 : nused * ((n + 8 + 15) / 16 * 16);
  return {0, bytes};
}

}  // namespace warpbeam::dedisp::detail
