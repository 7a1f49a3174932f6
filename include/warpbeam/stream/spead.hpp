#pragma once
// warpbeam's SPEAD stream of channelised voltages (SPEAD-64-48, the MeerKAT/SKA flavour), as
// `warpbeam send voltages` writes it and `warpbeam pipeline --listen spead://...` reads it:
// - Description heaps (sent 3 times before the data): an immediate item kDescriptionFlag = 1 and
//   the item kDescription, the stream's description as JSON text (StreamDescription), in one
//   packet.
// - Data heaps: one channel x heap_samples time samples of every antenna and polarisation,
//   payload item kVoltages ([time][antenna][pol], the sample type's bytes, e.g. ci4: one byte per
//   complex), immediate items kTimestamp (the first sample's index since the stream's epoch,
//   samples) and kChannel (0-based channel index). One heap is one packet.
// - The end: spead2's stream-stop heap.
// A receiver's block is block_samples samples of every channel ([chan][time][antenna][pol], the
// pipeline's block): heap (c, t) lands at byte (c x block_samples + t) x bytes_per_sample.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "warpbeam/io/voltages.hpp"

namespace warpbeam::stream::spead {

inline constexpr std::int64_t kTimestamp = 0x1600;  ///< as MeerKAT's F-engines: "timestamp"
inline constexpr std::int64_t kChannel = 0x4103;    ///< MeerKAT's "frequency" (first channel)
inline constexpr std::int64_t kVoltages = 0x3300;
inline constexpr std::int64_t kDescription = 0x5800;
inline constexpr std::int64_t kDescriptionFlag = 0x5801;

/// The stream's description: the voltages (as io::VoltageStreamInfo) and the heap layout.
struct StreamDescription {
  io::VoltageStreamInfo info;     ///< block_samples: the receiver's block (the file's block)
  std::int64_t heap_samples = 0;  ///< time samples per heap; divides block_samples
  std::int64_t timestamp0 = 0;    ///< timestamp of the stream's first sample (its epoch: mjd_start)
  std::int64_t bytes_per_sample() const {  ///< one time sample of every antenna and pol
    return static_cast<std::int64_t>(info.nantennas) * info.npol *
           bytes_per_complex(info.sample_type);
  }
  std::int64_t heap_bytes() const { return heap_samples * bytes_per_sample(); }
  std::int64_t heaps_per_block() const {
    return static_cast<std::int64_t>(info.nchans) * (info.block_samples / heap_samples);
  }
  nlohmann::json to_json() const;
  /// Throws format naming the field for a description that is missing a field or inconsistent.
  static StreamDescription from_json(const nlohmann::json& j);
};

}  // namespace warpbeam::stream::spead
