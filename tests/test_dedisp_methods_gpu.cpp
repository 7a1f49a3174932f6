// Sub-band and FDMT dedispersion on the GPU against the CPU path (issue 13): random inputs,
// the output poisoned (NaN) first, max|gpu - cpu| <= 1e-5 max|cpu| per trial (8-bit sums are
// exact integers on both). Shapes hit partial tiles, both foff signs, the killmask, > 256
// channels (the packed stage 1 flushes), odd FDMT blocks and channel-major input with NaN past
// each row's samples.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"

using namespace warpbeam;
using namespace warpbeam::dedisp;

namespace {

struct Shape {
  std::string name;
  int nchans;
  double fch1, foff, tsamp;
  double dm_max;
  std::int64_t nout;
  double zap_fraction;
};

const Shape kShapes[] = {
    {"77ch", 77, 1500, -1.3, 256e-6, 300, 2345, 0.0},
    {"130ch-foff+", 130, 1200, 0.7, 64e-6, 150, 2999, 0.0},
    {"513ch-killmask", 513, 1500, -0.5859375, 128e-6, 120, 1777, 0.1},
    {"2ch", 2, 1400, -8, 1e-4, 200, 1000, 0.0},
};

DedispersionConfig make_config(const Shape& s, Algorithm a, int nbits, bool is_signed) {
  DedispersionConfig c;
  c.nchans = s.nchans;
  c.fch1_mhz = s.fch1;
  c.foff_mhz = s.foff;
  c.tsamp_s = s.tsamp;
  c.nbits = nbits;
  c.is_signed = is_signed;
  c.algorithm = a;
  c.dms = dm_list_dedisp(0, s.dm_max, 40, 1.25, s.nchans, s.tsamp, s.fch1, s.foff);
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

std::vector<std::uint8_t> random_input(const DedispersionConfig& c, std::uint32_t seed) {
  const auto row =
      static_cast<std::size_t>((static_cast<std::int64_t>(c.nchans) * c.nbits + 7) / 8);
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> in(row * static_cast<std::size_t>(c.nsamples_in));
  for (auto& b : in)
    b = static_cast<std::uint8_t>(rng());
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

std::vector<float> run_gpu(const DedispersionPlan& plan, const std::vector<std::uint8_t>& in) {
  DeviceArray<std::uint8_t> d_in(in.size());
  DeviceArray<float> d_out(static_cast<std::size_t>(plan.ndms() * plan.nsamples_out()));
  copy_bytes(d_in.data(), in.data(), in.size());
  device_memset(d_out.data(), 0xFF, d_out.bytes());  // NaN
  Stream stream;
  plan.execute(View<const std::uint8_t, 2>(
                   d_in.data(), {plan.config().nsamples_in, plan.row_bytes()}, Space::device),
               View<float, 2>(d_out.data(), {plan.ndms(), plan.nsamples_out()}, Space::device),
               &stream);
  stream.synchronize();
  std::vector<float> out(d_out.size());
  copy_bytes(out.data(), d_out.data(), d_out.bytes());
  return out;
}

::testing::AssertionResult series_match(const std::vector<float>& ref,
                                        const std::vector<float>& got, std::int64_t ndm,
                                        std::int64_t nout) {
  if (ref.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::int64_t d = 0; d < ndm; ++d) {
    float maxref = 0;
    for (std::int64_t t = 0; t < nout; ++t)
      maxref = std::max(maxref, std::abs(ref[d * nout + t]));
    for (std::int64_t t = 0; t < nout; ++t) {
      const auto i = d * nout + t;
      const float err = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - ref[i]);
      if (err > 1e-5f * maxref)
        return ::testing::AssertionFailure()
               << "trial " << d << " sample " << t << ": got " << got[i] << ", expected " << ref[i];
    }
  }
  return ::testing::AssertionSuccess();
}

void check_method(Algorithm a, const std::vector<int>& nbits_list, std::int64_t fdmt_block) {
  int shape_index = 0;
  for (const Shape& s : kShapes) {
    for (int nbits : nbits_list) {
      const bool is_signed = shape_index % 2 == 1 && nbits >= 2 && nbits <= 16;
      auto c = make_config(s, a, nbits, is_signed);
      c.fdmt.block = fdmt_block;
      const auto in = random_input(c, 100 * shape_index + nbits);
      const auto ref = run_cpu(c, in);
      DedispersionPlan gpu(c, Backend::cuda);
      EXPECT_EQ(gpu.algorithm(), a);
      EXPECT_GT(gpu.workspace().device_bytes, 0);
      ASSERT_TRUE(series_match(ref, run_gpu(gpu, in), gpu.ndms(), gpu.nsamples_out()))
          << "shape " << s.name << ", nbits " << nbits << (is_signed ? " signed" : "") << " ("
          << gpu.kernel_description() << ")";
    }
    ++shape_index;
  }
}

// Channel-major float rows [nchans][stride], NaN past each row's nsamples_in samples and zeros
// in the killed channels' rows, against the CPU on the packed float input.
void check_channel_major(Algorithm a) {
  int shape_index = 0;
  for (const Shape& s : kShapes) {
    const DedispersionConfig c = make_config(s, a, 32, false);
    const auto in = random_input(c, 500 + shape_index++);
    const auto ref = run_cpu(c, in);
    const std::int64_t n = c.nsamples_in, stride = n + 37;
    std::vector<float> rows(static_cast<std::size_t>(c.nchans * stride), NAN);
    const auto* f = reinterpret_cast<const float*>(in.data());
    for (int ch = 0; ch < c.nchans; ++ch)
      for (std::int64_t t = 0; t < n; ++t)
        rows[ch * stride + t] = c.killmask.empty() || c.killmask[ch] ? f[t * c.nchans + ch] : 0.0f;
    DedispersionConfig cm = c;
    cm.killmask.clear();
    cm.channel_major = true;
    DedispersionPlan gpu(cm, Backend::cuda);
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
    // Without the killmask the plan sums the zero rows of the killed channels: the same sums,
    // but the sub-band grid may differ (it sees more channels), so compare with the CPU plan
    // of the same channel-major config run on the zeroed packed input.
    auto cz = cm;
    cz.channel_major = false;
    std::vector<std::uint8_t> zeroed(in);
    auto* zf = reinterpret_cast<float*>(zeroed.data());
    for (std::int64_t t = 0; t < n; ++t)
      for (int ch = 0; ch < c.nchans; ++ch)
        if (!(c.killmask.empty() || c.killmask[ch])) zf[t * c.nchans + ch] = 0;
    const auto ref_cm = run_cpu(cz, zeroed);
    ASSERT_TRUE(series_match(ref_cm, got, gpu.ndms(), gpu.nsamples_out()))
        << "shape " << s.name << " (" << gpu.kernel_description() << ")";
    if (c.killmask.empty() && a == Algorithm::fdmt)
      EXPECT_TRUE(series_match(ref, got, gpu.ndms(), gpu.nsamples_out())) << s.name;
    EXPECT_THROW(gpu.execute(View<const std::uint8_t, 2>(), View<float, 2>()), Error);
  }
}

}  // namespace

TEST(DedispMethodsGpu, SubbandMatchesCpuOnRandomInput) {
  WB_REQUIRE_GPU();
  check_method(Algorithm::subband, {2, 8, 16, 32}, 0);
}

TEST(DedispMethodsGpu, FdmtMatchesCpuOnRandomInput) {
  WB_REQUIRE_GPU();
  check_method(Algorithm::fdmt, {2, 8, 16, 32}, 0);
  check_method(Algorithm::fdmt, {8}, 777);  // several blocks, the last one partial
}

TEST(DedispMethodsGpu, SubbandChannelMajorMatchesCpu) {
  WB_REQUIRE_GPU();
  check_channel_major(Algorithm::subband);
}

TEST(DedispMethodsGpu, FdmtChannelMajorMatchesCpu) {
  WB_REQUIRE_GPU();
  check_channel_major(Algorithm::fdmt);
}

TEST(DedispMethodsGpu, ScaledOutputMatchesCpuQuantisation) {
  WB_REQUIRE_GPU();
  for (Algorithm a : {Algorithm::subband, Algorithm::fdmt}) {
    const auto c = make_config(kShapes[0], a, 8, false);
    const auto in = random_input(c, 9);
    const auto ref = run_cpu(c, in);
    DedispersionPlan gpu(c, Backend::cuda);
    const OutputScaling sc = dedisp_output_scaling(c, 8);
    DeviceArray<std::uint8_t> d_in(in.size());
    DeviceArray<std::uint8_t> d_out(static_cast<std::size_t>(gpu.ndms() * gpu.nsamples_out()));
    copy_bytes(d_in.data(), in.data(), in.size());
    device_memset(d_out.data(), 0xAB, d_out.bytes());
    gpu.execute(
        View<const std::uint8_t, 2>(d_in.data(), {c.nsamples_in, gpu.row_bytes()}, Space::device),
        View<std::uint8_t, 2>(d_out.data(), {gpu.ndms(), gpu.nsamples_out()}, Space::device), sc);
    std::vector<std::uint8_t> got(d_out.size());
    copy_bytes(got.data(), d_out.data(), d_out.bytes());
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], quantise_output(ref[i], sc, 8)) << to_string(a) << " element " << i;
  }
}

