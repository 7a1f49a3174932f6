// Dedispersion on the GPU against the CPU path (random inputs, output poisoned first), every
// kernel variant and several tile sizes on shapes chosen to hit partial tiles, both foff signs,
// the killmask, the packed kernel's lane flush and the shared-memory fitting; plus the host-side
// tile geometry, the quantised output and the autotune cache (CPU tests, no device needed).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "dedisp/tile_geometry.hpp"
#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"

using namespace warpbeam;
using namespace warpbeam::dedisp;

namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(rng());
  return b;
}

// ------------------------------------------------------------------------------------------
// Shapes: channel, sample and DM counts that are not multiples of any tile, both foff signs.
// ------------------------------------------------------------------------------------------
struct Shape {
  std::string name;
  int nchans;
  double fch1, foff, tsamp;
  std::vector<float> dms;
  std::int64_t nout;  // valid output samples wanted (nsamples_in = max delay + nout)
  double zap_fraction = 0;
};

std::vector<Shape> shapes() {
  return {
      {"77ch", 77, 1500, -1.3, 256e-6, dm_list_linear(0, 300, 7.3), 2345},
      {"1ch", 1, 1400, -1.0, 1e-4, dm_list_linear(0, 50, 10), 1000},
      {"130ch-foff+", 130, 1200, 0.7, 64e-6,
       dm_list_dedisp(0, 150, 40, 1.25, 130, 64e-6, 1200, 0.7), 2999},
      // > 256 channels: the packed kernel flushes its 16-bit lanes more than once; zapped channels.
      {"513ch-killmask", 513, 1500, -0.5859375, 128e-6, dm_list_linear(0, 120, 3.7), 1777, 0.1},
      // DM steps so coarse that a 4-DM tile's span does not fit shared memory: the DM tile halves.
      {"wide-span", 100, 400, -1.0, 1e-3, {0, 1000, 2000, 3000}, 1400},
      {"2000dm", 64, 800, -0.390625, 1e-4, dm_list_linear(0, 199.9, 0.1), 1111},
  };
}

DedispersionConfig make_config(const Shape& s, int nbits, bool is_signed) {
  DedispersionConfig c;
  c.nchans = s.nchans;
  c.fch1_mhz = s.fch1;
  c.foff_mhz = s.foff;
  c.tsamp_s = s.tsamp;
  c.nbits = nbits;
  c.is_signed = is_signed;
  c.dms = s.dms;
  if (s.zap_fraction > 0) {
    std::mt19937 rng(77);
    c.killmask.assign(static_cast<std::size_t>(s.nchans), 1);
    for (auto& k : c.killmask)
      k = std::uniform_real_distribution<double>(0, 1)(rng) < s.zap_fraction ? 0 : 1;
  }
  const auto d = delay_table(c);
  c.nsamples_in = *std::max_element(d.begin(), d.end()) + s.nout;
  return c;
}

// Random input of the config's shape: all bit patterns for integer samples, floats in [-5, 5).
std::vector<std::uint8_t> random_input(const DedispersionConfig& c, std::uint32_t seed) {
  const auto row =
      static_cast<std::size_t>((static_cast<std::int64_t>(c.nchans) * c.nbits + 7) / 8);
  auto in = random_bytes(row * static_cast<std::size_t>(c.nsamples_in), seed);
  if (c.nbits == 32) {
    auto f = wbtest::random_floats(in.size() / 4, seed + 1, -5, 5);
    std::memcpy(in.data(), f.data(), in.size());
  }
  return in;
}

std::vector<float> run_cpu(const DedispersionConfig& c, const std::vector<std::uint8_t>& in) {
  DedispersionPlan cpu(c, Backend::cpu);
  std::vector<float> out(static_cast<std::size_t>(cpu.ndms() * cpu.nsamples_out()));
  cpu.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, cpu.row_bytes()}),
              View<float, 2>(out.data(), {cpu.ndms(), cpu.nsamples_out()}));
  return out;
}

// Runs `plan` on the device with the output poisoned to NaN (0xFF bytes) first.
std::vector<float> run_gpu(const DedispersionPlan& plan, const std::vector<std::uint8_t>& in,
                           const Stream* stream = nullptr) {
  DeviceArray<std::uint8_t> d_in(in.size());
  DeviceArray<float> d_out(static_cast<std::size_t>(plan.ndms() * plan.nsamples_out()));
  copy_bytes(d_in.data(), in.data(), in.size());
  device_memset(d_out.data(), 0xFF, d_out.bytes());
  plan.execute(View<const std::uint8_t, 2>(
                   d_in.data(), {plan.config().nsamples_in, plan.row_bytes()}, Space::device),
               View<float, 2>(d_out.data(), {plan.ndms(), plan.nsamples_out()}, Space::device),
               stream);
  if (stream) stream->synchronize();
  std::vector<float> out(d_out.size());
  copy_bytes(out.data(), d_out.data(), d_out.bytes());
  return out;
}

