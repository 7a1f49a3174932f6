// Shared pieces of the CUDA DAS variants: device geometry tables and the layout changes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "das/cuda_common.cuh"

namespace warpbeam::das::detail {

DeviceGeometry::DeviceGeometry(const PlanData& p) {
  const auto& c = p.config;
  nvoxels = c.nvoxels();
  const auto order = locality_order(c.voxels);
  const std::size_t nv = order.size(), ntx = static_cast<std::size_t>(c.ntx());
  std::vector<double> x(nv), y(nv), z(nv), t(ntx * nv);
  std::vector<float> w(c.tx_weights.empty() ? 0 : ntx * nv);
  for (std::size_t s = 0; s < nv; ++s) {
    const auto& v = c.voxels[order[s]];
    x[s] = v[0];
    y[s] = v[1];
    z[s] = v[2];
    for (std::size_t q = 0; q < ntx; ++q) {
      t[q * nv + s] = p.tx_delays[q * nv + order[s]];
      if (!w.empty()) w[q * nv + s] = c.tx_weights[q * nv + order[s]];
    }
  }
  auto upload = [](auto& dst, const auto& src) {
    using T = typename std::decay_t<decltype(src)>::value_type;
    dst = DeviceArray<T>(src.size());
    if (!src.empty()) copy_bytes(dst.data(), src.data(), src.size() * sizeof(T));
  };
  upload(vx, x);
  upload(vy, y);
  upload(vz, z);
  upload(tau_tx, t);
  if (!w.empty()) upload(w_tx, w);
  upload(voxel, order);
  upload(elements, p.elements);
  upload(fast_elements, detail::fast_elements(p.elements));
  fast = make_fast_params(p.params, coordinate_scale(c));
}

double coordinate_scale(const DasConfig& c) {
  double m = 0;
  for (const auto& v : c.voxels)
    for (double x : v)
      m = std::max(m, std::abs(x));
  for (const auto& v : c.probe.positions)
    for (double x : v)
      m = std::max(m, std::abs(x));
  return m;
}

std::vector<FastElement> fast_elements(const std::vector<Element>& e) {
  std::vector<FastElement> f(e.size());
  for (std::size_t m = 0; m < e.size(); ++m)
    f[m] = {static_cast<float>(e[m].x), static_cast<float>(e[m].y), static_cast<float>(e[m].z),
            static_cast<float>(e[m].wx), static_cast<float>(e[m].wy)};
  return f;
}

GeometryArgs geometry_args(const DeviceGeometry& g, const DasConfig& c) {
  return {g.vx.data(),
          g.vy.data(),
          g.vz.data(),
          g.tau_tx.data(),
          g.w_tx.size() ? g.w_tx.data() : nullptr,
          g.voxel.data(),
          g.elements.data(),
          g.fast_elements.data(),
          static_cast<int>(c.nvoxels()),
          static_cast<int>(c.nrx()),
          static_cast<int>(c.ntx()),
          static_cast<int>(c.nsamples),
          static_cast<int>(c.batch)};
}

namespace {

__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}
__device__ __forceinline__ void store(float2* p, float2 v) {
  *p = v;
}
__device__ __forceinline__ void store(__half2* p, float2 v) {
  *p = __float22half2_rn(v);
}
__device__ __forceinline__ void store(__half2* p, float v) {
  *p = __floats2half2_rn(v, 0.f);
}

constexpr int kTile = 32, kRows = 8;

// One 32 (samples) x 32 (frames) tile of one (rx, tx) pair per block and z step, transposed
// through shared memory so that both the reads (along samples) and the writes (along frames)
// are coalesced.
template <class In, class Out>
__global__ void permute_bi_kernel(const In* __restrict__ in, Out* __restrict__ out,
                                  std::int64_t batch, std::int64_t nrx, std::int64_t ntx,
                                  std::int64_t K, std::int64_t bp) {
  __shared__ In tile[kTile][kTile + 1];
  const std::int64_t k0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t nmq = nrx * ntx;
  for (std::int64_t mq = blockIdx.z; mq < nmq; mq += gridDim.z) {
    const std::int64_t m = mq / ntx, q = mq % ntx;
    for (int i = threadIdx.y; i < kTile; i += kRows) {
      const std::int64_t b = b0 + i, k = k0 + threadIdx.x;
      if (b < batch && k < K) tile[i][threadIdx.x] = in[(b * nmq + mq) * K + k];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kRows) {
      const std::int64_t k = k0 + i, b = b0 + threadIdx.x;
      if (b < batch && k < K) store(out + ((k * ntx + q) * nrx + m) * bp + b, tile[threadIdx.x][i]);
    }
    __syncthreads();
  }
}

template <class In>
__device__ __forceinline__ float part(const In& v, int c);
template <>
__device__ __forceinline__ float part<float>(const float& v, int) {
  return v;
}
template <>
__device__ __forceinline__ float part<float2>(const float2& v, int c) {
  return c ? v.y : v.x;
}

template <class In, int Planes>
__global__ void permute_planar_kernel(const In* __restrict__ in, __half* __restrict__ out,
                                      std::int64_t batch, std::int64_t nrx, std::int64_t nrxp,
                                      std::int64_t ntx, std::int64_t K, std::int64_t bp) {
  __shared__ In tile[kTile][kTile + 1];
  const std::int64_t k0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t nmq = nrx * ntx;
  for (std::int64_t mq = blockIdx.z; mq < nmq; mq += gridDim.z) {
    const std::int64_t m = mq / ntx, q = mq % ntx;
    for (int i = threadIdx.y; i < kTile; i += kRows) {
      const std::int64_t b = b0 + i, k = k0 + threadIdx.x;
      if (b < batch && k < K) tile[i][threadIdx.x] = in[(b * nmq + mq) * K + k];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kRows) {
      const std::int64_t k = k0 + i, b = b0 + threadIdx.x;
      if (b < batch && k < K) {
        const In v = tile[threadIdx.x][i];
        __half* row = out + (((k * ntx + q) * nrxp + m) * Planes) * bp + b;
#pragma unroll
        for (int c = 0; c < Planes; ++c)
          row[c * bp] = __float2half_rn(part<In>(v, c));
      }
    }
    __syncthreads();
  }
}

__global__ void convert_f16_kernel(const float* __restrict__ in, __half* __restrict__ out,
                                   std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(in[i]);
}

dim3 permute_grid(std::int64_t batch, std::int64_t nrx, std::int64_t ntx, std::int64_t K) {
  return dim3(static_cast<unsigned>((K + kTile - 1) / kTile),
              static_cast<unsigned>((batch + kTile - 1) / kTile),
              static_cast<unsigned>(std::min<std::int64_t>(nrx * ntx, 65535)));
}

}  // namespace

