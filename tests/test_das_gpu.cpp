// Delay-and-sum on the GPU against the CPU reference: every variant (BL, BI, fp16 storage, TC, TCW)
// on random data, output poisoned (NaN) first, on odd shapes and on the reference shapes U1 and U2
// (U2 compared on a subset of voxels, so that the CPU side stays within a few seconds).
// Tolerance per output array: max|gpu - cpu| <= 1e-5 max|cpu| (fp32), 1e-2 max|cpu| (fp16, TC).
#include <cmath>
#include <complex>

#include "test_util.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/device.hpp"

using namespace warpbeam;
using namespace warpbeam::das;
using cf = std::complex<float>;

namespace {

struct Variant {
  Algorithm algorithm;
  Storage storage;
  double tol;
  const char* name;
};

const Variant kVariants[] = {
    {Algorithm::baseline, Storage::fp32, 1e-5, "BL fp32"},
    {Algorithm::baseline, Storage::fp16, 1e-2, "BL fp16"},
    {Algorithm::batch_inner, Storage::fp32, 1e-5, "BI fp32"},
    {Algorithm::batch_inner, Storage::fp16, 1e-2, "BI fp16"},
    {Algorithm::tensor_core, Storage::fp16, 1e-2, "TC fp16"},
    {Algorithm::tensor_core_window, Storage::fp16, 1e-2, "TCW fp16"},
};

std::vector<Vec3> random_voxels(std::size_t n, std::uint32_t seed, double hw, double z0, double z1,
                                bool volume) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ux(-hw, hw), uz(z0, z1);
  std::vector<Vec3> v(n);
  for (auto& p : v)
    p = {ux(rng), volume ? ux(rng) : 0.0, uz(rng)};
  return v;
}

// Channel data of a config: floats (RF) or interleaved complex floats (IQ), uniform in [-1, 1).
std::vector<float> random_input(const DasConfig& c, std::uint32_t seed) {
  const std::size_t n = static_cast<std::size_t>(c.batch * c.nrx() * c.ntx() * c.nsamples) *
                        (c.signal == Signal::iq ? 2 : 1);
  std::vector<float> v(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull ^ seed;
  for (auto& f : v) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f = static_cast<float>((x * 0x2545f4914f6cdd1dull) >> 40) / 16777216.f * 2.f - 1.f;
  }
  return v;
}

void execute(const DasPlan& plan, const float* in, cf* out, Space space,
             const Stream* s = nullptr) {
  const View<cf, 2> o(out, plan.output_shape(), space);
  if (plan.config().signal == Signal::iq)
    plan.execute(View<const cf, 4>(reinterpret_cast<const cf*>(in), plan.input_shape(), space), o,
                 s);
  else
    plan.execute(View<const float, 4>(in, plan.input_shape(), space), o, s);
}

// The CPU reference, on all voxels or on `subset` (indices into c.voxels): [batch][subset].
std::vector<cf> cpu_reference(DasConfig c, const std::vector<float>& in,
                              const std::vector<std::int64_t>& subset) {
  if (!subset.empty()) {
    std::vector<Vec3> v;
    for (auto i : subset)
      v.push_back(c.voxels[i]);
    c.voxels = v;  // plane-wave transmit delays do not depend on the other voxels
  }
  c.storage = Storage::fp32;  // the CPU path computes in fp32; fp16 storage is a GPU option
  c.algorithm = Algorithm::automatic;
  DasPlan plan(c, Backend::cpu);
  std::vector<cf> out(static_cast<std::size_t>(c.batch * c.nvoxels()));
  execute(plan, in.data(), out.data(), Space::host);
  return out;
}

