// The fused kernel's hand-written block FFT and data flow, checked on the CPU: the very templates
// cuda_fused.cu runs (block_fft.hpp, fused_layout.hpp) instantiated with complex<double> values
// and "threads" replayed in loops, against a naive DFT written here.
#include <cmath>
#include <complex>
#include <random>
#include <set>

#include "epic/block_fft.hpp"
#include "epic/fused_layout.hpp"
#include "test_util.hpp"
#include "warpbeam/epic.hpp"

namespace fftest {

// The value type the templates need, with its operations found by argument-dependent lookup.
struct Cx {
  std::complex<double> v;
};
inline Cx add(Cx a, Cx b) {
  return {a.v + b.v};
}
inline Cx sub(Cx a, Cx b) {
  return {a.v - b.v};
}
inline Cx mul_neg_i(Cx a) {
  return {a.v * std::complex<double>(0, -1)};
}
inline Cx mul_pos_i(Cx a) {
  return {a.v * std::complex<double>(0, 1)};
}
template <int E>
Cx mul_const(Cx a, warpbeam::epic::fft::Root16<E>) {
  return {a.v *
          std::complex<double>(warpbeam::epic::fft::kCos16[E], -warpbeam::epic::fft::kSin16[E])};
}

constexpr double kPi = 3.14159265358979323846;

std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x) {
  const std::size_t n = x.size();
  std::vector<std::complex<double>> w(n), y(n);
  for (std::size_t k = 0; k < n; ++k)
    w[k] = std::polar(1.0, -2 * kPi * static_cast<double>(k) / n);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < n; ++j)
      y[k] += x[j] * w[(j * k) % n];
  return y;
}

std::vector<std::complex<double>> random_vec(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  std::vector<std::complex<double>> v(n);
  for (auto& x : v)
    x = {g(rng), g(rng)};
  return v;
}

