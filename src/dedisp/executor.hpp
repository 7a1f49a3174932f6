#pragma once
// Internal: the kernel behind a DedispersionPlan. One implementation per backend (cpu.cpp,
// cuda.cu); plan.cpp picks one. Each gets the validated config and the delay table.
#include <cstdint>
#include <memory>
#include <vector>

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
};

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan);
/// The untiled CPU loop (cpu_direct.cpp): Algorithm::direct on the CPU, the benchmark baseline.
std::unique_ptr<Executor> make_cpu_direct_executor(const PlanData& plan);
/// Defined in cuda.cu; in a build without CUDA, plan.cpp never calls it.
std::unique_ptr<Executor> make_cuda_executor(const PlanData& plan);

}  // namespace warpbeam::dedisp::detail
