// Dedispersion on the CPU: DM lists, delays, and the plan against a naive loop written here.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/io/sigproc.hpp"

using namespace warpbeam;
using namespace warpbeam::dedisp;

TEST(DmList, D1HasDedispsTrialCount) {
  // D1 (DESIGN.md): 1024 ch, fch1 1500 MHz, foff -0.29296875 MHz, tsamp 64 us, DM 0-1000,
  // pulse width 40 us, tolerance 1.25: dedisp's rule gives 1122 trials (issue 3).
  auto dms = dm_list_dedisp(0, 1000, 40, 1.25, 1024, 64e-6, 1500, -0.29296875);
  EXPECT_EQ(dms.size(), 1122u);
  EXPECT_EQ(dms.front(), 0.f);
  EXPECT_GE(dms.back(), 1000.f);
  EXPECT_LT(dms[dms.size() - 2], 1000.f);
  for (std::size_t i = 1; i < dms.size(); ++i)
    EXPECT_GT(dms[i], dms[i - 1]);
}

TEST(DmList, LinearAndBadArguments) {
  auto dms = dm_list_linear(10, 20, 2.5);
  EXPECT_EQ(dms, (std::vector<float>{10, 12.5, 15, 17.5, 20}));
  EXPECT_THROW(dm_list_linear(20, 10, 1), Error);
  EXPECT_THROW(dm_list_linear(0, 10, 0), Error);
  EXPECT_THROW(dm_list_dedisp(0, 100, 40, 1.0, 64, 64e-6, 1500, -1), Error);
  EXPECT_THROW(dm_list_dedisp(-1, 100, 40, 1.25, 64, 64e-6, 1500, -1), Error);
}

// ---------------------------------------------------------------------------------------------
// The CPU plan against a naive loop written here.

namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(rng());
  return b;
}

// Sample t of channel ch of packed input, decoded independently of warpbeam's unpacker:
// sub-byte samples lowest bits first (SIGPROC), 16-bit little-endian, 32-bit float.
double naive_sample(const std::vector<std::uint8_t>& in, std::int64_t row_bytes, int nbits,
                    bool is_signed, std::int64_t t, int ch) {
  const std::uint8_t* r = in.data() + t * row_bytes;
  if (nbits == 32) {
    float f;
    std::memcpy(&f, r + 4 * ch, 4);
    return f;
  }
  if (nbits == 16) {
    const unsigned v = r[2 * ch] | (r[2 * ch + 1] << 8);
    return is_signed ? static_cast<double>(static_cast<std::int16_t>(v)) : v;
  }
  const long bit = static_cast<long>(ch) * nbits;
  const unsigned v = (r[bit / 8] >> (bit % 8)) & ((1u << nbits) - 1u);
  if (is_signed && nbits > 1 && v >= (1u << (nbits - 1))) return static_cast<int>(v) - (1 << nbits);
  return v;
}

// out[d][t] = sum over kept channels of in[t + delay(d, ch)][ch], in double.
std::vector<double> naive_dedisperse(const DedispersionConfig& c,
                                     const std::vector<std::uint8_t>& in) {
  const auto delays = delay_table(c);
  std::int32_t maxd = 0;
  for (auto d : delays)
    maxd = std::max(maxd, d);
  const std::int64_t nt = c.nsamples_in - maxd;
  const std::int64_t row =
      static_cast<std::int64_t>((c.nchans * static_cast<long>(c.nbits) + 7) / 8);
  std::vector<double> out(c.dms.size() * static_cast<std::size_t>(nt), 0.0);
  for (std::size_t d = 0; d < c.dms.size(); ++d)
    for (std::int64_t t = 0; t < nt; ++t) {
      double s = 0;
      for (int ch = 0; ch < c.nchans; ++ch)
        if (c.killmask.empty() || c.killmask[ch])
          s += naive_sample(in, row, c.nbits, c.is_signed, t + delays[d * c.nchans + ch], ch);
      out[d * nt + t] = s;
    }
  return out;
}

