#pragma once
// Internal: the kernels behind a BeamformPlan. One implementation per backend and algorithm
// (cpu.cpp; cuda_register_tiled.cu = register-tiled, cuda_register_stream.cu = register-stream,
// cuda_tensor_core.cu = tensor cores, cuda_cublas_fp16.cu = cuBLAS, cuda_tensor_int8.cu = int8
// tensor cores, cuda_tensor_int8_stream.cu = its streaming form for small N, their host-side
// arithmetic in int8.cpp); plan.cpp picks one.
#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "warpbeam/beamform.hpp"

namespace warpbeam::beamform::detail {

struct Int8Weights;

struct PlanData {
  const BeamformConfig& config;
  const std::vector<float>& table;    // conversion_table(): 256 (re, im) pairs (empty for cf16/32)
  CudaTuning tuning;                  // resolved for the plan's algorithm
  const Int8Weights* int8 = nullptr;  // tensor_int8(_stream), in set_weights(): quantised weights
};

class Executor {
 public:
  virtual ~Executor() = default;
  /// weights: host [nchans][npol][nbeams][nantennas] complex (already validated).
  virtual void set_weights(const PlanData& plan, const std::complex<float>* weights,
                           const Stream* stream) = 0;
  /// Shapes and memory spaces are already checked by the plan.
  virtual void execute(const PlanData& plan, const std::uint8_t* in, float* out,
                       const Stream* stream) = 0;
  /// The tuning actually used (zeros where there is none).
  virtual CudaTuning tuning() const { return {}; }
};

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan);
/// Defined in cuda_register_tiled.cu (register_tiled), cuda_register_stream.cu (register_stream),
/// cuda_tensor_core.cu (tensor_core), cuda_cublas_fp16.cu (cublas_fp16), cuda_tensor_int8.cu
/// (tensor_int8), cuda_tensor_int8_stream.cu (tensor_int8_stream); plan.cpp calls them only in a
/// CUDA build.
std::unique_ptr<Executor> make_register_tiled_executor(const PlanData& plan);
std::unique_ptr<Executor> make_register_stream_executor(const PlanData& plan);
std::unique_ptr<Executor> make_tensor_core_executor(const PlanData& plan);
std::unique_ptr<Executor> make_cublas_fp16_executor(const PlanData& plan);
/// tensor_int8: cuda_tensor_int8_gemm.cu's GEMM kernel where uses_int8_gemm() (int8.hpp) says so,
/// else cuda_tensor_int8.cu's general one.
std::unique_ptr<Executor> make_tensor_int8_executor(const PlanData& plan);
std::unique_ptr<Executor> make_tensor_int8_gemm_executor(const PlanData& plan);
std::unique_ptr<Executor> make_tensor_int8_stream_executor(const PlanData& plan);

/// Defaults of algorithm `a`'s CUDA kernel (sm_90), and the check that a tuning is one of the
/// compiled instantiations; zeros for algorithms without tunables.
CudaTuning resolve_tuning(Algorithm a, const CudaTuning& t);

}  // namespace warpbeam::beamform::detail