// max|gpu - cpu| <= 1e-5 * max|cpu| for every DM series; reports the first failing series with
// its first mismatch (DM trial, sample, got, expected) and its max error. NaN never passes.
::testing::AssertionResult series_match(const std::vector<float>& ref,
                                        const std::vector<float>& got, std::int64_t ndm,
                                        std::int64_t nout) {
  if (ref.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::int64_t d = 0; d < ndm; ++d) {
    float maxref = 0, maxerr = 0;
    std::int64_t first = -1;
    for (std::int64_t t = 0; t < nout; ++t)
      maxref = std::max(maxref, std::abs(ref[d * nout + t]));
    const float tol = 1e-5f * maxref;
    for (std::int64_t t = 0; t < nout; ++t) {
      const auto i = d * nout + t;
      const float err = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - ref[i]);
      maxerr = std::max(maxerr, err);
      if (err > tol && first < 0) first = t;
    }
    if (first >= 0)
      return ::testing::AssertionFailure()
             << "DM trial " << d << ": first mismatch at sample " << first << ": got "
             << got[d * nout + first] << ", expected " << ref[d * nout + first] << "; max error "
             << maxerr << " > " << tol << " (1e-5 x max|cpu| = " << maxref << ")";
  }
  return ::testing::AssertionSuccess();
}

std::string tuning_name(const CudaTuning& t) {
  return "{dms " + std::to_string(t.dms_per_block) + ", samples " +
         std::to_string(t.samples_per_thread) + ", threads " + std::to_string(t.threads_per_block) +
         ", channels " + std::to_string(t.channels_per_stage) + "}";
}

// Tile sizes every tiled variant is checked with: the default, odd DM tiles, 64 lanes along
// time, the longest and shortest register tiles, one channel per stage, 256 channels per stage
// (the packed kernel then flushes after every stage).
const std::vector<CudaTuning> kTunings = {
    {0, 0, 0, 0},      {3, 8, 96, 5},   {8, 32, 512, 0},
    {32, 16, 1024, 1}, {5, 16, 320, 7}, {1, 8, 32, 256},
};

