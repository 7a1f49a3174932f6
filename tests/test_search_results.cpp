// Issue 18's search-result bugs: a search that cannot search fails with the reason (B5: zero-DM
// of one channel; B6: too few samples after the delay, with the largest --dm-max that works),
// widths of several files in each file's own tsamp (B7), every zapped channel reported (mask,
// dead or non-finite, outlier), and a warning for a file without tstart.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/sim/filterbank.hpp"

using namespace warpbeam;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& w) {
  return s.find(w) != std::string::npos;
}

std::string simulate(const wbtest::TempDir& dir, const std::string& name, int nchans,
                     double tsamp_s, double snr = 20, int nbits = 8) {
  sim::FilterbankSimConfig s;
  s.nchans = nchans;
  s.foff_mhz = -256.0 / nchans;
  s.tsamp_s = tsamp_s;
  s.nbits = nbits;
  s.duration_s = 2;
  s.bursts = {{nchans > 1 ? 30.0 : 0.0, snr, 4e-3, 0.8}};
  const std::string path = dir.file(name);
  sim::simulate_filterbank(s, path);
  fs::remove(path + ".json");
  return path;
}

}  // namespace

// B5: a 1-channel file with the default zero-DM found 0 candidates without a word.
TEST(SearchResults, ZeroDmOfOneChannelIsAnError) {
  wbtest::TempDir dir;
  const auto one = simulate(dir, "one.fil", 1, 256e-6);
  auto r = wbtest::run_cli("search '" + one + "' --dm-max 0 --output '" + dir.file("o.cand") + "'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "--no-zero-dm")) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("o.cand")));
  r = wbtest::run_cli("search '" + one + "' --dm-max 0 --no-zero-dm");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "no candidates")) << r.out;
  // Zapping all but one channel, likewise; all of them is an error too.
  const auto many = simulate(dir, "many.fil", 16, 256e-6);
  r = wbtest::run_cli("search '" + many + "' --dm-max 10 --zap-chans 1-15");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "--no-zero-dm")) << r.err;
  r = wbtest::run_cli("search '" + many + "' --dm-max 10 --zap-chans 0-15 --no-zero-dm");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "every channel")) << r.err;
}

// B6: "boxcars 1-0", "no candidates", exit 0 for a file too short to search at that DM.
TEST(SearchResults, TooFewSamplesAfterTheDelayFailWithTheLargestDmMaxThatWorks) {
  WB_REQUIRE_DATA("filterbank/parkes_8bit_1.fil");
  const auto fil = wbtest::data_file("filterbank/parkes_8bit_1.fil");
  auto r = wbtest::run_cli("search '" + fil + "' --dm-max 255");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const std::smatch m = [&] {
    std::smatch mm;
    std::regex_search(r.err, mm, std::regex("lower --dm-max to at most ([0-9.]+)"));
    return mm;
  }();
  ASSERT_EQ(m.size(), 2u) << r.err;
  const double ok = std::stod(m[1]);
  EXPECT_GT(ok, 0);
  EXPECT_LT(ok, 255);
  // The value given works, and searches at least 128 samples ...
  r = wbtest::run_cli(fmt::format("search '{}' --dm-max {}", fil, ok));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::smatch s;
  ASSERT_TRUE(std::regex_search(r.out, s, std::regex("searched ([0-9]+) samples"))) << r.out;
  EXPECT_GE(std::stoll(s[1]), 128);
  EXPECT_FALSE(contains(r.out, "boxcars 1-0")) << r.out;
  // ... and a little more does not (the value is the largest, to 1 %).
  r = wbtest::run_cli(fmt::format("search '{}' --dm-max {}", fil, ok * 1.02 + 0.5));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  WB_REQUIRE_DATA("filterbank/small.fil");
  r = wbtest::run_cli("search '" + wbtest::data_file("filterbank/small.fil") + "' --dm-max 1");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "too short")) << r.err;
}

// B7: several files printed every file's widths with the first file's tsamp.
TEST(SearchResults, WidthsOfSeveralFilesUseEachFilesTsamp) {
  wbtest::TempDir dir;
  const auto a = simulate(dir, "a.fil", 64, 256e-6, 30);
  const auto b = simulate(dir, "b.fil", 64, 1024e-6, 30);
  const auto r = wbtest::run_cli("search '" + a + "' '" + b + "' --dm-max 40 --top 0 --output '" +
                                 dir.file("ab.cand") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int checked = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    int rank, filter, beam;
    double snr, time_s, dm, width_ms;
    long long sample, dm_trial, members;
    if (!(f >> rank >> snr >> time_s >> sample >> dm >> dm_trial >> width_ms >> filter >> members >>
          beam))
      continue;
    const double tsamp = beam == 0 ? 256e-6 : 1024e-6;
    EXPECT_NEAR(width_ms, std::ldexp(1.0, filter) * tsamp * 1e3, 1e-3) << line;
    checked += beam == 1;
  }
  EXPECT_GT(checked, 0) << "no candidate of the second file in:\n" << r.out;
}

