#pragma once
// Internal: the thread and shared-memory layout of the fused EPIC kernel (cuda_fused.cu), kept
// host-compilable so that tests/test_epic_fft.cpp can replay the kernel's data flow on the CPU.
//
// One channel is imaged by a cluster of C thread blocks; block `rank` owns image columns
// [rank NC, (rank + 1) NC) (NC = N / C) and keeps their accumulators. Per batch of SPB spectra:
//  1. unpack: ci4 -> calibrated fp16 voltages (RRII: re = (X.re, Y.re), im = (X.im, Y.im));
//  2. row stage: block `rank` transforms grid rows rank, rank + C, ... below the aperture height
//     R (rows >= R are zero and skipped); each row's 16-register inputs are gathered from the
//     antennas (columns >= A are zero and pruned); output column k is scaled by 1/N and stored
//     in the column buffer of the block that owns k (distributed shared memory);
//  3. cluster barrier (split: the voltages of batch b + 2 are unpacked between arrive and wait);
//  4. column stage: each block transforms its NC columns (rows >= A are zero and pruned) and
//     accumulates XX*, YY*, XY* of its pixels in fp32 registers (or XY* in shared memory).
// Every transform is a BlockFft<N> over Q = N / 16 threads.
#include <cstddef>

#include "epic/block_fft.hpp"
#include "epic/fused_config.hpp"

namespace warpbeam::epic::detail {

template <int N, int SPB, bool XYS>
struct FusedLayout {
  using Fft = fft::BlockFft<N>;
  static constexpr int kN = N;
  static constexpr int kC = fused_cluster(N);   // blocks per channel
  static constexpr int kA = fused_aperture(N);  // aperture rows/columns held
  static constexpr int kQ = Fft::kQ;            // threads per transform
  static constexpr int kNC = N / kC;            // image columns per block
  static constexpr int kThreads = kNC * kQ;     // one column per Q threads
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kPerWarp = 32 / kQ;  // transforms per warp
  static constexpr int kPin = kA / kQ;      // nonzero input registers of a transform
  static constexpr int kSpb = SPB;          // spectra per batch (per cluster barrier)
  static constexpr bool kXyShared = XYS;
  // Column buffer pitch (8-byte elements): NC + 16/Q makes a half-warp's loads (16/Q columns x
  // Q rows) hit 16 different bank pairs.
  static constexpr int kLdc = kNC + 16 / kQ;
  // The exchange runs in kH phases of 16 / kH first-pass rows (block_fft.hpp). Two phases
  // halve the exchange area (N = 128: 76 -> 38 KiB), which N = 128 needs to hold the gather
  // tables beside two spectra per pass or XY* in shared memory; elsewhere one phase, which keeps
  // fewer values live (ptxas: N = 128, 1 spectrum, XY* in registers spills 312 B with two).
  static constexpr int kH = N == 128 && (SPB >= 2 || XYS) ? 2 : 1;
  using Exchange = fft::BlockExchange<N, kH>;
  // Exchange area per transform: 16 / kH rows of pitch Q + 1, padded to = Q (mod 16) so that the
  // two (or four) transforms of a half-warp fall on different banks.
  static constexpr int kScratchPerFft = Exchange::kSlots + ((kQ - Exchange::kSlots) % 16 + 16) % 16;
  // Voltage buffers: batch b is unpacked into buffer b mod 3 two batches ahead, between the
  // cluster barrier's arrive and wait, so no block barrier is needed per batch.
  static constexpr int kAntBufs = 3;
  // Gather table (per block, in shared memory): block `rank` gathers local rows i (grid row
  // rank + C i), thread q of a row task the cells q + Q p, p < kPin; cell (i, q, p) has the
  // entries off[c] .. off[c + 1] of the block's list, c = gather_cell(i, q, p).
  static constexpr int kRowsPerRank = (kA + kC - 1) / kC;
  static constexpr int kGatherCells = kRowsPerRank * kQ * kPin;
  static constexpr int gather_cell(int i, int q, int p) { return (i * kQ + q) * kPin + p; }
  // XY* accumulators in shared memory: [NC][N + Q mod 16] float2.
  static constexpr int kXyPitch = N + (kQ % 16);
  static constexpr int kRowSlots = kThreads / kQ;  // row transforms in flight per block

  static_assert(kThreads % 32 == 0 && 32 % kQ == 0, "transforms must tile warps");
  static_assert(kPin >= 1 && kPin <= 16, "aperture must cover at least one register");

  // Column stage: thread -> (local column, q).
  static constexpr int column_of(int tid) { return tid / kQ; }
  static constexpr int q_of(int tid) { return tid % kQ; }
  // Row stage: thread -> row slot.
  static constexpr int slot_of(int tid) { return tid / kQ; }
  // Exchange area of the transform a thread belongs to (8-byte elements from scratch start).
  static constexpr int scratch_base(int tid) {
    return (tid / 32) * kPerWarp * kScratchPerFft + ((tid % 32) / kQ) * kScratchPerFft;
  }
  // Column buffer element of (batch buffer, spectrum in batch, row, local column).
  static constexpr int colbuf_index(int buf, int s, int row, int col) {
    return ((buf * SPB + s) * kA + row) * kLdc + col;
  }
  // Grid row of block `rank`'s i-th row task.
  static constexpr int row_of_task(int rank, int i) { return rank + kC * i; }
  // Rows of an aperture of height `rows` that block `rank` transforms.
  static constexpr int rows_of_rank(int rank, int rows) {
    return rows > rank ? (rows - rank + kC - 1) / kC : 0;
  }

  // Shared memory, byte offsets (all 16-byte aligned); nstand_pad = stands rounded up to 32.
  // max_entries: the largest gather list of any (channel, rank).
  struct Smem {
    std::size_t colbuf, scratch, antbuf, twiddle, autos, xy, goff, gent, total;
  };
  static constexpr std::size_t align16(std::size_t b) { return (b + 15) / 16 * 16; }
  static constexpr Smem smem(int nstand_pad, int max_entries) {
    Smem s{};
    std::size_t at = 0;
    s.colbuf = at;
    at += align16(std::size_t{8} * 2 * SPB * kA * kLdc);
    s.scratch = at;
    at += align16(std::size_t{8} * kWarps * kPerWarp * kScratchPerFft);
    s.antbuf = at;
    at += align16(std::size_t{8} * kAntBufs * SPB * nstand_pad);
    s.twiddle = at;
    at += align16(std::size_t{4} * N);
    s.autos = at;
    at += align16(std::size_t{16} * nstand_pad);
    s.xy = at;
    if (XYS) at += align16(std::size_t{8} * kNC * kXyPitch);
    s.goff = at;
    at += align16(std::size_t{2} * (kGatherCells + 1));
    s.gent = at;
    at += align16(std::size_t{4} * static_cast<std::size_t>(max_entries));
    s.total = at;
    return s;
  }
};

}  // namespace warpbeam::epic::detail