// The CUDA sub-band and FDMT plans report their device workspace, and the estimate made from the
// tables before a plan exists (DedispersionPlan::estimate_workspace, which the file search
// budgets with) bounds it, within 4x (stage-1 tile tables counted for one-DM tiles), for packed
// and float input, the killmask, and channel-major input.
TEST(DedispMethodsGpu, WorkspaceIsBoundedByTheEstimate) {
  WB_REQUIRE_GPU();
  for (Algorithm a : {Algorithm::subband, Algorithm::fdmt})
    for (const Shape& s : kShapes)
      for (int nbits : {8, 32})
        for (bool channel_major : {false, true}) {
          if (channel_major && nbits != 32) continue;
          auto c = make_config(s, a, nbits, false);
          if (channel_major) {
            c.killmask.clear();
            c.channel_major = true;
          }
          SCOPED_TRACE(s.name + " " + to_string(a) + " nbits " + std::to_string(nbits) +
                       (channel_major ? " channel-major" : ""));
          const DedispersionPlan plan(c, Backend::cuda);
          const Workspace w = plan.workspace();
          const Workspace e = DedispersionPlan::estimate_workspace(c, Backend::cuda);
          EXPECT_GT(w.device_bytes, 0);
          EXPECT_GE(e.device_bytes, w.device_bytes);
          EXPECT_LE(e.device_bytes, 4 * w.device_bytes);
          EXPECT_EQ(e.host_bytes, w.host_bytes);  // the host tables, counted alike
        }
}