// For every shape and nbits (signed on alternate shapes), the CPU result against `algorithm`
// with every tuning in `tunings`.
void check_algorithm(Algorithm algorithm, const std::vector<CudaTuning>& tunings,
                     const std::vector<int>& nbits_list) {
  int shape_index = 0;
  for (const Shape& s : shapes()) {
    for (int nbits : nbits_list) {
      const bool is_signed = (shape_index % 2 == 1) && nbits >= 2 && nbits <= 16;
      DedispersionConfig c = make_config(s, nbits, is_signed);
      const auto in = random_input(c, 1000 * shape_index + nbits);
      const auto ref = run_cpu(c, in);
      for (const CudaTuning& t : tunings) {
        c.algorithm = algorithm;
        c.tuning = t;
        DedispersionPlan gpu(c, Backend::cuda);
        const auto got = run_gpu(gpu, in);
        ASSERT_TRUE(series_match(ref, got, gpu.ndms(), gpu.nsamples_out()))
            << "shape " << s.name << ", nbits " << nbits << (is_signed ? " signed" : "")
            << ", algorithm " << to_string(algorithm) << ", tuning " << tuning_name(t) << " ("
            << gpu.kernel_description() << ")";
      }
    }
    ++shape_index;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------
// GPU against CPU
// ------------------------------------------------------------------------------------------

TEST(DedispGpu, MatchesCpuOnRandomInput) {
  WB_REQUIRE_GPU();
  for (int nbits : {1, 2, 4, 8, 32}) {
    DedispersionConfig c;
    c.nchans = 77;
    c.fch1_mhz = 1500;
    c.foff_mhz = -1.3;
    c.tsamp_s = 256e-6;
    c.nbits = nbits;
    c.dms = dm_list_linear(0, 300, 7.3);
    c.nsamples_in = 3001;
    const auto in = random_input(c, 5 + nbits);
    const auto ref = run_cpu(c, in);
    DedispersionPlan gpu(c, Backend::cuda);
    ASSERT_TRUE(series_match(ref, run_gpu(gpu, in), gpu.ndms(), gpu.nsamples_out()))
        << "nbits " << nbits << ", " << gpu.kernel_description();
  }
}

// The CUDA plans report their device workspace, and the estimate made before a plan exists (tile
// tables counted for one-DM tiles) bounds it, within 4x (the tables of one-DM tiles are at most
// three times those of any tile), so that budgets are not wasted. Every
// variant, every shape (the wide-span shape halves its DM tile), channel-major float input.
TEST(DedispGpu, WorkspaceIsBoundedByTheEstimate) {
  WB_REQUIRE_GPU();
  for (const Shape& s : shapes())
    for (Algorithm a : {Algorithm::direct, Algorithm::tiled, Algorithm::packed})
      for (bool channel_major : {false, true}) {
        if (channel_major && (a != Algorithm::tiled || s.zap_fraction > 0)) continue;
        DedispersionConfig c = make_config(s, channel_major ? 32 : 8, false);
        c.algorithm = a;
        c.channel_major = channel_major;
        const DedispersionPlan plan(c, Backend::cuda);
        const Workspace w = plan.workspace();
        const Workspace e = DedispersionPlan::estimate_workspace(c, Backend::cuda);
        SCOPED_TRACE(s.name + " " + to_string(a) + (channel_major ? " channel-major" : ""));
        EXPECT_GT(w.device_bytes, 0);
        EXPECT_GE(e.device_bytes, w.device_bytes);
        EXPECT_LE(e.device_bytes, 4 * w.device_bytes);
        EXPECT_EQ(w.host_bytes, 0);
      }
}

TEST(DedispGpu, DirectMatchesCpu) {
  WB_REQUIRE_GPU();
  check_algorithm(Algorithm::direct, {{}}, {1, 2, 4, 8, 16, 32});
}

TEST(DedispGpu, TiledMatchesCpuWithEveryTuning) {
  WB_REQUIRE_GPU();
  check_algorithm(Algorithm::tiled, kTunings, {1, 2, 4, 8, 16, 32});
}

TEST(DedispGpu, PackedMatchesCpuWithEveryTuning) {
  WB_REQUIRE_GPU();
  check_algorithm(Algorithm::packed, kTunings, {1, 2, 4, 8});
}

TEST(DedispGpu, AutomaticPicksPackedForNarrowSamplesAndTiledOtherwise) {
  WB_REQUIRE_GPU();
  check_algorithm(Algorithm::automatic, {{}}, {4, 16});
  const Shape s = shapes()[0];
  EXPECT_EQ(DedispersionPlan(make_config(s, 8, false), Backend::cuda).algorithm(),
            Algorithm::packed);
  EXPECT_EQ(DedispersionPlan(make_config(s, 16, false), Backend::cuda).algorithm(),
            Algorithm::tiled);
  EXPECT_EQ(DedispersionPlan(make_config(s, 32, false), Backend::cuda).algorithm(),
            Algorithm::tiled);
}

TEST(DedispGpu, PackedSumsAreExactAtFullScale) {
  // Every code at its largest magnitude: a lane flushed too late would overflow into its
  // neighbour. 1000 channels (four flush groups) with 1 and 256 channels per stage.
  WB_REQUIRE_GPU();
  struct Case {
    int nbits;
    bool is_signed;
    std::uint8_t byte;
    float value;  // per channel
  };
  for (const Case& k :
       {Case{8, false, 0xFF, 255}, Case{8, true, 0x80, -128}, Case{8, true, 0x7F, 127},
        Case{4, false, 0xFF, 15}, Case{2, true, 0xAA, -2}, Case{1, false, 0xFF, 1}}) {
    DedispersionConfig c;
    c.nchans = 1000;
    c.fch1_mhz = 1500;
    c.foff_mhz = -0.3;
    c.tsamp_s = 64e-6;
    c.nbits = k.nbits;
    c.is_signed = k.is_signed;
    c.dms = dm_list_linear(0, 40, 2.5);
    const auto d = delay_table(c);
    c.nsamples_in = *std::max_element(d.begin(), d.end()) + 1500;
    c.algorithm = Algorithm::packed;
    const std::vector<std::uint8_t> in(
        static_cast<std::size_t>(c.nsamples_in * ((c.nchans * c.nbits + 7) / 8)), k.byte);
    for (int cc : {1, 256, 0}) {
      c.tuning = {0, 0, 0, cc};
      DedispersionPlan gpu(c, Backend::cuda);
      const auto got = run_gpu(gpu, in);
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], k.value * c.nchans)
            << "nbits " << k.nbits << " byte " << int(k.byte) << " channels per stage " << cc
            << " at output " << i << " (" << gpu.kernel_description() << ")";
    }
  }
}

// Channel-major float32 input (the GPU search's path): rows [nchans][stride] with NaN past
// nsamples_in (they must feed no valid output) and the zapped channels' rows zeroed, against the
// CPU with the killmask.
TEST(DedispGpu, ChannelMajorInputMatchesTheCpu) {
  WB_REQUIRE_GPU();
  int shape_index = 0;
  for (const Shape& s : shapes()) {
    const DedispersionConfig c = make_config(s, 32, false);
    const auto in = random_input(c, 300 + shape_index++);
    const auto ref = run_cpu(c, in);
    const std::int64_t n = c.nsamples_in, stride = n + 37;
    std::vector<float> rows(static_cast<std::size_t>(c.nchans * stride), NAN);
    const auto* f = reinterpret_cast<const float*>(in.data());
    for (int ch = 0; ch < c.nchans; ++ch)
      for (std::int64_t t = 0; t < n; ++t)
        rows[ch * stride + t] = c.killmask.empty() || c.killmask[ch] ? f[t * c.nchans + ch] : 0.0f;
    for (const CudaTuning& t : kTunings) {
      DedispersionConfig cm = c;
      cm.killmask.clear();
      cm.channel_major = true;
      cm.tuning = t;
      DedispersionPlan gpu(cm, Backend::cuda);
      EXPECT_EQ(gpu.algorithm(), Algorithm::tiled);
      DeviceArray<float> d_in(rows.size()),
          d_out(static_cast<std::size_t>(gpu.ndms() * gpu.nsamples_out()));
      copy_bytes(d_in.data(), rows.data(), d_in.bytes());
      device_memset(d_out.data(), 0xFF, d_out.bytes());
      View<const float, 2> vin(d_in.data(), {c.nchans, n}, Space::device);
      vin.strides = {stride, 1};
      Stream stream;
      gpu.execute_channel_major(
          vin, View<float, 2>(d_out.data(), {gpu.ndms(), gpu.nsamples_out()}, Space::device),
          &stream);
      stream.synchronize();
      std::vector<float> got(d_out.size());
      copy_bytes(got.data(), d_out.data(), d_out.bytes());
      ASSERT_TRUE(series_match(ref, got, gpu.ndms(), gpu.nsamples_out()))
          << "shape " << s.name << ", tuning " << tuning_name(t) << " (" << gpu.kernel_description()
          << ")";
      // The packed-input entry point refuses a channel-major plan, and a bad stride is caught.
      EXPECT_THROW(gpu.execute(View<const std::uint8_t, 2>(), View<float, 2>()), Error);
      vin.strides = {n - 1, 1};
      EXPECT_THROW(
          gpu.execute_channel_major(
              vin, View<float, 2>(d_out.data(), {gpu.ndms(), gpu.nsamples_out()}, Space::device)),
          Error);
    }
  }
}

