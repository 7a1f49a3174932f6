#pragma once
// Internal: the register-level DFTs and the index map of the fused EPIC kernel's block FFT,
// written once for host and device so that tests/test_epic_fft.cpp checks on the CPU exactly
// the code the GPU runs (with std::complex<double> values in place of fp16 RRII pairs).
//
// Value type V: anything with the free functions (found by argument-dependent lookup) add, sub,
// mul_neg_i (x -i), mul_pos_i (x +i), mul_const(V, Root16<E>) (x exp(-2 pi i E / 16)) and a zero
// value V{}.
//
// An N-point DFT (N = 16 Q, Q = 4, 8 or 16) is spread over Q threads ("four-step", Bailey 1990):
//   X[k1 + 16 k2] = sum_q w_Q^(q k2) [ w_N^(q k1) sum_p w_16^(p k1) x[q + Q p] ]
// 1. thread q holds x[q + Q p], p = 0..15, and does a 16-point DFT in registers (dft16);
// 2. it multiplies output k1 by the twiddle w_N^(q k1);
// 3. the Q threads exchange through shared memory (exchange_index) so that thread q gets,
//    for each k1 in {q + Q j : j < 16/Q}, the values of all Q threads, and does Q-point DFTs;
//    its outputs are X[q + Q j + 16 k2], j < 16/Q, k2 < Q, in register j Q + k2 (output_index).
// Inputs known to be zero (the aperture fills only the first A of N cells) are pruned at
// compile time: dft16<V, M> treats x[p] for p >= M as zero.
// Forward transform: w_N = exp(-2 pi i / N).

#include <cstdint>

#if defined(__CUDACC__)
#define WB_HD __host__ __device__ __forceinline__
#define WB_UNROLL _Pragma("unroll")
#else
#define WB_HD inline
#define WB_UNROLL _Pragma("GCC unroll 16")
#endif

namespace warpbeam::epic::fft {

// cos and sin of 2 pi k / 16.
constexpr double kCos16[16] = {
    1.0,  0.92387953251128674,  0.70710678118654752,  0.38268343236508977,
    0.0,  -0.38268343236508977, -0.70710678118654752, -0.92387953251128674,
    -1.0, -0.92387953251128674, -0.70710678118654752, -0.38268343236508977,
    0.0,  0.38268343236508977,  0.70710678118654752,  0.92387953251128674};
constexpr double kSin16[16] = {
    0.0,  0.38268343236508977,  0.70710678118654752,  0.92387953251128674,
    1.0,  0.92387953251128674,  0.70710678118654752,  0.38268343236508977,
    0.0,  -0.38268343236508977, -0.70710678118654752, -0.92387953251128674,
    -1.0, -0.92387953251128674, -0.70710678118654752, -0.38268343236508977};

/// IEEE binary16 bits of x (round to nearest even), at compile time; |x| in normal range or 0.
constexpr std::uint16_t half_bits(double x) {
  std::uint16_t sign = 0;
  if (x < 0) {
    sign = 0x8000;
    x = -x;
  }
  if (!(x < 65520.0)) return static_cast<std::uint16_t>(sign | 0x7C00);  // overflow: infinity
  // Round x / unit to the nearest integer, ties to even.
  auto round_even = [](double v) {
    auto i = static_cast<std::uint32_t>(v);
    const double rest = v - i;
    if (rest > 0.5 || (rest == 0.5 && (i & 1))) ++i;
    return i;
  };
  if (x < 6.103515625e-05) {  // below 2^-14: subnormal, unit 2^-24 (1024 rounds up to normal)
    return static_cast<std::uint16_t>(sign | round_even(x * 16777216.0));
  }
  int e = 0;
  while (x >= 2) {
    x /= 2;
    ++e;
  }
  while (x < 1) {
    x *= 2;
    --e;
  }
  std::uint32_t mi = round_even((x - 1) * 1024);  // 10 fraction bits
  if (mi == 1024) {
    mi = 0;
    ++e;
  }
  return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | mi);
}