double max_err(const std::vector<std::complex<double>>& a,
               const std::vector<std::complex<double>>& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

template <int M>
void check_dft16() {
  auto x = random_vec(16, 100 + M);
  Cx r[16];
  for (int i = 0; i < 16; ++i)
    r[i] = {x[i]};
  for (int i = M; i < 16; ++i)
    x[i] = 0;  // the pruned inputs: the DFT must ignore whatever the registers hold
  warpbeam::epic::fft::dft16<M>(r);
  const auto want = naive_dft(x);
  std::vector<std::complex<double>> got(16);
  for (int i = 0; i < 16; ++i)
    got[i] = r[i].v;
  EXPECT_LT(max_err(got, want), 1e-12) << "dft16 with " << M << " nonzero inputs";
}

template <int M>
void check_dft8() {
  auto x = random_vec(8, 200 + M);
  Cx r[8];
  for (int i = 0; i < 8; ++i)
    r[i] = {x[i]};
  for (int i = M; i < 8; ++i)
    x[i] = 0;
  warpbeam::epic::fft::dft8<M>(r);
  const auto want = naive_dft(x);
  for (int i = 0; i < 8; ++i)
    EXPECT_LT(std::abs(r[i].v - want[i]), 1e-12) << "dft8<" << M << "> output " << i;
}

// Replays one N-point block FFT over its Q threads; inputs >= m are zero.
template <int N, int M>
void check_block_fft() {
  using F = warpbeam::epic::fft::BlockFft<N>;
  auto x = random_vec(N, 300 + N + M);
  for (int i = F::kQ * M; i < N; ++i)
    x[i] = 0;  // register p of every thread holds x[q + Q p]: p >= M means n >= Q M
  std::vector<Cx> scratch(16 * F::kL, Cx{{NAN, NAN}});
  std::vector<std::array<Cx, 16>> regs(F::kQ);
  for (int q = 0; q < F::kQ; ++q) {
    for (int p = 0; p < 16; ++p)
      regs[q][p] = {p < M ? x[F::input_index(q, p)] : std::complex<double>(NAN, NAN)};
    Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
    warpbeam::epic::fft::block_fft_pass1<N, M>(
        r, q, [](Cx v, int e) { return Cx{v.v * std::polar(1.0, -2 * kPi * e / N)}; },
        [&](int i, Cx v) { scratch.at(i) = v; });
  }
  const auto want = naive_dft(x);
  std::set<int> seen;
  for (int q = 0; q < F::kQ; ++q) {
    Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
    warpbeam::epic::fft::block_fft_pass2<N>(r, q, [&](int i) { return scratch.at(i); });
    for (int k = 0; k < 16; ++k) {
      const int idx = F::output_index(q, k);
      ASSERT_TRUE(idx >= 0 && idx < N);
      EXPECT_TRUE(seen.insert(idx).second) << "output " << idx << " produced twice";
      EXPECT_LT(std::abs(r[k].v - want[idx]), 1e-9 * N)
          << "N " << N << " M " << M << " thread " << q << " register " << k << " -> X[" << idx
          << "]";
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), N);
}

// One transform as the fused kernel does it: pass 1 in every thread's registers, then the
// exchange in the layout's kH phases through an area of kScratchPerFft values (poisoned with NaN
// first, bounds-checked): all threads store phase h, then all load it ("__syncwarp").
template <class L>
void transform(std::vector<std::array<Cx, 16>>& regs) {
  constexpr int N = L::kN, Q = L::kQ, H = L::kH;
  std::vector<Cx> scratch(L::kScratchPerFft, Cx{{NAN, NAN}});
  for (int q = 0; q < Q; ++q) {
    Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
    warpbeam::epic::fft::block_fft_pass1_regs<N, L::kPin>(
        r, q, [](Cx v, int e) { return Cx{v.v * std::polar(1.0, -2 * kPi * e / N)}; });
  }
  for (int h = 0; h < H; ++h) {
    std::fill(scratch.begin(), scratch.end(), Cx{{NAN, NAN}});
    for (int q = 0; q < Q; ++q) {
      Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
      warpbeam::epic::fft::block_fft_exchange_store<N, H>(
          r, q, h, [&](int i, Cx v) { scratch.at(static_cast<std::size_t>(i)) = v; });
    }
    for (int q = 0; q < Q; ++q) {
      Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
      warpbeam::epic::fft::block_fft_exchange_load<N, H>(
          r, q, h, [&](int i) { return scratch.at(static_cast<std::size_t>(i)); });
    }
  }
}

// Replays the whole fused kernel's data flow for one spectrum of one channel: the cluster's
// blocks, the row stage's task assignment, the 1/N hand-over into the owners' column buffers,
// the column stage and the accumulator -> pixel map; compares |F|^2 with a naive 2-D DFT.
template <int N, int SPB>
void check_fused_flow(int rows) {
  using L = warpbeam::epic::detail::FusedLayout<N, SPB, false>;
  using F = typename L::Fft;
  constexpr int A = L::kA, C = L::kC, NC = L::kNC, Q = L::kQ;
  std::mt19937 rng(N + rows);
  std::normal_distribution<double> g;
  // A random aperture in rows < `rows`, columns < A (of an N x N grid), for each spectrum.
  std::vector<std::vector<std::complex<double>>> grid(SPB);
  for (int s = 0; s < SPB; ++s) {
    grid[s].assign(static_cast<std::size_t>(N) * N, 0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < A; ++c)
        grid[s][r * N + c] = {g(rng), g(rng)};
  }
  // colbuf per rank; one batch (buffer 0).
  std::vector<std::vector<Cx>> colbuf(C, std::vector<Cx>(2 * SPB * A * L::kLdc, Cx{{0, 0}}));
  std::vector<std::vector<int>> written(C, std::vector<int>(colbuf[0].size(), 0));
  for (int rank = 0; rank < C; ++rank) {
    const int nrows = L::rows_of_rank(rank, rows);
    const int ntasks = SPB * nrows;
    for (int base = 0; base < ntasks; base += L::kRowSlots) {
      for (int slot = 0; slot < L::kRowSlots; ++slot) {
        const int task = base + slot;
        if (task >= ntasks) continue;
        const int s = task / nrows, row = L::row_of_task(rank, task % nrows);
        ASSERT_LT(row, rows);
        std::vector<std::array<Cx, 16>> regs(Q);
        for (int q = 0; q < Q; ++q)
          for (int p = 0; p < 16; ++p)
            regs[q][p] = {p < L::kPin ? grid[s][row * N + F::input_index(q, p)]
                                      : std::complex<double>(NAN, NAN)};
        transform<L>(regs);
        for (int q = 0; q < Q; ++q) {
          Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
          for (int k = 0; k < 16; ++k) {
            const int col = F::output_index(q, k);
            const int owner = col / NC;
            const std::size_t at = L::colbuf_index(0, s, row, col % NC);
            ASSERT_LT(at, colbuf[owner].size());
            colbuf[owner][at] = {r[k].v / static_cast<double>(N)};
            ++written[owner][at];
          }
        }
      }
    }
  }
  for (int rank = 0; rank < C; ++rank)
    for (int v : written[rank])
      ASSERT_LE(v, 1) << "a column-buffer element written twice";
  // Column stage and accumulation: pixel (k, rank NC + col) += |X|^2 N^2.
  std::vector<double> img(static_cast<std::size_t>(N) * N, -1);
  for (int rank = 0; rank < C; ++rank)
    for (int tid0 = 0; tid0 < L::kThreads; tid0 += Q) {
      const int col = L::column_of(tid0);
      std::vector<double> acc(Q * 16, 0);
      for (int s = 0; s < SPB; ++s) {
        std::vector<std::array<Cx, 16>> regs(Q);
        for (int q = 0; q < Q; ++q)
          for (int p = 0; p < 16; ++p)
            regs[q][p] = p < L::kPin
                             ? colbuf[rank][L::colbuf_index(0, s, F::input_index(q, p), col)]
                             : Cx{{NAN, NAN}};
        transform<L>(regs);
        for (int q = 0; q < Q; ++q) {
          Cx(&r)[16] = *reinterpret_cast<Cx(*)[16]>(regs[q].data());
          for (int k = 0; k < 16; ++k)
            acc[q * 16 + k] += std::norm(r[k].v) * N * N;
        }
      }
      for (int q = 0; q < Q; ++q)
        for (int k = 0; k < 16; ++k) {
          const std::size_t pix =
              static_cast<std::size_t>(F::output_index(q, k)) * N + rank * NC + col;
          ASSERT_EQ(img[pix], -1) << "pixel written twice";
          img[pix] = acc[q * 16 + k];
        }
    }
  // Naive 2-D DFT: rows first, then columns.
  std::vector<double> want(static_cast<std::size_t>(N) * N, 0);
  for (int s = 0; s < SPB; ++s) {
    std::vector<std::complex<double>> tmp(static_cast<std::size_t>(N) * N);
    for (int r = 0; r < N; ++r) {
      std::vector<std::complex<double>> row(grid[s].begin() + r * N, grid[s].begin() + (r + 1) * N);
      const auto f = naive_dft(row);
      std::copy(f.begin(), f.end(), tmp.begin() + r * N);
    }
    for (int c = 0; c < N; ++c) {
      std::vector<std::complex<double>> colv(N);
      for (int r = 0; r < N; ++r)
        colv[r] = tmp[r * N + c];
      const auto f = naive_dft(colv);
      for (int r = 0; r < N; ++r)
        want[static_cast<std::size_t>(r) * N + c] += std::norm(f[r]);
    }
  }
  double maxv = 0, maxe = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_GE(img[i], 0) << "pixel " << i << " never written";
    maxv = std::max(maxv, want[i]);
    maxe = std::max(maxe, std::abs(img[i] - want[i]));
  }
  EXPECT_LT(maxe, 1e-9 * maxv) << "N " << N << " rows " << rows;
}

}  // namespace fftest

