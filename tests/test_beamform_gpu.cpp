// Beamformer on the GPU against the CPU path: random inputs (never zeros) of every sample type,
// odd antenna/beam/channel counts, masks, every tuning, output poisoned (NaN) first.
// Register-tiled (fp32): max|gpu - cpu| <= 1e-5 max|cpu| per output array (beam, pol);
// tensor cores (fp16): <= 1e-2, against a CPU run with the same fp16-rounded weights.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "beamform/int8.hpp"
#include "beamform_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/device.hpp"

using namespace warpbeam;
using namespace warpbeam::beamform;
using namespace bftest;

namespace {

struct Case {
  BeamformConfig config;
  std::string label;
};

std::string describe(const BeamformConfig& c) {
  std::ostringstream s;
  s << to_string(c.sample_type) << " nchans " << c.nchans << " nant " << c.nantennas << " npol "
    << c.npol << " nbeams " << c.nbeams << " nsamples " << c.nsamples << " integration "
    << c.integration << (c.sum_pols ? " sum_pols" : "")
    << (c.output == OutputKind::voltage ? " voltage" : " power") << " algorithm "
    << to_string(c.algorithm) << " tuning " << c.tuning.beams_per_thread << "x"
    << c.tuning.samples_per_thread << "/" << c.tuning.threads_per_block;
  return s.str();
}

/// Runs `c` on the GPU (output poisoned) and on the CPU with the GPU plan's effective weights;
/// returns the comparison at `tol`.
Comparison run_both(BeamformConfig c, std::uint32_t seed, double tol, int mask_every = 3) {
  const auto in = random_input(c, seed);
  const auto w = random_weights(c, seed + 1, mask_every);
  BeamformPlan gpu(c, Backend::cuda);
  gpu.set_weights(weights_view(c, w));
  DeviceArray<std::uint8_t> d_in(in.size());
  DeviceArray<float> d_out(static_cast<std::size_t>(output_floats(c)));
  copy_bytes(d_in.data(), in.data(), in.size());
  device_memset(d_out.data(), 0xFF, d_out.bytes());  // NaN: every output must be written
  gpu.execute(View<const std::uint8_t, 3>(d_in.data(), c.input_shape(), Space::device),
              View<float, 4>(d_out.data(), c.output_shape(), Space::device));
  std::vector<float> got(d_out.size());
  copy_bytes(got.data(), d_out.data(), d_out.bytes());

  BeamformConfig cc = c;
  cc.algorithm = Algorithm::automatic;
  BeamformPlan cpu(cc, Backend::cpu);
  const auto& ew = gpu.effective_weights();
  cpu.set_weights(
      View<const std::complex<float>, 4>(ew.data(), {c.nchans, c.npol, c.nbeams, c.nantennas}));
  std::vector<float> ref(got.size());
  cpu.execute(input_view(c, in), output_view(c, ref));
  return compare(got, ref, c, tol);
}

void check(const BeamformConfig& c, std::uint32_t seed, double tol, int mask_every = 3) {
  const auto r = run_both(c, seed, tol, mask_every);
  EXPECT_GT(r.max_ref, 0) << describe(c);
  EXPECT_LE(r.max_err, tol * r.max_ref) << describe(c) << "\n  " << r.first;
  std::printf("  %-110s max err %.3g of max %.3g\n", describe(c).c_str(), r.max_err, r.max_ref);
}

const SampleType kTypes[] = {SampleType::ci4, SampleType::ci8, SampleType::cf16, SampleType::cf32};

}  // namespace

TEST(BeamformGpu, RegisterTiledMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 100;
  for (auto type : kTypes)
    for (int npol : {1, 2}) {
      // Odd shapes: partial channel tiles, partial antenna groups, partial beam groups, time
      // not a multiple of the tile; and an aligned one (word loads) with 2 antenna groups.
      for (auto [nch, nant, nb, nt] : {std::array<std::int64_t, 4>{13, 19, 11, 72},
                                       std::array<std::int64_t, 4>{9, 37, 33, 200},
                                       std::array<std::int64_t, 4>{16, 32, 32, 256},
                                       std::array<std::int64_t, 4>{3, 1, 1, 5}}) {
        BeamformConfig c = small_config(type, npol, static_cast<int>(nch), static_cast<int>(nant),
                                        static_cast<int>(nb), nt);
        c.algorithm = Algorithm::register_tiled;
        check(c, seed++, 1e-5, nant > 2 ? 3 : 0);
      }
    }
}