TEST(DedispGpu, AllChannelsMaskedGivesZeros) {
  WB_REQUIRE_GPU();
  DedispersionConfig c = make_config(shapes()[0], 8, false);
  c.killmask.assign(static_cast<std::size_t>(c.nchans), 0);
  const auto in = random_input(c, 3);
  for (Algorithm a : {Algorithm::direct, Algorithm::tiled, Algorithm::packed}) {
    c.algorithm = a;
    DedispersionPlan gpu(c, Backend::cuda);
    for (float v : run_gpu(gpu, in))
      ASSERT_EQ(v, 0.0f) << to_string(a);
  }
}

TEST(DedispGpu, RunsAsynchronouslyOnTwoStreams) {
  // Two plans (one scratch each) on two streams at once, as a streaming pipeline runs them.
  WB_REQUIRE_GPU();
  DedispersionConfig c = make_config(shapes()[3], 8, false);
  const auto in1 = random_input(c, 11), in2 = random_input(c, 12);
  const auto ref1 = run_cpu(c, in1), ref2 = run_cpu(c, in2);
  DedispersionPlan p1(c, Backend::cuda), p2(c, Backend::cuda);
  Stream s1, s2;
  DeviceArray<std::uint8_t> a(in1.size()), b(in2.size());
  DeviceArray<float> oa(ref1.size()), ob(ref2.size());
  copy_bytes(a.data(), in1.data(), in1.size());
  copy_bytes(b.data(), in2.data(), in2.size());
  device_memset(oa.data(), 0xFF, oa.bytes());
  device_memset(ob.data(), 0xFF, ob.bytes());
  const std::array<std::int64_t, 2> ishape{c.nsamples_in, p1.row_bytes()};
  const std::array<std::int64_t, 2> oshape{p1.ndms(), p1.nsamples_out()};
  p1.execute(View<const std::uint8_t, 2>(a.data(), ishape, Space::device),
             View<float, 2>(oa.data(), oshape, Space::device), &s1);
  p2.execute(View<const std::uint8_t, 2>(b.data(), ishape, Space::device),
             View<float, 2>(ob.data(), oshape, Space::device), &s2);
  s1.synchronize();
  s2.synchronize();
  std::vector<float> g1(ref1.size()), g2(ref2.size());
  copy_bytes(g1.data(), oa.data(), oa.bytes());
  copy_bytes(g2.data(), ob.data(), ob.bytes());
  EXPECT_TRUE(series_match(ref1, g1, p1.ndms(), p1.nsamples_out()));
  EXPECT_TRUE(series_match(ref2, g2, p2.ndms(), p2.nsamples_out()));
}

