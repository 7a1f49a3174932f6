// CPU beamformer (the reference path the CUDA variants are tested against): AVX2 + FMA + OpenMP.
//
// v[b][p][t][c] = sum_a w[c][p][b][a] x[c][t][a][p], vectorised over beams, as BEST-2's CPU code
// (Magro et al. 2013, 75 % of its CPU's peak): a channel's weights stay in cache and each voltage
// sample is broadcast against vectors of beams.
//
// Work units = (group of 16 channels) x (block of ~64 time samples), ordered block-major for
// OpenMP. In a unit, for each pass of up to 16 beams (2 vectors of 8), channel, pol and triple of
// time samples, 12 registers hold the beam voltages (3 samples x 2 beam vectors x re/im). Per
// antenna: each sample's (re, im) is broadcast straight from the conversion table (ci4/ci8: a
// byte load and two broadcasts; no unpack pass), the pass's weights of that antenna ([re 16]
// [im 16]) serve the 3 samples: 24 FMAs, 12 independent accumulator chains, more than the 2 FMA
// pipes x 4 cycles of latency need (beam_kernel_3x2; pairs and single samples for the tails).
// cf16/cf32 samples are converted to a float scratch in the input's own order first, then read the
// same way. Detection happens in registers (|v|^2; the pol sum and the integration add into the
// tile). The tile, [channel][out time][out pol][re, im][beam], is transposed 8 x 8 in registers
// into the output rows [beam][pol][time][16 channels] (64 B of power per row: whole cache lines,
// written with non-temporal stores when the output is far larger than the caches), paced over the
// kernel calls of the next pass.
//
// Arithmetic: fp32, antennas summed in order a = 0 .. na-1 with one FMA per real product, |v|^2
// as fma(re, re, im * im), the integration summed in time order; the error against the float64
// definition is a few fp32 roundings per antenna (tests: <= 1e-5 of the array's maximum).
//
// Measured on B1 (docs/PERFORMANCE.md, "CPU, B1"), each choice against the one it replaced.
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "src/beamform/cpu.cpp needs AVX2, FMA and F16C (the library is built with -march=x86-64-v3)"
#endif

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "beamform/executor.hpp"

