#pragma once
// Internal: host code shared by the CUDA sub-band and FDMT executors (cuda_subband.cpp,
// cuda_fdmt.cpp): their table uploads and the corner turn of packed input into channel rows.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "dedisp/cuda_kernels.hpp"
#include "dedisp/executor.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {

/// A host table on the device (at least one element, so that an empty table has a pointer).
template <class T>
DeviceArray<T> upload(const std::vector<T>& v) {
  DeviceArray<T> d(std::max<std::size_t>(v.size(), 1));
  if (!v.empty()) copy_bytes(d.data(), v.data(), v.size() * sizeof(T));
  return d;
}

/// Checks that `in` is packed input a plan of `c` can read (not a channel-major plan, aligned
/// 16/32-bit samples), then enqueues the corner turn of its `nsamples` rows (< 0:
/// c.nsamples_in) into `scratch` rows of `stride` elements, channel ch to row chan_row[ch]
/// (-1: dropped); see cuda_transpose.cu.
inline void corner_turn(const DedispersionConfig& c, const std::uint8_t* in,
                        const std::int32_t* chan_row, void* scratch, std::int64_t stride,
                        const Stream* stream, std::int64_t nsamples = -1) {
  if (c.channel_major)
    fail(ErrorCategory::invalid_argument,
         "this plan takes channel-major float32 input: call execute_channel_major()");
  if (c.nbits >= 16 && reinterpret_cast<std::uintptr_t>(in) % (c.nbits / 8) != 0)
    fail(ErrorCategory::invalid_argument,
         "the device input of {}-bit samples must be aligned to {} bytes", c.nbits, c.nbits / 8);
  TransposeArgs tr;
  tr.in = in;
  tr.row_bytes = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
  tr.nsamples = nsamples < 0 ? c.nsamples_in : nsamples;
  tr.nchans = c.nchans;
  tr.nbits = c.nbits;
  tr.is_signed = c.is_signed;
  tr.chan_row = chan_row;
  tr.scratch = scratch;
  tr.stride = stride;
  launch_transpose(tr, stream);
}

}  // namespace warpbeam::dedisp::detail