// Runs the CPU plan and compares every series with the naive loop; returns the plan's output.
std::vector<float> check_against_naive(const DedispersionConfig& c,
                                       const std::vector<std::uint8_t>& in) {
  DedispersionPlan plan(c, Backend::cpu);
  std::vector<float> got(static_cast<std::size_t>(plan.ndms() * plan.nsamples_out()), NAN);
  plan.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, plan.row_bytes()}),
               View<float, 2>(got.data(), {plan.ndms(), plan.nsamples_out()}));
  const auto ref = naive_dedisperse(c, in);
  EXPECT_EQ(ref.size(), got.size());
  for (std::int64_t d = 0; d < plan.ndms(); ++d) {
    double maxref = 0, maxerr = 0;
    std::int64_t worst = -1;
    for (std::int64_t t = 0; t < plan.nsamples_out(); ++t) {
      const auto i = static_cast<std::size_t>(d * plan.nsamples_out() + t);
      maxref = std::max(maxref, std::abs(ref[i]));
      const double err = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - ref[i]);
      if (err > maxerr) maxerr = err, worst = t;
    }
    const double tol = c.nbits == 32 ? 1e-5 * maxref : 0.0;  // integers add up exactly
    if (maxerr > tol) {
      ADD_FAILURE() << "nbits " << c.nbits << " dm trial " << d << " sample " << worst << ": got "
                    << got[d * plan.nsamples_out() + worst] << ", expected "
                    << ref[d * plan.nsamples_out() + worst] << " (max error " << maxerr << ")";
      break;
    }
  }
  return got;
}

DedispersionConfig odd_config(int nbits) {
  DedispersionConfig c;
  c.nchans = 77;  // not a multiple of 4 channels or of samples per byte
  c.fch1_mhz = 1500;
  c.foff_mhz = -1.3;
  c.tsamp_s = 256e-6;
  c.nbits = nbits;
  c.dms = dm_list_linear(0, 300, 7.3);  // 42 trials: not a multiple of the DM tile
  c.nsamples_in = 3001;                 // output length not a multiple of the time tile
  return c;
}

std::vector<std::uint8_t> random_input(const DedispersionConfig& c, std::uint32_t seed) {
  const std::size_t bytes =
      static_cast<std::size_t>(c.nsamples_in) * ((c.nchans * static_cast<long>(c.nbits) + 7) / 8);
  auto in = random_bytes(bytes, seed);
  if (c.nbits == 32) {
    auto f = wbtest::random_floats(bytes / 4, seed, -3, 10);
    std::memcpy(in.data(), f.data(), bytes);
  }
  return in;
}

}  // namespace

TEST(DedispCpu, MatchesNaiveLoopForEveryNbits) {
  for (int nbits : {1, 2, 4, 8, 16, 32}) {
    auto c = odd_config(nbits);
    check_against_naive(c, random_input(c, 100 + nbits));
  }
}

TEST(DedispCpu, SignedSamples) {
  for (int nbits : {2, 4, 8, 16}) {
    auto c = odd_config(nbits);
    c.is_signed = true;
    check_against_naive(c, random_input(c, 200 + nbits));
  }
}

TEST(DedispCpu, KillmaskSkipsChannels) {
  auto c = odd_config(8);
  c.killmask.assign(c.nchans, 1);
  for (int ch : {0, 5, 6, 7, 40, 76})
    c.killmask[ch] = 0;
  auto in = random_input(c, 7);
  check_against_naive(c, in);
  // Every channel zapped: all zeros.
  c.killmask.assign(c.nchans, 0);
  auto got = check_against_naive(c, in);
  for (float v : got)
    ASSERT_EQ(v, 0.f);
}

TEST(DedispCpu, OddShapesAndTileSizes) {
  struct Shape {
    int nchans;
    double foff;
    int nsamples;
    double dm_max, dm_step;
    int dms_per_tile, samples_per_tile;
  };
  const Shape shapes[] = {{1, -1, 500, 50, 10, 0, 0},
                          {3, 2.0, 257, 100, 33, 1, 16},
                          {64, -0.5, 1111, 200, 3.1, 7, 48},
                          {130, 0.25, 2049, 150, 2.5, 16, 512},
                          {33, -2, 4000, 800, 50, 3, 1024}};
  int seed = 0;
  for (const auto& s : shapes) {
    DedispersionConfig c;
    c.nchans = s.nchans;
    c.fch1_mhz = s.foff > 0 ? 1300 : 1500;  // either sign of foff
    c.foff_mhz = s.foff;
    c.tsamp_s = 128e-6;
    c.nbits = 8;
    c.dms = dm_list_linear(0, s.dm_max, s.dm_step);
    c.nsamples_in = s.nsamples;
    c.cpu_tuning = {s.dms_per_tile, s.samples_per_tile};
    c.threads = seed % 2 + 1;
    SCOPED_TRACE("nchans " + std::to_string(s.nchans));
    check_against_naive(c, random_input(c, 300 + seed++));
  }
}

