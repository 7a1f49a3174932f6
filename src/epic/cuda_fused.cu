// The fused CUDA EPIC imager: one thread-block cluster per channel loops over the gulp's spectra
// and keeps everything on chip; global memory is read for the 4-bit voltages and written once per
// gulp. Data flow and layout: fused_layout.hpp; the block FFT: block_fft.hpp (a hand-written
// four-step FFT, fp16 pairs packed RRII so one pass transforms X and Y; see docs/EPIC.md for why
// not cuFFTDx). Sizes: N = 64 (one block per channel), 128 (clusters of 2), 256 (clusters of 8,
// the column hand-over through distributed shared memory).
#include <cooperative_groups.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "epic/cuda_common.cuh"
#include "epic/fused_layout.hpp"

namespace cg = cooperative_groups;

namespace warpbeam::epic::detail {

namespace {

struct FusedParams {
  const std::uint16_t* in;  // ci4 [nchan][ntime][nstand] pairs (X in the low byte, Y in the high)
  std::int64_t ntime;
  int nstand, nstand_pad;
  const float2* cal;             // [nchan][nstand][2]
  const int* rows;               // [nchan] aperture height R (grid rows holding antennas)
  const unsigned* cell_off;      // [nchan][A*A + 1] CSR offsets of the A x A window
  const unsigned* entry_base;    // [nchan]
  const std::uint32_t* entries;  // stand << 16 | fp16 bits of the cell weight
  float* raw;                    // [nchan][4][N][N] sums of the products (FFT order)
  float4* autos;                 // [nchan][nstand]
};

__device__ __forceinline__ float2 ci4_to_float2(unsigned b) {
  return make_float2(static_cast<float>(static_cast<int>(b << 24) >> 28),
                     static_cast<float>(static_cast<int>(b << 28) >> 28));
}

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// The cluster barrier split in two: arrive (release: this block's distributed-shared-memory
// writes become visible) and wait (acquire). A cluster of one block uses __syncthreads().
template <int C>
__device__ __forceinline__ void cluster_arrive() {
  if constexpr (C > 1) asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
template <int C>
__device__ __forceinline__ void cluster_wait() {
  if constexpr (C > 1) {
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  } else {
    __syncthreads();
  }
}
template <int C>
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive<C>();
  cluster_wait<C>();
}

template <int N, int SPB, bool XYS>
__global__ void __launch_bounds__(FusedLayout<N, SPB, XYS>::kThreads, 1)
    fused_kernel(const FusedParams p) {
  using L = FusedLayout<N, SPB, XYS>;
  using F = fft::BlockFft<N>;
  constexpr int C = L::kC, A = L::kA, NC = L::kNC, T = L::kThreads, PIN = L::kPin;
  constexpr int KP = (SPB * kFusedMaxStands + T - 1) / T;  // prefetched input pairs per thread
  extern __shared__ __align__(16) unsigned char smem[];
  const auto lay = L::smem(p.nstand_pad);
  c2h* colbuf = reinterpret_cast<c2h*>(smem + lay.colbuf);
  c2h* scratch = reinterpret_cast<c2h*>(smem + lay.scratch);
  c2h* antbuf = reinterpret_cast<c2h*>(smem + lay.antbuf);
  __half2* twid = reinterpret_cast<__half2*>(smem + lay.twiddle);
  float* autos_s = reinterpret_cast<float*>(smem + lay.autos);
  float2* xy_s = reinterpret_cast<float2*>(smem + lay.xy);

  const int tid = threadIdx.x;
  const int chan = blockIdx.x / C;
  int rank = 0;
  if constexpr (C > 1) rank = static_cast<int>(cg::this_cluster().block_rank());
  const int q = L::q_of(tid);
  const int rows = p.rows[chan];
  const int nstand = p.nstand, npad = p.nstand_pad;
  const c2h zero{__float2half2_rn(0.f), __float2half2_rn(0.f)};

  // --- Set-up: zero the column buffers (rows >= R stay zero for the whole gulp), twiddles. ---
  for (int i = tid; i < 2 * SPB * A * L::kLdc; i += T)
    colbuf[i] = zero;
  for (int e = tid; e < N; e += T) {
    float s, c;
    sincospif(2.0f * static_cast<float>(e) / N, &s, &c);
    twid[e] = __floats2half2_rn(c, -s);  // w_N^e = cos - i sin
  }
  for (int i = tid; i < 4 * npad; i += T)
    autos_s[i] = 0;
  if constexpr (XYS)
    for (int i = tid; i < NC * L::kXyPitch; i += T)
      xy_s[i] = make_float2(0, 0);

  float axx[16], ayy[16], axr[XYS ? 1 : 16], axi[XYS ? 1 : 16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    axx[r] = ayy[r] = 0;
    if constexpr (!XYS) axr[r] = axi[r] = 0;
  }

  const float2* cal = p.cal + static_cast<std::size_t>(chan) * nstand * 2;
  const std::uint16_t* in = p.in + static_cast<std::size_t>(chan) * p.ntime * nstand;
  const int nbatch = static_cast<int>((p.ntime + SPB - 1) / SPB);

  // --- Unpack: ci4 -> calibrated fp16 RRII voltages; autocorrelations of exactly those values. --
  std::uint16_t pre[KP];
  auto load_raw = [&](int b) {
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      const int i = tid + k * T;
      const int s = i / nstand, st = i % nstand;
      const std::int64_t t = std::int64_t{b} * SPB + s;
      pre[k] = (s < SPB && t < p.ntime) ? __ldg(in + t * nstand + st) : std::uint16_t{0};
    }
  };
  auto unpack = [&](int b) {
    c2h* ab = antbuf + (b & 1) * SPB * npad;
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      const int i = tid + k * T;
      const int s = i / nstand, st = i % nstand;
      if (s >= SPB || std::int64_t{b} * SPB + s >= p.ntime) continue;
      const float2 ex = cmul(ci4_to_float2(pre[k] & 0xFFu), __ldg(cal + 2 * st));
      const float2 ey = cmul(ci4_to_float2(pre[k] >> 8), __ldg(cal + 2 * st + 1));
      const c2h v{__floats2half2_rn(ex.x, ey.x), __floats2half2_rn(ex.y, ey.y)};
      ab[s * npad + st] = v;
      if (rank == 0) {
        const float2 re = __half22float2(v.re), im = __half22float2(v.im);
        atomicAdd(&autos_s[4 * st + 0], re.x * re.x + im.x * im.x);
        atomicAdd(&autos_s[4 * st + 1], re.y * re.y + im.y * im.y);
        atomicAdd(&autos_s[4 * st + 2], re.x * re.y + im.x * im.y);
        atomicAdd(&autos_s[4 * st + 3], im.x * re.y - re.x * im.y);
      }
    }
  };