// Runs one variant on the GPU and compares with the CPU reference; reports the first mismatch.
void check_variant(const char* shape, DasConfig c, const Variant& v, const std::vector<float>& in,
                   const DeviceArray<float>& d_in, const std::vector<cf>& ref,
                   const std::vector<std::int64_t>& subset) {
  c.algorithm = v.algorithm;
  c.storage = v.storage;
  DasPlan plan(c, Backend::cuda);
  const std::int64_t nv = c.nvoxels(), B = c.batch;
  DeviceArray<cf> d_out(static_cast<std::size_t>(B * nv));
  std::vector<cf> got(d_out.size());
  for (int pass = 0; pass < 2; ++pass) {  // twice: the second run reuses the plan's scratch
    if (pass == 0) {
      device_memset(d_out.data(), 0xFF, d_out.bytes());
      execute(plan, d_in.data(), d_out.data(), Space::device);
    } else {
      Stream s;  // non-blocking: the poison goes on the same stream
      device_memset(d_out.data(), 0xFF, d_out.bytes(), &s);
      execute(plan, d_in.data(), d_out.data(), Space::device, &s);
      s.synchronize();
    }
    copy_bytes(got.data(), d_out.data(), d_out.bytes());
    const std::int64_t nref = subset.empty() ? nv : static_cast<std::int64_t>(subset.size());
    double maxref = 0, maxerr = 0;
    std::int64_t first_bad = -1, worst = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < nref; ++i)
        maxref = std::max(maxref, static_cast<double>(std::abs(ref[b * nref + i])));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < nref; ++i) {
        const std::int64_t n = subset.empty() ? i : subset[i];
        const cf g = got[b * nv + n], r = ref[b * nref + i];
        const double e = std::isfinite(g.real()) && std::isfinite(g.imag())
                             ? std::abs(std::complex<double>(g) - std::complex<double>(r))
                             : INFINITY;
        if (e > maxerr) {
          maxerr = e;
          worst = b * nref + i;
        }
        if (first_bad < 0 && e > v.tol * maxref) {
          first_bad = b * nref + i;
          ADD_FAILURE() << shape << " " << v.name << " pass " << pass
                        << ": first mismatch at frame " << b << " voxel " << n << ": got " << g
                        << ", expected " << r;
        }
      }
    std::printf("%-12s %-8s pass %d: max|gpu-cpu| / max|cpu| = %.3e (worst at %lld)\n", shape,
                v.name, pass, maxerr / maxref, static_cast<long long>(worst));
    EXPECT_LE(maxerr, v.tol * maxref) << shape << " " << v.name;
    EXPECT_GT(maxref, 0) << shape;
  }
}

void check_all(const char* shape, const DasConfig& c, std::uint32_t seed,
               const std::vector<std::int64_t>& subset = {}) {
  const auto in = random_input(c, seed);
  DeviceArray<float> d_in(in.size());
  copy_bytes(d_in.data(), in.data(), d_in.bytes());
  const auto ref = cpu_reference(c, in, subset);
  for (const auto& v : kVariants)
    check_variant(shape, c, v, in, d_in, ref, subset);
}

DasConfig odd_linear_iq() {
  DasConfig c;
  c.signal = Signal::iq;
  c.batch = 13;
  c.nsamples = 277;
  c.fs = 17e6;
  c.fc = 4.3e6;
  c.t0 = 1.7e-6;
  c.c = 1537;
  c.probe = linear_array(37, 0.27e-3);
  c.transmits = {Transmit::plane(-0.11), Transmit::plane(0.03), Transmit::plane(0.17)};
  c.voxels = random_voxels(211, 5, 5e-3, 3e-3, 10e-3, false);
  c.fnumber = 1.1;
  c.window = Window::hann;
  c.tx_weights = wbtest::random_floats(3 * 211, 6, 0.1f, 1.f);
  return c;
}

}  // namespace

TEST(DasGpu, OddShapeIqAllVariants) {
  WB_REQUIRE_GPU();
  check_all("odd-iq", odd_linear_iq(), 1);
}