TEST(BeamformGpu, RegisterTiledOutputsMatchCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 300;
  for (auto type : {SampleType::ci4, SampleType::cf32})
    for (int npol : {1, 2})
      for (int variant = 0; variant < 4; ++variant) {
        BeamformConfig c = small_config(type, npol, 11, 21, 17, 96);
        c.algorithm = Algorithm::register_tiled;
        if (variant == 0) c.output = OutputKind::voltage;
        if (variant == 1) c.integration = 2;                      // within a thread: plain stores
        if (variant == 2) c.integration = 12, c.sum_pols = true;  // across threads: atomics
        if (variant == 3) c.integration = 96;                     // across blocks
        check(c, seed++, 1e-5);
      }
}

TEST(BeamformGpu, EveryTuningMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 500;
  for (int bpt : {8, 16, 32})
    for (int tpt : {2, 4})
      for (int threads : {128, 256}) {
        if (bpt == 32 && tpt == 4) continue;  // not compiled (256 accumulator registers)
        BeamformConfig c = small_config(SampleType::ci4, 1, 17, 35, 41, 300);
        c.algorithm = Algorithm::register_tiled;
        c.tuning = {bpt, tpt, threads};
        check(c, seed++, 1e-5);
      }
}

TEST(BeamformGpu, LevelsTableMatchesCpu) {
  WB_REQUIRE_GPU();
  BeamformConfig c = small_config(SampleType::ci4, 2, 8, 24, 9, 64);
  c.levels.resize(16);
  for (int i = 0; i < 16; ++i)
    c.levels[static_cast<std::size_t>(i)] = std::pow(1.25f, static_cast<float>(i)) - 5;
  for (auto alg : {Algorithm::register_tiled, Algorithm::register_stream, Algorithm::tensor_core,
                   Algorithm::cublas_fp16}) {
    c.algorithm = alg;
    check(c, 700, uses_fp16(alg) ? 1e-2 : 1e-5);
  }
  BeamformConfig o = small_config(SampleType::ci8, 1, 8, 24, 9, 64);
  o.encoding = Encoding::offset_binary;
  for (auto alg : {Algorithm::register_tiled, Algorithm::register_stream, Algorithm::cublas_fp16}) {
    o.algorithm = alg;
    check(o, 701, uses_fp16(alg) ? 1e-2 : 1e-5);
  }
}

TEST(BeamformGpu, TensorCoreMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 900;
  for (auto type : kTypes)
    for (int npol : {1, 2})
      for (auto [nch, nant, nb, nt] : {std::array<std::int64_t, 4>{13, 19, 11, 72},
                                       std::array<std::int64_t, 4>{9, 70, 45, 200},
                                       std::array<std::int64_t, 4>{8, 64, 64, 128},
                                       std::array<std::int64_t, 4>{6, 40, 130, 160}}) {
        BeamformConfig c = small_config(type, npol, static_cast<int>(nch), static_cast<int>(nant),
                                        static_cast<int>(nb), nt);
        c.algorithm = Algorithm::tensor_core;
        check(c, seed++, 1e-2);
      }
}

TEST(BeamformGpu, TensorCoreIntegrationAndPolSumMatchCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 1100;
  for (int n : {1, 2, 8, 64})
    for (bool sum : {false, true}) {
      BeamformConfig c = small_config(SampleType::ci8, 2, 10, 40, 37, 192);
      c.algorithm = Algorithm::tensor_core;
      c.integration = n;
      c.sum_pols = sum;
      check(c, seed++, 1e-2);
    }
}

TEST(BeamformGpu, AutomaticPicksCublasForLargeNAndRegisterStreamOtherwise) {
  WB_REQUIRE_GPU();
  BeamformConfig c = small_config(SampleType::ci8, 2, 8, 256, 1024, 64);
  EXPECT_EQ(BeamformPlan(c, Backend::cuda).algorithm(), Algorithm::cublas_fp16);
  c = small_config(SampleType::ci4, 1, 8, 32, 32, 64);
  EXPECT_EQ(BeamformPlan(c, Backend::cuda).algorithm(), Algorithm::register_stream);
  EXPECT_EQ(BeamformPlan(c, Backend::cuda).tuning().beams_per_thread, 16);
}

