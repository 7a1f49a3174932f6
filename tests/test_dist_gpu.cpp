// Several workers on the GPU (issue 7; the lead's GPU run): workers sharing one device split a
// search's DM trials or files, and EPIC's channel blocks, and must give what one worker gives.
// On a one-GPU machine the list "0,0" (two workers on device 0) stands for two GPUs.
#include <cmath>

#include "dist_test_util.hpp"
#include "epic_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/dist/epic.hpp"
#include "warpbeam/dist/search.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/sim/filterbank.hpp"

using namespace warpbeam;
using namespace warpbeam::dist;

namespace {

DistSearchResult run(const std::vector<std::string>& files, double dm_max,
                     const std::vector<int>& gpus) {
  DistSearchConfig dc;
  dc.files = files;
  dc.search.dm_max = dm_max;
  dc.search.snr_min = 5;
  dc.run.progress = false;
  dc.backend = Backend::cuda;
  dc.gpus = gpus;
  return search_files(dc, Comm());
}

void expect_same(const DistSearchResult& one, const DistSearchResult& many,
                 const std::string& what) {
  const std::string a = io::format_cand(one.candidates, true);
  const std::string b = io::format_cand(many.candidates, true);
  if (a == b) {
    std::printf("%s: %zu candidates, identical .cand text\n", what.c_str(), one.candidates.size());
    return;
  }
  // Say where: the first candidate that differs.
  ADD_FAILURE() << what << ": the .cand texts differ (" << one.candidates.size() << " vs "
                << many.candidates.size() << " candidates)";
  for (std::size_t i = 0; i < std::min(one.candidates.size(), many.candidates.size()); ++i) {
    const auto &x = one.candidates[i], &y = many.candidates[i];
    if (x.snr != y.snr || x.sample != y.sample || x.dm_trial != y.dm_trial ||
        x.filter != y.filter || x.members != y.members || x.beam != y.beam) {
      ADD_FAILURE() << "first difference at candidate " << i << ": one worker (snr " << x.snr
                    << ", sample " << x.sample << ", dm_trial " << x.dm_trial << ", filter "
                    << x.filter << ", members " << x.members << ", beam " << x.beam
                    << "), several (snr " << y.snr << ", sample " << y.sample << ", dm_trial "
                    << y.dm_trial << ", filter " << y.filter << ", members " << y.members
                    << ", beam " << y.beam << ")";
      break;
    }
  }
}

}  // namespace

TEST(DistGpu, WorkersSharingOneGpuFindOneWorkersCandidates) {
  WB_REQUIRE_GPU();
  wbtest::TempDir dir;
  std::vector<std::string> beams;
  for (int b = 0; b < 3; ++b) {
    sim::FilterbankSimConfig s;
    s.nchans = 200;  // not a multiple of any tile
    s.fch1_mhz = 1450;
    s.foff_mhz = -1.1;
    s.tsamp_s = 200e-6;
    s.duration_s = 6 + b;
    s.seed = 70 + static_cast<std::uint64_t>(b);
    s.bursts = {{150.0 + 200 * b, 12, 1e-3, 1.5 + b}, {600, 20, 3e-3, 4.0}};
    beams.push_back(dir.file("b" + std::to_string(b) + ".fil"));
    sim::simulate_filterbank(s, beams.back());
  }
  const auto one = run(beams, 800, {0});
  ASSERT_GE(one.candidates.size(), 4u);
  // One device listed is the plain CUDA file search (search_filterbank), beam by beam.
  {
    search::FileSearchConfig c;
    c.dm_max = 800;
    c.snr_min = 5;
    search::RunOptions run;
    run.progress = false;
    DistSearchResult plain;
    for (int b = 0; b < 3; ++b) {
      c.beam = b;
      const auto r =
          search::search_filterbank(beams[static_cast<std::size_t>(b)], c, run, Backend::cuda);
      plain.candidates.insert(plain.candidates.end(), r.candidates.begin(), r.candidates.end());
    }
    sort_candidates(plain.candidates);
    expect_same(plain, one, "3 beams, search_filterbank vs --gpus 0");
  }
  expect_same(one, run(beams, 800, {0, 0}), "3 beams, 2 workers on device 0 (whole files)");
  expect_same(one, run(beams, 800, {0, 0, 0, 0, 0}), "3 beams, 5 workers on device 0 (DM slices)");
  expect_same(run({beams[0]}, 800, {0}), run({beams[0]}, 800, {0, 0, 0}),
              "1 beam, 3 workers on device 0 (DM slices)");
  if (std::filesystem::exists(wbtest::data_file("filterbank/burst_28.fil"))) {
    const std::vector<std::string> f = {wbtest::data_file("filterbank/burst_28.fil")};
    expect_same(run(f, 2000, {0}), run(f, 2000, {0, 0}), "burst_28, 2 workers on device 0");
  }
}