/// Tag of the constant twiddle w_16^E = exp(-2 pi i E / 16) = kCos16[E] - i kSin16[E].
template <int E>
struct Root16 {
  static constexpr int e = E;
};

/// x * w_16^e = x * exp(-2 pi i e / 16); multiples of pi/2 cost no multiplication.
template <int E, class V>
WB_HD V mul_root16(V x) {
  constexpr int e = ((E % 16) + 16) % 16;
  if constexpr (e == 0) {
    return x;
  } else if constexpr (e == 4) {
    return mul_neg_i(x);
  } else if constexpr (e == 8) {
    return sub(V{}, x);
  } else if constexpr (e == 12) {
    return mul_pos_i(x);
  } else {
    return mul_const(x, Root16<e>{});
  }
}

/// Number of nonzero inputs of a sub-DFT: inputs start, start + stride, ... (count of them)
/// that lie below m.
constexpr int nonzero(int m, int start, int stride, int count) {
  int n = 0;
  for (int i = 0; i < count; ++i)
    if (start + i * stride < m) ++n;
  return n;
}

/// In-place 4-point DFT of (a0, a1, a2, a3), of which only the first M are nonzero.
template <int M, class V>
WB_HD void dft4(V& a0, V& a1, V& a2, V& a3) {
  static_assert(M >= 0 && M <= 4);
  if constexpr (M == 0) {
    a0 = a1 = a2 = a3 = V{};
  } else if constexpr (M == 1) {
    a1 = a2 = a3 = a0;
  } else if constexpr (M == 2) {
    const V b = mul_neg_i(a1);
    const V x0 = add(a0, a1), x2 = sub(a0, a1), x1 = add(a0, b), x3 = sub(a0, b);
    a0 = x0, a1 = x1, a2 = x2, a3 = x3;
  } else {
    const V s02 = add(a0, a2), d02 = sub(a0, a2);
    const V s13 = M == 3 ? a1 : add(a1, a3);
    const V d13 = mul_neg_i(M == 3 ? a1 : sub(a1, a3));
    a0 = add(s02, s13);
    a2 = sub(s02, s13);
    a1 = add(d02, d13);
    a3 = sub(d02, d13);
  }
}

/// In-place 2-point DFT.
template <class V>
WB_HD void dft2(V& a0, V& a1) {
  const V s = add(a0, a1), d = sub(a0, a1);
  a0 = s, a1 = d;
}

/// In-place 8-point DFT (natural order in and out), inputs x[p] for p >= M taken as zero.
/// n = 2 n1 + n2, k = k1 + 4 k2: X[k1 + 4 k2] = sum_n2 w_2^(n2 k2) w_8^(n2 k1) DFT4_n1(x[2 n1 +
/// n2]).
template <int M, class V>
WB_HD void dft8(V (&x)[8]) {
  V y0[4] = {x[0], x[2], x[4], x[6]};
  V y1[4] = {x[1], x[3], x[5], x[7]};
  dft4<nonzero(M, 0, 2, 4)>(y0[0], y0[1], y0[2], y0[3]);
  dft4<nonzero(M, 1, 2, 4)>(y1[0], y1[1], y1[2], y1[3]);
  y1[1] = mul_root16<2>(y1[1]);
  y1[2] = mul_root16<4>(y1[2]);
  y1[3] = mul_root16<6>(y1[3]);
  WB_UNROLL
  for (int k1 = 0; k1 < 4; ++k1) {
    x[k1] = add(y0[k1], y1[k1]);
    x[k1 + 4] = sub(y0[k1], y1[k1]);
  }
}