TEST(DedispGpu, ScaledOutputMatchesCpu) {
  // 8- and 16-bit outputs of every variant against the CPU's quantised float result: exact for
  // integer inputs (exact sums), within 1 for 16/32-bit inputs (float sums may differ in the last
  // bit). Poisoned with two different patterns, so an unwritten output cannot pass.
  WB_REQUIRE_GPU();
  const Shape s = shapes()[2];
  for (int nbits : {2, 8, 16, 32}) {
    DedispersionConfig c = make_config(s, nbits, false);
    const auto in = random_input(c, 40 + nbits);
    DedispersionPlan cpu(c, Backend::cpu);
    const std::int64_t ndm = cpu.ndms(), nout = cpu.nsamples_out();
    const int tol = nbits <= 8 ? 0 : 1;
    for (int out_nbits : {8, 16}) {
      for (const OutputScaling sc :
           {dedisp_output_scaling(c, out_nbits), OutputScaling{0.013f, 3.5f}}) {
        std::vector<std::uint16_t> ref(static_cast<std::size_t>(ndm * nout));
        if (out_nbits == 8) {
          std::vector<std::uint8_t> r8(ref.size());
          cpu.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, cpu.row_bytes()}),
                      View<std::uint8_t, 2>(r8.data(), {ndm, nout}), sc);
          std::copy(r8.begin(), r8.end(), ref.begin());
        } else {
          cpu.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, cpu.row_bytes()}),
                      View<std::uint16_t, 2>(ref.data(), {ndm, nout}), sc);
        }
        for (Algorithm a : {Algorithm::direct, Algorithm::tiled, Algorithm::packed}) {
          if (a == Algorithm::packed && nbits > 8) continue;
          c.algorithm = a;
          DedispersionPlan gpu(c, Backend::cuda);
          DeviceArray<std::uint8_t> d_in(in.size());
          copy_bytes(d_in.data(), in.data(), in.size());
          const View<const std::uint8_t, 2> vin(d_in.data(), {c.nsamples_in, gpu.row_bytes()},
                                                Space::device);
          for (int poison : {0xFF, 0x5A}) {
            std::vector<std::uint16_t> got(ref.size());
            if (out_nbits == 8) {
              DeviceArray<std::uint8_t> d_out(ref.size());
              device_memset(d_out.data(), poison, d_out.bytes());
              gpu.execute(vin, View<std::uint8_t, 2>(d_out.data(), {ndm, nout}, Space::device), sc);
              std::vector<std::uint8_t> g8(ref.size());
              copy_bytes(g8.data(), d_out.data(), d_out.bytes());
              std::copy(g8.begin(), g8.end(), got.begin());
            } else {
              DeviceArray<std::uint16_t> d_out(ref.size());
              device_memset(d_out.data(), poison, d_out.bytes());
              gpu.execute(vin, View<std::uint16_t, 2>(d_out.data(), {ndm, nout}, Space::device),
                          sc);
              copy_bytes(got.data(), d_out.data(), d_out.bytes());
            }
            for (std::size_t i = 0; i < ref.size(); ++i)
              ASSERT_LE(std::abs(int(got[i]) - int(ref[i])), tol)
                  << "first mismatch: DM trial " << i / nout << " sample " << i % nout << ": got "
                  << got[i] << ", expected " << ref[i] << " (nbits " << nbits << ", out "
                  << out_nbits << " bits, scale " << sc.scale << ", offset " << sc.offset << ", "
                  << to_string(a) << ", poison " << poison << ")";
          }
        }
      }
    }
  }
}

TEST(DedispGpu, PackedRejectsWideSamplesAndBadTunings) {
  WB_REQUIRE_GPU();
  DedispersionConfig c = make_config(shapes()[0], 16, false);
  c.algorithm = Algorithm::packed;
  try {
    DedispersionPlan p(c, Backend::cuda);
    FAIL() << "packed accepted nbits 16";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("nbits"), std::string::npos) << e.what();
  }
  c = make_config(shapes()[0], 8, false);
  c.algorithm = Algorithm::tiled;
  c.tuning = {8, 16, 8 * 48, 0};  // 48 lanes along time: not whole warps
  EXPECT_THROW(DedispersionPlan(c, Backend::cuda), Error);
  c.tuning = {0, 12, 0, 0};
  EXPECT_THROW(DedispersionPlan(c, Backend::cuda), Error);
}

TEST(DedispGpu, ReportsTheTuningThatRuns) {
  // The reported tuning, given back as the request, makes the same kernel (what autotune
  // caches); the wide-span shape shows the DM tile halved to fit shared memory.
  WB_REQUIRE_GPU();
  DedispersionConfig c = make_config(shapes()[4], 8, false);
  c.algorithm = Algorithm::packed;
  c.tuning = {4, 16, 128, 0};
  DedispersionPlan p(c, Backend::cuda);
  EXPECT_LT(p.tuning().dms_per_block, 4) << p.kernel_description();
  c.tuning = p.tuning();
  DedispersionPlan q(c, Backend::cuda);
  EXPECT_EQ(q.kernel_description(), p.kernel_description());
  EXPECT_EQ(q.tuning().dms_per_block, p.tuning().dms_per_block);
  EXPECT_EQ(q.tuning().channels_per_stage, p.tuning().channels_per_stage);
}

TEST(DedispAutotuneGpu, MeasuresOnceThenReadsTheCache) {
  WB_REQUIRE_GPU();
  wbtest::TempDir dir;
  AutotuneOptions opt;
  opt.cache_path = dir.file("tuning.json");
  opt.repeats = 1;
  DedispersionConfig c = make_config(shapes()[5], 8, false);
  const AutotuneResult first = autotune(c, opt);
  EXPECT_FALSE(first.from_cache);
  EXPECT_FALSE(first.trials.empty());
  EXPECT_GT(first.kernel_s, 0);
  EXPECT_TRUE(first.algorithm == Algorithm::packed || first.algorithm == Algorithm::tiled);
  const AutotuneResult second = autotune(c, opt);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.algorithm, first.algorithm);
  EXPECT_EQ(second.tuning.dms_per_block, first.tuning.dms_per_block);
  EXPECT_EQ(second.tuning.samples_per_thread, first.tuning.samples_per_thread);
  EXPECT_EQ(second.tuning.threads_per_block, first.tuning.threads_per_block);
  EXPECT_EQ(second.tuning.channels_per_stage, first.tuning.channels_per_stage);
  // The winner is correct too.
  c.algorithm = second.algorithm;
  c.tuning = second.tuning;
  const auto in = random_input(c, 99);
  DedispersionPlan gpu(c, Backend::cuda);
  EXPECT_TRUE(series_match(run_cpu(c, in), run_gpu(gpu, in), gpu.ndms(), gpu.nsamples_out()));
}