using namespace fftest;

TEST(EpicBlockFft, RegisterDftsMatchNaiveDftForEveryPruning) {
  check_dft16<1>();
  check_dft16<2>();
  check_dft16<3>();
  check_dft16<4>();
  check_dft16<5>();
  check_dft16<7>();
  check_dft16<8>();
  check_dft16<12>();
  check_dft16<16>();
  check_dft8<1>();
  check_dft8<3>();
  check_dft8<4>();
  check_dft8<8>();
}

TEST(EpicBlockFft, FourStepOverThreadsMatchesNaiveDft) {
  check_block_fft<64, 16>();
  check_block_fft<64, 8>();
  check_block_fft<128, 8>();
  check_block_fft<128, 16>();
  check_block_fft<256, 4>();
  check_block_fft<256, 16>();
}

TEST(EpicBlockFft, HalfPrecisionConstantsRoundCorrectly) {
  // The fused kernel's constants are fp16 bit patterns made at compile time by half_bits();
  // check a few against the IEEE binary16 encodings (numpy.float16).
  struct Case {
    double x;
    unsigned bits;
  };
  // 1 = 0x3C00, -1 = 0xBC00, 0.5 = 0x3800, 1/128 = 0x2000, 1/256 = 0x1C00, 0.70710678 = 0x39A8,
  // 0.92387953 = 0x3B64, 0.38268343 = 0x361F.
  const Case cases[] = {{1.0, 0x3C00},
                        {-1.0, 0xBC00},
                        {0.5, 0x3800},
                        {1.0 / 128, 0x2000},
                        {1.0 / 256, 0x1C00},
                        {0.70710678118654752, 0x39A8},
                        {0.92387953251128674, 0x3B64},
                        {0.38268343236508977, 0x361F}};
  for (const auto& c : cases)
    EXPECT_EQ(warpbeam::epic::fft::half_bits(c.x), c.bits) << c.x;
}

TEST(EpicBlockFft, FusedDataFlowReproducesTheTwoDimensionalDft) {
  check_fused_flow<64, 1>(48);
  check_fused_flow<64, 2>(64);
  check_fused_flow<128, 1>(47);
  check_fused_flow<128, 2>(64);
  check_fused_flow<128, 3>(30);  // two exchange phases (kH = 2) on the CPU
  check_fused_flow<256, 1>(49);
  check_fused_flow<256, 2>(3);
  check_fused_flow<256, 3>(64);
}

