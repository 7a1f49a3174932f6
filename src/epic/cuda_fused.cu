// The fused CUDA EPIC imager: one thread-block cluster per channel loops over the gulp's spectra
// and keeps everything on chip; global memory is read for the 4-bit voltages and written once per
// gulp. Data flow and layout: fused_layout.hpp; the block FFT: block_fft.hpp (a hand-written
// four-step FFT, fp16 pairs packed RRII so one pass transforms X and Y; see docs/EPIC.md for why
// not cuFFTDx). Sizes: N = 64 (one block per channel), 128 (clusters of 2), 256 (clusters of 8,
// the column hand-over through distributed shared memory).
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
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
  int parts;                  // clusters per channel, each summing a contiguous part of the gulp
  const float2* cal;          // [nchan][nstand][2]
  const int* rows;            // [nchan] aperture height R (grid rows holding antennas)
  const std::uint16_t* goff;  // [nchan][C][cells + 1] gather offsets (FusedGather)
  const std::uint32_t* gent;  // [nchan][C][gstride] stand << 16 | fp16 bits of the cell weight
  int gstride;                // entries per (channel, rank) list
  float* raw;                 // [nchan][parts][4][N][N] sums of the products (FFT order)
  double* autos;              // [nchan][parts][nstand][4]
  unsigned long long* prof;   // [5] stage cycles (FusedTuning::profile) or null
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

// Loads the PIN + 1 gather offsets of a thread's cells (consecutive, 2 PIN-byte aligned).
template <int PIN>
__device__ __forceinline__ void load_offsets(const std::uint16_t* po, unsigned (&o)[PIN + 1]) {
  if constexpr (PIN % 8 == 0) {
#pragma unroll
    for (int v = 0; v < PIN / 8; ++v) {
      const uint4 w = reinterpret_cast<const uint4*>(po)[v];
      const unsigned ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        o[8 * v + 2 * k] = ws[k] & 0xFFFFu;
        o[8 * v + 2 * k + 1] = ws[k] >> 16;
      }
    }
  } else {
    static_assert(PIN == 4, "gather offsets come in 4, 8 or 16 per thread");
    const uint2 w = *reinterpret_cast<const uint2*>(po);
    o[0] = w.x & 0xFFFFu, o[1] = w.x >> 16, o[2] = w.y & 0xFFFFu, o[3] = w.y >> 16;
  }
  o[PIN] = po[PIN];
}