// ------------------------------------------------------------------------------------------
// Host side (no device): tile geometry, names, quantisation, autotune cache key, CLI errors.
// ------------------------------------------------------------------------------------------

namespace {
// Monotone random delays [ndm][nused] with steps up to `step` samples per DM.
std::vector<std::int32_t> random_delays(int ndm, int nused, int step, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> d(static_cast<std::size_t>(ndm) * nused);
  for (int k = 0; k < nused; ++k) {
    std::int32_t v = 0;
    const int kstep = 1 + step * (k + 1) / std::max(nused, 1);  // lower channels: bigger steps
    for (int i = 0; i < ndm; ++i) {
      d[static_cast<std::size_t>(i) * nused + k] = v;
      v += static_cast<std::int32_t>(rng() % static_cast<unsigned>(kstep + 1));
    }
  }
  return d;
}
}  // namespace

TEST(DedispTileGeometry, TablesAndSpansMatchBruteForce) {
  using namespace warpbeam::dedisp::detail;
  const int ndm = 37, nused = 19;
  const auto d = random_delays(ndm, nused, 9, 1);
  for (int bd : {1, 3, 8, 37, 64}) {
    std::vector<std::int32_t> base, span;
    tile_tables(d, ndm, nused, bd, base, span);
    const int ntiles = (ndm + bd - 1) / bd;
    ASSERT_EQ(base.size(), static_cast<std::size_t>(ntiles * nused));
    int maxspan = 0;
    for (int t = 0; t < ntiles; ++t)
      for (int k = 0; k < nused; ++k) {
        const int last = std::min(ndm, (t + 1) * bd) - 1;
        EXPECT_EQ(base[t * nused + k], d[t * bd * nused + k]);
        EXPECT_EQ(span[t * nused + k], d[last * nused + k] - d[t * bd * nused + k]);
        for (int i = t * bd; i <= last; ++i) {  // every DM of the tile lies inside its span
          EXPECT_GE(d[i * nused + k], base[t * nused + k]);
          EXPECT_LE(d[i * nused + k], base[t * nused + k] + span[t * nused + k]);
        }
        maxspan = std::max(maxspan, span[t * nused + k]);
      }
    EXPECT_EQ(max_tile_span(d, ndm, nused, bd), maxspan);
  }
}

TEST(DedispTileGeometry, RowsCoverEveryReadAndFitSharedMemory) {
  using namespace warpbeam::dedisp::detail;
  const SmemLimits limits;
  int checked = 0;
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const int ndm = 1 + static_cast<int>(seed * 7 % 50),
              nused = 1 + static_cast<int>(seed * 13 % 300);
    const auto d = random_delays(ndm, nused, static_cast<int>(1 + seed * seed * 40), seed);
    for (Algorithm a : {Algorithm::tiled, Algorithm::packed})
      for (const CudaTuning& t : kTunings) {
        const TileGeometry g = plan_tile_geometry(a, t, d, ndm, nused, 1 + seed * 997, limits);
        EXPECT_LE(g.smem_bytes, limits.per_block);
        EXPECT_EQ(g.smem_bytes, g.bytes_per_channel() * g.channels_per_stage);
        EXPECT_EQ(g.threads, g.lanes * g.dms_per_block);
        EXPECT_TRUE(g.lanes == 32 || g.lanes == 64);
        EXPECT_LE(g.threads, g.samples_per_thread == 32 ? 512 : 1024);
        EXPECT_LE(g.dms_per_block, ndm);
        EXPECT_GE(g.channels_per_stage, 1);
        EXPECT_LE(g.channels_per_stage, std::max(nused, 1));
        EXPECT_EQ(g.block_samples, g.lanes * g.samples_per_thread);
        EXPECT_EQ(g.max_span, max_tile_span(d, ndm, nused, g.dms_per_block));
        if (a == Algorithm::packed) {
          // Pair words read: < span/2 + BT/2; staged in pairs of words (even row length).
          EXPECT_EQ(g.row_words % 2, 0);
          EXPECT_GE(g.row_words, (g.max_span >> 1) + g.block_samples / 2);
          EXPECT_LE(g.stages_per_flush * g.channels_per_stage, kPackedFlushChannels);
          EXPECT_GE(g.stages_per_flush, 1);
        } else {
          EXPECT_EQ(g.row_words % 4, 0);
          EXPECT_GE(g.row_words, g.max_span + g.block_samples);
        }
        ++checked;
      }
  }
  EXPECT_EQ(checked, 20 * 2 * static_cast<int>(kTunings.size()));
}

