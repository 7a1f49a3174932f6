// The last steps of a gulp, shared by both CUDA executors: per-antenna autocorrelations (for the
// multi-kernel path; the fused kernel accumulates its own), and the finalisation (subtract the
// autocorrelation image, apply the grid correction, centre the image).
#include "core/cuda_check.hpp"
#include "epic/cuda_common.cuh"

namespace warpbeam::epic::detail {

namespace {

constexpr int kRowsPerBlock = 8;  // image rows q per finalisation block
constexpr int kAntChunk = 128;    // antennas staged in shared memory at a time

__device__ __forceinline__ float2 ci4_to_float2(std::uint8_t b) {
  return make_float2(static_cast<float>(static_cast<std::int8_t>(b & 0xF0) >> 4),
                     static_cast<float>(static_cast<std::int8_t>(b << 4) >> 4));
}

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Blocks of this many terms are summed in fp32 and the block sums in fp64: the rounding error
// stays at a few fp32 units whatever the gulp length or antenna count.
constexpr int kBlockTerms = 16;

// One thread per (stand, channel): sum over the gulp's spectra. autos: [nchan][nstand][4].
__global__ void autos_kernel(const std::uint8_t* __restrict__ in, const float2* __restrict__ cal,
                             int nstand, std::int64_t ntime, double* __restrict__ autos) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (s >= nstand) return;
  const float2 gx = cal[(static_cast<std::size_t>(c) * nstand + s) * 2];
  const float2 gy = cal[(static_cast<std::size_t>(c) * nstand + s) * 2 + 1];
  double d[4] = {0, 0, 0, 0};
  const std::uint8_t* p = in + (static_cast<std::size_t>(c) * ntime * nstand + s) * 2;
  for (std::int64_t t0 = 0; t0 < ntime; t0 += kBlockTerms) {
    const int nt = static_cast<int>(ntime - t0 < kBlockTerms ? ntime - t0 : kBlockTerms);
    float4 a = make_float4(0, 0, 0, 0);
    for (int k = 0; k < nt; ++k) {
      const std::size_t at = static_cast<std::size_t>(t0 + k) * nstand * 2;
      const float2 x = cmul(ci4_to_float2(p[at]), gx);
      const float2 y = cmul(ci4_to_float2(p[at + 1]), gy);
      a.x += x.x * x.x + x.y * x.y;
      a.y += y.x * y.x + y.y * y.y;
      a.z += x.x * y.x + x.y * y.y;
      a.w += x.y * y.x - x.x * y.y;
    }
    d[0] += a.x, d[1] += a.y, d[2] += a.z, d[3] += a.w;
  }
  double* o = autos + (static_cast<std::size_t>(c) * nstand + s) * 4;
  o[0] = d[0], o[1] = d[1], o[2] = d[2], o[3] = d[3];
}

template <class Raw>
__device__ __forceinline__ double raw_sum(const Raw* __restrict__ raw, std::size_t at, int nparts,
                                          std::size_t part_stride) {
  double v = 0;
  for (int k = 0; k < nparts; ++k)
    v += static_cast<double>(raw[at + k * part_stride]);
  return v;
}

// Block (row tile, channel), one thread per image column p (blockDim.x = N). raw: [nchan][nparts]
// [4][N][N]; autos: [nchan][nparts][nstand][4] (the parts' sums are added here).
template <class Raw>
__global__ void finalize_kernel(int n, int nused, int nstand, int nparts,
                                const int* __restrict__ used, const float* __restrict__ ax,
                                const float* __restrict__ ay, const float* __restrict__ corr,
                                const Raw* __restrict__ raw, const double* __restrict__ autos,
                                float* __restrict__ out) {
  __shared__ float a_s[kAntChunk][4];
  __shared__ float ay_s[kAntChunk][kRowsPerBlock];
  const int p = threadIdx.x;
  const int q0 = blockIdx.x * kRowsPerBlock;
  const int c = blockIdx.y;
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  double acc[kRowsPerBlock][4];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r)
#pragma unroll
    for (int k = 0; k < 4; ++k)
      acc[r][k] = 0;
  for (int k0 = 0; k0 < nused; k0 += kAntChunk) {
    const int kn = min(kAntChunk, nused - k0);
    __syncthreads();
    for (int i = threadIdx.x; i < kn * 4; i += blockDim.x) {
      // Each antenna's products summed over the parts in fp64, then rounded once to fp32.
      const double* a =
          autos + (static_cast<std::size_t>(c) * nparts * nstand + used[k0 + i / 4]) * 4 + i % 4;
      double v = 0;
      for (int k = 0; k < nparts; ++k)
        v += a[static_cast<std::size_t>(k) * nstand * 4];
      a_s[i / 4][i % 4] = static_cast<float>(v);
    }
    for (int i = threadIdx.x; i < kn * kRowsPerBlock; i += blockDim.x) {
      const int k = i / kRowsPerBlock, r = i % kRowsPerBlock;
      ay_s[k][r] =
          q0 + r < n ? ay[(static_cast<std::size_t>(c) * nused + k0 + k) * n + q0 + r] : 0.f;
    }
    __syncthreads();
    for (int kb = 0; kb < kn; kb += kBlockTerms) {
      const int ke = min(kn, kb + kBlockTerms);
      float part[kRowsPerBlock][4];
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          part[r][k] = 0;
      for (int k = kb; k < ke; ++k) {
        const float x = ax[(static_cast<std::size_t>(c) * nused + k0 + k) * n + p];
#pragma unroll
        for (int r = 0; r < kRowsPerBlock; ++r) {
          const float w = ay_s[k][r] * x;
#pragma unroll
          for (int j = 0; j < 4; ++j)
            part[r][j] += a_s[k][j] * w;
        }
      }
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[r][j] += part[r][j];
    }
  }
  const int x = (p + n / 2) % n;
  const std::size_t part_stride = 4 * nn;
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
    const int q = q0 + r;
    if (q >= n) break;
    const int y = (q + n / 2) % n;
    const std::size_t src = static_cast<std::size_t>(q) * n + p;
    const double g = corr[static_cast<std::size_t>(c) * nn + src];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const double v = raw_sum(raw, (static_cast<std::size_t>(c) * nparts * 4 + k) * nn + src,
                               nparts, part_stride);
      out[(static_cast<std::size_t>(c) * 4 + k) * nn + static_cast<std::size_t>(y) * n + x] =
          static_cast<float>((v - acc[r][k]) * g);
    }
  }
}