TEST(EpicBlockFft, FusedLayoutFitsTheH200SharedMemory) {
  using namespace warpbeam::epic::detail;
  constexpr std::size_t kOptin = 232448 - 512;  // 227 KiB (sm_90 opt-in) less static counters
  // A block's gather list holds at most nstand * taps * ceil(taps / C) entries (support 2).
  constexpr int kE64 = 256 * 9, kE128 = 256 * 3 * 2, kE256 = 256 * 3;
  EXPECT_LE((FusedLayout<64, 1, false>::smem(256, kE64).total), kOptin);
  EXPECT_LE((FusedLayout<64, 1, true>::smem(256, kE64).total), kOptin);
  EXPECT_LE((FusedLayout<64, 2, false>::smem(256, kE64).total), kOptin);
  EXPECT_GT((FusedLayout<64, 2, true>::smem(256, kE64).total), kOptin);  // not built
  EXPECT_LE((FusedLayout<128, 1, true>::smem(256, kE128).total), kOptin);
  EXPECT_LE((FusedLayout<128, 2, false>::smem(256, kE128).total), kOptin);
  EXPECT_GT((FusedLayout<128, 2, true>::smem(256, kE128).total), kOptin);  // not built
  EXPECT_LE((FusedLayout<256, 2, true>::smem(256, kE256).total), kOptin);
  EXPECT_LE((FusedLayout<256, 3, false>::smem(256, kE256).total), kOptin);
  EXPECT_GT((FusedLayout<256, 3, true>::smem(256, kE256).total), kOptin);  // not built
  EXPECT_EQ((FusedLayout<128, 1, false>::kThreads), 512);
  EXPECT_EQ((FusedLayout<256, 1, false>::kThreads), 512);
  EXPECT_EQ((FusedLayout<64, 1, false>::kThreads), 256);
  // Two exchange phases (half the exchange area) only where N = 128 needs the room.
  EXPECT_EQ((FusedLayout<64, 2, false>::kH), 1);
  EXPECT_EQ((FusedLayout<128, 1, false>::kH), 1);
  EXPECT_EQ((FusedLayout<128, 1, true>::kH), 2);
  EXPECT_EQ((FusedLayout<128, 2, false>::kH), 2);
  EXPECT_EQ((FusedLayout<256, 2, true>::kH), 1);
  // fused_variants() lists exactly the (N, XY* place, spectra per pass) that are built.
  for (int n : {64, 128, 256}) {
    const auto v = warpbeam::epic::fused_variants(n);
    EXPECT_EQ(v.size(), n == 256 ? 5u : 3u) << n;
    for (const auto& t : v)
      EXPECT_TRUE(t.spectra_per_pass >= 1 && t.spectra_per_pass <= 3 && t.time_split == 0);
  }
}

// Exchange-area bank pattern: within a half-warp (16 lanes, 8-byte accesses, 16 bank pairs),
// the slots a phase's stores and loads touch are pairwise different modulo 16.
template <class L>
void check_exchange_banks() {
  constexpr int Q = L::kQ, T = 16 / Q;  // transforms per half-warp
  using F = typename L::Fft;
  for (int k = 0; k < L::Exchange::kRows; ++k) {
    std::set<int> banks;
    for (int t = 0; t < T; ++t)
      for (int q = 0; q < Q; ++q)
        banks.insert((t * L::kScratchPerFft + F::exchange_index(q, k)) % 16);
    EXPECT_EQ(static_cast<int>(banks.size()), 16) << "N " << L::kN << " store row " << k;
  }
  for (int jj = 0; jj < L::Exchange::kJ; ++jj)
    for (int qq = 0; qq < Q; ++qq) {
      std::set<int> banks;
      for (int t = 0; t < T; ++t)
        for (int q = 0; q < Q; ++q)
          banks.insert((t * L::kScratchPerFft +
                        F::exchange_index(qq, F::second_pass_row(q, jj) % L::Exchange::kRows)) %
                       16);
      EXPECT_EQ(static_cast<int>(banks.size()), 16) << "N " << L::kN << " load " << qq;
    }
}

TEST(EpicBlockFft, ExchangeAreaHasNoBankConflicts) {
  using namespace warpbeam::epic::detail;
  check_exchange_banks<FusedLayout<64, 1, false>>();
  check_exchange_banks<FusedLayout<128, 1, false>>();
  check_exchange_banks<FusedLayout<128, 2, false>>();
  check_exchange_banks<FusedLayout<256, 1, false>>();
}