namespace warpbeam::beamform::detail {
namespace {

constexpr int kChanGroup = 16;  // channels per unit: 64 B of power per (beam, time) output row
constexpr int kLanes = 8;       // fp32 lanes of an AVX2 vector = beams per vector
constexpr int kSub = 64;        // time samples converted to float at once (cf16/cf32)
// Outputs above this size are written with non-temporal stores (no read-for-ownership, no
// eviction of weights and tiles): 32 MiB is far above one core's share of L2 and L3.
constexpr std::int64_t kStreamBytes = std::int64_t{32} << 20;

// 64-byte aligned, zero-initialised float buffer.
class Floats {
 public:
  void assign(std::size_t n) {
    const std::size_t bytes = std::max<std::size_t>(64, (n * sizeof(float) + 63) / 64 * 64);
    p_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!p_) throw std::bad_alloc();
    std::memset(p_.get(), 0, bytes);
  }
  float* data() const { return p_.get(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> p_;
};

// Where one (channel, pol)'s samples come from: start(s) points at antenna 0 of the s-th time
// row, load(q, xr, xi) broadcasts the (re, im) of the sample at q and steps q to the next antenna.
struct Ci4Source {
  using Ptr = const std::uint8_t*;
  Ptr p;                 // antenna 0 of the first time row (and the pol)
  std::int64_t row;      // bytes per time row
  std::ptrdiff_t astep;  // bytes from one antenna to the next (npol)
  const float* tab;      // conversion table, 256 (re, im) pairs
  Ptr start(int s) const { return p + s * row; }
  void load(Ptr& q, __m256& xr, __m256& xi) const {
    const float* e = tab + 2 * std::size_t{*q};
    xr = _mm256_broadcast_ss(e);
    xi = _mm256_broadcast_ss(e + 1);
    q += astep;
  }
};
struct Ci8Source {
  using Ptr = const std::uint8_t*;
  Ptr p;
  std::int64_t row;
  std::ptrdiff_t astep;  // 2 npol
  const float* tab;
  Ptr start(int s) const { return p + s * row; }
  void load(Ptr& q, __m256& xr, __m256& xi) const {
    xr = _mm256_broadcast_ss(tab + 2 * std::size_t{q[0]});
    xi = _mm256_broadcast_ss(tab + 2 * std::size_t{q[1]});
    q += astep;
  }
};
struct FloatSource {  // the float scratch of cf16/cf32 input, (re, im) interleaved as the input
  using Ptr = const float*;
  Ptr p;
  std::int64_t row;      // floats per time row (2 nantennas npol)
  std::ptrdiff_t astep;  // 2 npol
  Ptr start(int s) const { return p + s * row; }
  void load(Ptr& q, __m256& xr, __m256& xi) const {
    xr = _mm256_broadcast_ss(q);
    xi = _mm256_broadcast_ss(q + 1);
    q += astep;
  }
};

// Beam voltages of NV * 8 beams for T consecutive time samples: v[s][j] = sum_a w_a x_a(s), then
// epi(s, j, re, im). w: the pass's weights [antenna][re NV*8][im NV*8].
template <int NV, int T, class Source, class Epilogue>
inline void beam_kernel(const float* __restrict__ w, const Source& x, int na, Epilogue&& epi) {
  __m256 vr[T][NV], vi[T][NV];
  for (int s = 0; s < T; ++s)
    for (int j = 0; j < NV; ++j)
      vr[s][j] = vi[s][j] = _mm256_setzero_ps();
  typename Source::Ptr q[T];
  for (int s = 0; s < T; ++s)
    q[s] = x.start(s);
  for (int a = 0; a < na; ++a, w += 2 * NV * kLanes) {
    __m256 xr[T], xi[T];
    for (int s = 0; s < T; ++s)
      x.load(q[s], xr[s], xi[s]);
    for (int j = 0; j < NV; ++j) {
      const __m256 wr = _mm256_load_ps(w + j * kLanes);
      const __m256 wi = _mm256_load_ps(w + (NV + j) * kLanes);
      // Both samples' first halves, then the second halves: consecutive FMAs are independent.
      for (int s = 0; s < T; ++s) {
        vr[s][j] = _mm256_fmadd_ps(wr, xr[s], vr[s][j]);  // re += wr xr
        vi[s][j] = _mm256_fmadd_ps(wr, xi[s], vi[s][j]);  // im += wr xi
      }
      for (int s = 0; s < T; ++s) {
        vr[s][j] = _mm256_fnmadd_ps(wi, xi[s], vr[s][j]);  // re -= wi xi
        vi[s][j] = _mm256_fmadd_ps(wi, xr[s], vi[s][j]);   // im += wi xr
      }
    }
  }
  for (int s = 0; s < T; ++s)
    for (int j = 0; j < NV; ++j)
      epi(s, j, vr[s][j], vi[s][j]);
}

// The kernel for 3 samples x 16 beams, the main path: 12 independent accumulator chains of 2
// dependent FMAs per antenna (8 cycles of latency) for 24 FMAs (12 cycles on 2 pipes). With 2
// samples, 8 chains for 16 FMAs matched the latency exactly and lost ~10 % to it (measured with
// the data in L1: 2 x 16 85 % of the FMA loop, 3 x 16 93 %). 16 ymm registers: 12 accumulators,
// the first beam vector's weights and one sample's (re, im); the second vector's weights are
// memory operands.
template <class Source, class Epilogue>
inline void beam_kernel_3x2(const float* __restrict__ w, const Source& x, int na, Epilogue&& epi) {
  constexpr int T = 3;
  __m256 vr[T][2], vi[T][2];
  for (int s = 0; s < T; ++s)
    for (int j = 0; j < 2; ++j)
      vr[s][j] = vi[s][j] = _mm256_setzero_ps();
  typename Source::Ptr q[T];
  for (int s = 0; s < T; ++s)
    q[s] = x.start(s);
  for (int a = 0; a < na; ++a, w += 4 * kLanes) {
    const __m256 w0r = _mm256_load_ps(w), w0i = _mm256_load_ps(w + 2 * kLanes);
    for (int s = 0; s < T; ++s) {
      __m256 xr, xi;
      x.load(q[s], xr, xi);
      vr[s][0] = _mm256_fmadd_ps(w0r, xr, vr[s][0]);
      vi[s][0] = _mm256_fmadd_ps(w0r, xi, vi[s][0]);
      vr[s][1] = _mm256_fmadd_ps(_mm256_load_ps(w + kLanes), xr, vr[s][1]);
      vi[s][1] = _mm256_fmadd_ps(_mm256_load_ps(w + kLanes), xi, vi[s][1]);
      vr[s][0] = _mm256_fnmadd_ps(w0i, xi, vr[s][0]);
      vi[s][0] = _mm256_fmadd_ps(w0i, xr, vi[s][0]);
      vr[s][1] = _mm256_fnmadd_ps(_mm256_load_ps(w + 3 * kLanes), xi, vr[s][1]);
      vi[s][1] = _mm256_fmadd_ps(_mm256_load_ps(w + 3 * kLanes), xr, vi[s][1]);
    }
  }
  for (int s = 0; s < T; ++s)
    for (int j = 0; j < 2; ++j)
      epi(s, j, vr[s][j], vi[s][j]);
}

// In-register transpose of 8 rows of 8 floats: on return r[j][i] = old r[i][j].
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Stores the first n (1..8) floats of v at dst; non-temporal when `stream` and dst is 32-byte
// aligned (the callers then write whole 64 B lines; a non-temporal store to part of a line is
// flushed as a partial write: measured 5x slower than plain stores).
inline void store_row(float* dst, __m256 v, int n, bool stream) {
  if (n == kLanes) {
    if (stream && reinterpret_cast<std::uintptr_t>(dst) % 32 == 0)
      _mm256_stream_ps(dst, v);
    else
      _mm256_storeu_ps(dst, v);
  } else {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), v);
  }
}

// Floats from one channel of a tile to the next: the channel's rows plus one cache line, so that
// the 16 channels' rows a flush step reads lie in 16 different L1 sets (unpadded, B1's were
// 4 KiB apart, all in one set of the L1).
constexpr std::ptrdiff_t chan_stride(std::ptrdiff_t rows_floats) {
  return rows_floats + 16;
}

// One work unit: channels [ch0, ch0 + nch), samples [t0, t0 + nt). nch 0: none.
struct Task {
  int ch0 = 0, nch = 0;
  std::int64_t t0 = 0, nt = 0;
};

// One pass over the beams [b0, b0 + 8 nv).
struct Pass {
  int b0 = 0;
  int nv = 2;  // vectors of 8 beams: 2, or 1 for a remainder of <= 8 beams
};

// A computed tile whose output rows are still to be written, and where the writing stands: one
// step = one block of 16 tile rows x 8 beams (8 output lines of 64 B for power).
struct Flush {
  const float* tile = nullptr;  // null: nothing pending
  std::int64_t nto_max = 0;     // out times the tile has room for (its channel stride)
  Task tk;
  Pass ps;
  std::int64_t to = 0;  // next block: out time, out pol, tile row, beam
  int op = 0, r16 = 0, b8 = 0;
};

struct Scratch {
  Floats tile[2];  // [kChanGroup][tb / integration][out pol][vals][16 beams]: computed, flushed
  int cur = 0;     // the tile being computed; the other one is being flushed
  Flush flush;
  Floats xs;  // cf16/cf32: [kSub][nantennas * npol * 2] floats
};

// What every unit of one execute() reads and writes.
struct Run {
  const BeamformConfig& c;
  const float* table;
  const std::uint8_t* in;
  float* out;
  bool stream;  // non-temporal output stores
};

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(const PlanData& p) {
    const auto& c = p.config;
    nthreads_ = c.threads > 0 ? c.threads : omp_get_max_threads();
    // Block of time samples: a multiple of the integration, about 66 samples (the tile of a
    // 16-beam pass is then 66 KiB for B1; on Zen 3, 32 samples ran 10 % slower, 128 and 256 no
    // faster; 66, not 64, is a whole number of 3-sample kernel calls).
    const std::int64_t n = c.integration;
    tb_ = n >= 66 ? n : n * ((66 + n - 1) / n);
    tb_ = std::min<std::int64_t>(tb_, c.nsamples);
    // Beam passes: 16 beams (2 vectors) each; a remainder of <= 8 beams takes one vector.
    for (int b0 = 0; b0 < c.nbeams; b0 += 2 * kLanes)
      passes_.push_back({b0, c.nbeams - b0 > kLanes ? 2 : 1});
    nb_pad_ = passes_.back().b0 + passes_.back().nv * kLanes;
    const int vals = c.output == OutputKind::voltage ? 2 : 1;
    scratch_.resize(static_cast<std::size_t>(nthreads_));
    for (auto& s : scratch_) {
      for (auto& t : s.tile)
        t.assign(
            static_cast<std::size_t>(chan_stride(tb_ / n * c.nout_pols() * vals * 2 * kLanes)) *
            kChanGroup);
      if (c.sample_type == SampleType::cf16 || c.sample_type == SampleType::cf32)
        s.xs.assign(static_cast<std::size_t>(kSub) * c.nantennas * c.npol * 2);
    }
    weights_.assign(static_cast<std::size_t>(c.nchans) * c.npol * nb_pad_ * c.nantennas * 2);
  }

