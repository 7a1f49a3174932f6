#pragma once
// EPIC on several devices: the channels of one EpicConfig cut into contiguous blocks, one
// EpicPlan per block on its own device, all imaged at once (one host thread per device). EPIC's
// channels are independent, so the images are those of one plan over every channel:
// - every block keeps the whole band's aperture cell du (wavelengths): EpicConfig derives du
//   from the highest frequency of its channels, so a block gets the whole band's du as
//   EpicConfig::du_override;
// - every block runs the same algorithm: with Algorithm::automatic on CUDA, fused is used only
//   when every block supports it (as one plan over every channel would decide), else
//   multikernel everywhere.
// Input and output stay on the host (each block copies its channels to its device and back),
// since a channel block is contiguous in both layouts ([chan] is the slowest axis).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/epic.hpp"

namespace warpbeam::dist {

class MultiEpicPlan {
 public:
  /// `devices`: one block per entry, on that CUDA device (repeats allowed: "0,0" runs two blocks
  /// on device 0); empty: one block on the current device. Backend::cpu: one block per entry on
  /// the host (the ordinals are ignored; tests use it to check the split without a GPU), the
  /// cores shared between blocks unless config.threads is set. At most nchan blocks (extra
  /// devices get none). Throws as EpicPlan does; invalid_argument for a device that is not
  /// visible.
  MultiEpicPlan(const epic::EpicConfig& config, Backend backend, std::vector<int> devices = {});
  ~MultiEpicPlan();
  MultiEpicPlan(MultiEpicPlan&&) noexcept;
  MultiEpicPlan& operator=(MultiEpicPlan&&) noexcept;

  const epic::EpicConfig& config() const { return config_; }
  Backend backend() const;
  epic::Algorithm algorithm() const;
  epic::ImageGeometry geometry() const;
  const std::vector<int>& used_stands() const;
  const std::vector<int>& distant_stands() const;

  int blocks() const;
  /// Channels [first, last) of block k and its device (-1: host).
  std::pair<int, int> block_channels(int k) const;
  int block_device(int k) const;
  /// The plan of block k (its config holds the block's channels).
  const epic::EpicPlan& block_plan(int k) const;

  /// in: host [nchan][ntime][nstand][2] ci4 bytes; out: host [nchan][4][N][N] float32, as
  /// EpicPlan::execute. Synchronous: every block has finished when it returns. One execute at
  /// a time. Throws invalid_argument on a shape mismatch or device views.
  void execute(View<const std::uint8_t, 4> in, View<float, 4> out) const;

 private:
  struct Block;
  epic::EpicConfig config_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

/// The channel subset [first, last) of `config` as a config of its own, with du_override set so
/// that its cell_wavelengths() equals the whole config's (see above). Throws invalid_argument
/// for an empty or out-of-range subset.
epic::EpicConfig channel_block(const epic::EpicConfig& config, int first, int last);

}  // namespace warpbeam::dist