TEST(BeamformGpu, StreamedExecuteMatchesSynchronous) {
  WB_REQUIRE_GPU();
  // Weights set on a stream and an asynchronous execute on it: the same result after sync.
  BeamformConfig c = small_config(SampleType::ci4, 1, 16, 32, 20, 128);
  const auto in = random_input(c, 1);
  const auto w = random_weights(c, 2, 0);
  Stream stream;
  BeamformPlan gpu(c, Backend::cuda);
  gpu.set_weights(weights_view(c, w), &stream);
  DeviceArray<std::uint8_t> d_in(in.size());
  DeviceArray<float> d_out(static_cast<std::size_t>(output_floats(c)));
  copy_bytes(d_in.data(), in.data(), in.size(), &stream);
  device_memset(d_out.data(), 0xFF, d_out.bytes(), &stream);
  gpu.execute(View<const std::uint8_t, 3>(d_in.data(), c.input_shape(), Space::device),
              View<float, 4>(d_out.data(), c.output_shape(), Space::device), &stream);
  std::vector<float> got(d_out.size());
  copy_bytes(got.data(), d_out.data(), d_out.bytes(), &stream);
  stream.synchronize();
  BeamformPlan cpu(c, Backend::cpu);
  cpu.set_weights(weights_view(c, w));
  std::vector<float> ref(got.size());
  cpu.execute(input_view(c, in), output_view(c, ref));
  const auto r = compare(got, ref, c);
  EXPECT_LE(r.max_err, 1e-5 * r.max_ref) << r.first;
}

// ---- register-stream (fp32, round 2) ----

TEST(BeamformGpu, RegisterStreamMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 1300;
  for (auto type : kTypes)
    for (int npol : {1, 2})
      // Odd shapes (partial channel tiles, partial antenna chunks, unaligned rows, partial beam
      // groups, time not a multiple of the tile), the aligned B1-like one, a single antenna.
      for (auto [nch, nant, nb, nt] : {std::array<std::int64_t, 4>{13, 19, 11, 72},
                                       std::array<std::int64_t, 4>{9, 37, 33, 200},
                                       std::array<std::int64_t, 4>{16, 32, 32, 256},
                                       std::array<std::int64_t, 4>{3, 1, 1, 5}}) {
        BeamformConfig c = small_config(type, npol, static_cast<int>(nch), static_cast<int>(nant),
                                        static_cast<int>(nb), nt);
        c.algorithm = Algorithm::register_stream;
        check(c, seed++, 1e-5, nant > 2 ? 3 : 0);
      }
}

TEST(BeamformGpu, RegisterStreamEveryTuningAndOutputMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 1500;
  for (auto [bpt, tpt] : {std::array<int, 2>{32, 1}, {16, 1}, {16, 2}})
    for (auto type : {SampleType::ci4, SampleType::cf32})
      for (int npol : {1, 2})
        for (int variant = 0; variant < 5; ++variant) {
          BeamformConfig c = small_config(type, npol, 11, 21, 37, 300);
          c.algorithm = Algorithm::register_stream;
          c.tuning = {bpt, tpt, 0, 0, 0};
          if (variant == 1) c.output = OutputKind::voltage;
          if (variant == 2) c.integration = 4;                      // bins inside a tile
          if (variant == 3) c.integration = 50, c.sum_pols = true;  // bins across tiles
          if (variant == 4) c.integration = 300;                    // one bin: one block
          check(c, seed++, 1e-5);
        }
}

TEST(BeamformGpu, RegisterStreamWeightWindowsMatchCpu) {
  WB_REQUIRE_GPU();
  // More antennas than the 64 KB weight window holds (reloaded per tile): 70 dual-pol
  // antennas summed (32 beams x 2 pols x 8 channels x 8 B = 4 KB per antenna).
  std::uint32_t seed = 1700;
  for (auto type : {SampleType::ci4, SampleType::ci8, SampleType::cf16}) {
    BeamformConfig c = small_config(type, 2, 10, 70, 40, 160);
    c.algorithm = Algorithm::register_stream;
    c.sum_pols = true;
    c.integration = 5;
    check(c, seed++, 1e-5);
    c.sum_pols = false;
    c.integration = 1;
    c.tuning = {16, 2, 0, 0, 0};
    check(c, seed++, 1e-5);
  }
}