  // Reorders w[chan][pol][beam][antenna] into [chan][pol][pass][antenna][re beams][im beams]
  // (beams padded with zero weights to the pass width).
  void set_weights(const PlanData& p, const std::complex<float>* w, const Stream*) override {
    const auto& c = p.config;
    const int na = c.nantennas;
    for (int cp = 0; cp < c.nchans * c.npol; ++cp)
      for (const Pass& ps : passes_) {
        const int bw = ps.nv * kLanes;
        float* dst = weights_.data() + (static_cast<std::size_t>(cp) * nb_pad_ + ps.b0) * na * 2;
        for (int a = 0; a < na; ++a)
          for (int j = 0; j < bw; ++j) {
            const int b = ps.b0 + j;
            const std::complex<float> v =
                b < c.nbeams ? w[(static_cast<std::size_t>(cp) * c.nbeams + b) * na + a]
                             : std::complex<float>(0, 0);
            dst[(2 * a) * bw + j] = v.real();
            dst[(2 * a + 1) * bw + j] = v.imag();
          }
      }
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    const auto& c = p.config;
    const std::int64_t nblocks = (c.nsamples + tb_ - 1) / tb_;
    // Non-temporal stores for outputs far larger than the caches, when every output row starts at
    // the same offset in its cache line: then a first group of `head` channels ends at a line
    // boundary and every later group of 16 channels (64 B of power, 128 B of voltage) fills whole
    // lines. (A std::vector's data is typically 16 bytes past a line boundary; non-temporal
    // stores of lines split between two units ran at 1/5 of the plain stores' rate.)
    const int vals = c.output == OutputKind::voltage ? 2 : 1;
    const double out_bytes = 4.0 * c.nbeams * c.nout_pols() * c.nsamples_out() * c.out_row_floats();
    const auto addr = reinterpret_cast<std::uintptr_t>(out);
    const bool stream = out_bytes > static_cast<double>(kStreamBytes) && addr % (4 * vals) == 0 &&
                        (c.out_row_floats() * 4) % 64 == 0;
    const int head =
        stream ? std::min(c.nchans, static_cast<int>((64 - addr % 64) % 64 / (4 * vals))) : 0;
    const std::int64_t ngroups =
        (head > 0 ? 1 : 0) + (c.nchans - head + kChanGroup - 1) / kChanGroup;
    const std::int64_t nunits = nblocks * ngroups;
    // Block-major: units running together and one after the other are channel groups of one
    // time block and write neighbouring 64 B of the same output pages, which stay in the TLB.
    // Group-major, each unit wrote 64 B to each of ~2000 pages no unit nearby touched, and the
    // page walks (nested under a hypervisor) cost as much as the arithmetic.
    auto unit = [&](std::int64_t u) {
      Task tk;
      const int g = static_cast<int>(u % ngroups);
      tk.ch0 = head > 0 ? (g == 0 ? 0 : head + (g - 1) * kChanGroup) : g * kChanGroup;
      tk.nch = head > 0 && g == 0 ? head : std::min(kChanGroup, c.nchans - tk.ch0);
      tk.t0 = u / ngroups * tb_;
      tk.nt = std::min(tb_, c.nsamples - tk.t0);
      return tk;
    };
    const Run run{c, p.table.data(), in, out, stream};
#pragma omp parallel num_threads(nthreads_)
    {
      Scratch& s = scratch_[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic) nowait
      for (std::int64_t u = 0; u < nunits; ++u) {
        const Task tk = unit(u);
        // The unit this thread probably runs next (dynamic schedule: about u + threads): the
        // last pass prefetches its first channel.
        const Task next = u + nthreads_ < nunits ? unit(u + nthreads_) : Task{};
        for (std::size_t i = 0; i < passes_.size(); ++i) {
          const bool last = i + 1 == passes_.size();
          const Pass& ps = passes_[i];
          if (ps.nv == 2)
            compute_pass<2>(run, tk, ps, last ? next : tk, passes_[last ? 0 : i + 1], s);
          else
            compute_pass<1>(run, tk, ps, last ? next : tk, passes_[last ? 0 : i + 1], s);
        }
      }
      while (s.flush.tile)
        flush_step(run, s.flush);
      if (stream) _mm_sfence();  // the non-temporal stores are visible before execute() returns
    }
  }