template <class Raw>
void finalize(const PlanTables& t, const DeviceTables& d, const Raw* raw, int nparts,
              const double* autos, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((t.n + kRowsPerBlock - 1) / kRowsPerBlock),
                  static_cast<unsigned>(t.nchan));
  finalize_kernel<Raw><<<grid, static_cast<unsigned>(t.n), 0, stream>>>(
      t.n, t.nused(), t.nstand, nparts, d.used.data(), d.ax.data(), d.ay.data(), d.corr.data(), raw,
      autos, out);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace

DeviceTables::DeviceTables(const PlanTables& t)
    : ax(t.ax.size()),
      ay(t.ay.size()),
      corr(t.corr.size()),
      used(t.used.size()),
      cal(t.cal.size()) {
  copy_bytes(ax.data(), t.ax.data(), ax.bytes());
  copy_bytes(ay.data(), t.ay.data(), ay.bytes());
  copy_bytes(corr.data(), t.corr.data(), corr.bytes());
  copy_bytes(used.data(), t.used.data(), used.bytes());
  static_assert(sizeof(std::complex<float>) == sizeof(float2));
  copy_bytes(cal.data(), t.cal.data(), cal.bytes());
}

void launch_finalize(const PlanTables& t, const DeviceTables& d, const float* raw, int nparts,
                     const double* autos, float* out, cudaStream_t stream) {
  finalize(t, d, raw, nparts, autos, out, stream);
}

void launch_finalize(const PlanTables& t, const DeviceTables& d, const double* raw,
                     const double* autos, float* out, cudaStream_t stream) {
  finalize(t, d, raw, 1, autos, out, stream);
}

void launch_autos(const PlanTables& t, const DeviceTables& d, const std::uint8_t* in, double* autos,
                  cudaStream_t stream) {
  constexpr int threads = 128;
  const dim3 grid(static_cast<unsigned>((t.nstand + threads - 1) / threads),
                  static_cast<unsigned>(t.nchan));
  autos_kernel<<<grid, threads, 0, stream>>>(in, d.cal.data(), t.nstand, t.ntime, autos);
  WB_CUDA_CHECK_LAUNCH();
}

}  // namespace warpbeam::epic::detail
