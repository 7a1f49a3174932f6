// CUDA DAS, tensor-core window (TCW) variant.
//
// For one receiver m, a tile of 16 neighbouring voxels and a window of 8 consecutive samples
// k0 .. k0+7, the delay-and-sum is a small matrix product:
//     out[v][b] += sum_s W[v][s] x[s][m][b],   W[v][s] = (1 - f_v) c_v if s = k_v,
//                                                        f_v c_v       if s = k_v + 1, else 0,
// with complex W and x (real embedding: K = 8 samples x (re, im) = 16, two products for the real
// and imaginary outputs: A_re = [Wr, -Wi], A_im = [Wi, Wr]). In a tile of 16 voxels that are
// neighbours on the grid (tile_order) the taps of every voxel for one receiver span a few
// samples (U2: <= ~6, U1: <= ~5), so one window usually covers the tile; more windows are taken
// when not. Each sample row x[s][m][frames] is then read once per tile instead of once per voxel:
// 2 bytes per point from L1 instead of BI's 8 (two taps x 4 bytes), and the 8 FMA per point run
// on the tensor cores as one m16n8k16 HMMA per 128 points (x2 for re/im).
//
// Fragment layout (PTX ISA, mma.m16n8k16 .f16, groupID g = lane / 4, thread-in-group t = lane % 4):
//   A (16 x 16, row): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, cols 2t, 2t+1),
//                     a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, cols 2t+8, 2t+9);
//   B (16 x 8, col):  b0 = (rows 2t, 2t+1, col g), b1 = (rows 2t+8, 2t+9, col g);
//   C (16 x 8, f32):  c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1).
// K order: cols (2t, 2t+1) = (re, im) of sample k0+t, cols (2t+8, 2t+9) = (re, im) of k0+4+t,
// so b0 and b1 are single half2 values of the batch-inner layout [sample][tx][rx][frame] (re, im).
// N order: lane g loads frames 4g .. 4g+3 of a 32-frame block in one 16-byte load, so n-tile i
// of that block holds frames 4n + i (n = 0..7): two 16-byte loads per lane feed 4 n-tiles.
//
// Delays: each lane computes one (voxel, receiver) pair per pair of receivers in float with
// exact in-range / aperture decisions (fast_delay.hpp), packs (1 - f) c and f c as half2, and
// the lanes that need them get them by shuffles. Receivers outside [first, last] with a term for
// the tile (precomputed per tile and transmit at plan time, in double) are skipped.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "das/cuda_common.cuh"