 private:
  // Computes the tile of one beam pass (every channel, pol and sample of the unit) into
  // s.tile[s.cur] while the previous tile is flushed, a step every few kernel calls (written all
  // at once, its 1024 output lines (B1) filled the store queue and stalled the FMAs while the
  // memory drained them). (next, np): the unit and pass after this one, whose first channel is
  // prefetched.
  template <int NV>
  void compute_pass(const Run& r, const Task& tk, const Pass& ps, const Task& next, const Pass& np,
                    Scratch& s) const {
    const auto& c = r.c;
    const std::int64_t row = c.row_bytes();
    const int vals = c.output == OutputKind::voltage ? 2 : 1;
    const int nop = c.nout_pols();
    // Tile [channel][out time][out pol][re (, im)][beam], strides in floats: a channel's rows
    // are contiguous, so its kernel calls store to consecutive lines (time-major, the lines of
    // one channel were 1 KiB apart, in 4 of the 64 L1 sets).
    const std::ptrdiff_t tstep = std::ptrdiff_t{nop} * vals * NV * kLanes;
    const std::ptrdiff_t kstep = chan_stride(tb_ / c.integration * tstep);
    float* tile = s.tile[s.cur].data();
    // Flush pacing: `per` steps every `every` kernel calls, spread over the pass.
    const std::int64_t calls = std::int64_t{tk.nch} * c.npol * ((tk.nt + NV) / (NV + 1));
    const std::int64_t steps = flush_steps(c, s.flush);
    const std::int64_t every = steps > 0 ? std::max<std::int64_t>(1, calls / steps) : calls + 1;
    const std::int64_t per = steps > 0 ? (steps * every + calls - 1) / calls : 0;
    std::int64_t countdown = every;
    // Prefetch of the next channel (see below): up to 3 ranges, `pf_rate` lines per call.
    const char* pf_p[3];
    std::int64_t pf_left[3];
    int pf_n = 0, pf_rate = 0;
    auto tick = [&] {
      for (int i = 0; i < pf_rate && pf_n > 0; ++i) {
        _mm_prefetch(pf_p[pf_n - 1], _MM_HINT_T1);
        pf_p[pf_n - 1] += 64;
        if ((pf_left[pf_n - 1] -= 64) <= 0) --pf_n;
      }
      if (--countdown > 0) return;
      countdown = every;
      for (std::int64_t i = 0; i < per && s.flush.tile; ++i)
        flush_step(r, s.flush);
    };
    const std::int64_t calls_per_channel = std::max<std::int64_t>(1, calls / tk.nch);
    for (int k = 0; k < tk.nch; ++k) {
      const int ch = tk.ch0 + k;
      const std::uint8_t* chan_in = r.in + (std::int64_t{ch} * c.nsamples + tk.t0) * row;
      // The next channel's samples and weights (of this unit and pass, else of the next) are in
      // other pages, past what the hardware prefetcher follows: fetch them into L2 while this
      // channel computes, a few lines per kernel call (B1, weights from L3: +10 %; into L1 (T0)
      // they did not help, and issued all at once the prefetches waited for miss buffers).
      const bool same = k + 1 < tk.nch;
      const Task& tn = same ? tk : next;
      pf_n = 0;
      if (tn.nch > 0) {
        const int chn = same ? ch + 1 : tn.ch0;
        const Pass& pn = same ? ps : np;
        pf_p[pf_n] =
            reinterpret_cast<const char*>(r.in + (std::int64_t{chn} * c.nsamples + tn.t0) * row);
        pf_left[pf_n++] = tn.nt * row;
        for (int pol = 0; pol < c.npol; ++pol) {
          pf_p[pf_n] = reinterpret_cast<const char*>(pass_weights(c, chn, pol, pn));
          pf_left[pf_n++] = std::int64_t{c.nantennas} * 2 * pn.nv * kLanes * 4;
        }
        std::int64_t lines = 0;
        for (int i = 0; i < pf_n; ++i)
          lines += (pf_left[i] + 63) / 64;
        pf_rate = static_cast<int>((lines + calls_per_channel - 1) / calls_per_channel) + 1;
      }
      // Float samples are converted kSub at a time; ci4/ci8 ones are read in place, all at once
      // (in pieces of kSub, the odd tail of each piece took a 1-sample kernel call).
      const bool convert = c.sample_type == SampleType::cf16 || c.sample_type == SampleType::cf32;
      const std::int64_t piece = convert ? kSub : tk.nt;
      for (std::int64_t ts = 0; ts < tk.nt; ts += piece) {
        const int nsub = static_cast<int>(std::min<std::int64_t>(piece, tk.nt - ts));
        if (convert) to_float(c, chan_in + ts * row, nsub, s.xs.data());
        for (int pol = 0; pol < c.npol; ++pol) {
          const float* w = pass_weights(c, ch, pol, ps);
          // The channel's tile row of this (out) pol at out time 0.
          const int op = c.sum_pols ? 0 : pol;
          float* d0 = tile + k * kstep + op * vals * NV * kLanes;
          auto sweep = [&](auto src) {
            if (c.output == OutputKind::voltage)
              sweep_voltage<NV>(w, src, c.nantennas, nsub, d0 + ts * tstep, tstep, tick);
            else
              sweep_power<NV>(w, src, c, ts, nsub, !c.sum_pols || pol == 0, d0, tstep, tick);
          };
          switch (c.sample_type) {
            case SampleType::ci4:
              sweep(Ci4Source{chan_in + ts * row + pol, row, c.npol, r.table});
              break;
            case SampleType::ci8:
              sweep(Ci8Source{chan_in + ts * row + 2 * pol, row, 2 * c.npol, r.table});
              break;
            default: {
              const std::int64_t frow = 2 * static_cast<std::int64_t>(c.nantennas) * c.npol;
              sweep(FloatSource{s.xs.data() + 2 * pol, frow, 2 * c.npol});
            }
          }
        }
      }
    }
    // What the pacing left of the previous tile, then this one becomes the tile to flush.
    while (s.flush.tile)
      flush_step(r, s.flush);
    s.flush = Flush{};
    s.flush.tile = tile;
    s.flush.nto_max = tb_ / c.integration;
    s.flush.tk = tk;
    s.flush.ps = ps;
    s.cur ^= 1;
  }

