#pragma once
// Internal: the launch functions of the CUDA dedispersion kernels, one .cu file per variant
// (cuda_direct.cu, cuda_tiled.cu, cuda_packed.cu, plus the tiled variants' corner turn in
// cuda_transpose.cu).
// cuda_dispatch.cpp owns the tables and scratch and calls these. Plain C++: no CUDA types.
#include <cstddef>
#include <cstdint>

#include "warpbeam/device.hpp"

namespace warpbeam::dedisp::detail {

/// Where a kernel writes its sums: float32 (nbits 32), or quantised to 8/16 bits with
/// quantise(sum, scale, offset) (quantise.hpp). Layout [ndm][nsamples_out].
struct OutputTarget {
  void* data = nullptr;
  int nbits = 32;
  float scale = 1;
  float offset = 0;
};

/// The direct kernel (dedisp's scheme): the input corner-turned into 32-bit channel words,
/// [nwords][stride] (word w of time t holds channels 32/nbits*w ...), one thread per
/// (DM, 2 samples).
struct DirectArgs {
  const std::uint32_t* words = nullptr;
  std::int64_t stride = 0;  ///< words per row (>= nsamples_in)
  int nwords = 0;           ///< ceil(row_bytes / 4)
  int nchans = 0;
  int nbits = 8;
  bool is_signed = false;
  unsigned sign_flip = 0;                  ///< 2^(nbits-1) for signed 2/4/8-bit codes, else 0
  int nused = 0;                           ///< channels the killmask keeps
  const std::int32_t* delays = nullptr;    ///< [ndm][nchans]
  const std::uint8_t* killmask = nullptr;  ///< [nchans], 1 = use; null = all
  int ndm = 0;
  std::int64_t nsamples_out = 0;
  OutputTarget out;
};
/// The direct kernel's corner turn: [nsamples][row_bytes] -> words [nwords][stride].
void launch_direct_transpose(const std::uint8_t* in, std::int64_t row_bytes, std::int64_t nsamples,
                             std::uint32_t* words, int nwords, std::int64_t stride,
                             const Stream* stream);
void launch_direct(const DirectArgs& a, const Stream* stream);

/// The corner turn: packed [nsamples][row_bytes] -> scratch [row][stride] (row = chan_row[chan],
/// channels with row -1 are skipped). nbits <= 8: the raw unsigned code of each sample (uint8);
/// nbits 16 and 32: the sample's value as float32 (16-bit signed per is_signed). Writes samples
/// 0 .. nsamples-1 of each row; the padding up to `stride` is left as it is (zeros).
struct TransposeArgs {
  const std::uint8_t* in = nullptr;
  std::int64_t row_bytes = 0;
  std::int64_t nsamples = 0;
  int nchans = 0;
  int nbits = 8;
  bool is_signed = false;
  const std::int32_t* chan_row = nullptr;  ///< [nchans]
  void* scratch = nullptr;
  std::int64_t stride = 0;  ///< elements per scratch row
};
void launch_transpose(const TransposeArgs& a, const Stream* stream);

/// The tiled and packed kernels (see tile_geometry.hpp for the tile and the tables).
struct TileArgs {
  const void* scratch = nullptr;  ///< [nused][stride]: uint8 codes, or float32 (float_codes)
  std::int64_t stride = 0;        ///< elements per row; a multiple of 16 (codes) or 4 (floats)
  bool float_codes = false;
  int nused = 0;
  int ndm = 0;
  std::int64_t nsamples_out = 0;
  const std::int32_t* delays = nullptr;  ///< [ndm][nused]
  const std::int32_t* base = nullptr;    ///< [ndm_tiles][nused]
  const std::int32_t* span = nullptr;    ///< [ndm_tiles][nused]
  int dms_per_block = 0;                 ///< BD
  int lanes = 0;                         ///< TX (32 or 64)
  int samples_per_thread = 0;            ///< K (8, 16, 32)
  int channels_per_stage = 0;            ///< CC
  int row_words = 0;
  int ndm_tiles = 0;
  std::int64_t ntime_tiles = 0;
  std::size_t smem_bytes = 0;
  int stages_per_flush = 0;  ///< packed
  /// uint8 codes are signed two's complement of nbits when non-zero: 2^(nbits-1).
  unsigned sign_flip = 0;
  OutputTarget out;
};
void launch_tiled(const TileArgs& a, const Stream* stream);
void launch_packed(const TileArgs& a, const Stream* stream);

}  // namespace warpbeam::dedisp::detail