// Stage 2's two kernels (WARPBEAM_SUBBAND_STAGE2: "tile", one block per 8 trials; unset, one
// block per group of up to 32 trials) against the CPU on a fine DM list whose coarse groups
// hold more trials than a group block (tiles of 32 and a partial one) and fewer than its 16 warps
// (warps that only stage), 8-bit and float input, an output length not a multiple of the
// 256-sample time tile. The group kernel also with WARPBEAM_SUBBAND_GROUP = 4 warps at 8 blocks
// per SM and 3 warps at 12 (tiles of 8 and 6 trials; shared memory for a few sub-bands, so a
// group's packed windows take several stages).
TEST(DedispMethodsGpu, SubbandStage2KernelsMatchCpuOnLargeAndSmallGroups) {
  WB_REQUIRE_GPU();
  const Shape s{"256ch-fine", 256, 1400, -1, 64e-6, 60, 3001, 0.0};
  for (int nbits : {8, 32}) {
    auto c = make_config(s, Algorithm::subband, nbits, false);
    c.dms = dm_list_dedisp(0, s.dm_max, 40, 1.003, s.nchans, s.tsamp, s.fch1, s.foff);
    const auto d = delay_table(c);
    c.nsamples_in = *std::max_element(d.begin(), d.end()) + s.nout;
    const auto in = random_input(c, 4242 + nbits);
    const auto ref = run_cpu(c, in);
    for (const std::string kernel : {"tile", "group", "group 4,8", "group 3,12"}) {
      if (kernel == "tile")
        ::setenv("WARPBEAM_SUBBAND_STAGE2", "tile", 1);
      else
        ::unsetenv("WARPBEAM_SUBBAND_STAGE2");
      if (kernel.size() > 6) ::setenv("WARPBEAM_SUBBAND_GROUP", kernel.substr(6).c_str(), 1);
      DedispersionPlan gpu(c, Backend::cuda);
      ::unsetenv("WARPBEAM_SUBBAND_STAGE2");
      ::unsetenv("WARPBEAM_SUBBAND_GROUP");
      // The shape is what the test needs: a group above 32 trials and one below 16.
      std::vector<int> size(gpu.trials().coarse_dms.size(), 0);
      for (int j : gpu.trials().coarse_trial)
        ++size[static_cast<std::size_t>(j)];
      ASSERT_GT(*std::max_element(size.begin(), size.end()), 32);
      ASSERT_LT(*std::min_element(size.begin(), size.end()), 16);
      const std::string desc = gpu.kernel_description();
      EXPECT_NE(desc.find(kernel == "tile" ? "per 8 trials" : "per group"), std::string::npos)
          << desc;
      if (kernel.size() > 6) {  // several stages per group: "; N stages of <= M sub-bands"
        const auto at = desc.find(" stages of");
        ASSERT_NE(at, std::string::npos) << desc;
        const auto from = desc.rfind(' ', at - 1) + 1;
        EXPECT_GT(std::stoi(desc.substr(from, at - from)),
                  static_cast<int>(gpu.trials().coarse_dms.size()))
            << desc;
      }
      ASSERT_TRUE(series_match(ref, run_gpu(gpu, in), gpu.ndms(), gpu.nsamples_out()))
          << kernel << " kernel, nbits " << nbits << " (" << desc << ")";
    }
  }
}

