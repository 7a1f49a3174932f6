// CPU beamformer (the reference path). OpenMP over (group of 16 channels) x (block of time
// samples); inside, per channel and pol: unpack the block to float re/im planes [antenna][time]
// (time contiguous), then for each pair of beams accumulate 16 time samples at a time in
// registers over all antennas (the weights of a pair are loaded once per antenna and reused
// across the block: 16 FMAs per 8 loads, AVX2-vectorised over time). Results go to a
// [beam][pol][time][16 channels] tile so that the store to [beam][pol][time][chan] writes whole
// cache lines (the transpose fused into the store).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "beamform/executor.hpp"

namespace warpbeam::beamform::detail {
namespace {

constexpr int kChanGroup = 16;  // channels per task: 64 B of output per (beam, time) row
constexpr int kVec = 16;        // time samples accumulated in registers

struct Scratch {
  std::vector<float> xr, xi;  // [antenna][tb_pad]
  std::vector<float> tile;    // [beam][out pol][tb / integration][kChanGroup] (x2 for voltage)
};

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(const PlanData& p) {
    const auto& c = p.config;
    nthreads_ = c.threads > 0 ? c.threads : omp_get_max_threads();
    // Block of time samples: a multiple of the integration, about 64 samples.
    const std::int64_t n = c.integration;
    tb_ = n >= 64 ? n : n * ((64 + n - 1) / n);
    tb_ = std::min<std::int64_t>(tb_, c.nsamples);
    tb_pad_ = (tb_ + kVec - 1) / kVec * kVec;
    const std::size_t vals = c.output == OutputKind::voltage ? 2 : 1;
    scratch_.resize(static_cast<std::size_t>(nthreads_));
    for (auto& s : scratch_) {
      s.xr.assign(static_cast<std::size_t>(c.nantennas * tb_pad_), 0.f);
      s.xi.assign(s.xr.size(), 0.f);
      s.tile.assign(
          static_cast<std::size_t>(c.nbeams) * c.nout_pols() * (tb_ / n) * kChanGroup * vals, 0.f);
    }
    weights_.resize(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams * c.nantennas * 2);
  }

  void set_weights(const PlanData&, const std::complex<float>* w, const Stream*) override {
    std::memcpy(weights_.data(), w, weights_.size() * sizeof(float));
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out, const Stream*) override {
    const auto& c = p.config;
    const std::int64_t ngroups = (c.nchans + kChanGroup - 1) / kChanGroup;
    const std::int64_t nblocks = (c.nsamples + tb_ - 1) / tb_;
#pragma omp parallel for schedule(dynamic) num_threads(nthreads_)
    for (std::int64_t task = 0; task < ngroups * nblocks; ++task) {
      Scratch& s = scratch_[static_cast<std::size_t>(omp_get_thread_num())];
      run_task(p, in, out, task / nblocks, task % nblocks, s);
    }
  }

 private:
  // Unpacks channel `ch`, pol `pol`, samples [t0, t0 + nt) into s.xr/s.xi [antenna][tb_pad_].
  void unpack(const PlanData& p, const std::uint8_t* in, int ch, int pol, std::int64_t t0,
              std::int64_t nt, Scratch& s) const {
    const auto& c = p.config;
    const std::int64_t row = c.row_bytes();
    const int bpc = bytes_per_complex(c.sample_type);
    const float* tab = p.table.data();
    for (int a = 0; a < c.nantennas; ++a) {
      float* xr = s.xr.data() + a * tb_pad_;
      float* xi = s.xi.data() + a * tb_pad_;
      const std::uint8_t* src =
          in + (static_cast<std::int64_t>(ch) * c.nsamples + t0) * row + (a * c.npol + pol) * bpc;
      for (std::int64_t t = 0; t < nt; ++t, src += row) {
        switch (c.sample_type) {
          case SampleType::ci4:
            xr[t] = tab[2 * src[0]];
            xi[t] = tab[2 * src[0] + 1];
            break;
          case SampleType::ci8:
            xr[t] = tab[2 * src[0]];
            xi[t] = tab[2 * src[1]];
            break;
          case SampleType::cf16: {
            std::uint16_t h[2];
            std::memcpy(h, src, 4);
            xr[t] = half_to_float(h[0]);
            xi[t] = half_to_float(h[1]);
            break;
          }
          case SampleType::cf32:
            std::memcpy(xr + t, src, 4);
            std::memcpy(xi + t, src + 4, 4);
            break;
        }
      }
      for (std::int64_t t = nt; t < tb_pad_; ++t)
        xr[t] = xi[t] = 0;
    }
  }