  auto twiddle = [&](c2h v, int e) { return mul_twiddle(v, twid[e]); };
  c2h* scr = scratch + L::scratch_base(tid);

  // --- Row stage: this block's rows below R; outputs scaled 1/N to their column owners. ---
  const unsigned* cell_off = p.cell_off + static_cast<std::size_t>(chan) * (A * A + 1);
  const std::uint32_t* entries = p.entries + p.entry_base[chan];
  const int nrows = L::rows_of_rank(rank, rows);
  const int warp_first_slot = (tid / 32) * L::kPerWarp;
  auto row_stage = [&](int b, int nvalid) {
    const c2h* ab0 = antbuf + (b & 1) * SPB * npad;
    const int ntasks = nvalid * nrows;
    for (int base = 0; base < ntasks; base += L::kRowSlots) {
      if (base + warp_first_slot >= ntasks) break;  // the whole warp is idle (warp-uniform)
      const int task = base + L::slot_of(tid);
      const bool active = task < ntasks;
      const int s = active ? task / nrows : 0;
      const int row = L::row_of_task(rank, active ? task % nrows : 0);
      const c2h* ab = ab0 + s * npad;
      // Gather the row's cells: the PIN cells' entry lists are walked side by side (one entry
      // of each per step) so that their loads are in flight together.
      c2h x[16];
      unsigned e0[PIN], e1[PIN];
      unsigned longest = 0;
#pragma unroll
      for (int pp = 0; pp < PIN; ++pp) {
        const int cell = row * A + F::input_index(q, pp);
        e0[pp] = active ? __ldg(cell_off + cell) : 0u;
        e1[pp] = active ? __ldg(cell_off + cell + 1) : 0u;
        longest = max(longest, e1[pp] - e0[pp]);
        x[pp] = zero;
      }
      for (unsigned k = 0; k < longest; ++k) {
#pragma unroll
        for (int pp = 0; pp < PIN; ++pp) {
          if (e0[pp] + k >= e1[pp]) continue;
          const std::uint32_t en = __ldg(entries + e0[pp] + k);
          __half_raw wr;
          wr.x = static_cast<unsigned short>(en & 0xFFFFu);
          const __half2 w = __half2half2(__half(wr));
          const c2h v = ab[en >> 16];
          x[pp].re = __hfma2(w, v.re, x[pp].re);
          x[pp].im = __hfma2(w, v.im, x[pp].im);
        }
      }
      fft::block_fft_pass1<N, PIN>(x, q, twiddle, [&](int i, c2h v) { scr[i] = v; });
      __syncwarp();
      fft::block_fft_pass2<N>(x, q, [&](int i) { return scr[i]; });
      __syncwarp();
      if (active) {
        constexpr std::uint16_t kScale = half_bits(1.0 / N);  // exact: N is a power of two
        const __half2 scale = half2_const(kScale);
#pragma unroll
        for (int r = 0; r < 16; ++r) {
          const int k = F::output_index(q, r);
          c2h* dst = colbuf + L::colbuf_index(b & 1, s, row, k % NC);
          if constexpr (C > 1) dst = cg::this_cluster().map_shared_rank(dst, k / NC);
          *dst = c2h{__hmul2(x[r].re, scale), __hmul2(x[r].im, scale)};
        }
      }
    }
  };