// Stage 1's two paths on codes: one launch for every sub-band (cuda_subband_stage1.cu, the
// default for sub-bands of <= 32 channels) and the brute-force kernels' per-sub-band launches
// (WARPBEAM_SUBBAND_STAGE1 set, or sub-bands wider than 32 channels), against the CPU: 1, 2, 4
// and 8 bits, signed and unsigned, the killmask (sub-bands of fewer channels), 4, 16, 32 and
// 64 channels per sub-band.
TEST(DedispMethodsGpu, SubbandStage1PathsMatchCpu) {
  WB_REQUIRE_GPU();
  const Shape s = kShapes[2];  // 513 channels, the killmask
  int seed = 0;
  for (int subbands : {128, 32, 16, 8})
    for (int nbits : {1, 2, 4, 8})
      for (bool is_signed : {false, true}) {
        if (is_signed && nbits == 1) continue;
        auto c = make_config(s, Algorithm::subband, nbits, is_signed);
        c.subband.subbands = subbands;
        const auto in = random_input(c, 9000 + seed++);
        const auto ref = run_cpu(c, in);
        for (bool fused : {true, false}) {
          if (!fused) ::setenv("WARPBEAM_SUBBAND_STAGE1", "8,512,16", 1);
          DedispersionPlan gpu(c, Backend::cuda);
          ::unsetenv("WARPBEAM_SUBBAND_STAGE1");
          const std::string desc = gpu.kernel_description();
          // 513 channels: <= 17 per sub-band in 32 or 128 sub-bands (one launch), 64 or 65 in
          // 8 (too wide for it); 16 sub-bands of ~32 may go either way (the killmask decides).
          if (subbands != 16)
            EXPECT_EQ(desc.find("in one launch") != std::string::npos, fused && subbands >= 32)
                << desc;
          ASSERT_TRUE(series_match(ref, run_gpu(gpu, in), gpu.ndms(), gpu.nsamples_out()))
              << subbands << " sub-bands, nbits " << nbits << (is_signed ? " signed" : "") << " ("
              << desc << ")";
        }
      }
}