TEST(DedispCpu, InjectedPulsePeaksAtItsDm) {
  // A pulse dispersed exactly as the delay table says (one sample per channel) over constant
  // noise-free data: the trial at its DM collects all channels in one sample, every other trial
  // spreads it out.
  DedispersionConfig c;
  c.nchans = 128;
  c.fch1_mhz = 1500;
  c.foff_mhz = -2;
  c.tsamp_s = 100e-6;
  c.nbits = 8;
  c.dms = dm_list_linear(0, 400, 4);
  c.nsamples_in = 12000;
  const int true_trial = 62;  // DM 248
  const std::int64_t t_arrive = 500;
  const auto delays = delay_table(c);
  std::vector<std::uint8_t> in(static_cast<std::size_t>(c.nsamples_in * c.nchans), 10);
  for (int ch = 0; ch < c.nchans; ++ch)
    in[(t_arrive + delays[true_trial * c.nchans + ch]) * c.nchans + ch] = 60;
  DedispersionPlan plan(c, Backend::cpu);
  std::vector<float> out(static_cast<std::size_t>(plan.ndms() * plan.nsamples_out()));
  plan.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, plan.row_bytes()}),
               View<float, 2>(out.data(), {plan.ndms(), plan.nsamples_out()}));
  std::int64_t best_d = -1, best_t = -1;
  float best = -1;
  for (std::int64_t d = 0; d < plan.ndms(); ++d)
    for (std::int64_t t = 0; t < plan.nsamples_out(); ++t)
      if (out[d * plan.nsamples_out() + t] > best)
        best = out[d * plan.nsamples_out() + t], best_d = d, best_t = t;
  EXPECT_EQ(best_d, true_trial);
  EXPECT_EQ(best_t, t_arrive);
  EXPECT_EQ(best, 10.f * 128 + 50.f * 128);
  // Neighbouring trials see less of the pulse.
  EXPECT_LT(*std::max_element(out.begin() + (true_trial + 3) * plan.nsamples_out(),
                              out.begin() + (true_trial + 4) * plan.nsamples_out()),
            best - 50 * 64);
}

TEST(DedispCpu, BadTuningIsAnInvalidArgument) {
  auto c = odd_config(8);
  c.cpu_tuning.dms_per_tile = -1;
  try {
    DedispersionPlan plan(c, Backend::cpu);
    FAIL() << "accepted dms_per_tile = -1";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dms_per_tile"), std::string::npos);
  }
}

// Plans report their workspace (as cufftGetSize): the estimate made before a plan exists is what
// the plan then holds (the CPU kernels' scratch and delay table), checked against the sizes the
// kernels need: the unpacked [kept channel][time] rows and [ndm][kept channel] delays.
TEST(DedispCpu, WorkspaceIsReportedAndEstimated) {
  for (int nbits : {2, 8, 32})
    for (bool mask : {false, true})
      for (Algorithm a : {Algorithm::automatic, Algorithm::direct}) {
        auto c = odd_config(nbits);
        c.algorithm = a;
        if (mask) {
          c.killmask.assign(static_cast<std::size_t>(c.nchans), 1);
          for (int ch = 0; ch < c.nchans; ch += 3)
            c.killmask[static_cast<std::size_t>(ch)] = 0;
        }
        SCOPED_TRACE("nbits " + std::to_string(nbits) + (mask ? " mask " : " ") + to_string(a));
        const DedispersionPlan plan(c, Backend::cpu);
        const Workspace w = plan.workspace();
        EXPECT_EQ(w.device_bytes, 0);
        EXPECT_EQ(DedispersionPlan::estimate_workspace(c, Backend::cpu).host_bytes, w.host_bytes);
        const std::int64_t kept =
            mask ? std::count(c.killmask.begin(), c.killmask.end(), 1) : c.nchans;
        const std::int64_t ndm = plan.ndms();
        if (a == Algorithm::direct) {
          EXPECT_EQ(w.host_bytes, c.nsamples_in * c.nchans * 4);
        } else {
          EXPECT_GE(w.host_bytes, kept * c.nsamples_in * 4 + ndm * kept * 4);
          EXPECT_LE(w.host_bytes, kept * (c.nsamples_in + 16) * 4 + ndm * kept * 4);
        }
        // Linear in the DM trials, as the file search's budget assumes.
        auto none = c, one = c;
        none.dms.clear();
        one.dms.resize(1);
        const auto e0 = DedispersionPlan::estimate_workspace(none, Backend::cpu).host_bytes;
        const auto e1 = DedispersionPlan::estimate_workspace(one, Backend::cpu).host_bytes;
        EXPECT_EQ(e0 + ndm * (e1 - e0), w.host_bytes);
      }
}