/// In-place 16-point DFT (natural order in and out), inputs x[p] for p >= M taken as zero.
/// n = 4 n1 + n2, k = k1 + 4 k2: X[k1 + 4 k2] = sum_n2 w_4^(n2 k2) w_16^(n2 k1) DFT4_n1(x[4n1+n2]).
template <int M, class V>
WB_HD void dft16(V (&x)[16]) {
  V y[4][4];
  WB_UNROLL
  for (int n2 = 0; n2 < 4; ++n2)
    WB_UNROLL
  for (int n1 = 0; n1 < 4; ++n1)
    y[n2][n1] = x[4 * n1 + n2];
  dft4<nonzero(M, 0, 4, 4)>(y[0][0], y[0][1], y[0][2], y[0][3]);
  dft4<nonzero(M, 1, 4, 4)>(y[1][0], y[1][1], y[1][2], y[1][3]);
  dft4<nonzero(M, 2, 4, 4)>(y[2][0], y[2][1], y[2][2], y[2][3]);
  dft4<nonzero(M, 3, 4, 4)>(y[3][0], y[3][1], y[3][2], y[3][3]);
  y[1][1] = mul_root16<1>(y[1][1]);
  y[1][2] = mul_root16<2>(y[1][2]);
  y[1][3] = mul_root16<3>(y[1][3]);
  y[2][1] = mul_root16<2>(y[2][1]);
  y[2][2] = mul_root16<4>(y[2][2]);
  y[2][3] = mul_root16<6>(y[2][3]);
  y[3][1] = mul_root16<3>(y[3][1]);
  y[3][2] = mul_root16<6>(y[3][2]);
  y[3][3] = mul_root16<9>(y[3][3]);
  WB_UNROLL
  for (int k1 = 0; k1 < 4; ++k1) {
    V a0 = y[0][k1], a1 = y[1][k1], a2 = y[2][k1], a3 = y[3][k1];
    dft4<4>(a0, a1, a2, a3);
    x[k1] = a0, x[k1 + 4] = a1, x[k1 + 8] = a2, x[k1 + 12] = a3;
  }
}

/// In-place P-point DFT of x[0..P), P = 4, 8 or 16, all inputs nonzero.
template <int P, class V>
WB_HD void dft_small(V* x) {
  if constexpr (P == 4) {
    dft4<4>(x[0], x[1], x[2], x[3]);
  } else if constexpr (P == 8) {
    V t[8];
    WB_UNROLL
    for (int i = 0; i < 8; ++i)
      t[i] = x[i];
    dft8<8>(t);
    WB_UNROLL
    for (int i = 0; i < 8; ++i)
      x[i] = t[i];
  } else {
    static_assert(P == 16, "second-pass DFT sizes are 4, 8 and 16");
    V t[16];
    WB_UNROLL
    for (int i = 0; i < 16; ++i)
      t[i] = x[i];
    dft16<16>(t);
    WB_UNROLL
    for (int i = 0; i < 16; ++i)
      x[i] = t[i];
  }
}

/// The block FFT of N = 16 Q points over Q threads.
template <int N>
struct BlockFft {
  static constexpr int kN = N;
  static constexpr int kQ = N / 16;   // threads per transform
  static constexpr int kJ = 16 / kQ;  // second-pass DFTs per thread
  static constexpr int kL = kQ + 1;   // exchange row pitch (+1: no bank conflicts)
  static_assert(N == 64 || N == 128 || N == 256, "block FFT sizes are 64, 128 and 256");

  /// Element x[n] that thread q holds in register p: n = q + Q p.
  static constexpr int input_index(int q, int p) { return q + kQ * p; }
  /// Twiddle exponent of register k1 of thread q after the first pass (w_N^e).
  static constexpr int twiddle_exponent(int q, int k1) { return q * k1; }
  /// Exchange slot (within one transform's area of 16 kL values) of first-pass output k1 of
  /// thread q.
  static constexpr int exchange_index(int q, int k1) { return k1 * kL + q; }
  /// First-pass output row k1 that register group j of thread q transforms in the second pass.
  static constexpr int second_pass_row(int q, int j) { return q + kQ * j; }
  /// Output element X[k] in register r = j Q + k2 of thread q.
  static constexpr int output_index(int q, int r) {
    return second_pass_row(q, r / kQ) + 16 * (r % kQ);
  }
};