// ---- cublas-fp16 (round 2) ----

TEST(BeamformGpu, CublasMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 1900;
  for (int bits : {16, 32})
    for (auto type : kTypes)
      for (int npol : {1, 2})
        for (auto [nch, nant, nb, nt] : {std::array<std::int64_t, 4>{13, 19, 11, 72},
                                         std::array<std::int64_t, 4>{9, 70, 45, 200},
                                         std::array<std::int64_t, 4>{3, 1, 1, 5}}) {
          BeamformConfig c = small_config(type, npol, static_cast<int>(nch), static_cast<int>(nant),
                                          static_cast<int>(nb), nt);
          c.algorithm = Algorithm::cublas_fp16;
          c.tuning.gemm_output_bits = bits;
          check(c, seed++, 1e-2, nant > 2 ? 3 : 0);
        }
}

TEST(BeamformGpu, CublasOutputsAndChunksMatchCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 2100;
  for (int bits : {16, 32})
    for (int variant = 0; variant < 5; ++variant) {
      BeamformConfig c = small_config(SampleType::ci8, 2, 13, 40, 37, 96);
      c.algorithm = Algorithm::cublas_fp16;
      c.tuning.gemm_output_bits = bits;
      c.tuning.gemm_chunk_channels = 3;  // 5 rounds, the last partial
      if (variant == 1) c.output = OutputKind::voltage;
      if (variant == 2) c.integration = 3;
      if (variant == 3) c.integration = 12, c.sum_pols = true;
      if (variant == 4) c.integration = 96;
      check(c, seed++, 1e-2);
    }
}

TEST(BeamformGpu, NewVariantsAreBitwiseReproducible) {
  WB_REQUIRE_GPU();
  // Power summed over pols and integrated across threads: round 1's atomics made the last bits
  // vary; register-stream and cublas-fp16 add in a fixed order.
  for (auto alg : {Algorithm::register_stream, Algorithm::cublas_fp16}) {
    BeamformConfig c = small_config(SampleType::ci4, 2, 24, 48, 40, 512);
    c.algorithm = alg;
    c.sum_pols = true;
    c.integration = 16;
    const auto in = random_input(c, 5);
    const auto w = random_weights(c, 6, 0);
    BeamformPlan gpu(c, Backend::cuda);
    gpu.set_weights(weights_view(c, w));
    DeviceArray<std::uint8_t> d_in(in.size());
    DeviceArray<float> d_out(static_cast<std::size_t>(output_floats(c)));
    copy_bytes(d_in.data(), in.data(), in.size());
    std::vector<float> first(d_out.size()), again(d_out.size());
    for (auto* dst : {&first, &again}) {
      device_memset(d_out.data(), 0xFF, d_out.bytes());
      gpu.execute(View<const std::uint8_t, 3>(d_in.data(), c.input_shape(), Space::device),
                  View<float, 4>(d_out.data(), c.output_shape(), Space::device));
      copy_bytes(dst->data(), d_out.data(), d_out.bytes());
    }
    EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0)
        << to_string(alg);
    EXPECT_TRUE(std::isfinite(first[0]) && first[0] > 0) << to_string(alg);
  }
}

TEST(BeamformGpu, CublasStreamedExecuteMatchesCpu) {
  WB_REQUIRE_GPU();
  BeamformConfig c = small_config(SampleType::ci4, 2, 16, 64, 130, 128);
  c.algorithm = Algorithm::cublas_fp16;
  const auto in = random_input(c, 11);
  const auto w = random_weights(c, 12, 0);
  Stream stream;
  BeamformPlan gpu(c, Backend::cuda);
  gpu.set_weights(weights_view(c, w), &stream);
  DeviceArray<std::uint8_t> d_in(in.size());
  DeviceArray<float> d_out(static_cast<std::size_t>(output_floats(c)));
  copy_bytes(d_in.data(), in.data(), in.size(), &stream);
  device_memset(d_out.data(), 0xFF, d_out.bytes(), &stream);
  gpu.execute(View<const std::uint8_t, 3>(d_in.data(), c.input_shape(), Space::device),
              View<float, 4>(d_out.data(), c.output_shape(), Space::device), &stream);
  std::vector<float> got(d_out.size());
  copy_bytes(got.data(), d_out.data(), d_out.bytes(), &stream);
  stream.synchronize();
  BeamformConfig cc = c;
  cc.algorithm = Algorithm::automatic;
  BeamformPlan cpu(cc, Backend::cpu);
  const auto& ew = gpu.effective_weights();
  cpu.set_weights(
      View<const std::complex<float>, 4>(ew.data(), {c.nchans, c.npol, c.nbeams, c.nantennas}));
  std::vector<float> ref(got.size());
  cpu.execute(input_view(c, in), output_view(c, ref));
  const auto r = compare(got, ref, c, 1e-2);
  EXPECT_LE(r.max_err, 1e-2 * r.max_ref) << r.first;
}