template <int N, int SPB, bool XYS>
__global__ void __launch_bounds__(FusedLayout<N, SPB, XYS>::kThreads, 1)
    fused_kernel(const FusedParams p) {
  using L = FusedLayout<N, SPB, XYS>;
  using F = fft::BlockFft<N>;
  constexpr int C = L::kC, A = L::kA, NC = L::kNC, T = L::kThreads, PIN = L::kPin, H = L::kH;
  constexpr int NB = L::kAntBufs;
  constexpr int KP = (SPB * kFusedMaxStands + T - 1) / T;  // prefetched input pairs per thread
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned long long prof_s[3];
  __shared__ long long prof_t[2 * FusedLayout<N, SPB, XYS>::kWarps];  // per warp: start, last tick
  const auto lay = L::smem(p.nstand_pad, p.gstride);
  c2h* colbuf = reinterpret_cast<c2h*>(smem + lay.colbuf);
  c2h* scratch = reinterpret_cast<c2h*>(smem + lay.scratch);
  c2h* antbuf = reinterpret_cast<c2h*>(smem + lay.antbuf);
  __half2* twid = reinterpret_cast<__half2*>(smem + lay.twiddle);
  float* autos_s = reinterpret_cast<float*>(smem + lay.autos);
  float2* xy_s = reinterpret_cast<float2*>(smem + lay.xy);
  std::uint16_t* goff_s = reinterpret_cast<std::uint16_t*>(smem + lay.goff);
  std::uint32_t* gent_s = reinterpret_cast<std::uint32_t*>(smem + lay.gent);

  const int tid = threadIdx.x;
  const int cid = blockIdx.x / C;  // cluster: (channel, part of the gulp)
  const int chan = cid / p.parts, part = cid % p.parts;
  int rank = 0;
  if constexpr (C > 1) rank = static_cast<int>(cg::this_cluster().block_rank());
  const int q = L::q_of(tid);
  const int rows = p.rows[chan];
  const int nstand = p.nstand, npad = p.nstand_pad;
  const c2h zero{__float2half2_rn(0.f), __float2half2_rn(0.f)};
  const std::int64_t t_begin = p.ntime * part / p.parts;
  const int nspec = static_cast<int>(p.ntime * (part + 1) / p.parts - t_begin);  // < 2^30
  const int nbatch = (nspec + SPB - 1) / SPB;
  // Stage profile: lane 0 of each warp keeps its timestamps in shared memory (no registers).
  const bool prof = p.prof != nullptr;
  if (prof && (tid & 31) == 0) prof_t[2 * (tid / 32)] = prof_t[2 * (tid / 32) + 1] = clock64();

  // --- Set-up: zero the column buffers (rows >= R stay zero for the whole gulp), twiddles, the
  // block's gather table (read for every batch, so it lives in shared memory). ---
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
  {
    const std::size_t list = static_cast<std::size_t>(chan) * C + rank;
    const std::uint16_t* goff = p.goff + list * (L::kGatherCells + 1);
    for (int i = tid; i < L::kGatherCells + 1; i += T)
      goff_s[i] = goff[i];
    const int nent = goff[L::kGatherCells];
    const std::uint32_t* gent = p.gent + list * p.gstride;
    for (int i = tid; i < nent; i += T)
      gent_s[i] = __ldg(gent + i);
  }
  if (tid < 3) prof_s[tid] = 0;

  float axx[16], ayy[16], axr[XYS ? 1 : 16], axi[XYS ? 1 : 16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    axx[r] = ayy[r] = 0;
    if constexpr (!XYS) axr[r] = axi[r] = 0;
  }

  const float2* cal = p.cal + static_cast<std::size_t>(chan) * nstand * 2;
  const std::uint16_t* in = p.in + (static_cast<std::size_t>(chan) * p.ntime + t_begin) * nstand;

  // --- Unpack: ci4 -> calibrated fp16 RRII voltages; autocorrelations of exactly those values. --
  std::uint16_t pre[KP];
  auto load_raw = [&](int b) {
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      const int i = tid + k * T;
      const int s = i / nstand, st = i % nstand;
      const int t = b * SPB + s;
      pre[k] = (s < SPB && t < nspec) ? __ldg(in + static_cast<std::size_t>(t) * nstand + st)
                                      : std::uint16_t{0};
    }
  };
  auto unpack = [&](int b) {
    c2h* ab = antbuf + (b % NB) * SPB * npad;
#pragma unroll
    for (int k = 0; k < KP; ++k) {
      const int i = tid + k * T;
      const int s = i / nstand, st = i % nstand;
      if (s >= SPB || b * SPB + s >= nspec) continue;
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
  // One transform of the registers' PIN inputs: pass 1, the exchange through the warp's area
  // (in H phases: block_fft.hpp) and pass 2. With one phase, pass 1 stores each output as it is
  // twiddled, which keeps fewer values live (ptxas: ~50 B fewer spills than twiddling all first).
  auto transform = [&](c2h(&x)[16]) {
    if constexpr (H == 1) {
      fft::block_fft_pass1<N, PIN>(x, q, twiddle, [&](int i, c2h v) { scr[i] = v; });
      __syncwarp();
      fft::block_fft_pass2<N>(x, q, [&](int i) { return scr[i]; });
    } else {
      fft::block_fft_pass1_regs<N, PIN>(x, q, twiddle);
#pragma unroll
      for (int h = 0; h < H; ++h) {
        if (h > 0) __syncwarp();  // phase h - 1's loads are done before its slots are reused
        fft::block_fft_exchange_store<N, H>(x, q, h, [&](int i, c2h v) { scr[i] = v; });
        __syncwarp();
        fft::block_fft_exchange_load<N, H>(x, q, h, [&](int i) { return scr[i]; });
      }
    }
    __syncwarp();  // every lane has read before the next transform stores
  };
  // Per-stage cycle counts (one lane per warp), summed in shared memory.
  auto tick = [&](int stage) {
    if (!prof) return;
    if ((tid & 31) == 0) {
      const long long now = clock64();
      long long& last = prof_t[2 * (tid / 32) + 1];
      atomicAdd(&prof_s[stage], static_cast<unsigned long long>(now - last));
      last = now;
    }
    __syncwarp();  // reconverge before the .aligned cluster barrier
  };

  // --- Row stage: this block's rows below R; outputs scaled 1/N to their column owners. ---
  const int nrows = L::rows_of_rank(rank, rows);
  const int warp_first_slot = (tid / 32) * L::kPerWarp;
  auto row_stage = [&](int b, int nvalid) {
    const c2h* ab0 = antbuf + (b % NB) * SPB * npad;
    const int ntasks = nvalid * nrows;
    for (int base = 0; base < ntasks; base += L::kRowSlots) {
      if (base + warp_first_slot >= ntasks) break;  // the whole warp is idle (warp-uniform)
      const int task = base + L::slot_of(tid);
      const bool active = task < ntasks;
      const int s = active ? task / nrows : 0;
      const int i = active ? task % nrows : 0;  // local row: grid row rank + C i
      const int row = L::row_of_task(rank, i);
      const c2h* ab = ab0 + s * npad;
      // Gather the row's cells from the block's table: the PIN cells' entry lists are walked
      // side by side (one entry of each per step) so that their loads are in flight together.
      c2h x[16];
      unsigned o[PIN + 1];
      load_offsets<PIN>(goff_s + L::gather_cell(i, q, 0), o);
      unsigned longest = 0;
#pragma unroll
      for (int pp = 0; pp < PIN; ++pp) {
        if (!active) o[pp + 1] = o[pp];
        longest = max(longest, o[pp + 1] - o[pp]);
        x[pp] = zero;
      }
      for (unsigned k = 0; k < longest; ++k) {
#pragma unroll
        for (int pp = 0; pp < PIN; ++pp) {
          if (o[pp] + k >= o[pp + 1]) continue;
          const std::uint32_t en = gent_s[o[pp] + k];
          __half_raw wr;
          wr.x = static_cast<unsigned short>(en & 0xFFFFu);
          const __half2 w = __half2half2(__half(wr));
          const c2h v = ab[en >> 16];
          x[pp].re = __hfma2(w, v.re, x[pp].re);
          x[pp].im = __hfma2(w, v.im, x[pp].im);
        }
      }
      transform(x);
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
      transform(x);
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

  // --- The gulp. Batch b + 2 is unpacked between the arrive and the wait of batch b's cluster
  // barrier (three voltage buffers): the barrier of batch b + 1 then publishes it before any
  // row stage reads it, so no block barrier is needed per batch. ---
  __syncthreads();
  load_raw(0);
  unpack(0);
  if (nbatch > 1) {
    load_raw(1);
    unpack(1);
  }
  if (nbatch > 2) load_raw(2);
  cluster_sync<C>();  // zeroed buffers and batches 0, 1 everywhere before any remote write
  for (int b = 0; b < nbatch; ++b) {
    const int nvalid = min(SPB, nspec - b * SPB);
    row_stage(b, nvalid);
    tick(0);
    cluster_arrive<C>();
    if (b + 2 < nbatch) {
      unpack(b + 2);
      if (b + 3 < nbatch) load_raw(b + 3);
    }
    cluster_wait<C>();
    tick(1);
    column_stage(b, nvalid);
    tick(2);
  }
  __syncthreads();  // every unpack's autocorrelation atomics are done

  // --- Write the sums once (undoing the 1/N of the row stage: products carry 1/N^2). ---
  const float norm = static_cast<float>(N) * N;
  const std::size_t nn = static_cast<std::size_t>(N) * N;
  const std::size_t slice = static_cast<std::size_t>(chan) * p.parts + part;
  float* out = p.raw + slice * 4 * nn + rank * NC + col;
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
    for (int i = tid; i < 4 * nstand; i += T)
      p.autos[slice * nstand * 4 + i] = autos_s[i];
  if (prof) {
    if ((tid & 31) == 0)
      atomicAdd(&p.prof[4], static_cast<unsigned long long>(clock64() - prof_t[2 * (tid / 32)]));
    if (tid == 0) {
      for (int k = 0; k < 3; ++k)
        atomicAdd(&p.prof[k], prof_s[k]);
      atomicAdd(&p.prof[3], static_cast<unsigned long long>(L::kWarps) * nbatch);
    }
  }
  cluster_sync<C>();  // no block leaves while another may still address its shared memory
}

using KernelFn = void (*)(FusedParams);

struct Launch {
  KernelFn fn = nullptr;  // null: this variant is not built (it never fits the shared memory)
  int cluster = 1, threads = 0;
  std::size_t smem = 0;
};

// The variants built; keep in step with fused_variants() in plan.cpp. The shared memory of
// every (spectra per pass, XY* place) is computed from its layout, built or not, so that a
// refusal can say how much it would need.
template <int N, int SPB, bool XYS>
constexpr bool kBuilt = SPB <= 2 ? !(SPB == 2 && XYS && N < 256) : (SPB == 3 && !XYS && N == 256);

template <int N, int SPB, bool XYS>
void set_launch(Launch& l, int nstand_pad, int max_entries) {
  using L = FusedLayout<N, SPB, XYS>;
  if constexpr (kBuilt<N, SPB, XYS>) l.fn = fused_kernel<N, SPB, XYS>;
  l.cluster = L::kC;
  l.threads = L::kThreads;
  l.smem = L::smem(nstand_pad, max_entries).total;
}

template <int N>
Launch pick(int spb, bool xys, int nstand_pad, int max_entries) {
  Launch l;
  if (spb == 1) {
    if (xys)
      set_launch<N, 1, true>(l, nstand_pad, max_entries);
    else
      set_launch<N, 1, false>(l, nstand_pad, max_entries);
  } else if (spb == 2) {
    if (xys)
      set_launch<N, 2, true>(l, nstand_pad, max_entries);
    else
      set_launch<N, 2, false>(l, nstand_pad, max_entries);
  } else {
    if (xys)
      set_launch<N, 3, true>(l, nstand_pad, max_entries);
    else
      set_launch<N, 3, false>(l, nstand_pad, max_entries);
  }
  return l;
}

// Clusters per channel: the fewest parts within 0.5 % of the best wave fill, where `slots`
// clusters run at once and each part adds an assumed 0.5 % (set-up, one more write of the sums
// and its read in the finalisation). E3 with 16 resident clusters of 8: 1 part -> 9 waves for
// 8.25 waves of work; 4 parts -> 33 full waves (-8 %).
int choose_parts(int nchan, int slots, std::int64_t ntime) {
  auto cost = [&](int k) {
    const double waves = std::ceil(static_cast<double>(nchan) * k / slots);
    return waves / k * (1 + 0.005 * (k - 1));
  };
  const int kmax = static_cast<int>(std::min<std::int64_t>(8, ntime));
  double best = cost(1);
  for (int k = 2; k <= kmax; ++k)
    best = std::min(best, cost(k));
  for (int k = 1; k <= kmax; ++k)
    if (cost(k) <= best * 1.005) return k;
  return 1;
}

class FusedExecutor final : public Executor {
 public:
  FusedExecutor(const EpicConfig& c, const PlanTables& t) : t_(t), dev_(t) {
    // Defaults from the H200 sweeps (2026-11-29, docs/PERFORMANCE.md). N = 64 and 128: two
    // spectra per cluster barrier, XY* in registers (E1 round 2: 9.25 ms against 12.55 ms for one
    // spectrum per pass). N = 256: three spectra per pass with XY* in registers (E3 round 2:
    // 39.8 ms; two with XY* in shared memory 41.8 ms); when the caller fixes the spectra per pass
    // at one or two, XY* in shared memory is the faster partner there (49.2 / 41.8 ms against
    // 53.4 / 42.9 ms).
    const int spb_asked = c.fused.spectra_per_pass;
    if (c.fused.xy_in_shared >= 0)
      xys_ = c.fused.xy_in_shared == 1;
    else
      xys_ = t.n == 256 && (spb_asked == 1 || spb_asked == 2);
    spb_ = spb_asked > 0 ? spb_asked : (t.n == 256 && !xys_ ? 3 : 2);
    npad_ = (t.nstand + 31) / 32 * 32;
    const int q = t.n / 16, a = fused_aperture(t.n), cl = fused_cluster(t.n);
    gather_ = build_fused_gather(t, a, cl, q, a / q);
    const int max_entries = std::max(gather_.max_entries, 1);
    launch_ = t.n == 64    ? pick<64>(spb_, xys_, npad_, max_entries)
              : t.n == 128 ? pick<128>(spb_, xys_, npad_, max_entries)
                           : pick<256>(spb_, xys_, npad_, max_entries);
    const std::string what = "the fused EPIC kernel (N " + std::to_string(t.n) + ", " +
                             std::to_string(spb_) + " spectra per pass, XY* in " +
                             (xys_ ? "shared memory" : "registers") + ")";
    int dev = 0, optin = 0, sms = 0;
    WB_CUDA_CHECK(cudaGetDevice(&dev));
    WB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    WB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    constexpr std::size_t kStaticSmem = 512;  // the kernel's __shared__ profile counters
    if (launch_.smem + kStaticSmem > static_cast<std::size_t>(optin))
      fail(ErrorCategory::unsupported, what + " needs " + std::to_string(launch_.smem) +
                                           " bytes of shared memory; the device allows " +
                                           std::to_string(optin));
    if (!launch_.fn)
      fail(ErrorCategory::unsupported,
           what + " is not built (it does not fit 227 KiB of shared memory with 256 stands)");
    ::warpbeam::detail::allow_dynamic_smem(reinterpret_cast<const void*>(launch_.fn), launch_.smem);
    if (launch_.cluster > 1) {
      cudaLaunchConfig_t cfg = config(nullptr, 1);
      cudaLaunchAttribute attr = cluster_attribute();
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      WB_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&slots_, launch_.fn, &cfg));
    } else {
      int per_sm = 0;
      WB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, launch_.fn,
                                                                  launch_.threads, launch_.smem));
      slots_ = per_sm * sms;
    }
    if (slots_ < 1)
      fail(ErrorCategory::unsupported,
           "the device cannot schedule " + what + ": " + std::to_string(launch_.cluster) +
               " block(s) of " + std::to_string(launch_.threads) + " threads with " +
               std::to_string(launch_.smem) + " bytes of shared memory each");
    parts_ = c.fused.time_split > 0
                 ? static_cast<int>(std::min<std::int64_t>(c.fused.time_split, t.ntime))
                 : choose_parts(t.nchan, slots_, t.ntime);
    profile_ = c.fused.profile;
    upload_tables();
    raw_ = DeviceArray<float>(static_cast<std::size_t>(t.nchan) * parts_ * 4 * t.n * t.n);
    autos_ = DeviceArray<double>(static_cast<std::size_t>(t.nchan) * parts_ * t.nstand * 4);
    if (profile_) prof_ = DeviceArray<unsigned long long>(5);
  }

  void execute(const std::uint8_t* in, float* out, const Stream* stream) override {
    cudaStream_t s = WB_STREAM(stream);
    FusedParams prm{};
    prm.in = reinterpret_cast<const std::uint16_t*>(in);
    prm.ntime = t_.ntime;
    prm.nstand = t_.nstand;
    prm.nstand_pad = npad_;
    prm.parts = parts_;
    prm.cal = dev_.cal.data();
    prm.rows = rows_.data();
    prm.goff = goff_.data();
    prm.gent = gent_.data();
    prm.gstride = std::max(gather_.max_entries, 1);
    prm.raw = raw_.data();
    prm.autos = autos_.data();
    if (profile_) {
      WB_CUDA_CHECK(cudaMemsetAsync(prof_.data(), 0, prof_.bytes(), s));
      prm.prof = prof_.data();
    }
    cudaLaunchConfig_t cfg = config(s, parts_);
    cudaLaunchAttribute attr = cluster_attribute();
    if (launch_.cluster > 1) {  // thread-block clusters (sm_90) for N = 128 and 256
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
    }
    WB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, launch_.fn, prm));
    WB_CUDA_CHECK_LAUNCH();
    launch_finalize(t_, dev_, raw_.data(), parts_, autos_.data(), out, s);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  FusedProfile profile() const override {
    FusedProfile f;
    f.time_split = parts_;
    f.active_clusters = slots_;
    if (!profile_) return f;
    unsigned long long h[5] = {};
    WB_CUDA_CHECK(cudaDeviceSynchronize());
    copy_bytes(h, prof_.data(), sizeof h);
    f.row_cycles = static_cast<double>(h[0]);
    f.barrier_cycles = static_cast<double>(h[1]);
    f.column_cycles = static_cast<double>(h[2]);
    f.batches = static_cast<double>(h[3]);
    return f;
  }

 private:
  cudaLaunchConfig_t config(cudaStream_t s, int parts) const {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(t_.nchan * parts * launch_.cluster));
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

  // The per-block gather lists (gcf.cpp: build_fused_gather) and the aperture heights.
  void upload_tables() {
    std::vector<int> rows(t_.rows.begin(), t_.rows.end());
    rows_ = DeviceArray<int>(rows.size());
    goff_ = DeviceArray<std::uint16_t>(gather_.offsets.size());
    gent_ = DeviceArray<std::uint32_t>(gather_.entries.size());
    copy_bytes(rows_.data(), rows.data(), rows_.bytes());
    copy_bytes(goff_.data(), gather_.offsets.data(), goff_.bytes());
    copy_bytes(gent_.data(), gather_.entries.data(), gent_.bytes());
  }

  const PlanTables& t_;
  DeviceTables dev_;
  FusedGather gather_;
  Launch launch_;
  int spb_ = 2, npad_ = 32, slots_ = 0, parts_ = 1;
  bool xys_ = false, profile_ = false;
  DeviceArray<int> rows_;
  DeviceArray<std::uint16_t> goff_;
  DeviceArray<std::uint32_t> gent_;
  DeviceArray<float> raw_;
  DeviceArray<double> autos_;
  DeviceArray<unsigned long long> prof_;
};

}  // namespace

std::unique_ptr<Executor> make_fused_executor(const EpicConfig& c, const PlanTables& t) {
  return std::make_unique<FusedExecutor>(c, t);
}

}  // namespace warpbeam::epic::detail