  // --- Column stage: this block's NC columns; accumulate the products in fp32. ---
  const int col = L::column_of(tid);
  auto column_stage = [&](int b, int nvalid) {
    for (int s = 0; s < nvalid; ++s) {
      c2h x[16];
#pragma unroll
      for (int pp = 0; pp < PIN; ++pp)
        x[pp] = colbuf[L::colbuf_index(b & 1, s, F::input_index(q, pp), col)];
      fft::block_fft_pass1<N, PIN>(x, q, twiddle, [&](int i, c2h v) { scr[i] = v; });
      __syncwarp();
      fft::block_fft_pass2<N>(x, q, [&](int i) { return scr[i]; });
      __syncwarp();
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const float2 re = __half22float2(x[r].re), im = __half22float2(x[r].im);
        axx[r] += re.x * re.x + im.x * im.x;
        ayy[r] += re.y * re.y + im.y * im.y;
        const float xr = re.x * re.y + im.x * im.y, xi = im.x * re.y - re.x * im.y;
        if constexpr (XYS) {
          float2& a = xy_s[col * L::kXyPitch + F::output_index(q, r)];
          a.x += xr;
          a.y += xi;
        } else {
          axr[r] += xr;
          axi[r] += xi;
        }
      }
    }
  };

  // --- The gulp: unpack(b + 1) overlaps the cluster barrier between row and column stages. ---
  __syncthreads();
  load_raw(0);
  unpack(0);
  if (nbatch > 1) load_raw(1);
  cluster_sync<C>();  // zeroed buffers and batch 0 everywhere before any remote write
  for (int b = 0; b < nbatch; ++b) {
    const std::int64_t left = p.ntime - std::int64_t{b} * SPB;
    const int nvalid = left < SPB ? static_cast<int>(left) : SPB;
    row_stage(b, nvalid);
    cluster_arrive<C>();
    if (b + 1 < nbatch) {
      unpack(b + 1);
      if (b + 2 < nbatch) load_raw(b + 2);
    }
    cluster_wait<C>();
    column_stage(b, nvalid);
    __syncthreads();
  }

  // --- Write the sums once (undoing the 1/N of the row stage: products carry 1/N^2). ---
  const float norm = static_cast<float>(N) * N;
  const std::size_t nn = static_cast<std::size_t>(N) * N;
  float* out = p.raw + static_cast<std::size_t>(chan) * 4 * nn + rank * NC + col;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int k = F::output_index(q, r);
    float* o = out + static_cast<std::size_t>(k) * N;
    o[0] = axx[r] * norm;
    o[nn] = ayy[r] * norm;
    if constexpr (XYS) {
      const float2 a = xy_s[col * L::kXyPitch + k];
      o[2 * nn] = a.x * norm;
      o[3 * nn] = a.y * norm;
    } else {
      o[2 * nn] = axr[r] * norm;
      o[3 * nn] = axi[r] * norm;
    }
  }
  if (rank == 0)
    for (int st = tid; st < nstand; st += T)
      p.autos[static_cast<std::size_t>(chan) * nstand + st] = make_float4(
          autos_s[4 * st], autos_s[4 * st + 1], autos_s[4 * st + 2], autos_s[4 * st + 3]);
  cluster_sync<C>();  // no block leaves while another may still address its shared memory
}