// ---- tensor-int8 (issue 17) ----

namespace {

/// Runs `c` (tensor_int8 or tensor_int8_stream) on the GPU with weights `w`, output poisoned,
/// input at `offset` bytes past an aligned allocation (offset 1: the byte-wise loads); returns the
/// output and the plan's effective weights.
std::vector<float> run_int8(const BeamformConfig& c, const std::vector<std::uint8_t>& in,
                            const std::vector<std::complex<float>>& w, std::size_t offset = 0,
                            std::vector<std::complex<float>>* effective = nullptr) {
  BeamformPlan gpu(c, Backend::cuda);
  EXPECT_EQ(gpu.algorithm(), c.algorithm);
  gpu.set_weights(weights_view(c, w));
  DeviceArray<std::uint8_t> d_in(in.size() + 16);
  DeviceArray<float> d_out(static_cast<std::size_t>(output_floats(c)));
  copy_bytes(d_in.data() + offset, in.data(), in.size());
  device_memset(d_out.data(), 0xFF, d_out.bytes());  // NaN: every output must be written
  gpu.execute(View<const std::uint8_t, 3>(d_in.data() + offset, c.input_shape(), Space::device),
              View<float, 4>(d_out.data(), c.output_shape(), Space::device));
  std::vector<float> got(d_out.size());
  copy_bytes(got.data(), d_out.data(), d_out.bytes());
  if (effective) *effective = gpu.effective_weights();
  return got;
}

/// The configurations the int8 tests cover: odd shapes (partial channel, beam, antenna and time
/// tiles; an odd number of 4-channel groups; 3 tiles of 64 beams), the B1 block shape (32 beams:
/// 2 warps along beams) and a 64-beam one (4 warps), both sample types and pol counts, the pol
/// sum, integrations 1, 4 and 64, and the table path (offset binary, integer custom levels).
/// Integration 1 without the pol sum runs the GEMM kernel (cuda_tensor_int8_gemm.cu), the rest
/// the general one (cuda_tensor_int8.cu).
std::vector<BeamformConfig> int8_cases() {
  std::vector<BeamformConfig> v;
  for (auto type : {SampleType::ci4, SampleType::ci8})
    for (int npol : {1, 2})
      for (auto [nch, nant, nb, nt] : {std::array<std::int64_t, 4>{13, 19, 11, 72},
                                       std::array<std::int64_t, 4>{9, 70, 45, 200},
                                       std::array<std::int64_t, 4>{16, 32, 32, 256},
                                       std::array<std::int64_t, 4>{8, 64, 64, 128},
                                       std::array<std::int64_t, 4>{6, 40, 130, 160}})
        for (int variant = 0; variant < 3; ++variant) {
          BeamformConfig c = small_config(type, npol, static_cast<int>(nch), static_cast<int>(nant),
                                          static_cast<int>(nb), nt);
          c.algorithm = Algorithm::tensor_int8;
          c.sum_pols = npol == 2 && variant > 0;
          c.integration = variant == 0 ? 1 : (variant == 1 ? 4 : 8);
          if (nt % c.integration != 0) c.integration = 1;
          v.push_back(c);
        }
  BeamformConfig c = small_config(SampleType::ci4, 2, 10, 40, 37, 192);
  c.algorithm = Algorithm::tensor_int8;
  c.integration = 64;
  c.sum_pols = true;
  v.push_back(c);
  c.encoding = Encoding::offset_binary;
  c.integration = 1;
  v.push_back(c);
  c = small_config(SampleType::ci8, 1, 12, 33, 20, 64);
  c.algorithm = Algorithm::tensor_int8;
  c.levels.resize(256);
  for (int i = 0; i < 256; ++i)  // integers, not two's complement: the table path
    c.levels[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 255 - 127);
  v.push_back(c);
  return v;
}

}  // namespace