  // Power of samples [ts, ts + nsub) of the unit (src at ts) of one channel and pol into the
  // tile (d: the channel's row at out time 0, tstep floats per out time): |v|^2 stored by the
  // first contribution to an output sample (first pol of a sum, first sample of an
  // integration), added by the others. Counters, not divisions, find the output sample.
  template <int NV, class Source, class Tick>
  static void sweep_power(const float* w, Source src, const BeamformConfig& c, std::int64_t ts,
                          int nsub, bool first_pol, float* d, std::ptrdiff_t tstep, Tick& tick) {
    const std::int64_t n = c.integration;
    std::int64_t ph = ts % n;  // phase in the integration
    d += ts / n * tstep;
    auto detect = [&](int /*s*/, int j, __m256 re, __m256 im) {
      float* dj = d + j * kLanes;
      __m256 pw = _mm256_fmadd_ps(re, re, _mm256_mul_ps(im, im));
      if (!(first_pol && ph == 0)) pw = _mm256_add_ps(pw, _mm256_load_ps(dj));
      _mm256_store_ps(dj, pw);
      if (j == NV - 1 && ++ph == n) {  // the sample's last vector: on to the next out sample
        ph = 0;
        d += tstep;
      }
    };
    int t = 0;
    if constexpr (NV == 2)
      for (; t + 3 <= nsub; t += 3, src.p += 3 * src.row) {
        beam_kernel_3x2(w, src, c.nantennas, detect);
        tick();
      }
    for (; t + 2 <= nsub; t += 2, src.p += 2 * src.row) {
      beam_kernel<NV, 2>(w, src, c.nantennas, detect);
      tick();
    }
    if (t < nsub) {
      beam_kernel<NV, 1>(w, src, c.nantennas, detect);
      tick();
    }
  }

