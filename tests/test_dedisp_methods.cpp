// Sub-band and FDMT dedispersion on the CPU (issue 13): each against a naive sum written here
// along the delays the plan reports, those delays against the physics (the exact dispersion
// curve) and brute force (the smearing bound the plan reports), the reports, and bad settings.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "dedisp/method_tables.hpp"
#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"

using namespace warpbeam;
using namespace warpbeam::dedisp;

namespace {

constexpr double kK = 4.148808e3;  // s MHz^2 pc^-1 cm^3, written out here

std::vector<std::uint8_t> random_codes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(rng());
  return b;
}

// Sample (t, ch) of 8-bit or float32 input.
double sample(const DedispersionConfig& c, const std::vector<std::uint8_t>& in, std::int64_t t,
              int ch) {
  if (c.nbits == 32) {
    float f;
    std::memcpy(&f, in.data() + (t * c.nchans + ch) * 4, 4);
    return f;
  }
  return in[static_cast<std::size_t>(t * c.nchans + ch)];
}

bool kept(const DedispersionConfig& c, int ch) {
  return c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)];
}

std::vector<std::uint8_t> random_input(const DedispersionConfig& c, std::uint32_t seed) {
  const std::size_t n = static_cast<std::size_t>(c.nsamples_in) * c.nchans;
  if (c.nbits == 8) return random_codes(n, seed);
  auto f = wbtest::random_floats(n, seed, -3, 10);
  std::vector<std::uint8_t> in(n * 4);
  std::memcpy(in.data(), f.data(), in.size());
  return in;
}

std::vector<float> run(const DedispersionPlan& plan, const std::vector<std::uint8_t>& in) {
  std::vector<float> out(static_cast<std::size_t>(plan.ndms() * plan.nsamples_out()), NAN);
  plan.execute(
      View<const std::uint8_t, 2>(in.data(), {plan.config().nsamples_in, plan.row_bytes()}),
      View<float, 2>(out.data(), {plan.ndms(), plan.nsamples_out()}));
  return out;
}

// out[i][t] == sum over kept channels of in[t + delays[i][ch]][ch], exactly for 8-bit input,
// within 1e-5 max|ref| for float32.
void expect_sum_along(const DedispersionPlan& plan, const std::vector<std::uint8_t>& in,
                      const std::vector<float>& got, const std::vector<std::int32_t>& delays) {
  const auto& c = plan.config();
  const std::int64_t nt = plan.nsamples_out();
  for (std::int64_t i = 0; i < plan.ndms(); ++i) {
    double maxref = 0, maxerr = 0;
    std::int64_t worst = 0;
    std::vector<double> ref(static_cast<std::size_t>(nt), 0.0);
    for (std::int64_t t = 0; t < nt; ++t) {
      for (int ch = 0; ch < c.nchans; ++ch)
        if (kept(c, ch)) ref[t] += sample(c, in, t + delays[i * c.nchans + ch], ch);
      maxref = std::max(maxref, std::abs(ref[t]));
    }
    for (std::int64_t t = 0; t < nt; ++t) {
      const float g = got[static_cast<std::size_t>(i * nt + t)];
      const double e = std::isnan(g) ? INFINITY : std::abs(g - ref[t]);
      if (e > maxerr) maxerr = e, worst = t;
    }
    const double tol = c.nbits == 32 ? 1e-5 * maxref : 0.0;
    if (maxerr > tol) {
      ADD_FAILURE() << to_string(c.algorithm) << " trial " << i << " sample " << worst << ": got "
                    << got[i * nt + worst] << ", expected " << ref[worst];
      return;
    }
  }
}

double freq(const DedispersionConfig& c, int ch) {
  return c.fch1_mhz + ch * c.foff_mhz;
}

// Exact delay (samples) of channel ch at `dm` relative to the band's highest frequency.
double exact_delay(const DedispersionConfig& c, double dm, int ch) {
  const double fhi = std::max(freq(c, 0), freq(c, c.nchans - 1));
  const double f = freq(c, ch);
  return kK * dm * (1 / (f * f) - 1 / (fhi * fhi)) / c.tsamp_s;
}

// 96 channels (not a power of two), 8-bit, DMs by dedisp's rule, a few channels killed.
DedispersionConfig lband(Algorithm a, int nbits = 8) {
  DedispersionConfig c;
  c.nchans = 96;
  c.fch1_mhz = 1500;
  c.foff_mhz = -3.125;
  c.tsamp_s = 128e-6;
  c.nbits = nbits;
  c.dms = dm_list_dedisp(0, 400, 40, 1.25, c.nchans, c.tsamp_s, c.fch1_mhz, c.foff_mhz);
  c.killmask.assign(static_cast<std::size_t>(c.nchans), 1);
  for (int ch : {3, 40, 41, 95})
    c.killmask[ch] = 0;
  c.algorithm = a;
  const auto d = delay_table(c);
  c.nsamples_in = *std::max_element(d.begin(), d.end()) + 1500;
  return c;
}

// D1 (DESIGN.md) with a short gulp.
DedispersionConfig d1(Algorithm a, std::int64_t nout) {
  DedispersionConfig c;
  c.nchans = 1024;
  c.fch1_mhz = 1500;
  c.foff_mhz = -0.29296875;
  c.tsamp_s = 64e-6;
  c.nbits = 8;
  c.dms = dm_list_dedisp(0, 1000, 40, 1.25, c.nchans, c.tsamp_s, c.fch1_mhz, c.foff_mhz);
  c.algorithm = a;
  const auto d = delay_table(c);
  c.nsamples_in = *std::max_element(d.begin(), d.end()) + nout;
  return c;
}