// The kernel computes exactly the host emulation of its arithmetic (int8.hpp: exact integer sums,
// then float(P) * fl(s^2)): every output bit for bit, aligned and unaligned input; the GEMM
// kernel's 256-thread block on the aligned input, its 128-thread one on the unaligned.
TEST(BeamformGpu, TensorInt8EqualsItsEmulationExactly) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 2000;
  for (const char* gemm : {"0", "1"})
    for (BeamformConfig c : int8_cases())
      for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
        ::setenv("WARPBEAM_INT8_GEMM", gemm, 1);
        c.tuning.threads_per_block = offset == 0 ? 256 : 128;
        const auto in = random_input(c, seed);
        const auto w = random_weights(c, seed + 1, 3);
        ++seed;
        const auto got = run_int8(c, in, w, offset);
        std::vector<float> want(got.size(), NAN);
        beamform::detail::emulate_int8(c, beamform::detail::quantize_int8(c, w.data()), in.data(),
                                       want.data());
        std::size_t bad = got.size();
        for (std::size_t i = 0; i < got.size() && bad == got.size(); ++i)
          if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) bad = i;
        EXPECT_EQ(bad, got.size()) << describe(c) << " offset " << offset << ", "
                                   << c.tuning.threads_per_block << " threads: first difference at "
                                   << bad << ": got " << (bad < got.size() ? got[bad] : 0.f)
                                   << ", emulation " << (bad < got.size() ? want[bad] : 0.f);
        EXPECT_GT(*std::max_element(want.begin(), want.end()), 0) << describe(c);
        ::unsetenv("WARPBEAM_INT8_GEMM");
      }
}

// The general kernel computes the GEMM kernel's cases exactly too (WARPBEAM_INT8_GEMM=0 forces
// it, as the benchmarks do to compare the two).
TEST(BeamformGpu, TensorInt8GeneralKernelEqualsItsEmulationWhereTheGemmKernelRuns) {
  WB_REQUIRE_GPU();
  ::setenv("WARPBEAM_INT8_GEMM", "0", 1);
  std::uint32_t seed = 2300;
  int ran = 0;
  for (const BeamformConfig& c : int8_cases()) {
    if (!(c.integration == 1 && !(c.sum_pols && c.npol == 2))) continue;
    const auto in = random_input(c, seed);
    const auto w = random_weights(c, seed + 1, 3);
    ++seed;
    const auto got = run_int8(c, in, w, 1);
    std::vector<float> want(got.size(), NAN);
    beamform::detail::emulate_int8(c, beamform::detail::quantize_int8(c, w.data()), in.data(),
                                   want.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << describe(c);
    ++ran;
  }
  ::unsetenv("WARPBEAM_INT8_GEMM");
  EXPECT_GE(ran, 10);
}

// Against the fp32 CPU path: with the plan's effective weights (scale * q) the two differ by fp32
// rounding only (<= 1e-5 of the maximum, as the fp32 kernels); with the unquantised weights by the
// int8 weights' error, within the bound BeamformInt8.PowerErrorOfInt8WeightsIsBounded establishes
// on the CPU (1e-2 of the maximum).
namespace {
void expect_int8_within_bounds_of_cpu(const BeamformConfig& c, const std::vector<std::uint8_t>& in,
                                      const std::vector<std::complex<float>>& w) {
  std::vector<std::complex<float>> ew;
  const auto got = run_int8(c, in, w, 0, &ew);
  BeamformConfig cc = c;
  cc.algorithm = Algorithm::automatic;
  const std::vector<std::complex<float>>* both[] = {&ew, &w};
  for (const auto* weights : both) {
    BeamformPlan cpu(cc, Backend::cpu);
    cpu.set_weights(weights_view(c, *weights));
    std::vector<float> ref(got.size());
    cpu.execute(input_view(c, in), output_view(c, ref));
    const double tol = weights == &ew ? 1e-5 : 1e-2;
    const auto r = compare(got, ref, c, tol);
    EXPECT_LE(r.max_err, tol * r.max_ref)
        << describe(c) << (weights == &ew ? " (effective weights)" : " (fp32 weights)") << "\n  "
        << r.first;
    EXPECT_GT(r.max_ref, 0);
  }
}
}  // namespace

// tensor-int8 against the fp32 CPU path within those bounds.
TEST(BeamformGpu, TensorInt8MatchesCpuWithinItsBounds) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 2500;
  for (const BeamformConfig& c : int8_cases()) {
    const auto in = random_input(c, seed);
    const auto w = random_weights(c, seed + 1, 3);
    ++seed;
    expect_int8_within_bounds_of_cpu(c, in, w);
  }
}