  // Beam voltages of beams b0, b1 for kVec samples from t: acc = sum_a w_a x_a (complex).
  static inline void beam_pair(const float* __restrict__ w0, const float* __restrict__ w1,
                               const float* __restrict__ xr, const float* __restrict__ xi, int na,
                               std::int64_t stride, float* __restrict__ r0, float* __restrict__ i0,
                               float* __restrict__ r1, float* __restrict__ i1) {
    float ar0[kVec] = {}, ai0[kVec] = {}, ar1[kVec] = {}, ai1[kVec] = {};
    for (int a = 0; a < na; ++a) {
      const float w0r = w0[2 * a], w0i = w0[2 * a + 1], w1r = w1[2 * a], w1i = w1[2 * a + 1];
      const float* __restrict__ pr = xr + a * stride;
      const float* __restrict__ pi = xi + a * stride;
#pragma omp simd
      for (int t = 0; t < kVec; ++t) {
        // Explicit FMAs: -std=c++20 turns off GCC's contraction of a * b + c.
        ar0[t] = std::fma(-w0i, pi[t], std::fma(w0r, pr[t], ar0[t]));
        ai0[t] = std::fma(w0i, pr[t], std::fma(w0r, pi[t], ai0[t]));
        ar1[t] = std::fma(-w1i, pi[t], std::fma(w1r, pr[t], ar1[t]));
        ai1[t] = std::fma(w1i, pr[t], std::fma(w1r, pi[t], ai1[t]));
      }
    }
    for (int t = 0; t < kVec; ++t) {
      r0[t] = ar0[t];
      i0[t] = ai0[t];
      r1[t] = ar1[t];
      i1[t] = ai1[t];
    }
  }

  void run_task(const PlanData& p, const std::uint8_t* in, float* out, std::int64_t group,
                std::int64_t block, Scratch& s) const {
    const auto& c = p.config;
    const int ch0 = static_cast<int>(group * kChanGroup);
    const int nch = std::min(kChanGroup, c.nchans - ch0);
    const std::int64_t t0 = block * tb_;
    const std::int64_t nt = std::min(tb_, c.nsamples - t0);
    const std::int64_t n = c.integration;
    const std::int64_t nto = nt / n, tbo = tb_ / n;
    const int nop = c.nout_pols();
    const bool voltage = c.output == OutputKind::voltage;
    const int vals = voltage ? 2 : 1;
    std::fill(s.tile.begin(), s.tile.end(), 0.f);
    float vr[2][kVec], vi[2][kVec];
    for (int k = 0; k < nch; ++k) {
      const int ch = ch0 + k;
      for (int pol = 0; pol < c.npol; ++pol) {
        unpack(p, in, ch, pol, t0, nt, s);
        const int op = c.sum_pols ? 0 : pol;
        const float* wcp = weights_.data() + (static_cast<std::size_t>(ch) * c.npol + pol) *
                                                 c.nbeams * c.nantennas * 2;
        for (int b = 0; b < c.nbeams; b += 2) {
          const int b1 = std::min(b + 1, c.nbeams - 1);
          for (std::int64_t tv = 0; tv < nt; tv += kVec) {
            beam_pair(wcp + static_cast<std::size_t>(b) * c.nantennas * 2,
                      wcp + static_cast<std::size_t>(b1) * c.nantennas * 2, s.xr.data() + tv,
                      s.xi.data() + tv, c.nantennas, tb_pad_, vr[0], vi[0], vr[1], vi[1]);
            const int nv = static_cast<int>(std::min<std::int64_t>(kVec, nt - tv));
            for (int j = 0; j < (b1 > b ? 2 : 1); ++j) {
              float* tile = s.tile.data() + ((static_cast<std::size_t>(b + j) * nop + op) * tbo) *
                                                kChanGroup * vals;
              for (int t = 0; t < nv; ++t) {
                const std::int64_t tt = tv + t;
                if (voltage) {
                  tile[(tt * kChanGroup + k) * 2] = vr[j][t];
                  tile[(tt * kChanGroup + k) * 2 + 1] = vi[j][t];
                } else {
                  tile[(tt / n) * kChanGroup + k] += vr[j][t] * vr[j][t] + vi[j][t] * vi[j][t];
                }
              }
            }
          }
        }
      }
    }
    // Store: rows of nch channels (x2 for voltage) per (beam, out pol, time).
    const std::int64_t ntout = c.nsamples_out(), row = c.out_row_floats();
    const std::int64_t to0 = t0 / n;
    for (int b = 0; b < c.nbeams; ++b)
      for (int op = 0; op < nop; ++op)
        for (std::int64_t to = 0; to < nto; ++to) {
          const float* src = s.tile.data() + ((static_cast<std::size_t>(b) * nop + op) * tbo + to) *
                                                 kChanGroup * vals;
          float* dst = out + ((static_cast<std::int64_t>(b) * nop + op) * ntout + to0 + to) * row +
                       static_cast<std::int64_t>(ch0) * vals;
          std::memcpy(dst, src, static_cast<std::size_t>(nch) * vals * sizeof(float));
        }
  }

  int nthreads_ = 1;
  std::int64_t tb_ = 0, tb_pad_ = 0;
  std::vector<Scratch> scratch_;
  std::vector<float> weights_;  // [chan][pol][beam][antenna] (re, im)
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan) {
  return std::make_unique<CpuExecutor>(plan);
}

}  // namespace warpbeam::beamform::detail