// NaN/Inf channels were zapped silently: every zapped channel is in the summary and the JSON.
TEST(SearchResults, ZappedChannelsAreReportedByReason) {
  wbtest::TempDir dir;
  const auto clean = simulate(dir, "f.fil", 32, 256e-6, 25, 32);
  io::FilterbankReader in(clean);
  auto data = in.read_all();
  const int nchans = in.header().nchans;
  for (std::int64_t t = 0; t < in.header().nsamples; t += 97)
    data[static_cast<std::size_t>(t * nchans + 7)] = NAN;      // channel 7: some NaN samples
  data[static_cast<std::size_t>(50 * nchans + 9)] = INFINITY;  // channel 9: one Inf
  {
    io::FilterbankWriter w(dir.file("nan.fil"), in.header());
    w.write(data.data(), in.header().nsamples);
    w.commit();
  }
  const auto r =
      wbtest::run_cli("search '" + dir.file("nan.fil") +
                      "' --dm-max 40 --zap-chans 3,20-21 --json '" + dir.file("nan.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "3 by --zap-chans, 2 dead or non-finite")) << r.out;
  const auto j = nlohmann::json::parse(wbtest::slurp(dir.file("nan.json")));
  const auto& z = j.at("parameters").at("run").at("zapped_channels");
  EXPECT_EQ(z.at("mask").get<std::vector<int>>(), (std::vector<int>{3, 20, 21}));
  EXPECT_EQ(z.at("dead_or_nonfinite").get<std::vector<int>>(), (std::vector<int>{7, 9}));
}

// A missing tstart silently gave MJD 0.
TEST(SearchResults, AFileWithoutTstartIsWarnedAboutOnce) {
  wbtest::TempDir dir;
  std::string h;
  auto str = [&](const std::string& s) {
    const auto n = static_cast<std::int32_t>(s.size());
    h.append(reinterpret_cast<const char*>(&n), 4);
    h += s;
  };
  auto i32 = [&](const std::string& k, std::int32_t v) {
    str(k);
    h.append(reinterpret_cast<const char*>(&v), 4);
  };
  auto f64 = [&](const std::string& k, double v) {
    str(k);
    h.append(reinterpret_cast<const char*>(&v), 8);
  };
  str("HEADER_START");
  i32("nchans", 8);
  i32("nbits", 8);
  f64("fch1", 1400);
  f64("foff", -1);
  f64("tsamp", 1e-3);
  str("HEADER_END");
  std::string data(8 * 4000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>(100 + (i * 2654435761u >> 24) % 16);
  std::ofstream(dir.file("nt.fil"), std::ios::binary) << h << data;
  const auto r = wbtest::run_cli("search '" + dir.file("nt.fil") + "' --dm-max 5");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto first = r.err.find("no tstart");
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no tstart", first + 1), std::string::npos) << "warned twice:\n" << r.err;
}

// B4, stage 1: the baseline's masked passes follow their definition (written out here with the
// single-pass baseline and the robust RMS), and a bright narrow pulse barely raises its own
// baseline, which the single pass lifted by a large fraction of the pulse.
TEST(SearchResults, SearchBaselineMasksABrightPulse) {
  using namespace search;
  const std::int64_t n = 5000;
  const int levels = baseline_levels(1 << 20, n);
  EXPECT_EQ(levels, 4) << "5000 samples: the last level must keep >= 3 values (3 x 625)";
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(n);
  for (auto& v : x)
    v = g(rng);
  for (std::int64_t t = 2480; t < 2520; ++t)  // 40 samples at 60 sigma
    x[t] += 60;
  std::vector<float> single(n), got(n), masked(n), scratch(2 * n);
  running_median_baseline(x.data(), n, levels, single.data(), scratch.data());
  search_baseline(x.data(), n, levels, got.data(), masked.data(), scratch.data());
  // The definition, naively.
  std::vector<float> ref(n), r(n), m(n);
  running_median_baseline(x.data(), n, levels, ref.data(), scratch.data());
  for (int pass = 1; pass < kBaselinePasses; ++pass) {
    for (std::int64_t t = 0; t < n; ++t)
      r[t] = x[t] - ref[t];
    const auto lim =
        static_cast<float>(kBaselineMaskSigma * robust_rms(r.data(), n, 0, scratch.data()));
    for (std::int64_t t = 0; t < n; ++t)
      m[t] = r[t] > lim ? ref[t] : x[t];
    running_median_baseline(m.data(), n, levels, ref.data(), scratch.data());
  }
  EXPECT_EQ(got, ref);
  const float lift_single = *std::max_element(single.begin() + 2400, single.begin() + 2600);
  const float lift = *std::max_element(got.begin() + 2400, got.begin() + 2600);
  EXPECT_GT(lift_single, 2.0f) << "the single pass should show the problem";
  EXPECT_LT(lift, 0.3f) << "the masked baseline still follows the pulse";
}