TEST(DasGpu, OddShapeRfRowColumnDivergingAllVariants) {
  WB_REQUIRE_GPU();
  DasConfig c;
  c.signal = Signal::rf;
  c.batch = 7;
  c.nsamples = 333;
  c.fs = 31e6;
  c.fc = 5e6;
  c.probe = row_column_array(11, 0.31e-3);
  c.transmits = {Transmit::diverging({0.4e-3, 0, -6e-3}), Transmit::diverging({0, -0.7e-3, -9e-3})};
  c.voxels = random_voxels(389, 8, 2.5e-3, 2e-3, 7e-3, true);
  c.fnumber = 0.9;
  c.window = Window::tukey;
  c.tukey_alpha = 0.35;
  check_all("odd-rf-rca", c, 2);
}

TEST(DasGpu, OddShapeMatrixIqBatchOneAndThirtyThree) {
  WB_REQUIRE_GPU();
  for (std::int64_t batch : {1, 33}) {
    DasConfig c;
    c.signal = Signal::iq;
    c.batch = batch;
    c.nsamples = 190;
    c.fs = 7.3e6;
    c.fc = 3.1e6;
    c.probe = matrix_array(7, 5, 0.29e-3, 0.33e-3);
    c.transmits = {Transmit::plane(0.05, -0.08)};
    c.voxels = random_voxels(1001, 9, 3e-3, 4e-3, 15e-3, true);
    check_all(batch == 1 ? "odd-3d-b1" : "odd-3d-b33", c, 3);
  }
}

TEST(DasGpu, EveryTilingOfBlAndBiMatchesCpu) {
  WB_REQUIRE_GPU();
  for (Signal type : {Signal::iq, Signal::rf}) {
    DasConfig c = odd_linear_iq();
    c.signal = type;
    c.batch = 70;  // several batch tiles, a partial last one
    const auto in = random_input(c, 11);
    DeviceArray<float> d_in(in.size());
    copy_bytes(d_in.data(), in.data(), d_in.bytes());
    const auto ref = cpu_reference(c, in, {});
    for (const auto& v : kVariants) {
      if (v.algorithm == Algorithm::tensor_core) continue;
      const std::vector<int> tiles = v.algorithm == Algorithm::baseline ? std::vector<int>{4, 8, 16}
                                     : v.algorithm == Algorithm::batch_inner
                                         ? std::vector<int>{1, 2, 4, 8}
                                         : std::vector<int>{32, 64, 128};
      // BI with fp16 storage: float and double delays.
      const std::vector<int> bits =
          v.algorithm == Algorithm::batch_inner && v.storage == Storage::fp16
              ? std::vector<int>{32, 64}
              : std::vector<int>{0};
      for (int t : tiles)
        for (int threads : {64, 256})
          for (int b : bits) {
            DasConfig ct = c;
            if (v.algorithm == Algorithm::baseline)
              ct.tuning.batch_tile = t;
            else if (v.algorithm == Algorithm::batch_inner)
              ct.tuning.bi_repeats = t;
            else
              ct.tuning.warp_frames = t;
            ct.tuning.threads_per_block = threads;
            ct.tuning.delay_bits = b;
            check_variant(type == Signal::iq ? "tiles-iq" : "tiles-rf", ct, v, in, d_in, ref, {});
          }
    }
  }
}