TEST(DedispTileGeometry, HalvesTheDmTileWhenARowDoesNotFit) {
  using namespace warpbeam::dedisp::detail;
  const int ndm = 16, nused = 4;
  std::vector<std::int32_t> d(ndm * nused);
  for (int i = 0; i < ndm; ++i)
    for (int k = 0; k < nused; ++k)
      d[i * nused + k] = i * 3000 * (k + 1);  // 12000 samples per DM step at the last channel
  SmemLimits small{64 * 1024, 64 * 1024};
  const TileGeometry g =
      plan_tile_geometry(Algorithm::tiled, {16, 16, 512, 0}, d, ndm, nused, 5000, small);
  EXPECT_LT(g.dms_per_block, 16);
  EXPECT_LE(g.bytes_per_channel(), small.per_block);
  EXPECT_EQ(g.threads, 32 * g.dms_per_block);
}

TEST(DedispTileGeometry, RejectsBadTuningsNamingTheField) {
  using namespace warpbeam::dedisp::detail;
  const auto d = random_delays(10, 10, 3, 2);
  auto message = [&](const CudaTuning& t) -> std::string {
    try {
      plan_tile_geometry(Algorithm::packed, t, d, 10, 10, 1000, SmemLimits{});
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument) << e.what();
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({0, 12, 0, 0}).find("samples_per_thread"), std::string::npos);
  EXPECT_NE(message({33, 0, 0, 0}).find("dms_per_block"), std::string::npos);
  EXPECT_NE(message({0, 0, 100, 0}).find("threads_per_block"), std::string::npos);
  EXPECT_NE(message({5, 0, 512, 0}).find("threads_per_block"), std::string::npos);
  EXPECT_NE(message({8, 0, 8 * 96, 0}).find("threads_per_block"), std::string::npos);
  EXPECT_NE(message({32, 32, 1024, 0}).find("threads_per_block"), std::string::npos);
  EXPECT_NE(message({0, 0, 0, 257}).find("channels_per_stage"), std::string::npos);
  EXPECT_EQ(message({4, 8, 128, 3}), "");
}

TEST(DedispTileGeometry, CompactDelaysDropMaskedChannelsAndNeedGrowingDelays) {
  using namespace warpbeam::dedisp::detail;
  DedispersionConfig c;
  c.nchans = 5;
  c.killmask = {1, 0, 1, 1, 0};
  EXPECT_EQ(used_channels(c), (std::vector<int>{0, 2, 3}));
  const std::vector<std::int32_t> d = {0, 0, 0, 0, 0, 1, 2, 3, 4, 5};  // [2][5]
  EXPECT_EQ(compact_delays(d, 2, 5, {0, 2, 3}), (std::vector<std::int32_t>{0, 0, 0, 1, 3, 4}));
  const std::vector<std::int32_t> bad = {0, 9, 0, 0, 0, 1, 2, 3, 4, 5};
  EXPECT_THROW(compact_delays(bad, 2, 5, {0, 1}), Error);
}

TEST(DedispAlgorithm, NamesRoundTrip) {
  for (Algorithm a : {Algorithm::automatic, Algorithm::direct, Algorithm::tiled, Algorithm::packed})
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  EXPECT_EQ(parse_algorithm("auto"), Algorithm::automatic);
  EXPECT_THROW(parse_algorithm("fdmt"), Error);
}

TEST(DedispOutputScaling, QuantiseRoundsHalfToEvenAndClamps) {
  const OutputScaling unit{1, 0};
  EXPECT_EQ(quantise_output(2.5f, unit, 8), 2u);
  EXPECT_EQ(quantise_output(3.5f, unit, 8), 4u);
  EXPECT_EQ(quantise_output(-7.0f, unit, 8), 0u);
  EXPECT_EQ(quantise_output(1e9f, unit, 8), 255u);
  EXPECT_EQ(quantise_output(1e9f, unit, 16), 65535u);
  EXPECT_EQ(quantise_output(NAN, unit, 16), 0u);
  EXPECT_EQ(quantise_output(100.0f, OutputScaling{0.5f, 1.25f}, 8), 51u);  // 51.25
  DedispersionConfig c;
  c.nchans = 1024;
  c.nbits = 2;
  // dedisp: 255 / (3 * 1024) * 3 * 1024 / 255 / 16 = 1/16 for 2-bit, 1024 channels, 8-bit out.
  EXPECT_FLOAT_EQ(dedisp_output_scaling(c, 8).scale, 1.0f / 16.0f);
  EXPECT_THROW(dedisp_output_scaling(c, 12), Error);
}

TEST(DedispOutputScaling, CpuPlanQuantisesItsFloatResult) {
  DedispersionConfig c = make_config(shapes()[0], 8, false);
  const auto in = random_input(c, 21);
  const auto ref = run_cpu(c, in);
  DedispersionPlan cpu(c, Backend::cpu);
  const OutputScaling sc{0.02f, -1.0f};
  std::vector<std::uint8_t> got(ref.size());
  cpu.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, cpu.row_bytes()}),
              View<std::uint8_t, 2>(got.data(), {cpu.ndms(), cpu.nsamples_out()}), sc);
  for (std::size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(got[i], quantise_output(ref[i], sc, 8)) << i;
  EXPECT_THROW(cpu.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, cpu.row_bytes()}),
                           View<std::uint8_t, 2>(got.data(), {cpu.ndms(), cpu.nsamples_out()}),
                           OutputScaling{NAN, 0}),
               Error);
}