namespace warpbeam::das::detail {
namespace {

constexpr int kTile = 16;  // voxels per tile (the M of m16n8k16)

struct TcwArgs {
  const double* __restrict__ vx;
  const double* __restrict__ vy;
  const double* __restrict__ vz;
  const double* __restrict__ tau_tx;        // [tx][slot] (s)
  const float* __restrict__ w_tx;           // [tx][slot], 0 for empty slots
  const std::int32_t* __restrict__ voxel;   // [slot] -> output voxel, -1 empty
  const int2* __restrict__ rx_range;        // [tx][tile]: first, last receiver with a term
  const Element* __restrict__ elements;     // [rx]
  const FastElement* __restrict__ fast_el;  // [rx]
  float out_scale;                          // the transmit weights' scale (w_tx is divided by it)
  int ntiles, nslots, nvoxels, nrx, ntx, nsamples, batch;
};

__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

// (wr, -wi) -> (wi, wr): swap the halves, then flip the sign of the low one.
__device__ __forceinline__ std::uint32_t re_to_im(std::uint32_t x) {
  return __byte_perm(x, 0u, 0x1032) ^ 0x8000u;
}

// The weight of sample s = k + d of a voxel whose taps are k, k+1 with weights a, b.
__device__ __forceinline__ std::uint32_t tap(int d, std::uint32_t a, std::uint32_t b) {
  return d == 0 ? a : (d == 1 ? b : 0u);
}

// One warp: one tile of 16 voxels x 32 L frames (c0 = blockIdx.y * 32 L), all transmits and
// receivers, or (split > 1) every split-th pair of receivers, the split warps of one tile adding
// their sums in shared memory at the end. data: [sample][tx][rx][bp] complex fp16.
//
// Split: a warp's work is a chain of ~2 receivers per iteration whose loads wait on L2; when the
// grid has too few warps to hide that (U1: 3938 tiles of 32 frames, ~1.5 waves), splitting the
// receivers of a tile among warps gives the SMs more independent chains.
template <int L>
__global__ void __launch_bounds__(256)
    tcw_kernel(TcwArgs G, DelayParams P, FastParams F, const __half2* __restrict__ data,
               std::int64_t bp, int split, float2* __restrict__ out) {
  constexpr int NT = 4 * L;           // n-tiles of 8 frames
  extern __shared__ float partial[];  // split > 1: [tile of block][part - 1][NT * 8][32 lanes]
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int warp = static_cast<int>(threadIdx.x >> 5), part = warp % split;
  const int block_tiles = static_cast<int>(blockDim.x >> 5) / split;
  const int warp_tile = static_cast<int>(blockIdx.x) * block_tiles + warp / split;
  const bool valid = warp_tile < G.ntiles;
  if (split == 1 && !valid) return;  // no block-wide barrier below then
  // A warp past the last tile (split > 1) reads the last tile's geometry, computes nothing and
  // stores nothing, but meets the barrier.
  const int tile = valid ? warp_tile : G.ntiles - 1;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.y) * 32 * L;
  // The pair this lane computes: voxel cv of the tile, receiver m0 + half.
  const int cv = lane & 15, half = lane >> 4;
  const int slot = tile * kTile + cv;
  const double px = G.vx[slot], py = G.vy[slot], pz = G.vz[slot];
  const int last_row = G.nsamples - 1;
  const std::int64_t kstride = static_cast<std::int64_t>(G.ntx) * G.nrx * bp;

  float acc_re[NT][4], acc_im[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc_re[j][e] = 0.f;
      acc_im[j][e] = 0.f;
    }