// Effective width of a pulse in a band whose lowest frequency is flo (MHz), as SubbandConfig
// states it, written out independently.
double width_s(const DedispersionConfig& c, double dm, double flo) {
  const double w = c.pulse_width_us * 1e-6;
  const double tchan = 8.3e-6 * std::abs(c.foff_mhz) * dm / std::pow(flo * 1e-3, 3);
  return std::sqrt(w * w + c.tsamp_s * c.tsamp_s + tchan * tchan);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sub-band

TEST(DedispSubband, SumsAlongItsDelaysWithinTheBoundAgainstBruteForce) {
  for (int nsub : {0, 1, 5, 12}) {
    auto c = lband(Algorithm::subband);
    c.subband.subbands = nsub;
    c.threads = nsub % 2 + 1;
    c.cpu_tuning.samples_per_tile = nsub == 5 ? 100 : 0;  // several partial blocks
    SCOPED_TRACE("subbands " + std::to_string(nsub));
    DedispersionPlan plan(c, Backend::cpu);
    const auto& r = plan.trials();
    const auto bf = delay_table(c);
    const auto in = random_input(c, 11 + nsub);
    const auto got = run(plan, in);
    // 1. The output is the sum along the reported delays (exact: 8-bit codes).
    expect_sum_along(plan, in, got, r.delays);
    // 2. The output lies within the envelope that the reported error allows around brute force:
    //    sum_c min / max of x[t + D(i, c) + e][c] over |e| <= max_delay_error[i].
    const std::int64_t nt = plan.nsamples_out();
    for (std::int64_t i = 0; i < plan.ndms(); i += 7) {
      const int E = r.max_delay_error[i];
      for (std::int64_t t = 0; t < nt; t += 13) {
        double lo = 0, hi = 0;
        for (int ch = 0; ch < c.nchans; ++ch) {
          if (!kept(c, ch)) continue;
          double mn = INFINITY, mx = -INFINITY;
          for (int e = -E; e <= E; ++e) {
            const std::int64_t s = t + bf[i * c.nchans + ch] + e;
            if (s < 0 || s >= c.nsamples_in) continue;
            mn = std::min(mn, sample(c, in, s, ch));
            mx = std::max(mx, sample(c, in, s, ch));
          }
          lo += mn, hi += mx;
        }
        const float g = got[i * nt + t];
        ASSERT_TRUE(g >= lo && g <= hi)
            << "trial " << i << " t " << t << ": " << g << " not in [" << lo << ", " << hi << "]";
      }
    }
    // 3. The smearing bound, recomputed here from the coarse grid: every sub-band of the cut
    //    (nearly equal channel counts, in frequency order) within `smearing` of its width.
    const int S = r.subbands;
    ASSERT_GE(S, 1);
    ASSERT_LE(S, c.nchans);
    if (nsub > 0) EXPECT_EQ(S, nsub);
    for (std::int64_t i = 0; i < plan.ndms(); ++i) {
      const double dmj = r.coarse_dms[r.coarse_trial[i]];
      double worst = 0;
      for (int s = 0; s < S; ++s) {
        const int c0 = s * c.nchans / S, c1 = (s + 1) * c.nchans / S - 1;  // foff < 0
        bool any = false;
        for (int ch = c0; ch <= c1; ++ch)
          any = any || kept(c, ch);
        if (!any) continue;
        const double fh = freq(c, c0), fl = freq(c, c1);
        const double t_sb = kK * std::abs(c.dms[i] - dmj) * (1 / (fl * fl) - 1 / (fh * fh));
        EXPECT_LE(t_sb, c.subband.smearing * width_s(c, c.dms[i], fl) * (1 + 1e-6))
            << "trial " << i << " sub-band " << s;
        worst = std::max(worst, t_sb);
      }
      EXPECT_NEAR(r.subband_smearing_s[i], worst, 1e-6 * worst + 1e-9);
      // Whole-sample delays: the sub-band's sweep error plus the roundings of both stages.
      EXPECT_LE(r.max_delay_error[i], std::ceil(worst / c.tsamp_s) + 1) << "trial " << i;
      for (int ch = 0; ch < c.nchans; ++ch)
        if (kept(c, ch)) {
          EXPECT_GE(r.delays[i * c.nchans + ch], 0);
          EXPECT_LE(r.delays[i * c.nchans + ch], plan.max_delay());
        }
    }
    // 4. Fewer additions than brute force when the plan chooses the cut.
    if (nsub == 0) {
      const double brute = static_cast<double>(plan.ndms()) * 92 * nt;
      EXPECT_LT(plan.operations().additions, brute);
    }
  }
}

TEST(DedispSubband, FloatInputAndAscendingFrequencies) {
  auto c = lband(Algorithm::subband, 32);
  c.fch1_mhz = 1200;
  c.foff_mhz = 3.125;  // channel 0 is the lowest frequency
  c.killmask.clear();
  const auto d = delay_table(c);
  c.nsamples_in = *std::max_element(d.begin(), d.end()) + 700;
  DedispersionPlan plan(c, Backend::cpu);
  const auto in = random_input(c, 5);
  expect_sum_along(plan, in, run(plan, in), plan.trials().delays);
  EXPECT_LT(plan.trials().coarse_dms.size(), c.dms.size());
}

TEST(DedispSubband, D1NeedsFarFewerAdditions) {
  // The default keeps every trial's predicted S/N >= 95 % of brute force's; a bound of 90 %
  // buys the "tenth of the additions" of PRESTO-style plans (the narrow 40 us pulse of D1's DM
  // list loses the rest to the second rounding at low DM).
  for (double min_snr : {0.95, 0.90}) {
    auto c = d1(Algorithm::subband, 4096);
    c.subband.min_snr_fraction = min_snr;
    DedispersionPlan plan(c, Backend::cpu);
    const auto& r = plan.trials();
    const double brute = 1024.0 * 1122 * plan.nsamples_out();
    const double ratio = brute / plan.operations().additions;
    const float worst_snr = *std::min_element(r.snr_fraction.begin(), r.snr_fraction.end());
    const int worst_err = *std::max_element(r.max_delay_error.begin(), r.max_delay_error.end());
    std::printf(
        "[ D1 subband, min S/N %.2f ] %d sub-bands, %zu coarse DMs x %d phases for %zu trials: "
        "%.2fx fewer additions; worst predicted S/N %.4f, worst delay error %d samples, max "
        "added smearing %.1f us\n",
        min_snr, r.subbands, r.coarse_dms.size(), r.subband_phases, r.dms.size(), ratio, worst_snr,
        worst_err, 1e6 * *std::max_element(r.smearing_s.begin(), r.smearing_s.end()));
    EXPECT_EQ(r.dms.size(), 1122u);
    EXPECT_GE(ratio, min_snr > 0.92 ? 5.5 : 8.0);
    // Every trial keeps the bound, except a trial that no coarse DM can serve (its own group).
    for (std::size_t i = 0; i < r.dms.size(); ++i)
      if (r.snr_fraction[i] < min_snr) {
        const int j = r.coarse_trial[i];
        EXPECT_EQ(std::count(r.coarse_trial.begin(), r.coarse_trial.end(), j), 1) << "trial " << i;
      }
    EXPECT_EQ(plan.max_delay(), *std::max_element(plan.delays().begin(), plan.delays().end()));
  }
}

TEST(DedispSubband, BadSettingsAreInvalidArgumentsNamingTheField) {
  auto expect_error = [](DedispersionConfig c, const std::string& word) {
    try {
      DedispersionPlan plan(c, Backend::cpu);
      ADD_FAILURE() << "accepted (" << word << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  auto c = lband(Algorithm::subband);
  c.subband.subbands = 97;  // more sub-bands than the 96 channels
  expect_error(c, "subband.subbands");
  c = lband(Algorithm::subband);
  c.subband.subbands = 8;
  c.subband.coarse_dm_step = 50;  // far coarser than 8 sub-bands of 12 channels allow
  expect_error(c, "coarser");
  c.subband.coarse_dm_step = -1;
  expect_error(c, "subband.coarse_dm_step");
  c = lband(Algorithm::subband);
  c.subband.smearing = 0;
  expect_error(c, "subband.smearing");
  c = lband(Algorithm::subband);
  c.pulse_width_us = 0;
  expect_error(c, "pulse_width_us");
  // A step the bound allows is accepted, and its grid is uniform.
  c = lband(Algorithm::subband);
  c.subband.subbands = 8;
  c.subband.coarse_dm_step = 0.5;
  DedispersionPlan plan(c, Backend::cpu);
  for (float dm : plan.trials().coarse_dms)
    EXPECT_NEAR(std::fmod(dm + 1e-4, 0.5), 0, 1e-3);
}

// The packed stage-2 schedule of the CUDA sub-band method (subband_schedule.cpp; the kernel that
// runs it is checked against the CPU in test_dedisp_methods_gpu.cpp): every used stage-1 window of
// a coarse group is staged exactly once, in the stage of its sub-band, at its own length (to 4
// words) from a 16-byte aligned element at most 3 before min_shift; each stage fits its area and
// sub-band limit; and each (trial, sub-band) offset puts the trial's block of samples inside its
// window, at shift - the window's first sample.
TEST(DedispSubband, GroupScheduleStagesEveryWindowOnceWithinItsArea) {
  struct Case {
    DedispersionConfig c;
    std::int64_t area;
    int max_sub;
  };
  std::vector<Case> cases{{d1(Algorithm::subband, 4096), 26000, 64},
                          {d1(Algorithm::subband, 4096), 9000, 5},
                          {lband(Algorithm::subband), 3000, 64},
                          {lband(Algorithm::subband), 1000, 3}};
  const int block = 256;
  for (const auto& k : cases) {
    SCOPED_TRACE("area " + std::to_string(k.area) + ", <= " + std::to_string(k.max_sub));
    const auto t = dedisp::detail::plan_subbands(k.c, delay_table(k.c));
    const int nsub = t.nsub();
    std::vector<std::int64_t> sub_offset, sub_len;
    std::int64_t at = 0;
    for (int s = 0; s < nsub; ++s) {  // rows longer than their largest shift, as the plan's
      std::int32_t most = 0;
      for (std::int64_t q = 0; q < t.nrows1(); ++q)
        most = std::max(most, t.max_shift[static_cast<std::size_t>(q) * nsub + s]);
      sub_offset.push_back(at);
      sub_len.push_back(most + 300 + 7 * s);
      at += t.nrows1() * sub_len.back();
    }
    const auto g = dedisp::detail::plan_subband_group_schedule(t, sub_offset, sub_len, block,
                                                               k.area, k.max_sub);
    ASSERT_EQ(g.stage_begin.size(), static_cast<std::size_t>(t.ncoarse()) + 1);
    ASSERT_EQ(g.offset.size(), t.coarse_of.size() * nsub);
    std::vector<int> staged(t.used.size(), 0);
    std::vector<std::int32_t> stage_of_sub(static_cast<std::size_t>(t.ncoarse()) * nsub, -1);
    std::vector<std::int32_t> dst(t.used.size(), -1);
    std::vector<std::int64_t> lo_of(t.used.size(), 0);
    for (int j = 0; j < t.ncoarse(); ++j) {
      int next_sub = 0;
      for (int st = g.stage_begin[j]; st < g.stage_begin[j + 1]; ++st) {
        const auto& S = g.stages[st];
        EXPECT_EQ(S.sub_lo, next_sub);
        EXPECT_GT(S.sub_hi, S.sub_lo);
        EXPECT_LE(S.sub_hi - S.sub_lo, k.max_sub);
        next_sub = S.sub_hi;
        std::int64_t words = 0;
        for (int r = S.row_lo; r < S.row_hi; ++r) {
          const auto& w = g.rows[r];
          // The window's row and sub-band, from its source element.
          int s = 0;
          while (s + 1 < nsub && sub_offset[s + 1] <= w.src + 3)
            ++s;
          // The window starts up to 3 samples before min_shift, at a multiple of 4 elements.
          const std::int64_t rel = w.src - sub_offset[s];
          const std::int64_t q = (rel + 3) / sub_len[s];
          const std::int64_t lo = rel - q * sub_len[s];
          const std::size_t qs = static_cast<std::size_t>(q) * nsub + s;
          ASSERT_GE(s, S.sub_lo);
          ASSERT_LT(s, S.sub_hi);
          ASSERT_GE(q, t.phase_begin[j]);
          ASSERT_LT(q, t.phase_begin[j + 1]);
          EXPECT_EQ(w.src % 4, 0);
          EXPECT_LE(lo, t.min_shift[qs]);
          EXPECT_GT(lo, t.min_shift[qs] - 4);
          EXPECT_EQ(w.limit, sub_len[s] - lo);
          EXPECT_EQ(w.len % 4, 0);
          EXPECT_GE(w.len, block + t.max_shift[qs] - lo);
          EXPECT_LT(w.len, block + t.max_shift[qs] - lo + 4);
          EXPECT_TRUE(t.used[qs]);
          EXPECT_EQ(w.dst, words);  // packed: each window right after the one before
          words += w.len;
          ++staged[qs];
          dst[qs] = w.dst;
          lo_of[qs] = lo;
          for (int x = S.sub_lo; x < S.sub_hi; ++x)
            stage_of_sub[static_cast<std::size_t>(j) * nsub + x] = st;
        }
        EXPECT_LE(words, k.area);
        EXPECT_LE(words, g.max_stage_words);
      }
      EXPECT_EQ(next_sub, nsub);
    }
    for (std::size_t qs = 0; qs < t.used.size(); ++qs)
      EXPECT_EQ(staged[qs], t.used[qs] ? 1 : 0)
          << "row " << qs / nsub << ", sub-band " << qs % nsub;
    for (std::size_t i = 0; i < t.coarse_of.size(); ++i)
      for (int s = 0; s < nsub; ++s) {
        const std::size_t is = i * nsub + s;
        const std::size_t qs =
            static_cast<std::size_t>(t.phase_begin[t.coarse_of[i]] + t.phase[is]) * nsub + s;
        ASSERT_TRUE(t.used[qs]);
        EXPECT_EQ(g.offset[is], dst[qs] + t.shift[is] - lo_of[qs]);
        EXPECT_GE(g.offset[is], dst[qs]);
        EXPECT_LE(g.offset[is] + block, dst[qs] + block + t.max_shift[qs] - lo_of[qs]);
      }
  }
  // Fewer blocks per SM where a block's share does not hold a sub-band's windows: an area of
  // 100 words (less than one 256-sample window) at 3 or more blocks, ample at 2; none that holds
  // them at any count: unsupported.
  {
    const auto c = d1(Algorithm::subband, 4096);
    const auto t = dedisp::detail::plan_subbands(c, delay_table(c));
    std::vector<std::int64_t> off(t.nsub()), len(t.nsub());
    std::int64_t at = 0;
    for (int s = 0; s < t.nsub(); ++s) {
      std::int32_t most = 0;
      for (std::int64_t q = 0; q < t.nrows1(); ++q)
        most = std::max(most, t.max_shift[static_cast<std::size_t>(q) * t.nsub() + s]);
      off[s] = at;
      len[s] = most + 300;
      at += t.nrows1() * len[s];
    }
    int used = 0;
    const auto g = dedisp::detail::plan_subband_group_schedule_fitting(
        t, off, len, block, 64, 5, [](int b) -> std::int64_t { return b >= 3 ? 100 : 1 << 20; },
        &used);
    EXPECT_EQ(used, 2);
    EXPECT_FALSE(g.rows.empty());
    EXPECT_THROW(dedisp::detail::plan_subband_group_schedule_fitting(
                     t, off, len, block, 64, 5, [](int) -> std::int64_t { return 100; }, &used),
                 Error);
  }
  // The benchmarking override of the group kernel's launch: garbage and out-of-range values are
  // refused, naming the variable; a good one is read.
  int warps = 0, blocks = 0;
  dedisp::detail::parse_subband_group_override("10,3", 16, &warps, &blocks);
  EXPECT_EQ(warps, 10);
  EXPECT_EQ(blocks, 3);
  for (const char* bad : {"", "abc", "10", "0,3", "17,3", "10,0", "10,33", ",3", "-1,2"}) {
    try {
      dedisp::detail::parse_subband_group_override(bad, 16, &warps, &blocks);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find("WARPBEAM_SUBBAND_GROUP"), std::string::npos) << bad;
    }
  }
  // A window larger than the area: unsupported, naming the sub-band.
  const auto c = lband(Algorithm::subband);
  const auto t = dedisp::detail::plan_subbands(c, delay_table(c));
  std::vector<std::int64_t> off(t.nsub(), 0), len(t.nsub(), 100000);
  try {
    dedisp::detail::plan_subband_group_schedule(t, off, len, block, block, 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::unsupported);
    EXPECT_NE(std::string(e.what()).find("sub-band"), std::string::npos) << e.what();
  }
}

// 8-bit codes are summed in 16-bit integers (stage 1) and widened integers (stage 2), float32
// input in float32: both sums are exact (integers below 2^24), so the outputs agree bit for bit.
// The same codes fed as float32 force the float path; the integer path is checked to run where
// the bound allows it (every sub-band's sum of codes within uint16) and not where it does not.
TEST(DedispSubband, IntegerSumsOfCodesEqualTheFloatSumsBitForBit) {
  struct Case {
    const char* name;
    DedispersionConfig c;
    bool codes;  // whether the 8-bit plan takes the integer path
  };
  std::vector<Case> cases;
  for (int nsub : {0, 1, 5, 12}) {
    auto c = lband(Algorithm::subband);
    c.subband.subbands = nsub;
    c.threads = nsub % 2 + 1;
    c.cpu_tuning.samples_per_tile = nsub == 5 ? 100 : 0;  // several partial blocks
    cases.push_back({"lband", c, true});
  }
  {
    auto c = d1(Algorithm::subband, 3000);  // D1's cut (64 sub-bands), a gulp not of 64s
    c.dms.resize(200);
    const auto d = delay_table(c);
    c.nsamples_in = *std::max_element(d.begin(), d.end()) + 3001;
    c.threads = 2;
    cases.push_back({"D1", c, true});
  }
  {
    // Sub-bands of 300 channels: 300 x 255 does not fit in uint16, so the float path runs.
    DedispersionConfig c;
    c.nchans = 600;
    c.fch1_mhz = 1500;
    c.foff_mhz = -0.5;
    c.tsamp_s = 128e-6;
    c.dms = dm_list_linear(0, 60, 3);
    c.algorithm = Algorithm::subband;
    c.subband.subbands = 2;
    const auto d = delay_table(c);
    c.nsamples_in = *std::max_element(d.begin(), d.end()) + 777;
    cases.push_back({"wide sub-bands", c, false});
  }
  std::uint32_t seed = 40;
  for (const auto& k : cases) {
    SCOPED_TRACE(std::string(k.name) + ", " + std::to_string(k.c.subband.subbands) + " sub-bands");
    const DedispersionPlan codes(k.c, Backend::cpu);
    auto cf = k.c;
    cf.nbits = 32;
    const DedispersionPlan floats(cf, Backend::cpu);
    const bool int_path = codes.kernel_description().find("16-bit integers") != std::string::npos;
    EXPECT_EQ(int_path, k.codes) << codes.kernel_description();
    EXPECT_EQ(floats.kernel_description().find("16-bit integers"), std::string::npos);
    ASSERT_EQ(codes.trials().delays, floats.trials().delays);  // the same sums to make
    // Random codes, the full range included.
    auto in8 = random_codes(static_cast<std::size_t>(k.c.nsamples_in) * k.c.nchans, seed++);
    for (std::size_t i = 0; i < in8.size(); i += 97)
      in8[i] = 255;
    std::vector<std::uint8_t> in32(in8.size() * 4);
    for (std::size_t i = 0; i < in8.size(); ++i) {
      const auto f = static_cast<float>(in8[i]);
      std::memcpy(in32.data() + 4 * i, &f, 4);
    }
    const auto got = run(codes, in8);  // run() poisons the output with NaN first
    const auto want = run(floats, in32);
    ASSERT_EQ(got.size(), want.size());
    std::size_t differ = 0, first = got.size();
    for (std::size_t i = 0; i < got.size(); ++i) {
      std::uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      if (a != b) {
        if (differ++ == 0) first = i;
      }
    }
    EXPECT_EQ(differ, 0u) << "first at trial " << first / codes.nsamples_out() << " sample "
                          << first % codes.nsamples_out() << ": " << got[first] << " vs "
                          << want[first];
    // And the sums are the sums along the reported delays (exact), not merely equal.
    if (k.c.nchans < 200) expect_sum_along(codes, in8, got, codes.trials().delays);
  }
}

// A sub-band plan runs gulps shorter than it was made for (the file search's first and last
// gulps), bit for bit as a plan made for the shorter gulp; brute force and FDMT refuse them.
TEST(DedispSubband, APlanRunsShorterGulpsBitForBit) {
  for (int nbits : {8, 32}) {
    for (int nsub : {0, 5}) {
      auto c = lband(Algorithm::subband, nbits);
      c.subband.subbands = nsub;
      c.threads = 2;
      c.cpu_tuning.samples_per_tile = nsub == 5 ? 300 : 0;  // several macro blocks
      SCOPED_TRACE("nbits " + std::to_string(nbits) + ", subbands " + std::to_string(nsub));
      const DedispersionPlan plan(c, Backend::cpu);
      ASSERT_TRUE(plan.accepts_shorter_input());
      EXPECT_TRUE(DedispersionPlan::accepts_shorter_input(c, Backend::cpu));
      const std::int64_t D = plan.max_delay();
      const auto in = random_input(c, 70 + nbits + nsub);
      const auto full = run(plan, in);
      for (std::int64_t rows : {c.nsamples_in - 1, D + 1000, D + 301, D + 64, D + 1}) {
        SCOPED_TRACE("rows " + std::to_string(rows));
        auto cs = c;
        cs.nsamples_in = rows;
        const DedispersionPlan shorter(cs, Backend::cpu);
        ASSERT_EQ(shorter.trials().delays, plan.trials().delays);
        const std::int64_t nt = rows - D;
        std::vector<std::uint8_t> head(
            in.begin(), in.begin() + static_cast<std::ptrdiff_t>(rows * plan.row_bytes()));
        const auto want = run(shorter, head);
        // The same rows through the longer plan, its output poisoned first.
        std::vector<float> got(static_cast<std::size_t>(plan.ndms() * nt), NAN);
        plan.execute(View<const std::uint8_t, 2>(head.data(), {rows, plan.row_bytes()}),
                     View<float, 2>(got.data(), {plan.ndms(), nt}));
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
        // And the first samples are the full gulp's (the same sums of the same rows).
        for (std::int64_t i = 0; i < plan.ndms(); i += 5)
          ASSERT_EQ(std::memcmp(got.data() + i * nt, full.data() + i * plan.nsamples_out(),
                                static_cast<std::size_t>(nt) * sizeof(float)),
                    0)
              << "trial " << i;
        // Quantised output takes the shorter gulp too.
        std::vector<std::uint16_t> q(static_cast<std::size_t>(plan.ndms() * nt), 0xFFFF);
        const OutputScaling scaling{0.5f, 1.0f};
        plan.execute(View<const std::uint8_t, 2>(head.data(), {rows, plan.row_bytes()}),
                     View<std::uint16_t, 2>(q.data(), {plan.ndms(), nt}), scaling);
        for (std::size_t k = 0; k < q.size(); k += 37)
          ASSERT_EQ(q[k], quantise_output(want[k], scaling, 16)) << k;
      }
      // Not more rows than planned, nor so few that no output sample is left; the output's
      // length must follow the input's.
      std::vector<std::uint8_t> more(in);
      more.resize(in.size() + static_cast<std::size_t>(plan.row_bytes()));
      std::vector<float> out(static_cast<std::size_t>(plan.ndms() * (plan.nsamples_out() + 1)));
      EXPECT_THROW(plan.execute(View<const std::uint8_t, 2>(more.data(),
                                                            {c.nsamples_in + 1, plan.row_bytes()}),
                                View<float, 2>(out.data(), {plan.ndms(), plan.nsamples_out() + 1})),
                   Error);
      EXPECT_THROW(plan.execute(View<const std::uint8_t, 2>(in.data(), {D, plan.row_bytes()}),
                                View<float, 2>(out.data(), {plan.ndms(), 0})),
                   Error);
      EXPECT_THROW(plan.execute(View<const std::uint8_t, 2>(in.data(), {D + 10, plan.row_bytes()}),
                                View<float, 2>(out.data(), {plan.ndms(), 11})),
                   Error);
    }
  }
  // Brute force and FDMT plans are made for their length: a shorter gulp is refused.
  for (Algorithm a : {Algorithm::automatic, Algorithm::tiled, Algorithm::fdmt}) {
    const auto c = lband(a);
    SCOPED_TRACE(to_string(a));
    const DedispersionPlan plan(c, Backend::cpu);
    EXPECT_FALSE(plan.accepts_shorter_input());
    EXPECT_FALSE(DedispersionPlan::accepts_shorter_input(c, Backend::cuda));
    const auto in = random_input(c, 3);
    const std::int64_t rows = c.nsamples_in - 100;
    std::vector<float> out(static_cast<std::size_t>(plan.ndms() * (rows - plan.max_delay())));
    EXPECT_THROW(plan.execute(View<const std::uint8_t, 2>(in.data(), {rows, plan.row_bytes()}),
                              View<float, 2>(out.data(), {plan.ndms(), rows - plan.max_delay()})),
                 Error);
  }
  auto c = lband(Algorithm::subband);
  EXPECT_TRUE(DedispersionPlan::accepts_shorter_input(c, Backend::cuda));
}

// ---------------------------------------------------------------------------------------------
// FDMT

TEST(DedispFdmt, SumsExactlyAlongItsOwnDelayCurves) {
  struct Shape {
    int nchans;
    double foff;
    std::int64_t block;
    bool mask;
  };
  const Shape shapes[] = {{96, -3.125, 0, true},
                          {77, 2.5, 333, false},
                          {1, -1, 0, false},
                          {2, -4, 64, false},
                          {130, -1, 1000, true}};
  int seed = 0;
  for (const auto& s : shapes) {
    DedispersionConfig c;
    c.nchans = s.nchans;
    c.fch1_mhz = s.foff < 0 ? 1500 : 1250;
    c.foff_mhz = s.foff;
    c.tsamp_s = 128e-6;
    c.nbits = 8;
    c.dms = dm_list_linear(0, 350, 9.7);
    c.algorithm = Algorithm::fdmt;
    c.fdmt.block = s.block;
    c.threads = seed % 2 + 1;
    if (s.mask) {
      c.killmask.assign(static_cast<std::size_t>(c.nchans), 1);
      c.killmask[5] = c.killmask[6] = c.killmask[static_cast<std::size_t>(c.nchans - 1)] = 0;
    }
    const auto d = delay_table(c);
    c.nsamples_in = *std::max_element(d.begin(), d.end()) + 2500;
    SCOPED_TRACE("nchans " + std::to_string(s.nchans));
    DedispersionPlan plan(c, Backend::cpu);
    const auto& r = plan.trials();
    const auto in = random_input(c, 40 + seed++);
    expect_sum_along(plan, in, run(plan, in), r.delays);
    // The curves: start at 0 at the highest frequency, reach the row's integer delay at the
    // lowest, never decrease towards lower frequencies, and follow the exact dispersion curve
    // of the row's DM to within a few samples (the roundings of the tree's splits).
    int worst = 0;
    for (std::int64_t i = 0; i < plan.ndms(); ++i) {
      const int hi_ch = s.foff < 0 ? 0 : c.nchans - 1, lo_ch = c.nchans - 1 - hi_ch;
      const std::int32_t* cur = r.delays.data() + i * c.nchans;
      EXPECT_EQ(cur[hi_ch], 0);
      EXPECT_EQ(cur[lo_ch], r.fdmt_delay[i]);
      EXPECT_EQ(r.fdmt_delay[i], d[i * c.nchans + lo_ch]);  // brute force's lowest channel
      for (int ch = 1; ch < c.nchans; ++ch) {
        const int a = s.foff < 0 ? ch - 1 : ch, b = s.foff < 0 ? ch : ch - 1;  // a above b
        EXPECT_LE(cur[a], cur[b]);
      }
      for (int ch = 0; ch < c.nchans; ++ch)
        worst = std::max(
            worst, static_cast<int>(std::ceil(std::abs(cur[ch] - exact_delay(c, r.dms[i], ch)))));
      // The row's DM is its integer delay across the band.
      if (c.nchans > 1) EXPECT_NEAR(exact_delay(c, r.dms[i], lo_ch), r.fdmt_delay[i], 1e-3);
    }
    EXPECT_LE(worst, 3);
  }
}

TEST(DedispFdmt, EveryIntegerDelayIsATrial) {
  auto c = lband(Algorithm::fdmt);
  // One DM per integer delay across the band, 0 .. 120.
  const double per_dm = exact_delay(c, 1.0, c.nchans - 1);
  c.dms.clear();
  for (int k = 0; k <= 120; ++k)
    c.dms.push_back(static_cast<float>(k / per_dm));
  const auto d = delay_table(c);
  c.nsamples_in = *std::max_element(d.begin(), d.end()) + 900;
  DedispersionPlan plan(c, Backend::cpu);
  for (int k = 0; k <= 120; ++k)
    EXPECT_EQ(plan.trials().fdmt_delay[k], k);
  EXPECT_EQ(plan.trials().fdmt_max_delay, 120);
  const auto in = random_input(c, 9);
  expect_sum_along(plan, in, run(plan, in), plan.trials().delays);
}

TEST(DedispFdmt, D1NeedsFewerAdditionsAndBoundedMemory) {
  const auto c = d1(Algorithm::fdmt, 16384);
  DedispersionPlan plan(c, Backend::cpu);
  const auto& r = plan.trials();
  const double brute = 1024.0 * 1122 * plan.nsamples_out();
  const auto ops = plan.operations();
  const auto ws = plan.workspace();
  const float worst_snr = *std::min_element(r.snr_fraction.begin(), r.snr_fraction.end());
  std::printf(
      "[ D1 fdmt ] integer delays up to %d: %.2fx fewer additions than brute force on "
      "%lld samples, %.3g bytes moved, host workspace %.2f GB; worst predicted S/N %.4f\n",
      r.fdmt_max_delay, brute / ops.additions, static_cast<long long>(plan.nsamples_out()),
      ops.bytes, ws.host_bytes / 1e9, worst_snr);
  EXPECT_EQ(r.fdmt_max_delay, plan.max_delay());
  EXPECT_LT(ops.additions, brute / 2.5);
  // The tree's roundings cost a pulse narrower than a sample some S/N at low DM; once the
  // channels' own smearing spans several samples (DM >= 300 here) it is small.
  EXPECT_GE(worst_snr, 0.8f);
  for (std::size_t i = 0; i < r.dms.size(); ++i)
    if (c.dms[i] >= 300) EXPECT_GE(r.snr_fraction[i], 0.95f) << "DM " << c.dms[i];
  // Two level buffers of one block, never the plane: a longer gulp grows only the unpacked
  // input, and the workspace stays far below the integer-delay plane of D1 (2^20 samples).
  auto c4 = d1(Algorithm::fdmt, 4 * 16384);
  DedispersionPlan plan4(c4, Backend::cpu);
  EXPECT_EQ(plan4.workspace().host_bytes - ws.host_bytes,
            static_cast<std::int64_t>(3 * 16384) * 1024 * 4);
  const double plane = (r.fdmt_max_delay + 1.0) * (1 << 20) * 4;
  EXPECT_LT(static_cast<double>(ws.host_bytes), plane / 10);
}

// ---------------------------------------------------------------------------------------------
// Both, and the choice between the methods

TEST(DedispMethods, InjectedPulsePeaksAtItsDm) {
  // A pulse at trial 31's DM, each channel's fluence spread over its own dispersion smearing
  // (8.3 us MHz^-1 GHz^3 per unit DM), over constant data: each method finds it at that trial
  // (or a neighbour) and time, with at least 80 % of brute force's S/N: the best boxcar of
  // 1, 2, 4 or 8 samples over the trials, sum / sqrt(width) above the constant level. (The pulse
  // sits on brute force's own rounded delays, so brute force collects it whole; the search
  // tests compare realistic pulses.)
  auto c = lband(Algorithm::automatic);
  c.killmask.clear();
  const int true_trial = 31;
  const std::int64_t t_arrive = 700;
  std::vector<std::uint8_t> in(static_cast<std::size_t>(c.nsamples_in * c.nchans), 10);
  const double dm = c.dms[true_trial];
  for (int ch = 0; ch < c.nchans; ++ch) {
    const double f = freq(c, ch);
    const double smear = 8.3e-6 * std::abs(c.foff_mhz) * dm / std::pow(f * 1e-3, 3) / c.tsamp_s;
    const auto w = std::max<std::int64_t>(1, std::lround(smear));
    const double t = t_arrive + exact_delay(c, dm, ch);
    for (std::int64_t k = 0; k < w; ++k)
      in[(std::lround(t - 0.5 * (w - 1)) + k) * c.nchans + ch] =
          static_cast<std::uint8_t>(10 + std::lround(120.0 / w));
  }
  float brute_best = 0;
  for (Algorithm a : {Algorithm::automatic, Algorithm::subband, Algorithm::fdmt}) {
    c.algorithm = a;
    DedispersionPlan plan(c, Backend::cpu);
    const auto out = run(plan, in);
    std::int64_t best_d = -1, best_t = -1;
    double best = -1;
    const std::int64_t nt = plan.nsamples_out();
    for (std::int64_t d = 0; d < plan.ndms(); ++d)
      for (int w = 1; w <= 8; w *= 2)
        for (std::int64_t t = 0; t + w <= nt; ++t) {
          double sum = 0;
          for (int k = 0; k < w; ++k)
            sum += out[d * nt + t + k] - 10.0 * 96;
          if (sum / std::sqrt(w) > best) best = sum / std::sqrt(w), best_d = d, best_t = t;
        }
    SCOPED_TRACE(to_string(a));
    EXPECT_NEAR(best_d, true_trial, 1);
    EXPECT_NEAR(best_t, t_arrive, 4);
    if (a == Algorithm::automatic)
      brute_best = static_cast<float>(best);
    else
      EXPECT_GE(best, 0.8 * brute_best);
  }
}

TEST(DedispMethods, SelectPicksSubbandForD1AndBruteForceForATightBound) {
  const auto c = d1(Algorithm::automatic, 8192);
  const auto ch = select_algorithm(c, Backend::cpu);
  std::printf("[ select D1 cpu ] %s\n", ch.reason.c_str());
  EXPECT_EQ(ch.algorithm, Algorithm::subband);
  EXPECT_GT(ch.subband_s, 0);
  EXPECT_LT(ch.subband_s, ch.brute_s / 4);
  const auto strict = select_algorithm(c, Backend::cpu, 0.9999);
  EXPECT_EQ(strict.algorithm, Algorithm::automatic) << strict.reason;
  EXPECT_THROW(select_algorithm(c, Backend::cpu, 0), Error);
}

TEST(DedispMethods, NamesParseAndBruteForceReportsItsOwnDelays) {
  EXPECT_EQ(parse_algorithm("subband"), Algorithm::subband);
  EXPECT_EQ(parse_algorithm("fdmt"), Algorithm::fdmt);
  EXPECT_EQ(to_string(Algorithm::fdmt), "fdmt");
  auto c = lband(Algorithm::automatic);
  DedispersionPlan plan(c, Backend::cpu);
  EXPECT_EQ(plan.trials().delays, plan.delays());
  for (std::int64_t i = 0; i < plan.ndms(); ++i) {
    EXPECT_EQ(plan.trials().max_delay_error[i], 0);
    EXPECT_FLOAT_EQ(plan.trials().snr_fraction[i], 1.0f);
  }
  EXPECT_GT(plan.workspace().host_bytes, 0);
  EXPECT_DOUBLE_EQ(plan.operations().additions, static_cast<double>(plan.ndms()) * 92 *
                                                    static_cast<double>(plan.nsamples_out()));
}

// ---------------------------------------------------------------------------------------------
// Slices of a DM list (the file search's chunks and workers' DM ranges) and workspaces

namespace {

// Runs a slice [a, b) of the whole list's config `whole` with `grid` (for subband: the whole
// list's grid, SubbandConfig::trial_coarse_dms) on the same input, and checks that each of its
// trials sums along the whole list's delays and gives the whole list's output, exactly (8-bit).
void expect_slice_sums_as_the_whole(const DedispersionConfig& whole, std::int64_t a, std::int64_t b,
                                    bool explicit_grid) {
  const DedispersionPlan all(whole, Backend::cpu);
  const auto in = random_input(whole, 77);
  const auto out_all = run(all, in);
  auto c = whole;
  c.dms.assign(whole.dms.begin() + a, whole.dms.begin() + b);
  if (explicit_grid) {
    const auto& r = all.trials();
    c.subband.subbands = r.subbands;
    for (std::int64_t i = a; i < b; ++i) {
      c.subband.trial_coarse_dms.push_back(r.coarse_dms[r.coarse_trial[i]]);
      c.subband.trial_phases.push_back(r.coarse_phases[r.coarse_trial[i]]);
    }
  }
  const DedispersionPlan slice(c, Backend::cpu);
  const auto out = run(slice, in);
  const int n = whole.nchans;
  const std::int64_t nt = std::min(slice.nsamples_out(), all.nsamples_out());
  for (std::int64_t i = a; i < b; ++i) {
    const auto* want = all.trials().delays.data() + i * n;
    const auto* got = slice.trials().delays.data() + (i - a) * n;
    ASSERT_TRUE(std::equal(got, got + n, want)) << "trial " << i;
    for (std::int64_t t = 0; t < nt; ++t)
      ASSERT_EQ(out[(i - a) * slice.nsamples_out() + t], out_all[i * all.nsamples_out() + t])
          << "trial " << i << " sample " << t;
  }
}

}  // namespace

TEST(DedispSubband, AnExplicitGridMakesASliceSumAsTheWholeList) {
  for (int nsub : {0, 12}) {
    auto c = lband(Algorithm::subband);
    c.subband.subbands = nsub;
    SCOPED_TRACE("subbands " + std::to_string(nsub));
    const auto n = static_cast<std::int64_t>(c.dms.size());
    expect_slice_sums_as_the_whole(c, n / 3, n - 5, true);
    expect_slice_sums_as_the_whole(c, 1, 2, true);
  }
  // Bad explicit grids name the field.
  auto c = lband(Algorithm::subband);
  c.subband.subbands = 8;
  c.subband.trial_coarse_dms.assign(c.dms.size() - 1, 10.0f);
  c.subband.trial_phases.assign(c.dms.size() - 1, 1);
  EXPECT_THROW(DedispersionPlan(c, Backend::cpu), Error);
  c.subband.trial_coarse_dms.push_back(10.0f);
  c.subband.trial_phases.push_back(9);
  try {
    DedispersionPlan plan(c, Backend::cpu);
    ADD_FAILURE() << "phases 9 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("subband.trial_phases"), std::string::npos) << e.what();
  }
  c.subband.trial_phases.back() = 1;
  c.subband.subbands = 0;
  EXPECT_THROW(DedispersionPlan(c, Backend::cpu), Error);
  // A coarse DM far above a trial's: no shift keeps its delays within the trial's sweep.
  c.subband.subbands = 8;
  c.subband.trial_coarse_dms.assign(c.dms.size(), 400.0f);
  try {
    DedispersionPlan plan(c, Backend::cpu);
    ADD_FAILURE() << "coarse DM 400 for DM 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("subband.trial_coarse_dms[0]"), std::string::npos)
        << e.what();
  }
}

TEST(DedispFdmt, ASliceOfTheDmListSumsAsTheWholeList) {
  // A row of the transform depends on its own sub-tree only, so a slice prunes the tree
  // differently and still computes the same rows.
  auto c = lband(Algorithm::fdmt);
  c.fdmt.block = 300;
  const auto n = static_cast<std::int64_t>(c.dms.size());
  expect_slice_sums_as_the_whole(c, n / 2, n, false);
  expect_slice_sums_as_the_whole(c, 3, 17, false);
}

// The estimate made before a plan exists (from the tables, as the file search budgets with it)
// is exactly what the CPU plan holds, and preview() reports the plan's trials and work.
TEST(DedispMethods, WorkspaceEstimateIsWhatTheCpuPlanHolds) {
  for (Algorithm a : {Algorithm::subband, Algorithm::fdmt})
    for (int nbits : {8, 32})
      for (bool mask : {false, true}) {
        auto c = lband(a, nbits);
        if (!mask) c.killmask.clear();
        c.cpu_tuning.samples_per_tile = nbits == 8 ? 0 : 500;
        SCOPED_TRACE(to_string(a) + " nbits " + std::to_string(nbits) + (mask ? " mask" : ""));
        const DedispersionPlan plan(c, Backend::cpu);
        const Workspace w = plan.workspace();
        EXPECT_EQ(w.device_bytes, 0);
        EXPECT_EQ(DedispersionPlan::estimate_workspace(c, Backend::cpu).host_bytes, w.host_bytes);
        // At least the corner-turned gulp of the kept channels.
        const std::int64_t kept_channels =
            mask ? std::count(c.killmask.begin(), c.killmask.end(), 1) : c.nchans;
        // (Sub-band keeps 8-bit codes as bytes.)
        const int bytes = a == Algorithm::subband && nbits == 8 ? 1 : 4;
        EXPECT_GE(w.host_bytes, kept_channels * c.nsamples_in * bytes);
        const PlanPreview p = DedispersionPlan::preview(c, Backend::cpu);
        EXPECT_EQ(p.workspace.host_bytes, w.host_bytes);
        EXPECT_EQ(p.trials.delays, plan.trials().delays);
        EXPECT_EQ(p.trials.coarse_dms, plan.trials().coarse_dms);
        EXPECT_DOUBLE_EQ(p.operations.additions, plan.operations().additions);
      }
  // A bad config throws from preview() as from the plan.
  auto c = lband(Algorithm::subband);
  c.subband.subbands = 97;
  EXPECT_THROW(DedispersionPlan::preview(c, Backend::cpu), Error);
  EXPECT_THROW(DedispersionPlan::estimate_workspace(c, Backend::cpu), Error);
}

// The sub-band and FDMT tables are derived once per configuration and shared by the plans of it
// (method_cache.cpp): plans that differ only in the samples per execute share one report (the
// same object); a change of any field the tables depend on gives a plan its own.
TEST(DedispMethods, PlansOfOneConfigurationShareTheirTables) {
  auto config = [](Algorithm a, std::int64_t nout) {
    DedispersionConfig c;
    c.nchans = 130;
    c.fch1_mhz = 1200;
    c.foff_mhz = 0.7;
    c.tsamp_s = 64e-6;
    c.nbits = 8;
    c.dms = dm_list_dedisp(0, 150, 40, 1.25, c.nchans, c.tsamp_s, c.fch1_mhz, c.foff_mhz);
    c.algorithm = a;
    c.fdmt.block = 512;
    const auto d = delay_table(c);
    c.nsamples_in = *std::max_element(d.begin(), d.end()) + nout;
    return c;
  };
  for (Algorithm a : {Algorithm::subband, Algorithm::fdmt}) {
    SCOPED_TRACE(to_string(a));
    const DedispersionPlan first(config(a, 1000), Backend::cpu);
    const DedispersionPlan longer(config(a, 3000), Backend::cpu);
    EXPECT_EQ(&first.trials(), &longer.trials());
    EXPECT_EQ(first.trials().dms, longer.trials().dms);
    std::vector<DedispersionConfig> changed(5, config(a, 1000));
    changed[0].killmask.assign(130, 1);
    changed[0].killmask[7] = 0;
    changed[1].pulse_width_us = 80;
    changed[2].dms.pop_back();
    changed[3].tsamp_s = 128e-6;
    if (a == Algorithm::subband)
      changed[4].subband.subbands = 4;
    else
      changed[4].fdmt.block = 256;
    for (std::size_t k = 0; k < changed.size(); ++k) {
      auto& c = changed[k];
      const auto d = delay_table(c);
      c.nsamples_in = *std::max_element(d.begin(), d.end()) + 1000;
      const DedispersionPlan other(c, Backend::cpu);
      EXPECT_NE(&other.trials(), &first.trials()) << "change " << k;
    }
  }
}
