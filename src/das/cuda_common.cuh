#pragma once
// Internal (CUDA): what the DAS kernel variants share: the voxel/transmit/receiver tables on the
// device in kernel (locality) order, and the layout changes of the channel data.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/cuda_check.hpp"
#include "das/executor.hpp"
#include "das/fast_delay.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam::das::detail {

/// Device copies of the geometry, voxels in locality_order() ("slots").
struct DeviceGeometry {
  explicit DeviceGeometry(const PlanData& p);
  std::int64_t nvoxels = 0;
  DeviceArray<double> vx, vy, vz;          // [slot] voxel coordinates (m)
  DeviceArray<double> tau_tx;              // [tx][slot] (s)
  DeviceArray<float> w_tx;                 // [tx][slot]; empty when all weights are 1
  DeviceArray<std::int32_t> voxel;         // [slot] -> output voxel index
  DeviceArray<Element> elements;           // [rx]
  DeviceArray<FastElement> fast_elements;  // [rx], float copies for the fp16 kernels
  FastParams fast;                         // float constants (fast_delay.hpp)
};

/// Kernel arguments of the geometry (plain pointers).
struct GeometryArgs {
  const double* __restrict__ vx;
  const double* __restrict__ vy;
  const double* __restrict__ vz;
  const double* __restrict__ tau_tx;
  const float* __restrict__ w_tx;  // may be null
  const std::int32_t* __restrict__ voxel;
  const Element* __restrict__ elements;
  const FastElement* __restrict__ fast_elements;
  int nvoxels, nrx, ntx, nsamples, batch;
};
GeometryArgs geometry_args(const DeviceGeometry& g, const DasConfig& c);

/// The largest |coordinate| of the voxels and receive elements (m): the scale of the float
/// rounding errors that FastParams' margins cover.
double coordinate_scale(const DasConfig& c);
/// Float copies of the receive elements.
std::vector<FastElement> fast_elements(const std::vector<Element>& e);

/// Element storage type of the permuted buffers: fp32, fp16, or complex fp16 (IQ as fp16; RF as
/// fp16 with a zero imaginary part, for the kernels that treat all data as complex).
enum class StoreType { f32, f16, c16 };

/// [batch][rx][tx][sample] -> batch-inner [sample][tx][rx][bp] (complex interleaved for IQ),
/// converting to fp16 when asked; frames >= batch in the padded buffer are left untouched (the
/// owner zeroes them once).
void permute_batch_inner(const void* in, void* out, bool iq, StoreType store, std::int64_t batch,
                         std::int64_t nrx, std::int64_t ntx, std::int64_t nsamples, std::int64_t bp,
                         cudaStream_t s);

/// [batch][rx][tx][sample] -> [sample][tx][rx_padded][plane][bp] fp16 (planes re, im for IQ; one
/// plane for RF): the tensor-core layout, rows of `bp` frames.
void permute_planar_f16(const void* in, __half* out, bool iq, std::int64_t batch, std::int64_t nrx,
                        std::int64_t nrx_padded, std::int64_t ntx, std::int64_t nsamples,
                        std::int64_t bp, cudaStream_t s);

/// Element-wise fp32 -> fp16 copy of `count` floats (the BL fp16 input, same layout).
void convert_f16(const float* in, __half* out, std::int64_t count, cudaStream_t s);

}  // namespace warpbeam::das::detail