  for (int q = 0; q < G.ntx; ++q) {
    const int2 range =
        valid ? G.rx_range[static_cast<std::int64_t>(q) * G.ntiles + tile] : make_int2(INT_MAX, -1);
    const std::int64_t tq = static_cast<std::int64_t>(q) * G.nslots + slot;
    const double ttx = G.tau_tx[tq];
    const float wtx = G.w_tx[tq];
    const FastVoxel fv = make_fast_voxel(P, px, py, pz, ttx);
    const __half2* qbase = data + static_cast<std::int64_t>(q) * G.nrx * bp + c0 + 4 * g;
    for (int mb = range.x; mb <= range.y; mb += 2 * split) {
      const int m0 = mb + 2 * part;
      const int m = m0 + half;
      int k = -1;
      std::uint32_t are = 0u, bre = 0u;  // (1 - f) c and f c as half2 (re, -im)
      if (m >= range.x && m <= range.y && wtx != 0.f) {
        const FastCoeff c =
            coefficients_f32(P, F, fv, px, py, pz, ttx, wtx, G.fast_el[m], G.elements[m]);
        if (c.k >= 0) {
          k = c.k;
          const float f0 = 1.f - c.f;
          are = pack_half2(f0 * c.cr, -f0 * c.ci);
          bre = pack_half2(c.f * c.cr, -c.f * c.ci);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (m0 + h > range.y) break;
        const bool mine = half == h && k >= 0;
        const int kmin = __reduce_min_sync(0xffffffffu, mine ? k : INT_MAX);
        if (kmin == INT_MAX) continue;  // no voxel of the tile hears this receiver
        const int kmax = __reduce_max_sync(0xffffffffu, mine ? k + 1 : 0);
        // This lane's A rows are voxels g and g+8 of the tile.
        const int s0 = 16 * h + g;
        const int k0v = __shfl_sync(0xffffffffu, k, s0);
        const int k1v = __shfl_sync(0xffffffffu, k, s0 + 8);
        const std::uint32_t a0 = __shfl_sync(0xffffffffu, are, s0);
        const std::uint32_t b0 = __shfl_sync(0xffffffffu, bre, s0);
        const std::uint32_t a1 = __shfl_sync(0xffffffffu, are, s0 + 8);
        const std::uint32_t b1 = __shfl_sync(0xffffffffu, bre, s0 + 8);
        const std::uint32_t a0i = re_to_im(a0), b0i = re_to_im(b0);
        const std::uint32_t a1i = re_to_im(a1), b1i = re_to_im(b1);
        const __half2* mbase = qbase + static_cast<std::int64_t>(m0 + h) * bp;
        for (int w0 = kmin; w0 <= kmax; w0 += 8) {
          const int slo = w0 + t, shi = w0 + 4 + t;
          const std::uint32_t fre[4] = {tap(slo - k0v, a0, b0), tap(slo - k1v, a1, b1),
                                        tap(shi - k0v, a0, b0), tap(shi - k1v, a1, b1)};
          const std::uint32_t fim[4] = {tap(slo - k0v, a0i, b0i), tap(slo - k1v, a1i, b1i),
                                        tap(shi - k0v, a0i, b0i), tap(shi - k1v, a1i, b1i)};
          // Rows past the last sample carry zero weight; read a valid row instead.
          const __half2* rlo = mbase + static_cast<std::int64_t>(min(slo, last_row)) * kstride;
          const __half2* rhi = mbase + static_cast<std::int64_t>(min(shi, last_row)) * kstride;
#pragma unroll
          for (int l = 0; l < L; ++l) {
            if (c0 + 32 * l < bp) {
              const uint4 vlo = __ldg(reinterpret_cast<const uint4*>(rlo + 32 * l));
              const uint4 vhi = __ldg(reinterpret_cast<const uint4*>(rhi + 32 * l));
              const std::uint32_t lo[4] = {vlo.x, vlo.y, vlo.z, vlo.w};
              const std::uint32_t hi[4] = {vhi.x, vhi.y, vhi.z, vhi.w};
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                mma_16816(acc_re[4 * l + i], fre, lo[i], hi[i]);
                mma_16816(acc_im[4 * l + i], fim, lo[i], hi[i]);
              }
            }
          }
        }
      }
    }
  }
  if (split > 1) {
    // Parts 1 .. split-1 leave their sums in shared memory; part 0 adds them in part order (the
    // same result on every run).
    const int tiles_slot = (warp / split) * (split - 1);
    constexpr int kWords = NT * 8;
    if (part > 0) {
      float* mine = partial + static_cast<std::size_t>(tiles_slot + part - 1) * kWords * 32 + lane;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          mine[(8 * j + e) * 32] = acc_re[j][e];
          mine[(8 * j + 4 + e) * 32] = acc_im[j][e];
        }
    }
    __syncthreads();
    if (part > 0) return;
    for (int pp = 1; pp < split; ++pp) {
      const float* other =
          partial + static_cast<std::size_t>(tiles_slot + pp - 1) * kWords * 32 + lane;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc_re[j][e] += other[(8 * j + e) * 32];
          acc_im[j][e] += other[(8 * j + 4 + e) * 32];
        }
    }
  }
  // c[2r + e]: voxel g + 8r, n-column 2t + e, i.e. frame c0 + 32 l + 4 (2t + e) + i.
  if (!valid) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int v = G.voxel[tile * kTile + g + 8 * r];
    if (v < 0) continue;
#pragma unroll
    for (int l = 0; l < L; ++l)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const std::int64_t b = c0 + 32 * l + 4 * (2 * t + e) + i;
          if (b < G.batch)
            out[b * G.nvoxels + v] = make_float2(G.out_scale * acc_re[4 * l + i][2 * r + e],
                                                 G.out_scale * acc_im[4 * l + i][2 * r + e]);
        }
  }
}

