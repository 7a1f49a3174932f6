// Beamformer on the GPU against the CPU path: random inputs (never zeros) of every sample type,
// odd antenna/beam/channel counts, masks, every tuning, output poisoned (NaN) first.
// Register-tiled (fp32): max|gpu - cpu| <= 1e-5 max|cpu| per output array (beam, pol);
// tensor cores (fp16): <= 1e-2, against a CPU run with the same fp16-rounded weights.
#include <cmath>

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
  for (auto alg : {Algorithm::register_tiled, Algorithm::tensor_core}) {
    c.algorithm = alg;
    check(c, 700, alg == Algorithm::tensor_core ? 1e-2 : 1e-5);
  }
  BeamformConfig o = small_config(SampleType::ci8, 1, 8, 24, 9, 64);
  o.encoding = Encoding::offset_binary;
  o.algorithm = Algorithm::register_tiled;
  check(o, 701, 1e-5);
}

TEST(BeamformGpu, TensorCoreMatchesCpu) {
  WB_REQUIRE_GPU();
  std::uint32_t seed = 900;
  for (auto type : kTypes)
    for (int npol : {1, 2})
      for (auto [nch, nant, nb, nt] : {std::array<std::int64_t, 4>{13, 19, 11, 72},
                                       std::array<std::int64_t, 4>{9, 70, 45, 200},
                                       std::array<std::int64_t, 4>{8, 64, 64, 128}}) {
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

TEST(BeamformGpu, AutomaticPicksTensorCoresForLargeN) {
  WB_REQUIRE_GPU();
  BeamformConfig c = small_config(SampleType::ci8, 2, 8, 256, 1024, 64);
  EXPECT_EQ(BeamformPlan(c, Backend::cuda).algorithm(), Algorithm::tensor_core);
  c = small_config(SampleType::ci4, 1, 8, 32, 32, 64);
  EXPECT_EQ(BeamformPlan(c, Backend::cuda).algorithm(), Algorithm::register_tiled);
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