void permute_batch_inner(const void* in, void* out, bool iq, StoreType store_type,
                         std::int64_t batch, std::int64_t nrx, std::int64_t ntx,
                         std::int64_t nsamples, std::int64_t bp, cudaStream_t s) {
  const dim3 grid = permute_grid(batch, nrx, ntx, nsamples), block(kTile, kRows);
  if (iq && store_type == StoreType::f32)
    permute_bi_kernel<<<grid, block, 0, s>>>(
        static_cast<const float2*>(in), static_cast<float2*>(out), batch, nrx, ntx, nsamples, bp);
  else if (iq)
    permute_bi_kernel<<<grid, block, 0, s>>>(
        static_cast<const float2*>(in), static_cast<__half2*>(out), batch, nrx, ntx, nsamples, bp);
  else if (store_type == StoreType::c16)
    permute_bi_kernel<<<grid, block, 0, s>>>(
        static_cast<const float*>(in), static_cast<__half2*>(out), batch, nrx, ntx, nsamples, bp);
  else if (store_type == StoreType::f32)
    permute_bi_kernel<<<grid, block, 0, s>>>(
        static_cast<const float*>(in), static_cast<float*>(out), batch, nrx, ntx, nsamples, bp);
  else
    permute_bi_kernel<<<grid, block, 0, s>>>(
        static_cast<const float*>(in), static_cast<__half*>(out), batch, nrx, ntx, nsamples, bp);
  WB_CUDA_CHECK_LAUNCH();
}

void permute_planar_f16(const void* in, __half* out, bool iq, std::int64_t batch, std::int64_t nrx,
                        std::int64_t nrx_padded, std::int64_t ntx, std::int64_t nsamples,
                        std::int64_t bp, cudaStream_t s) {
  const dim3 grid = permute_grid(batch, nrx, ntx, nsamples), block(kTile, kRows);
  if (iq)
    permute_planar_kernel<float2, 2><<<grid, block, 0, s>>>(
        static_cast<const float2*>(in), out, batch, nrx, nrx_padded, ntx, nsamples, bp);
  else
    permute_planar_kernel<float, 1><<<grid, block, 0, s>>>(
        static_cast<const float*>(in), out, batch, nrx, nrx_padded, ntx, nsamples, bp);
  WB_CUDA_CHECK_LAUNCH();
}

void convert_f16(const float* in, __half* out, std::int64_t count, cudaStream_t s) {
  const int threads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>((count + threads - 1) / threads, 1 << 16));
  convert_f16_kernel<<<blocks, threads, 0, s>>>(in, out, count);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::das::detail