  // Voltages of nsub samples of one channel and pol (src at the first) into the tile (d: the
  // channel's re row at the first sample, tstep floats per sample; im follows re).
  template <int NV, class Source, class Tick>
  static void sweep_voltage(const float* w, Source src, int na, int nsub, float* d,
                            std::ptrdiff_t tstep, Tick& tick) {
    auto store = [&](int s, int j, __m256 re, __m256 im) {
      float* dj = d + s * tstep + j * kLanes;
      _mm256_store_ps(dj, re);
      _mm256_store_ps(dj + NV * kLanes, im);
    };
    int t = 0;
    if constexpr (NV == 2)
      for (; t + 3 <= nsub; t += 3, src.p += 3 * src.row, d += 3 * tstep) {
        beam_kernel_3x2(w, src, na, store);
        tick();
      }
    for (; t + 2 <= nsub; t += 2, src.p += 2 * src.row, d += 2 * tstep) {
      beam_kernel<NV, 2>(w, src, na, store);
      tick();
    }
    if (t < nsub) {
      beam_kernel<NV, 1>(w, src, na, store);
      tick();
    }
  }

  const float* pass_weights(const BeamformConfig& c, int ch, int pol, const Pass& ps) const {
    return weights_.data() +
           ((static_cast<std::size_t>(ch) * c.npol + pol) * nb_pad_ + ps.b0) * c.nantennas * 2;
  }

