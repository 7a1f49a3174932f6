#pragma once
// Internal: the kernel behind a DasPlan. One executor per backend and variant (cpu.cpp,
// cuda_baseline.cu, cuda_batch_inner.cu, cuda_tensor_core.cu); plan.cpp picks one. Each gets the
// validated config, the transmit delay table and the constants of the delay model.
#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "das/delay.hpp"
#include "warpbeam/das.hpp"

namespace warpbeam::das::detail {

struct PlanData {
  const DasConfig& config;
  const std::vector<double>& tx_delays;  // [ntx][nvoxels] (s)
  const DelayParams& params;
  const std::vector<Element>& elements;  // [nrx]
};

/// The delay constants and receive elements of a validated config.
DelayParams make_delay_params(const DasConfig& config);
std::vector<Element> make_elements(const DasConfig& config);

/// A voxel order that keeps neighbouring voxels together (Morton order of the coordinates
/// quantised over their bounding box), so that the voxels of one GPU thread block read nearby
/// samples. order[i] is the voxel computed in slot i.
std::vector<std::int32_t> locality_order(const std::vector<Vec3>& voxels);

/// Tiles of `tile` voxels (a power of two) for the tensor-core window kernel, whose cost grows
/// with the spread of sample indices within a tile: on a regular grid (voxels on the lattice of
/// their distinct coordinates), each tile is a box of the lattice, shaped to minimise its extent
/// in path length (depth counts twice: transmit and receive), and tiles follow a Morton order;
/// otherwise locality_order() cut into runs. Returns slots [ntiles * tile] of voxel indices,
/// -1 for an empty slot (at grid edges); every voxel appears exactly once.
std::vector<std::int32_t> tile_order(const std::vector<Vec3>& voxels, int tile);

class Executor {
 public:
  virtual ~Executor() = default;
  /// `in`: float [batch][nrx][ntx][nsamples] (RF) or complex<float> (IQ), in the plan's memory
  /// space; out: [batch][nvoxels]. Shapes and spaces are already checked by the plan.
  /// `layout_done` (CUDA, may be null) is recorded on the stream between the layout change of
  /// the input and the beamforming kernel, for timing each (right away when there is none).
  virtual void execute(const PlanData& plan, const void* in, std::complex<float>* out,
                       const Stream* stream, Event* layout_done) = 0;
};

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan);
// Defined in the .cu files; in a build without CUDA, plan.cpp never calls them.
std::unique_ptr<Executor> make_baseline_executor(const PlanData& plan);
std::unique_ptr<Executor> make_batch_inner_executor(const PlanData& plan);
std::unique_ptr<Executor> make_tensor_core_executor(const PlanData& plan);
std::unique_ptr<Executor> make_tensor_core_window_executor(const PlanData& plan);

}  // namespace warpbeam::das::detail