// Per (tile, transmit): the first and last receiver with a term for any voxel of the tile, in
// double precision (the reference's decisions), so the kernel skips the rest exactly.
__global__ void tcw_rx_range_kernel(TcwArgs G, DelayParams P, int2* __restrict__ range) {
  const int lane = threadIdx.x & 31;
  const std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (w >= static_cast<std::int64_t>(G.ntiles) * G.ntx) return;
  const int tile = static_cast<int>(w % G.ntiles), q = static_cast<int>(w / G.ntiles);
  int lo = INT_MAX, hi = -1;
  for (int p = lane; p < kTile * G.nrx; p += 32) {
    const int slot = tile * kTile + (p % kTile), m = p / kTile;
    const std::int64_t tq = static_cast<std::int64_t>(q) * G.nslots + slot;
    const float wtx = G.w_tx[tq];
    if (wtx == 0.f) continue;
    const Coeff c =
        das_coefficients(P, G.vx[slot], G.vy[slot], G.vz[slot], G.tau_tx[tq], wtx, G.elements[m]);
    if (c.k >= 0) {
      lo = min(lo, m);
      hi = max(hi, m);
    }
  }
  lo = __reduce_min_sync(0xffffffffu, lo);
  hi = __reduce_max_sync(0xffffffffu, hi);
  if (lane == 0) range[w] = make_int2(lo, hi);
}

template <class T>
DeviceArray<T> upload(const std::vector<T>& v) {
  DeviceArray<T> d(v.size());
  if (!v.empty()) copy_bytes(d.data(), v.data(), v.size() * sizeof(T));
  return d;
}

class CudaTcwExecutor final : public Executor {
 public:
  explicit CudaTcwExecutor(const PlanData& p) {
    const auto& c = p.config;
    iq_ = c.signal == Signal::iq;
    const auto slots = tile_order(c.voxels, kTile);
    ntiles_ = static_cast<int>(slots.size() / kTile);
    const std::size_t ns = slots.size(), ntx = static_cast<std::size_t>(c.ntx());
    const std::size_t nv = static_cast<std::size_t>(c.nvoxels());
    std::vector<double> x(ns), y(ns), z(ns), tau(ntx * ns);
    std::vector<float> w(ntx * ns);
    for (std::size_t s = 0; s < ns; ++s) {
      // Empty slots copy the tile's first voxel (every tile has one) and weigh 0.
      const std::int32_t real = slots[s];
      const auto v = static_cast<std::size_t>(real >= 0 ? real : slots[s / kTile * kTile]);
      x[s] = c.voxels[v][0];
      y[s] = c.voxels[v][1];
      z[s] = c.voxels[v][2];
      for (std::size_t q = 0; q < ntx; ++q) {
        tau[q * ns + s] = p.tx_delays[q * nv + v];
        w[q * ns + s] = real < 0 ? 0.f : c.tx_weights.empty() ? 1.f : c.tx_weights[q * nv + v];
      }
    }
    // fp16 weights: scale the transmit weights to at most 1 (fp16's range and precision are
    // relative), and the sums back at the end.
    float wmax = 0.f;
    for (float v : w)
      wmax = std::max(wmax, std::abs(v));
    scale_ = wmax > 0.f ? wmax : 1.f;
    for (float& v : w)
      v /= scale_;
    vx_ = upload(x);
    vy_ = upload(y);
    vz_ = upload(z);
    tau_ = upload(tau);
    w_ = upload(w);
    voxel_ = upload(slots);
    elements_ = upload(p.elements);
    fast_el_ = upload(fast_elements(p.elements));
    fast_ = make_fast_params(p.params, coordinate_scale(c));
    range_ = DeviceArray<int2>(ntx * static_cast<std::size_t>(ntiles_));

    bp_ = (c.batch + 31) / 32 * 32;
    // Frames per warp: as asked (default 64), but no more than the padded batch needs.
    warp_frames_ = c.tuning.warp_frames ? c.tuning.warp_frames : 64;
    while (warp_frames_ > 32 && warp_frames_ / 2 >= bp_)
      warp_frames_ /= 2;
    // By default the receivers of a tile are split among 4 warps (fewer if the block has fewer):
    // the fastest split on U2 and faster than none on U1 (docs/PERFORMANCE.md, session s21).
    threads_ = c.tuning.threads_per_block ? c.tuning.threads_per_block
                                          : std::max(128, 32 * c.tuning.rx_split);
    split_ = c.tuning.rx_split ? c.tuning.rx_split : std::min(4, threads_ / 32);
    while (threads_ / 32 % split_ != 0)
      split_ /= 2;
    const std::size_t n = static_cast<std::size_t>(c.nsamples * c.ntx() * c.nrx() * bp_);
    buf_ = DeviceArray<__half2>(n);
    device_memset(buf_.data(), 0, buf_.bytes());  // the padded frames stay zero

    const TcwArgs G = args(c);
    const std::int64_t warps = static_cast<std::int64_t>(ntiles_) * c.ntx();
    tcw_rx_range_kernel<<<static_cast<unsigned>((warps + 7) / 8), 256>>>(G, p.params,
                                                                         range_.data());
    WB_CUDA_CHECK_LAUNCH();
    // Finished before any execute() on a non-blocking stream can use the tables and buffer.
    device_synchronize();
  }