/// Pass 1 of the block FFT for thread q: 16-point DFT of its registers (inputs p >= M are zero),
/// twiddles w_N^(q k1) by `twiddle(V, exponent)`, and `store(exchange_index, V)` of every output.
template <int N, int M, class V, class Twiddle, class Store>
WB_HD void block_fft_pass1(V (&x)[16], int q, Twiddle&& twiddle, Store&& store) {
  using F = BlockFft<N>;
  dft16<M>(x);
  WB_UNROLL
  for (int k1 = 0; k1 < 16; ++k1) {
    const V v = k1 == 0 ? x[k1] : twiddle(x[k1], F::twiddle_exponent(q, k1));
    store(F::exchange_index(q, k1), v);
  }
}

/// Pass 1 kept in registers: the 16-point DFT (inputs p >= M are zero) and the twiddles
/// w_N^(q k1); register k1 then holds what exchange slot k1 of thread q receives. The exchange and
/// pass 2 follow in H phases (block_fft_exchange_store / block_fft_exchange_load).
template <int N, int M, class V, class Twiddle>
WB_HD void block_fft_pass1_regs(V (&x)[16], int q, Twiddle&& twiddle) {
  using F = BlockFft<N>;
  dft16<M>(x);
  WB_UNROLL
  for (int k1 = 1; k1 < 16; ++k1)
    x[k1] = twiddle(x[k1], F::twiddle_exponent(q, k1));
}

/// The exchange in H phases (H = 1, or 2 when Q <= 8), so that the exchange area holds 16 / H
/// first-pass rows, not 16: in phase h every thread stores its registers k1 in
/// [16 h / H, 16 (h + 1) / H) (store(slot, value), slot < 16 L / H), then, after a warp barrier,
/// loads the second-pass rows q + Q j that lie in that range, which are exactly the registers
/// j Q + k2 it stored in this phase (Q <= 8), so the outputs overwrite nothing still to be
/// stored. A barrier must also separate phase h's loads from phase h + 1's stores.
template <int N, int H>
struct BlockExchange {
  using F = BlockFft<N>;
  static constexpr int kRows = 16 / H;  // first-pass rows held per phase
  static constexpr int kJ = F::kJ / H;  // second-pass DFTs per thread per phase
  static constexpr int kSlots = kRows * F::kL;
  static_assert(H == 1 || (H == 2 && F::kQ <= 8), "two phases need Q <= 8");
};

template <int N, int H, class V, class Store>
WB_HD void block_fft_exchange_store(const V (&x)[16], int q, int h, Store&& store) {
  using E = BlockExchange<N, H>;
  WB_UNROLL
  for (int k = 0; k < E::kRows; ++k)
    store(BlockFft<N>::exchange_index(q, k), x[h * E::kRows + k]);
}

template <int N, int H, class V, class Load>
WB_HD void block_fft_exchange_load(V (&x)[16], int q, int h, Load&& load) {
  using F = BlockFft<N>;
  using E = BlockExchange<N, H>;
  WB_UNROLL
  for (int jj = 0; jj < E::kJ; ++jj) {
    const int j = h * E::kJ + jj;
    V t[F::kQ];
    WB_UNROLL
    for (int qq = 0; qq < F::kQ; ++qq)
      t[qq] = load(F::exchange_index(qq, F::second_pass_row(q, j) - h * E::kRows));
    dft_small<F::kQ>(t);
    WB_UNROLL
    for (int k2 = 0; k2 < F::kQ; ++k2)
      x[j * F::kQ + k2] = t[k2];
  }
}

/// Pass 2 for thread q (after every thread of the transform finished pass 1): `load` the
/// values of its second-pass rows and do the Q-point DFTs; register r then holds
/// X[BlockFft<N>::output_index(q, r)].
template <int N, class V, class Load>
WB_HD void block_fft_pass2(V (&x)[16], int q, Load&& load) {
  using F = BlockFft<N>;
  WB_UNROLL
  for (int j = 0; j < F::kJ; ++j) {
    V t[F::kQ];
    WB_UNROLL
    for (int qq = 0; qq < F::kQ; ++qq)
      t[qq] = load(F::exchange_index(qq, F::second_pass_row(q, j)));
    dft_small<F::kQ>(t);
    WB_UNROLL
    for (int k2 = 0; k2 < F::kQ; ++k2)
      x[j * F::kQ + k2] = t[k2];
  }
}

}  // namespace warpbeam::epic::fft