  // cf16/cf32 rows -> floats in the same order (IEEE half -> float is exact: F16C).
  static void to_float(const BeamformConfig& c, const std::uint8_t* src, int nrows, float* dst) {
    const std::int64_t nf = static_cast<std::int64_t>(nrows) * c.nantennas * c.npol * 2;
    if (c.sample_type == SampleType::cf32) {
      std::memcpy(dst, src, static_cast<std::size_t>(nf) * sizeof(float));
      return;
    }
    std::int64_t i = 0;
    for (; i + 8 <= nf; i += 8)
      _mm256_storeu_ps(
          dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
    for (; i < nf; ++i) {
      std::uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = half_to_float(h);
    }
  }

  // Flush steps of a pending tile: (out times) x (out pols) x (blocks of 16 rows) x (blocks of 8
  // real beams); 0 when nothing is pending.
  static std::int64_t flush_steps(const BeamformConfig& c, const Flush& f) {
    if (!f.tile) return 0;
    const int vals = c.output == OutputKind::voltage ? 2 : 1;
    const int nbv = std::min(f.ps.nv * kLanes, c.nbeams - f.ps.b0);
    return f.tk.nt / c.integration * c.nout_pols() * ((f.tk.nch * vals + 15) / 16) *
           ((nbv + kLanes - 1) / kLanes);
  }

  // One flush step: tile rows [r16, r16 + 16) x beams [b8, b8 + 8) of (out time, out pol), two
  // 8 x 8 blocks transposed in registers, to the output rows [beam][out pol][time][ch0 * vals +
  // row], each beam's 64 B written whole before the next. Beams past nbeams are padding.
  static void flush_step(const Run& r, Flush& f) {
    const auto& c = r.c;
    const int bw = f.ps.nv * kLanes;
    const int vals = c.output == OutputKind::voltage ? 2 : 1;
    const int valid_rows = f.tk.nch * vals;
    const int nop = c.nout_pols();
    const int nbv = std::min(bw, c.nbeams - f.ps.b0);
    // Tile row = channel row / vals, component row % vals (see compute_pass).
    const std::ptrdiff_t tstep = std::ptrdiff_t{nop} * vals * bw;
    const std::ptrdiff_t kstep = chan_stride(f.nto_max * tstep);
    const float* m = f.tile + f.to * tstep + f.op * vals * bw + f.b8;
    // vals is 1 or 2: a shift and a mask, not the 32 integer divisions of row / vals and
    // row % vals (B1: 10 % of the CPU time went to them).
    const int vshift = vals - 1;
    auto at = [&](int row) { return m + (row >> vshift) * kstep + (row & vshift) * bw; };
    const int nr0 = std::min(kLanes, valid_rows - f.r16);
    const int nr1 = std::min(kLanes, valid_rows - f.r16 - kLanes);  // <= 0: no second block
    __m256 v0[8], v1[8];
    for (int i = 0; i < 8; ++i)
      v0[i] = _mm256_load_ps(at(f.r16 + i));
    transpose8(v0);
    if (nr1 > 0) {
      for (int i = 0; i < 8; ++i)
        v1[i] = _mm256_load_ps(at(f.r16 + kLanes + i));
      transpose8(v1);
    }
    const std::int64_t ntout = c.nsamples_out(), orow = c.out_row_floats();
    const std::int64_t to = f.tk.t0 / c.integration + f.to;
    for (int j = 0; j < std::min(kLanes, nbv - f.b8); ++j) {
      const std::int64_t b = f.ps.b0 + f.b8 + j;
      float* dst = r.out + ((b * nop + f.op) * ntout + to) * orow +
                   static_cast<std::int64_t>(f.tk.ch0) * vals + f.r16;
      store_row(dst, v0[j], nr0, r.stream);
      if (nr1 > 0) store_row(dst + kLanes, v1[j], nr1, r.stream);
    }
    // Next block; past the last, nothing is pending.
    if ((f.b8 += kLanes) < nbv) return;
    f.b8 = 0;
    if ((f.r16 += 2 * kLanes) < valid_rows) return;
    f.r16 = 0;
    if (++f.op < nop) return;
    f.op = 0;
    if (++f.to < f.tk.nt / c.integration) return;
    f.tile = nullptr;
  }

  int nthreads_ = 1;
  std::int64_t tb_ = 0;
  std::vector<Pass> passes_;
  int nb_pad_ = 0;
  std::vector<Scratch> scratch_;
  Floats weights_;  // [chan][pol][pass][antenna][re beams][im beams], see set_weights
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan) {
  return std::make_unique<CpuExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