  void execute(const PlanData& p, const void* in, std::complex<float>* out, const Stream* stream,
               Event* layout_done) override {
    const auto& c = p.config;
    cudaStream_t s = WB_STREAM(stream);
    permute_batch_inner(in, buf_.data(), iq_, StoreType::c16, c.batch, c.nrx(), c.ntx(), c.nsamples,
                        bp_, s);
    if (layout_done) layout_done->record(stream);
    const TcwArgs G = args(c);
    auto* o = reinterpret_cast<float2*>(out);
    const int block_tiles = threads_ / 32 / split_;
    const dim3 grid(static_cast<unsigned>((ntiles_ + block_tiles - 1) / block_tiles),
                    static_cast<unsigned>((bp_ + warp_frames_ - 1) / warp_frames_));
    if (warp_frames_ == 32)
      launch<1>(grid, s, G, p, o);
    else if (warp_frames_ == 64)
      launch<2>(grid, s, G, p, o);
    else
      launch<4>(grid, s, G, p, o);
    WB_CUDA_CHECK_LAUNCH();
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  template <int L>
  void launch(dim3 grid, cudaStream_t s, const TcwArgs& G, const PlanData& p, float2* o) const {
    // The split warps' partial sums: NT * 8 floats per lane for each part but the first.
    const std::size_t smem = split_ > 1 ? static_cast<std::size_t>(threads_ / 32 / split_) *
                                              (split_ - 1) * 4 * L * 8 * 32 * sizeof(float)
                                        : 0;
    // More than 48 KiB needs the opt-in. It is set to the most any tuning needs (256 threads,
    // split 8, 128 frames: 7 x 16 KiB), the same for every plan, so that plans on other threads
    // never lower it under one another's launch.
    constexpr int kMaxPartial = 7 * 16 * 8 * 32 * sizeof(float);
    if (smem > 0)
      WB_CUDA_CHECK(cudaFuncSetAttribute(tcw_kernel<L>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         kMaxPartial));
    tcw_kernel<L><<<grid, threads_, smem, s>>>(G, p.params, fast_, buf_.data(), bp_, split_, o);
  }

  TcwArgs args(const DasConfig& c) const {
    return {vx_.data(),
            vy_.data(),
            vz_.data(),
            tau_.data(),
            w_.data(),
            voxel_.data(),
            range_.data(),
            elements_.data(),
            fast_el_.data(),
            scale_,
            ntiles_,
            ntiles_ * kTile,
            static_cast<int>(c.nvoxels()),
            static_cast<int>(c.nrx()),
            static_cast<int>(c.ntx()),
            static_cast<int>(c.nsamples),
            static_cast<int>(c.batch)};
  }

  DeviceArray<double> vx_, vy_, vz_, tau_;
  DeviceArray<float> w_;
  DeviceArray<std::int32_t> voxel_;
  DeviceArray<int2> range_;
  DeviceArray<Element> elements_;
  DeviceArray<FastElement> fast_el_;
  DeviceArray<__half2> buf_;
  FastParams fast_;
  float scale_ = 1.f;
  std::int64_t bp_ = 0;
  int ntiles_ = 0, warp_frames_ = 64, threads_ = 128, split_ = 1;
  bool iq_ = true;
};

}  // namespace

std::unique_ptr<Executor> make_tensor_core_window_executor(const PlanData& plan) {
  return std::make_unique<CudaTcwExecutor>(plan);
}

}  // namespace warpbeam::das::detail