TEST(DistGpu, EpicBlocksSharingOneGpuImageAsOnePlan) {
  WB_REQUIRE_GPU();
  using namespace wbepic;
  for (auto algorithm : {epic::Algorithm::multikernel, epic::Algorithm::automatic}) {
    epic::EpicConfig c;
    c.nchan = 9;
    c.nstand = 64;
    c.ntime = 12;
    for (int i = 0; i < c.nchan; ++i)
      c.freqs_hz.push_back(62e6 - 25e3 * 41 * i);
    c.stand_xyz_m = random_station(c.nstand, 20, 5);
    c.grid_size = 64;
    c.algorithm = algorithm;
    std::mt19937 rng(4);
    std::uniform_real_distribution<double> ph(-kPi, kPi);
    for (int i = 0; i < c.nchan * c.nstand * 2; ++i)
      c.calibration.push_back(std::polar(1.0f, static_cast<float>(ph(rng))));
    const auto in = random_ci4(static_cast<std::size_t>(c.nchan) * c.ntime * c.nstand * 2, 8);
    const std::size_t nn = static_cast<std::size_t>(c.grid_size) * c.grid_size;
    auto images = [&](const std::vector<int>& devices) {
      const MultiEpicPlan p(c, Backend::cuda, devices);
      std::vector<float> out(static_cast<std::size_t>(c.nchan) * 4 * nn, std::nanf(""));
      p.execute(View<const std::uint8_t, 4>(in.data(), {c.nchan, c.ntime, c.nstand, 2}),
                View<float, 4>(out.data(), {c.nchan, 4, c.grid_size, c.grid_size}));
      return std::make_pair(out, p.algorithm());
    };
    const auto [want, alg1] = images({0});
    const auto [got, alg3] = images({0, 0, 0});
    EXPECT_EQ(alg1, alg3);
    // Per (channel, product): max|got - want| <= 1e-5 max|want| (the fp32 bound of DESIGN.md);
    // the blocks run the same kernels on the same channels, so they should agree exactly.
    double worst = 0;
    std::size_t differ = 0;
    for (int ch = 0; ch < c.nchan; ++ch)
      for (int k = 0; k < 4; ++k) {
        const std::size_t o = (static_cast<std::size_t>(ch) * 4 + k) * nn;
        double m = 0, e = 0;
        for (std::size_t i = 0; i < nn; ++i) {
          ASSERT_FALSE(std::isnan(got[o + i]))
              << "channel " << ch << " product " << k << " pixel " << i << " never written";
          m = std::max(m, std::abs(static_cast<double>(want[o + i])));
          e = std::max(e, std::abs(static_cast<double>(got[o + i]) - want[o + i]));
          differ += got[o + i] != want[o + i];
        }
        EXPECT_LE(e, 1e-5 * m) << "channel " << ch << " product " << k;
        worst = std::max(worst, m > 0 ? e / m : e);
      }
    std::printf(
        "EPIC %s on 3 blocks of device 0 vs one plan: worst relative error %.3g, %zu "
        "pixels differ\n",
        epic::to_string(alg1).c_str(), worst, differ);
  }
}

TEST(DistGpu, CliWithGpus00WritesWhatGpus0Writes) {
  WB_REQUIRE_GPU();
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  wbtest::TempDir dir;
  const std::string f = "'" + wbtest::data_file("filterbank/burst_28.fil") + "'";
  const auto a = wbdist::run(
      "", "search " + f + " --backend cuda --gpus 0 --output '" + dir.file("a.cand") + "'");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = wbdist::run(
      "", "search " + f + " --backend cuda --gpus 0,0 --output '" + dir.file("b.cand") + "'");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(wbtest::slurp(dir.file("b.cand")), wbtest::slurp(dir.file("a.cand")));
  EXPECT_NE(b.out.find("2 worker(s)"), std::string::npos) << b.out;
  // Workers sharing the GPU launch the same dedispersion kernels with different shared-memory
  // sizes at once (their DM slices differ): once this failed with CUDA error 701 because one
  // worker lowered the kernel's dynamic shared-memory limit under another's launch. A race, so
  // several runs with four workers.
  for (int i = 0; i < 6; ++i) {
    const auto r =
        wbdist::run("", "search " + f + " --backend cuda --snr-min 5 --gpus 0,0,0,0 --output '" +
                            dir.file("r.cand") + "'");
    ASSERT_EQ(r.exit_code, 0) << "run " << i << ": " << r.err;
  }
  // A device that is not there is a usage error.
  const auto c = wbdist::run(
      "", "search " + f + " --backend cuda --gpus 0,99 --output '" + dir.file("c.cand") + "'");
  EXPECT_EQ(c.exit_code, 2) << c.err;
  EXPECT_NE(c.err.find("--gpus"), std::string::npos) << c.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.cand")));
}
