// The multi-kernel CUDA EPIC imager (the Bifrost-style baseline, fp32 throughout): per batch of
// spectra, (1) a gather kernel writes every cell of every grid (X and Y of each channel and
// spectrum) from the antennas, (2) one batched cuFFT 2-D transform, (3) a multiply-accumulate
// kernel adds XX*, YY*, XY* into the gulp's sums; then the autocorrelation and finalisation
// kernels (cuda_finalize.cu). Every grid makes a round trip through device memory between the
// kernels: that traffic is what the fused kernel removes.
#include <cufft.h>
#include <cufftXt.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/cuda_check.hpp"
#include "epic/cuda_common.cuh"

#define WB_CUFFT_CHECK(expr)                                                                     \
  do {                                                                                           \
    cufftResult wb_r_ = (expr);                                                                  \
    if (wb_r_ != CUFFT_SUCCESS)                                                                  \
      ::warpbeam::fail(                                                                          \
          ::warpbeam::ErrorCategory::cuda,                                                       \
          std::string("cuFFT error ") + std::to_string(static_cast<int>(wb_r_)) + " in " #expr); \
  } while (0)

namespace warpbeam::epic::detail {

struct CufftPlan {
  cufftHandle h = 0;
  CufftPlan() = default;
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;
  ~CufftPlan() {
    if (h) cufftDestroy(h);
  }
};

namespace {

// A plan for `batch` in-place n x n C2C fp32 transforms.
void make_plan(CufftPlan& p, int n, long long batch) {
  WB_CUFFT_CHECK(cufftCreate(&p.h));
  long long dims[2] = {n, n};
  std::size_t work = 0;
  WB_CUFFT_CHECK(cufftMakePlanMany64(p.h, 2, dims, nullptr, 1, static_cast<long long>(n) * n,
                                     nullptr, 1, static_cast<long long>(n) * n, CUFFT_C2C, batch,
                                     &work));
}

struct Entry {
  int stand;
  float weight;
};

__device__ __forceinline__ float2 ci4_to_float2(std::uint8_t b) {
  return make_float2(static_cast<float>(static_cast<std::int8_t>(b & 0xF0) >> 4),
                     static_cast<float>(static_cast<std::int8_t>(b << 4) >> 4));
}

// One thread per (cell, channel): the cell's value in every spectrum of the batch, both
// polarisations. grid: [nchan][batch][2][N*N].
__global__ void gather_kernel(const std::uint8_t* __restrict__ in, std::int64_t ntime,
                              std::int64_t t0, int batch, int nstand, int ncell,
                              const std::uint32_t* __restrict__ base,
                              const std::uint32_t* __restrict__ offsets,
                              const Entry* __restrict__ entries, const float2* __restrict__ cal,
                              float2* __restrict__ grid) {
  const int cell = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (cell >= ncell) return;
  const std::uint32_t* off = offsets + static_cast<std::size_t>(c) * (ncell + 1);
  const std::uint32_t e0 = base[c] + off[cell], e1 = base[c] + off[cell + 1];
  const float2* g = cal + static_cast<std::size_t>(c) * nstand * 2;
  for (int t = 0; t < batch; ++t) {
    const std::uint8_t* spec = in + (static_cast<std::size_t>(c) * ntime + t0 + t) * nstand * 2;
    float2 x = make_float2(0, 0), y = make_float2(0, 0);
    for (std::uint32_t e = e0; e < e1; ++e) {
      const Entry en = entries[e];
      const float2 vx = ci4_to_float2(spec[en.stand * 2]),
                   vy = ci4_to_float2(spec[en.stand * 2 + 1]);
      const float2 gx = g[en.stand * 2], gy = g[en.stand * 2 + 1];
      x.x += en.weight * (vx.x * gx.x - vx.y * gx.y);
      x.y += en.weight * (vx.x * gx.y + vx.y * gx.x);
      y.x += en.weight * (vy.x * gy.x - vy.y * gy.y);
      y.y += en.weight * (vy.x * gy.y + vy.y * gy.x);
    }
    float2* out = grid + ((static_cast<std::size_t>(c) * batch + t) * 2) * ncell;
    out[cell] = x;
    out[ncell + cell] = y;
  }
}

// One thread per (pixel, channel): accumulate the batch's products. raw: [nchan][4][N*N] fp64.
// The products are summed in fp32 over blocks of kMacBlock spectra and the block sums in fp64,
// so that the rounding does not grow with the gulp: XX* and YY* lose most of their value to the
// autocorrelation subtraction (by ~sqrt(spectra)), and a plain fp32 sum over a 1000-spectrum gulp
// would leave ~2e-5 of the image's maximum there (DESIGN: 1e-5 for fp32 paths).
constexpr int kMacBlock = 16;

__global__ void mac_kernel(const float2* __restrict__ grid, int batch, int ncell, bool first,
                           double* __restrict__ raw) {
  const int pix = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (pix >= ncell) return;
  double d[4] = {0, 0, 0, 0};
  for (int t0 = 0; t0 < batch; t0 += kMacBlock) {
    const int t1 = min(batch, t0 + kMacBlock);
    float xx = 0, yy = 0, xyr = 0, xyi = 0;
    for (int t = t0; t < t1; ++t) {
      const float2* g = grid + ((static_cast<std::size_t>(c) * batch + t) * 2) * ncell;
      const float2 x = g[pix], y = g[ncell + pix];
      xx += x.x * x.x + x.y * x.y;
      yy += y.x * y.x + y.y * y.y;
      xyr += x.x * y.x + x.y * y.y;
      xyi += x.y * y.x - x.x * y.y;
    }
    d[0] += xx, d[1] += yy, d[2] += xyr, d[3] += xyi;
  }
  double* r = raw + static_cast<std::size_t>(c) * 4 * ncell + pix;
  for (int k = 0; k < 4; ++k)
    r[k * ncell] = first ? d[k] : r[k * ncell] + d[k];
}

class MultikernelExecutor final : public Executor {
 public:
  MultikernelExecutor(const EpicConfig& c, const PlanTables& t) : t_(t), dev_(t) {
    const std::int64_t ncell = std::int64_t{t.n} * t.n;
    // Batch: the tuned value, else as many spectra as keep the grids within 4 GiB (and a quarter
    // of the free device memory). Each batch reads and writes the fp64 sums once (E3: 277 MB),
    // so larger batches keep that traffic small (E3: 29 spectra per batch, ~5 ms per gulp).
    const std::int64_t per_spectrum = std::int64_t{t.nchan} * 2 * ncell * 8;
    std::size_t free_bytes = 0, total_bytes = 0;
    WB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::int64_t budget =
        std::min<std::int64_t>(4ll << 30, static_cast<std::int64_t>(free_bytes / 4));
    std::int64_t b = c.multikernel.batch > 0 ? c.multikernel.batch
                                             : std::max<std::int64_t>(1, budget / per_spectrum);
    batch_ = static_cast<int>(std::min<std::int64_t>(b, t.ntime));
    tail_ = static_cast<int>(t.ntime % batch_);
    build_gather_tables();
    grid_ = DeviceArray<float2>(static_cast<std::size_t>(per_spectrum / 8) * batch_);
    raw_ = DeviceArray<double>(static_cast<std::size_t>(t.nchan) * 4 * ncell);
    autos_ = DeviceArray<double>(static_cast<std::size_t>(t.nchan) * t.nstand * 4);
    make_plan(plan_, t.n, static_cast<long long>(t.nchan) * 2 * batch_);
    if (tail_) make_plan(tail_plan_, t.n, static_cast<long long>(t.nchan) * 2 * tail_);
  }

  void execute(const std::uint8_t* in, float* out, const Stream* stream) override {
    cudaStream_t s = WB_STREAM(stream);
    const int ncell = t_.n * t_.n;
    constexpr int threads = 256;
    const dim3 grid((ncell + threads - 1) / threads, static_cast<unsigned>(t_.nchan));
    for (std::int64_t t0 = 0; t0 < t_.ntime; t0 += batch_) {
      const int b = static_cast<int>(std::min<std::int64_t>(batch_, t_.ntime - t0));
      gather_kernel<<<grid, threads, 0, s>>>(in, t_.ntime, t0, b, t_.nstand, ncell, base_.data(),
                                             offsets_.data(), entries_.data(), dev_.cal.data(),
                                             grid_.data());
      WB_CUDA_CHECK_LAUNCH();
      const cufftHandle h = b == batch_ ? plan_.h : tail_plan_.h;
      WB_CUFFT_CHECK(cufftSetStream(h, s));
      auto* g = reinterpret_cast<cufftComplex*>(grid_.data());
      WB_CUFFT_CHECK(cufftExecC2C(h, g, g, CUFFT_FORWARD));
      mac_kernel<<<grid, threads, 0, s>>>(grid_.data(), b, ncell, t0 == 0, raw_.data());
      WB_CUDA_CHECK_LAUNCH();
    }
    launch_autos(t_, dev_, in, autos_.data(), s);
    launch_finalize(t_, dev_, raw_.data(), autos_.data(), out, s);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  // CSR per channel over all N*N cells (gcf.cpp): entries (stand, weight = wy * wx).
  void build_gather_tables() {
    const GatherTable g = build_gather_table(t_, t_.n);
    std::vector<Entry> entries(g.stand.size());
    for (std::size_t e = 0; e < entries.size(); ++e)
      entries[e] = {static_cast<int>(g.stand[e]), g.weight[e]};
    offsets_ = DeviceArray<std::uint32_t>(g.offsets.size());
    base_ = DeviceArray<std::uint32_t>(g.base.size());
    entries_ = DeviceArray<Entry>(std::max<std::size_t>(entries.size(), 1));
    copy_bytes(offsets_.data(), g.offsets.data(), offsets_.bytes());
    copy_bytes(base_.data(), g.base.data(), base_.bytes());
    copy_bytes(entries_.data(), entries.data(), entries.size() * sizeof(Entry));
  }

  const PlanTables& t_;
  DeviceTables dev_;
  int batch_ = 1, tail_ = 0;
  DeviceArray<std::uint32_t> offsets_, base_;
  DeviceArray<Entry> entries_;
  DeviceArray<float2> grid_;
  DeviceArray<double> raw_;
  DeviceArray<double> autos_;
  CufftPlan plan_, tail_plan_;
};

}  // namespace

std::unique_ptr<Executor> make_multikernel_executor(const EpicConfig& c, const PlanTables& t) {
  return std::make_unique<MultikernelExecutor>(c, t);
}

}  // namespace warpbeam::epic::detail

namespace warpbeam::epic {

using detail::CufftPlan;

double cufft_reference_time_s(int n, std::int64_t transforms, bool half) {
  // Time `transforms` in-place n x n C2C transforms in batches of <= 2 GiB of data; the median
  // of 3 repeats after one warm-up.
  const std::int64_t bytes_per = std::int64_t{n} * n * (half ? 4 : 8);
  const std::int64_t batch = std::min<std::int64_t>(transforms, (2ll << 30) / bytes_per);
  DeviceArray<std::uint8_t> buf(static_cast<std::size_t>(batch * bytes_per));
  device_memset(buf.data(), 0, buf.bytes());
  CufftPlan plan;
  WB_CUFFT_CHECK(cufftCreate(&plan.h));
  long long dims[2] = {n, n};
  std::size_t work = 0;
  const long long dist = static_cast<long long>(n) * n;
  if (half) {
    WB_CUFFT_CHECK(cufftXtMakePlanMany(plan.h, 2, dims, nullptr, 1, dist, CUDA_C_16F, nullptr, 1,
                                       dist, CUDA_C_16F, batch, &work, CUDA_C_16F));
  } else {
    WB_CUFFT_CHECK(cufftMakePlanMany64(plan.h, 2, dims, nullptr, 1, dist, nullptr, 1, dist,
                                       CUFFT_C2C, batch, &work));
  }
  auto run = [&] {
    for (std::int64_t done = 0; done + batch <= transforms; done += batch) {
      if (half) {
        WB_CUFFT_CHECK(cufftXtExec(plan.h, buf.data(), buf.data(), CUFFT_FORWARD));
      } else {
        auto* p = reinterpret_cast<cufftComplex*>(buf.data());
        WB_CUFFT_CHECK(cufftExecC2C(plan.h, p, p, CUFFT_FORWARD));
      }
    }
    WB_CUDA_CHECK(cudaDeviceSynchronize());
  };
  run();
  std::vector<double> times;
  for (int r = 0; r < 3; ++r) {
    const auto a = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(times.begin(), times.end());
  const double whole = static_cast<double>(transforms / batch * batch);
  return times[1] * static_cast<double>(transforms) / whole;
}

}  // namespace warpbeam::epic
