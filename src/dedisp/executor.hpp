#pragma once
// Internal: the kernel behind a DedispersionPlan. One implementation per backend (cpu_tiled.cpp,
// cuda_dispatch.cpp); plan.cpp picks one. Each gets the validated config and the delay table.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/dedisp.hpp"

namespace warpbeam::dedisp::detail {

struct PlanData {
  const DedispersionConfig& config;
  const std::vector<std::int32_t>& delays;  // [ndm][nchans]
  std::int32_t max_delay;
  std::int64_t nsamples_out;
};

class Executor {
 public:
  virtual ~Executor() = default;
  /// Shapes and memory spaces are already checked by the plan.
  virtual void execute(const PlanData& plan, const std::uint8_t* in, float* out,
                       const Stream* stream) = 0;
  /// Writes the sums quantised to `out_nbits` (8 or 16) with `scaling` into `out`. Returns false
  /// when this backend has no such path; the plan then quantises a float32 result itself.
  virtual bool execute_scaled(const PlanData& /*plan*/, const std::uint8_t* /*in*/, void* /*out*/,
                              int /*out_nbits*/, const OutputScaling& /*scaling*/,
                              const Stream* /*stream*/) {
    return false;
  }
  /// Channel-major float32 input [nchans][stride] (DedispersionPlan::execute_channel_major).
  virtual void execute_channel_major(const PlanData& /*plan*/, const float* /*in*/,
                                     std::int64_t /*stride*/, float* /*out*/,
                                     const Stream* /*stream*/) {
    fail(ErrorCategory::unsupported, "this backend has no channel-major input");
  }
  /// The kernel variant and tile sizes that run (defaults: the config's).
  virtual Algorithm algorithm(const PlanData& plan) const { return plan.config.algorithm; }
  virtual CudaTuning tuning(const PlanData& plan) const { return plan.config.tuning; }
  virtual std::string description(const PlanData& plan) const {
    return "cpu " + to_string(plan.config.algorithm);
  }
  /// What the executor allocated (DedispersionPlan::workspace()).
  virtual Workspace workspace() const = 0;
};

/// DedispersionPlan::estimate_workspace() of each backend: cpu_tiled.cpp (both CPU kernels),
/// tile_geometry.cpp (the CUDA kernels' tables and scratch; plain C++, in every build).
Workspace estimate_cpu_workspace(const DedispersionConfig& config);
Workspace estimate_cuda_workspace(const DedispersionConfig& config);

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan);
/// The untiled CPU loop (cpu_direct.cpp): Algorithm::direct on the CPU, the benchmark baseline.
std::unique_ptr<Executor> make_cpu_direct_executor(const PlanData& plan);
/// Defined in cuda_dispatch.cpp; in a build without CUDA, plan.cpp never calls it.
std::unique_ptr<Executor> make_cuda_executor(const PlanData& plan);

}  // namespace warpbeam::dedisp::detail