// TCW's receiver split (warps sharing a tile's receivers, sums added in shared memory), on a
// grid with partial tiles and a last block with warps past the last tile, and on U1 (aperture-
// limited receiver ranges that differ between tiles).
TEST(DasGpu, TcwReceiverSplitMatchesCpu) {
  WB_REQUIRE_GPU();
  const Variant tcw = kVariants[std::size(kVariants) - 1];
  ASSERT_EQ(tcw.algorithm, Algorithm::tensor_core_window);
  struct Shape {
    const char* name;
    DasConfig c;
  };
  DasConfig odd = odd_linear_iq();
  odd.batch = 70;
  DasConfig u1 = reference_config("U1");
  u1.voxels.resize(5000);  // 312.5 tiles
  for (const Shape& shape : {Shape{"split-odd", odd}, Shape{"split-U1", u1}}) {
    const auto in = random_input(shape.c, 12);
    DeviceArray<float> d_in(in.size());
    copy_bytes(d_in.data(), in.data(), d_in.bytes());
    const auto ref = cpu_reference(shape.c, in, {});
    for (int wf : {32, 128})
      for (auto [threads, split] : {std::pair{64, 2}, std::pair{128, 4}, std::pair{256, 8},
                                    std::pair{256, 2}, std::pair{192, 1}, std::pair{96, 0}}) {
        SCOPED_TRACE(::testing::Message()
                     << "warp frames " << wf << ", " << threads << " threads, split " << split);
        DasConfig ct = shape.c;
        ct.tuning.warp_frames = wf;
        ct.tuning.threads_per_block = threads;
        ct.tuning.rx_split = split;
        check_variant(shape.name, ct, tcw, in, d_in, ref, {});
      }
  }
}

// U1: PyMUST's rotating disk (251 x 251 pixels, 128 rx, 334 IQ samples, 32 frames, f-number 1).
TEST(DasGpu, ReferenceShapeU1AllVariants) {
  WB_REQUIRE_GPU();
  check_all("U1", reference_config("U1"), 21);
}

// U2: 32 x 32 matrix, 512 IQ samples, 64^3 voxels, batch 128, full aperture. The GPU computes the
// whole volume; the CPU a spread subset of 1500 voxels.
TEST(DasGpu, ReferenceShapeU2AllVariants) {
  WB_REQUIRE_GPU();
  const DasConfig c = reference_config("U2");
  std::vector<std::int64_t> subset;
  for (std::int64_t i = 0; i < 1500; ++i)
    subset.push_back((i * 174763) % c.nvoxels());
  check_all("U2", c, 22, subset);
}

// A regular 3-D grid whose sides are not multiples of the tensor-core window kernel's tiles
// (11 x 5 x 9 voxels: tiles with empty slots), two steered plane waves, Tukey apodization, a
// batch of 37 (a partial block of 32 frames).
TEST(DasGpu, OddGridWithPartialTilesAllVariants) {
  WB_REQUIRE_GPU();
  DasConfig c;
  c.signal = Signal::iq;
  c.batch = 37;
  c.nsamples = 251;
  c.fs = 12e6;
  c.fc = 3.3e6;
  c.t0 = 0.5e-6;
  c.probe = matrix_array(9, 6, 0.3e-3, 0.3e-3);
  c.transmits = {Transmit::plane(0.06, 0.02), Transmit::plane(-0.09, 0.0)};
  c.voxels = parse_grid("-1.5e-3:1.5e-3:3e-4,-0.6e-3:0.6e-3:3e-4,6e-3:10e-3:5e-4").voxels();
  c.fnumber = 1.3;
  c.window = Window::tukey;
  c.tukey_alpha = 0.6;
  check_all("odd-grid", c, 31);
}

// Voxels placed on the decision boundaries of the delay model: on the f-number aperture edge of
// an element (to 1e-12 relative) and at exactly the first and the last sample. The float delays
// of the fp16 kernels must defer to double there; one wrong term among 24 receivers is an error
// of several per cent, far above the 1e-2 tolerance.
TEST(DasGpu, BoundaryVoxelsMatchCpuInEveryVariant) {
  WB_REQUIRE_GPU();
  DasConfig c;
  c.signal = Signal::iq;
  c.batch = 24;
  c.nsamples = 300;
  c.fs = 20e6;
  c.fc = 5e6;
  c.c = 1540;
  c.probe = linear_array(24, 0.3e-3);
  c.transmits = {Transmit::plane(0)};
  c.fnumber = 1.5;
  c.t0 = 10e-6;
  const double first_z = c.t0 * c.c / 2, last_z = (c.t0 + (c.nsamples - 1) / c.fs) * c.c / 2;
  for (std::size_t m = 0; m < c.probe.size(); m += 3) {
    const double xm = c.probe.positions[m][0];
    for (double z : {9e-3, 11e-3, 14e-3})
      for (double eps : {-1e-12, 0.0, 1e-12}) {
        const double rho = z / (2 * *c.fnumber) * (1 + eps);
        c.voxels.push_back({xm + rho, 0, z});
        c.voxels.push_back({xm - rho, 0, z});
      }
    for (double eps : {-1e-12, 0.0, 1e-12}) {
      c.voxels.push_back({xm, 0, first_z * (1 + eps)});
      c.voxels.push_back({xm, 0, last_z * (1 + eps)});
    }
  }
  check_all("boundary", c, 41);
}