// int8 weights only when the caller allows them, and then tensor-int8-stream where it fits (B1's
// shape); tensor-int8 never by itself (not measured on the shapes it would be picked for).
TEST(BeamformGpu, AutomaticPicksInt8WeightsOnlyWhenAllowed) {
  WB_REQUIRE_GPU();
  BeamformConfig small = small_config(SampleType::ci4, 1, 8, 32, 32, 64);
  BeamformConfig large = small_config(SampleType::ci8, 2, 8, 256, 1024, 64);
  EXPECT_EQ(BeamformPlan(small, Backend::cuda).algorithm(), Algorithm::register_stream);
  EXPECT_EQ(BeamformPlan(large, Backend::cuda).algorithm(), Algorithm::cublas_fp16);
  small.int8_weights = large.int8_weights = true;
  EXPECT_EQ(BeamformPlan(small, Backend::cuda).algorithm(), Algorithm::tensor_int8_stream);
  EXPECT_EQ(BeamformPlan(large, Backend::cuda).algorithm(), Algorithm::cublas_fp16);
  // What it cannot form exactly is refused on the GPU too.
  BeamformConfig c = small_config(SampleType::cf16, 1);
  c.algorithm = Algorithm::tensor_int8;
  EXPECT_THROW(BeamformPlan(c, Backend::cuda), Error);
}

// ---- tensor-int8-stream (issue 17: the streaming int8 kernel for B1; written without a GPU) ----

namespace {

/// Shapes tensor_int8_stream accepts, each aimed at one of its edges: fewer antennas than its 32
/// (unaligned rows 19 and 7 bytes: the byte-wise loads; 24: a whole 8-byte group past the row),
/// channels not a multiple of its 16-channel tile (13, 20, 5, 18; 20 also the float4 path with a
/// partial tile, 18 and 13 the scalar stores), beams past one group of 32 (45, 64) or fewer (11),
/// samples not a multiple of its 32-sample chunk (72, 1000, 200), blocks streaming several chunks
/// through the ring (1000, 512), both pols kept apart, every integration 2 .. 32, offset binary
/// (the table path) and the smallest shape.
std::vector<BeamformConfig> int8_stream_odd_cases() {
  std::vector<BeamformConfig> v;
  auto add = [&](int npol, int nch, int nant, int nb, std::int64_t nt, int integration = 1) {
    BeamformConfig c = small_config(SampleType::ci4, npol, nch, nant, nb, nt);
    c.algorithm = Algorithm::tensor_int8_stream;
    c.integration = integration;
    v.push_back(c);
    return &v.back();
  };
  add(1, 13, 19, 11, 72);
  add(1, 20, 24, 45, 1000);
  add(1, 1, 1, 1, 3);
  add(1, 16, 32, 32, 96)->encoding = Encoding::offset_binary;
  add(2, 18, 32, 32, 200);
  add(2, 5, 7, 64, 64);
  add(2, 16, 16, 33, 96)->encoding = Encoding::offset_binary;
  for (int n : {2, 4, 8, 16, 32})
    add(1, 16, 32, 32, 512, n);
  add(2, 13, 19, 40, 160, 16);
  add(1, 20, 32, 32, 96, 32);
  return v;
}

/// `c` through tensor_int8_stream at input offset 0 and 1 against the host emulation (every
/// output bit), and at offset 0 against tensor_int8 (the same arithmetic: bit-identical too).
void expect_stream_exact(const BeamformConfig& c, std::uint32_t seed) {
  const auto in = random_input(c, seed);
  const auto w = random_weights(c, seed + 1, 3);
  std::vector<float> want(static_cast<std::size_t>(output_floats(c)), NAN);
  beamform::detail::emulate_int8(c, beamform::detail::quantize_int8(c, w.data()), in.data(),
                                 want.data());
  EXPECT_GT(*std::max_element(want.begin(), want.end()), 0) << describe(c);
  auto first_difference = [](const std::vector<float>& a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return a.size();
  };
  for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
    const auto got = run_int8(c, in, w, offset);
    const std::size_t bad = first_difference(got, want);
    // The index as [beam][pol][time][chan], for the first run's diagnosis.
    const auto ch = static_cast<std::int64_t>(bad) % c.nchans;
    const auto to = static_cast<std::int64_t>(bad) / c.nchans % c.nsamples_out();
    const auto bp = static_cast<std::int64_t>(bad) / (c.nchans * c.nsamples_out());
    EXPECT_EQ(bad, got.size()) << describe(c) << " offset " << offset << ": first difference at "
                               << bad << " (beam " << bp / c.nout_pols() << " pol "
                               << bp % c.nout_pols() << " time " << to << " chan " << ch
                               << "): got " << (bad < got.size() ? got[bad] : 0.f) << ", emulation "
                               << (bad < got.size() ? want[bad] : 0.f);
    if (offset == 0) {
      BeamformConfig ci = c;
      ci.algorithm = Algorithm::tensor_int8;
      const auto other = run_int8(ci, in, w);
      EXPECT_EQ(first_difference(got, other), got.size()) << describe(c) << " vs tensor-int8";
    }
  }
}

}  // namespace