TEST(DedispAutotune, CacheKeyNamesTheShapeAndPathFollowsXdg) {
  DedispersionConfig c = make_config(shapes()[0], 8, false);
  const std::string key = autotune_cache_key(c, "NVIDIA H200, sm_90");
  for (const char* part :
       {"nchans=77", "nbits=8", "ndm=42", "algorithm=automatic", "H200", "max_delay<="})
    EXPECT_NE(key.find(part), std::string::npos) << key;
  c.nsamples_in += 1;
  EXPECT_NE(autotune_cache_key(c, "NVIDIA H200, sm_90"), key);
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", "/tmp/wb-xdg", 1);
  EXPECT_EQ(default_autotune_cache_path(), "/tmp/wb-xdg/warpbeam/dedisp-tuning.json");
  if (old)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
}

TEST(DedispChannelMajor, ConfigIsValidated) {
  DedispersionConfig c = make_config(shapes()[0], 8, false);
  c.channel_major = true;
  EXPECT_THROW(c.validate(), Error);  // 8-bit
  c.nbits = 32;
  c.validate();
  c.killmask.assign(static_cast<std::size_t>(c.nchans), 1);
  c.validate();  // all ones is no mask
  c.killmask[3] = 0;
  EXPECT_THROW(c.validate(), Error);
  c.killmask.clear();
  c.algorithm = Algorithm::packed;
  EXPECT_THROW(c.validate(), Error);
  c.algorithm = Algorithm::tiled;
  // The CPU backend has no channel-major path.
  DedispersionPlan cpu(c, Backend::cpu);
  std::vector<float> rows(static_cast<std::size_t>(c.nchans * c.nsamples_in));
  std::vector<float> out(static_cast<std::size_t>(cpu.ndms() * cpu.nsamples_out()));
  EXPECT_THROW(
      cpu.execute_channel_major(View<const float, 2>(rows.data(), {c.nchans, c.nsamples_in}),
                                View<float, 2>(out.data(), {cpu.ndms(), cpu.nsamples_out()})),
      Error);
}

TEST(DedispTileGeometry, DefaultsAreTheD1SweepWinners) {
  using namespace warpbeam::dedisp::detail;
  // A shape with plenty of DMs and channels: nothing is capped.
  std::vector<std::int32_t> d;
  const int ndm = 64, nused = 8;
  for (int i = 0; i < ndm; ++i)
    for (int k = 0; k < nused; ++k)
      d.push_back(i * k / 4);
  const SmemLimits big;
  const auto p = plan_tile_geometry(Algorithm::packed, {}, d, ndm, nused, 100000, big);
  EXPECT_EQ(p.dms_per_block, 32);
  EXPECT_EQ(p.samples_per_thread, 16);
  EXPECT_EQ(p.threads, 1024);
  const auto t = plan_tile_geometry(Algorithm::tiled, {}, d, ndm, nused, 100000, big);
  EXPECT_EQ(t.dms_per_block, 16);
  EXPECT_EQ(t.samples_per_thread, 32);
  EXPECT_EQ(t.threads, 512);
  // A requested 1024-thread block takes K = 16 by default; a requested K = 32 a 512-thread one.
  const auto a = plan_tile_geometry(Algorithm::tiled, {32, 0, 1024, 0}, d, ndm, nused, 100000, big);
  EXPECT_EQ(a.samples_per_thread, 16);
  const auto b = plan_tile_geometry(Algorithm::packed, {0, 32, 0, 0}, d, ndm, nused, 100000, big);
  EXPECT_EQ(b.threads, 512);
}

TEST(DedispAutotune, NeedsADevice) {
  if (cuda_available()) GTEST_SKIP() << "a device is present";
  EXPECT_THROW(autotune(make_config(shapes()[0], 8, false)), Error);
}

TEST(BenchDedispGpuCli, RejectsBadOptionsAsUsageErrors) {
  for (const char* args :
       {"bench dedisp --backend cuda --config D7", "bench dedisp --backend gpu",
        "bench dedisp --backend cuda --repeats 0", "bench dedisp --backend cuda --algorithm fdmt",
        "bench dedisp --backend cuda --nsamples 0", "bench dedisp-gpu --config D1"}) {
    const auto r = wbtest::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << args << ": " << r.err;
  }
}

TEST(BenchDedispGpuCli, FailsCleanlyWithoutADevice) {
  if (cuda_available()) GTEST_SKIP() << "a device is present";
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli("bench dedisp --config D1 --backend cuda --sweep --json '" +
                                 dir.file("b.json") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("CUDA"), std::string::npos) << r.err;
  EXPECT_TRUE(dir.files().empty());
}