using KernelFn = void (*)(FusedParams);

template <int N, int SPB, bool XYS>
struct Variant {
  using L = FusedLayout<N, SPB, XYS>;
  static KernelFn fn() { return fused_kernel<N, SPB, XYS>; }
};

struct Launch {
  KernelFn fn = nullptr;
  int cluster = 1, threads = 0;
  std::size_t smem = 0;
};

template <int N>
Launch pick(int spb, bool xys, int nstand_pad) {
  Launch l;
  auto set = [&](auto v) {
    using V = decltype(v);
    l.fn = V::fn();
    l.cluster = V::L::kC;
    l.threads = V::L::kThreads;
    l.smem = V::L::smem(nstand_pad).total;
  };
  if (spb == 1 && !xys) set(Variant<N, 1, false>{});
  if (spb == 1 && xys) set(Variant<N, 1, true>{});
  if (spb == 2 && !xys) set(Variant<N, 2, false>{});
  if (spb == 2 && xys) set(Variant<N, 2, true>{});
  return l;
}

class FusedExecutor final : public Executor {
 public:
  FusedExecutor(const EpicConfig& c, const PlanTables& t) : t_(t), dev_(t) {
    // Defaults (until the H200 sweep says otherwise): XY* in shared memory for N >= 128, where
    // keeping it in registers spills at 128 registers per thread; two spectra per cluster
    // barrier where the shared memory allows it (not N = 128 with XY* in shared memory).
    const int spb = c.fused.spectra_per_pass > 0 ? c.fused.spectra_per_pass : t.n == 128 ? 1 : 2;
    const bool xys = c.fused.xy_in_shared >= 0 ? c.fused.xy_in_shared == 1 : t.n >= 128;
    npad_ = (t.nstand + 31) / 32 * 32;
    launch_ = t.n == 64    ? pick<64>(spb, xys, npad_)
              : t.n == 128 ? pick<128>(spb, xys, npad_)
                           : pick<256>(spb, xys, npad_);
    int dev = 0, optin = 0;
    WB_CUDA_CHECK(cudaGetDevice(&dev));
    WB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (launch_.smem > static_cast<std::size_t>(optin))
      fail(ErrorCategory::unsupported,
           "the fused EPIC kernel (N " + std::to_string(t.n) + ", " + std::to_string(spb) +
               " spectra per pass, XY* in " + (xys ? "shared memory" : "registers") + ") needs " +
               std::to_string(launch_.smem) + " bytes of shared memory; the device " + "allows " +
               std::to_string(optin));
    WB_CUDA_CHECK(cudaFuncSetAttribute(launch_.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(launch_.smem)));
    if (launch_.cluster > 1) {
      cudaLaunchConfig_t cfg = config(nullptr);
      cudaLaunchAttribute attr = cluster_attribute();
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int clusters = 0;
      WB_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, launch_.fn, &cfg));
      if (clusters < 1)
        fail(ErrorCategory::unsupported,
             "the device cannot schedule a cluster of " + std::to_string(launch_.cluster) +
                 " blocks of " + std::to_string(launch_.threads) + " threads with " +
                 std::to_string(launch_.smem) + " bytes of shared memory each");
    }
    build_tables();
    raw_ = DeviceArray<float>(static_cast<std::size_t>(t.nchan) * 4 * t.n * t.n);
    autos_ = DeviceArray<float4>(static_cast<std::size_t>(t.nchan) * t.nstand);
  }

  void execute(const std::uint8_t* in, float* out, const Stream* stream) override {
    cudaStream_t s = WB_STREAM(stream);
    FusedParams prm{};
    prm.in = reinterpret_cast<const std::uint16_t*>(in);
    prm.ntime = t_.ntime;
    prm.nstand = t_.nstand;
    prm.nstand_pad = npad_;
    prm.cal = dev_.cal.data();
    prm.rows = rows_.data();
    prm.cell_off = cell_off_.data();
    prm.entry_base = entry_base_.data();
    prm.entries = entries_.data();
    prm.raw = raw_.data();
    prm.autos = autos_.data();
    cudaLaunchConfig_t cfg = config(s);
    cudaLaunchAttribute attr = cluster_attribute();
    if (launch_.cluster > 1) {  // thread-block clusters (sm_90) for N = 128 and 256
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
    }
    WB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, launch_.fn, prm));
    WB_CUDA_CHECK_LAUNCH();
    launch_finalize(t_, dev_, raw_.data(), autos_.data(), out, s);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  cudaLaunchConfig_t config(cudaStream_t s) const {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(t_.nchan * launch_.cluster));
    cfg.blockDim = dim3(static_cast<unsigned>(launch_.threads));
    cfg.dynamicSmemBytes = launch_.smem;
    cfg.stream = s;
    return cfg;
  }
  cudaLaunchAttribute cluster_attribute() const {
    cudaLaunchAttribute a{};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = static_cast<unsigned>(launch_.cluster);
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    return a;
  }

  // CSR of the A x A window per channel (gcf.cpp), entries packed as stand << 16 | fp16 weight.
  void build_tables() {
    const GatherTable g = build_gather_table(t_, fused_aperture(t_.n));
    std::vector<std::uint32_t> entries(g.stand.size());
    for (std::size_t e = 0; e < entries.size(); ++e)
      entries[e] = (g.stand[e] << 16) | fft::half_bits(g.weight[e]);
    std::vector<int> rows(t_.rows.begin(), t_.rows.end());
    rows_ = DeviceArray<int>(rows.size());
    cell_off_ = DeviceArray<unsigned>(g.offsets.size());
    entry_base_ = DeviceArray<unsigned>(g.base.size());
    entries_ = DeviceArray<std::uint32_t>(std::max<std::size_t>(entries.size(), 1));
    copy_bytes(rows_.data(), rows.data(), rows_.bytes());
    copy_bytes(cell_off_.data(), g.offsets.data(), cell_off_.bytes());
    copy_bytes(entry_base_.data(), g.base.data(), entry_base_.bytes());
    copy_bytes(entries_.data(), entries.data(), entries.size() * sizeof(std::uint32_t));
  }

  const PlanTables& t_;
  DeviceTables dev_;
  Launch launch_;
  int npad_ = 32;
  DeviceArray<int> rows_;
  DeviceArray<unsigned> cell_off_, entry_base_;
  DeviceArray<std::uint32_t> entries_;
  DeviceArray<float> raw_;
  DeviceArray<float4> autos_;
};

}  // namespace

std::unique_ptr<Executor> make_fused_executor(const EpicConfig& c, const PlanTables& t) {
  return std::make_unique<FusedExecutor>(c, t);
}

}  // namespace warpbeam::epic::detail