// The odd shapes, every output bit for bit the emulation's (small: compute-sanitizer's test).
TEST(BeamformGpu, TensorInt8StreamOddShapesEqualTheEmulationExactly) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 3000;
  for (const BeamformConfig& c : int8_stream_odd_cases())
    expect_stream_exact(c, seed += 2);
}

// B1's shape (32 antennas, 1 pol, ci4, 32 beams, 8192 samples: 16 chunks a block) on 128 of its
// 1024 channels (the per-channel work is the same; the bench run checks all 1024 by sampling).
TEST(BeamformGpu, TensorInt8StreamB1ShapeEqualsTheEmulationExactly) {
  WB_REQUIRE_GPU();
  BeamformConfig c = small_config(SampleType::ci4, 1, 128, 32, 32, 8192);
  c.algorithm = Algorithm::tensor_int8_stream;
  expect_stream_exact(c, 3500);
}

// Against the fp32 CPU path, as TensorInt8MatchesCpuWithinItsBounds: 1e-5 of the maximum with the
// effective weights, 1e-2 (the int8 weights' bound) with the unquantised ones.
TEST(BeamformGpu, TensorInt8StreamMatchesCpuWithinItsBounds) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 3600;
  std::vector<BeamformConfig> cases = int8_stream_odd_cases();
  cases.push_back(small_config(SampleType::ci4, 1, 32, 32, 32, 1024));
  cases.back().algorithm = Algorithm::tensor_int8_stream;
  for (const BeamformConfig& c : cases) {
    const auto in = random_input(c, seed);
    const auto w = random_weights(c, seed + 1, 3);
    seed += 2;
    expect_int8_within_bounds_of_cpu(c, in, w);
  }
}

// Not picked unless int8 weights are allowed (AutomaticPicksInt8WeightsOnlyWhenAllowed), and what
// it cannot do is refused on the GPU too, before any kernel runs.
TEST(BeamformGpu, TensorInt8StreamIsNotPickedByDefaultAndRefusesWhatItCannotDo) {
  WB_REQUIRE_GPU();
  EXPECT_NE(
      BeamformPlan(small_config(SampleType::ci4, 1, 16, 32, 32, 64), Backend::cuda).algorithm(),
      Algorithm::tensor_int8_stream);
  BeamformConfig c = small_config(SampleType::ci4, 1, 16, 33, 32, 64);
  c.algorithm = Algorithm::tensor_int8_stream;
  EXPECT_THROW(BeamformPlan(c, Backend::cuda), Error);
  c = small_config(SampleType::ci4, 2, 16, 32, 32, 64);
  c.algorithm = Algorithm::tensor_int8_stream;
  c.sum_pols = true;
  EXPECT_THROW(BeamformPlan(c, Backend::cuda), Error);
}