// A sub-band plan runs gulps shorter than it was made for (DedispersionPlan::
// accepts_shorter_input; the search's first and last gulps), bit for bit as a plan made for the
// shorter gulp: packed input (a device buffer of exactly the shorter gulp's rows) and
// channel-major rows (NaN past each row's samples, a row stride shorter than the planned gulp).
// The longer plan runs its full gulp first, so its buffers hold another gulp's series.
TEST(DedispMethodsGpu, SubbandPlanRunsShorterGulpsBitForBit) {
  WB_REQUIRE_GPU();
  int shape_index = 0;
  for (const Shape& s : kShapes) {
    for (int nbits : {8, 32}) {
      const auto c = make_config(s, Algorithm::subband, nbits, false);
      const DedispersionPlan plan(c, Backend::cuda);
      ASSERT_TRUE(plan.accepts_shorter_input());
      const std::int64_t D = plan.max_delay();
      const auto in = random_input(c, 900 + 10 * shape_index + nbits);
      (void)run_gpu(plan, in);
      for (std::int64_t rows : {c.nsamples_in - 1, D + s.nout / 3, D + 257, D + 1}) {
        SCOPED_TRACE(s.name + ", nbits " + std::to_string(nbits) + ", rows " +
                     std::to_string(rows) + " (" + plan.kernel_description() + ")");
        auto cs = c;
        cs.nsamples_in = rows;
        const DedispersionPlan shorter(cs, Backend::cuda);
        ASSERT_EQ(shorter.trials().delays, plan.trials().delays);
        const std::vector<std::uint8_t> head(
            in.begin(), in.begin() + static_cast<std::ptrdiff_t>(rows * plan.row_bytes()));
        const auto want = run_gpu(shorter, head);
        const std::int64_t nt = rows - D;
        DeviceArray<std::uint8_t> d_in(head.size());
        DeviceArray<float> d_out(static_cast<std::size_t>(plan.ndms() * nt));
        copy_bytes(d_in.data(), head.data(), head.size());
        device_memset(d_out.data(), 0xFF, d_out.bytes());  // NaN
        Stream stream;
        plan.execute(
            View<const std::uint8_t, 2>(d_in.data(), {rows, plan.row_bytes()}, Space::device),
            View<float, 2>(d_out.data(), {plan.ndms(), nt}, Space::device), &stream);
        stream.synchronize();
        std::vector<float> got(d_out.size());
        copy_bytes(got.data(), d_out.data(), d_out.bytes());
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
        ASSERT_TRUE(series_match(run_cpu(cs, head), got, plan.ndms(), nt));
      }
      if (nbits != 32) continue;
      // Channel-major float rows.
      auto cm = c;
      cm.killmask.clear();
      cm.channel_major = true;
      const DedispersionPlan plan_cm(cm, Backend::cuda);
      ASSERT_TRUE(plan_cm.accepts_shorter_input());
      const auto* f = reinterpret_cast<const float*>(in.data());
      for (std::int64_t rows : {cm.nsamples_in - 3, D + 101}) {
        SCOPED_TRACE(s.name + " channel-major, rows " + std::to_string(rows));
        const std::int64_t stride = rows + 37, nt = rows - D;
        std::vector<float> host(static_cast<std::size_t>(cm.nchans * stride), NAN);
        for (int ch = 0; ch < cm.nchans; ++ch)
          for (std::int64_t t = 0; t < rows; ++t)
            host[ch * stride + t] = f[t * cm.nchans + ch];
        DeviceArray<float> d_in(host.size());
        copy_bytes(d_in.data(), host.data(), d_in.bytes());
        View<const float, 2> vin(d_in.data(), {cm.nchans, rows}, Space::device);
        vin.strides = {stride, 1};
        auto run_cm = [&](const DedispersionPlan& p) {
          DeviceArray<float> d_out(static_cast<std::size_t>(p.ndms() * nt));
          device_memset(d_out.data(), 0xFF, d_out.bytes());
          Stream stream;
          p.execute_channel_major(vin, View<float, 2>(d_out.data(), {p.ndms(), nt}, Space::device),
                                  &stream);
          stream.synchronize();
          std::vector<float> out(d_out.size());
          copy_bytes(out.data(), d_out.data(), d_out.bytes());
          return out;
        };
        auto cs = cm;
        cs.nsamples_in = rows;
        const DedispersionPlan shorter(cs, Backend::cuda);
        const auto want = run_cm(shorter);
        const auto got = run_cm(plan_cm);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
    }
    ++shape_index;
  }
}