// Algorithm::automatic resolves as automatic_algorithm() says and matches the CPU, for fp32 and
// fp16 storage and small and large batches.
TEST(DasGpu, AutomaticPicksAVerifiedVariant) {
  WB_REQUIRE_GPU();
  for (Storage st : {Storage::fp32, Storage::fp16})
    for (std::int64_t batch : {3, 40}) {
      DasConfig c = odd_linear_iq();
      c.batch = batch;
      c.storage = st;
      c.algorithm = Algorithm::automatic;
      DasPlan plan(c, Backend::cuda);
      EXPECT_EQ(plan.algorithm(), automatic_algorithm(c));
      const auto in = random_input(c, 51);
      DeviceArray<float> d_in(in.size());
      copy_bytes(d_in.data(), in.data(), d_in.bytes());
      const auto ref = cpu_reference(c, in, {});
      const Variant v{Algorithm::automatic, st, st == Storage::fp32 ? 1e-5 : 1e-2,
                      st == Storage::fp32 ? "auto fp32" : "auto fp16"};
      check_variant("auto", c, v, in, d_in, ref, {});
    }
}

// The two halves of execute(): layout change and kernel, timed by events, same numbers.
TEST(DasGpu, ExecuteTimedSplitsLayoutAndKernel) {
  WB_REQUIRE_GPU();
  DasConfig c = odd_linear_iq();
  c.batch = 40;
  const auto in = random_input(c, 61);
  DeviceArray<float> d_in(in.size());
  copy_bytes(d_in.data(), in.data(), d_in.bytes());
  for (Algorithm a : {Algorithm::baseline, Algorithm::batch_inner, Algorithm::tensor_core_window}) {
    c.algorithm = a;
    c.storage = a == Algorithm::baseline ? Storage::fp32 : Storage::fp16;
    DasPlan plan(c, Backend::cuda);
    DeviceArray<cf> d1(static_cast<std::size_t>(c.batch * c.nvoxels())), d2(d1.size());
    execute(plan, d_in.data(), d1.data(), Space::device);
    device_memset(d2.data(), 0xFF, d2.bytes());
    const auto t = plan.execute_timed(View<const cf, 4>(reinterpret_cast<const cf*>(d_in.data()),
                                                        plan.input_shape(), Space::device),
                                      View<cf, 2>(d2.data(), plan.output_shape(), Space::device));
    EXPECT_GE(t.layout_ms, 0.0);
    EXPECT_GT(t.kernel_ms, 0.0);
    std::vector<cf> a1(d1.size()), a2(d2.size());
    copy_bytes(a1.data(), d1.data(), d1.bytes());
    copy_bytes(a2.data(), d2.data(), d2.bytes());
    EXPECT_EQ(a1, a2) << to_string(a);
  }
  DasPlan cpu(odd_linear_iq(), Backend::cpu);
  std::vector<cf> hi(static_cast<std::size_t>(cpu.input_shape()[0] * cpu.input_shape()[1] *
                                              cpu.input_shape()[2] * cpu.input_shape()[3])),
      ho(static_cast<std::size_t>(cpu.output_shape()[0] * cpu.output_shape()[1]));
  EXPECT_THROW(cpu.execute_timed(View<const cf, 4>(hi.data(), cpu.input_shape()),
                                 View<cf, 2>(ho.data(), cpu.output_shape())),
               Error);
}
