// Several workers (issue 7), on the CPU: the split of a search over workers, the GPU list, the
// world of one process, the DM-slice hook of the file search, the distributed search against one
// worker (the same .cand text, byte for byte, on burst_28 and a simulated multi-beam
// observation), errors, and the multi-block EPIC plan against one plan.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "epic_test_util.hpp"
#include "search/gulp_searcher.hpp"
#include "test_util.hpp"
#include "warpbeam/dist/comm.hpp"
#include "warpbeam/dist/epic.hpp"
#include "warpbeam/dist/search.hpp"
#include "warpbeam/dist/work.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/io/image.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/sim/filterbank.hpp"

using namespace warpbeam;
using namespace warpbeam::dist;

namespace {

// Every DM trial of every file is searched exactly once, by slices that tile the file's list.
void expect_covers(const std::vector<std::vector<SearchTask>>& p,
                   const std::vector<std::int64_t>& ndm) {
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> got(ndm.size());
  for (const auto& tasks : p)
    for (const auto& t : tasks) {
      ASSERT_GE(t.file, 0);
      ASSERT_LT(t.file, static_cast<int>(ndm.size()));
      got[static_cast<std::size_t>(t.file)].push_back({t.dm_begin, t.dm_end});
      EXPECT_EQ(t.whole, t.dm_begin == 0 && t.dm_end == ndm[static_cast<std::size_t>(t.file)]);
    }
  for (std::size_t f = 0; f < ndm.size(); ++f) {
    auto& g = got[f];
    std::sort(g.begin(), g.end());
    std::int64_t next = 0;
    for (const auto& [b, e] : g) {
      EXPECT_EQ(b, next) << "file " << f;
      EXPECT_GT(e, b) << "file " << f;
      next = e;
    }
    EXPECT_EQ(next, ndm[f]) << "file " << f;
  }
}

search::FileSearchConfig quiet() {
  return {};
}

search::RunOptions quiet_run() {
  search::RunOptions r;
  r.progress = false;
  return r;
}

// A simulated observation: `beams` files of 64 channels (a burst in some of them, at a DM and a
// time of their own), written to `dir`.
std::vector<std::string> multibeam(const wbtest::TempDir& dir, int beams, double seconds) {
  std::vector<std::string> out;
  for (int b = 0; b < beams; ++b) {
    sim::FilterbankSimConfig s;
    s.nchans = 64;
    s.fch1_mhz = 1400;
    s.foff_mhz = -2;
    s.tsamp_s = 256e-6;
    s.duration_s = seconds + 0.5 * b;  // unequal lengths: unequal costs
    s.seed = 100 + static_cast<std::uint64_t>(b);
    if (b % 3 != 2) s.bursts = {{120.0 + 60 * b, 12.0 + 3 * b, 1e-3, 0.8 + 0.3 * b}};
    out.push_back(dir.file("beam" + std::to_string(b) + ".fil"));
    sim::simulate_filterbank(s, out.back());
  }
  return out;
}

std::string cand_text(const std::vector<std::string>& files, const search::FileSearchConfig& c,
                      int cpu_workers, const search::RunOptions& run = quiet_run()) {
  DistSearchConfig dc;
  dc.files = files;
  dc.search = c;
  dc.run = run;
  dc.cpu_workers = cpu_workers;
  const auto r = search_files(dc, Comm());
  EXPECT_EQ(r.workers, std::max(1, cpu_workers));
  return io::format_cand(r.candidates, true);
}

// The first line where two .cand texts differ (for the failure message).
std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i])
    ++i;
  const std::size_t la = a.rfind('\n', i == 0 ? 0 : i - 1);
  const std::size_t start = la == std::string::npos ? 0 : la + 1;
  return "one worker: '" + a.substr(start, a.find('\n', start) - start) + "' vs '" +
         b.substr(start, b.find('\n', start) - start) + "'";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The split

TEST(Partition, SplitRangeTilesEveryRange) {
  for (std::int64_t n = 0; n <= 23; ++n)
    for (int parts = 1; parts <= 7; ++parts) {
      std::int64_t next = 0, lo = n, hi = 0;
      for (int k = 0; k < parts; ++k) {
        const auto [b, e] = split_range(n, parts, k);
        EXPECT_EQ(b, next);
        next = e;
        lo = std::min(lo, e - b);
        hi = std::max(hi, e - b);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1) << n << " in " << parts;
    }
  EXPECT_THROW(split_range(5, 0, 0), Error);
  EXPECT_THROW(split_range(5, 2, 2), Error);
}

TEST(Partition, FewerWorkersThanFilesGiveWholeFilesBalanced) {
  const std::vector<std::int64_t> ndm = {50, 60, 70, 80, 90, 100, 110};
  const std::vector<double> cost = {7, 1, 5, 3, 9, 2, 4};
  for (int workers = 1; workers <= 7; ++workers) {
    const auto p = partition_search(ndm, cost, workers);
    ASSERT_EQ(p.size(), static_cast<std::size_t>(workers));
    expect_covers(p, ndm);
    double lo = 1e9, hi = 0;
    for (const auto& tasks : p) {
      double load = 0;
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        EXPECT_TRUE(tasks[i].whole);
        if (i > 0) {
          EXPECT_LT(tasks[i - 1].file, tasks[i].file);
        }
        load += cost[static_cast<std::size_t>(tasks[i].file)];
      }
      lo = std::min(lo, load);
      hi = std::max(hi, load);
    }
    // Greedy by decreasing cost: no worker exceeds another by more than the largest file.
    EXPECT_LE(hi - lo, 9.0) << workers << " workers";
  }
  // The same inputs give the same split (every rank computes it alone).
  EXPECT_EQ(partition_search(ndm, cost, 3), partition_search(ndm, cost, 3));
}

TEST(Partition, MoreWorkersThanFilesSplitTheDmTrials) {
  const std::vector<std::int64_t> ndm = {10, 7};
  const std::vector<double> cost = {10, 10};
  const auto p = partition_search(ndm, cost, 5);
  expect_covers(p, ndm);
  // 3 workers on file 0 (ties go to the lower file), 2 on file 1; slices differ by at most 1.
  ASSERT_EQ(p[0].size(), 1u);
  EXPECT_EQ(p[0][0], (SearchTask{0, 0, 4, false}));
  EXPECT_EQ(p[1][0], (SearchTask{0, 4, 7, false}));
  EXPECT_EQ(p[2][0], (SearchTask{0, 7, 10, false}));
  EXPECT_EQ(p[3][0], (SearchTask{1, 0, 4, false}));
  EXPECT_EQ(p[4][0], (SearchTask{1, 4, 7, false}));
  // A costly file draws the extra workers.
  const auto q = partition_search({100, 100}, {1, 10}, 4);
  expect_covers(q, {100, 100});
  EXPECT_EQ(q[0][0], (SearchTask{0, 0, 100, true}));
  for (int w = 1; w < 4; ++w)
    EXPECT_EQ(q[static_cast<std::size_t>(w)][0].file, 1);
}

TEST(Partition, AFileOfEnoughGulpsIsCutInTime) {
  // File 0: 3 workers and 6 gulps: three gulp slices of every DM trial. File 1: 2 workers and
  // 2 gulps: two gulp slices.
  const auto p = partition_search({10, 7}, {10, 10}, 5, {6, 2});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].at(0), (SearchTask{0, 0, 10, false, 0, 2}));
  EXPECT_EQ(p[1].at(0), (SearchTask{0, 0, 10, false, 2, 4}));
  EXPECT_EQ(p[2].at(0), (SearchTask{0, 0, 10, false, 4, 6}));
  EXPECT_EQ(p[3].at(0), (SearchTask{1, 0, 7, false, 0, 1}));
  EXPECT_EQ(p[4].at(0), (SearchTask{1, 0, 7, false, 1, 2}));
  // Fewer gulps than workers: the DM trials are cut instead (every gulp each).
  const auto q = partition_search({10, 7}, {10, 10}, 5, {2, 2});
  EXPECT_EQ(q[0].at(0), (SearchTask{0, 0, 4, false}));
  EXPECT_EQ(q[2].at(0), (SearchTask{0, 7, 10, false}));
  EXPECT_EQ(q[3].at(0), (SearchTask{1, 0, 7, false, 0, 1}));
  // Whole files are whole whatever the gulps; a wrong number of gulp counts is an error.
  EXPECT_EQ(partition_search({10}, {1}, 1, {6})[0].at(0), (SearchTask{0, 0, 10, true}));
  EXPECT_THROW(partition_search({10, 7}, {1, 1}, 3, {6}), Error);
}

TEST(Partition, WorkersBeyondTheDmTrialsStayIdle) {
  const auto p = partition_search({2}, {1}, 4);
  expect_covers(p, {2});
  EXPECT_EQ(p[0].size(), 1u);
  EXPECT_EQ(p[1].size(), 1u);
  EXPECT_TRUE(p[2].empty());
  EXPECT_TRUE(p[3].empty());
}

TEST(Partition, BadInputsAreErrors) {
  EXPECT_THROW(partition_search({10}, {1}, 0), Error);
  EXPECT_THROW(partition_search({10, 5}, {1}, 2), Error);
  EXPECT_THROW(partition_search({}, {}, 2), Error);
  EXPECT_THROW(partition_search({0}, {1}, 2), Error);
  EXPECT_THROW(partition_search({10}, {0}, 2), Error);
}

TEST(GpuList, ParsesDeviceNumbersAndRejectsTheRest) {
  EXPECT_EQ(parse_gpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_gpu_list("0,1,3"), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(parse_gpu_list("0,0"), (std::vector<int>{0, 0}));
  for (const char* bad : {"", "a", "1,", ",1", "-1", "1.5", " 1", "1,,2", "0x1"}) {
    try {
      parse_gpu_list(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("--gpus"), std::string::npos) << e.what();
    }
  }
}

TEST(GpuList, WorkersOfAProcess) {
  const Comm one;
  EXPECT_EQ(local_devices(Backend::cpu, {}, one), (std::vector<int>{-1}));
  try {
    local_devices(Backend::cpu, {0, 1}, one);
    ADD_FAILURE() << "--gpus with the CPU backend was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
  if (!cuda_available()) {
    EXPECT_THROW(local_devices(Backend::cuda, {}, one), Error);
  } else {
    EXPECT_EQ(local_devices(Backend::cuda, {0, 0}, one), (std::vector<int>{0, 0}));
    EXPECT_THROW(local_devices(Backend::cuda, {device_count()}, one), Error);
  }
}

// ---------------------------------------------------------------------------------------------
// The world of one process

TEST(Comm, AWorldOfOneGathersItsOwnAndRethrowsItsErrors) {
  const Comm& w = Comm::world();  // this test is not run by mpirun
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(w.rank(), 0);
  EXPECT_FALSE(w.uses_mpi());
  EXPECT_TRUE(w.is_root());
  EXPECT_EQ(w.gather("abc"), (std::vector<std::string>{"abc"}));
  EXPECT_EQ(w.allgather("xy"), (std::vector<std::string>{"xy"}));
  EXPECT_EQ(w.broadcast("z"), "z");
  EXPECT_EQ(w.alltoall({"to me"}), (std::vector<std::string>{"to me"}));
  EXPECT_THROW(w.alltoall({"a", "b"}), Error);  // one message per rank
  EXPECT_NO_THROW(w.agree(nullptr));
  try {
    w.agree(std::make_exception_ptr(Error(ErrorCategory::format, "bad header in 'x.fil'")));
    ADD_FAILURE() << "no error";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.category(), ErrorCategory::format);
    EXPECT_STREQ(e.what(), "bad header in 'x.fil'");
  }
  try {
    w.agree(std::make_exception_ptr(std::runtime_error("plain")));
    ADD_FAILURE() << "no error";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.category(), ErrorCategory::io);
    EXPECT_STREQ(e.what(), "plain");
  }
}

// ---------------------------------------------------------------------------------------------
// The DM-slice hook of the file search

TEST(SearchSlices, SlicesFindExactlyTheWholeListsPeaksAndCandidates) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const auto path = wbtest::data_file("filterbank/burst_28.fil");
  auto c = quiet();
  c.snr_min = 5;  // many peaks, so that the comparison means something
  auto run = quiet_run();
  run.threads = 4;  // what the memory bound counts
  const auto source = io::open_filterbank(path);
  const auto& h = source->header();
  auto collect = [](std::vector<search::Peak>& to, std::vector<std::int64_t>& gulps) {
    return [&to, &gulps](search::GulpPeaks&& gp) {
      gulps.push_back(gp.gulp);
      to.insert(to.end(), gp.peaks.begin(), gp.peaks.end());
      return true;
    };
  };
  const search::FileSearchPlan whole(c, run, h, Backend::cpu, path);
  std::vector<search::Peak> whole_peaks;
  std::vector<std::int64_t> whole_gulps;
  search::StageTimes times;
  search::search_gulps(whole, *source, {}, 0, collect(whole_peaks, whole_gulps), times);
  const std::int64_t ndm = whole.ndms();
  ASSERT_GT(whole_peaks.size(), 20u);
  ASSERT_EQ(static_cast<std::int64_t>(whole_gulps.size()), whole.gulps());

  // Three uneven slices, each planned with a thread count of its own and the whole search's
  // gulp (as a worker of the distributed search): the gulps must not change.
  std::vector<search::Peak> sliced;
  const std::int64_t cuts[] = {0, 7, ndm / 2 + 3, ndm};
  for (int s = 0; s < 3; ++s) {
    auto mine_run = run;
    mine_run.threads = s + 1;
    mine_run.gulp = whole.gulp();
    const search::FileSearchPlan plan(c, mine_run, h, Backend::cpu, path);
    std::vector<search::Peak> mine;
    std::vector<std::int64_t> gulps;
    search::SearchSlice slice;
    slice.dm_begin = cuts[s];
    slice.dm_end = cuts[s + 1];
    search::search_gulps(plan, *source, slice, 0, collect(mine, gulps), times);
    EXPECT_EQ(gulps, whole_gulps);
    for (const auto& p : mine) {
      EXPECT_GE(p.dm_trial, cuts[s]);
      EXPECT_LT(p.dm_trial, cuts[s + 1]);
    }
    sliced.insert(sliced.end(), mine.begin(), mine.end());
  }
  auto key = [](const search::Peak& a, const search::Peak& b) {
    return std::tie(a.dm_trial, a.filter, a.sample) < std::tie(b.dm_trial, b.filter, b.sample);
  };
  std::sort(whole_peaks.begin(), whole_peaks.end(), key);
  std::sort(sliced.begin(), sliced.end(), key);
  EXPECT_EQ(sliced, whole_peaks);

  // Clustering all peaks at once gives the streaming clusterer's candidates.
  auto want = search::search_filterbank(path, c, run, Backend::cpu).candidates;
  std::vector<search::Candidate> got;
  for (const auto& cl : search::cluster_peaks(sliced, c.cluster))
    got.push_back(search::to_candidate(cl, whole.dms(), h.tsamp));
  sort_candidates(want);
  sort_candidates(got);
  EXPECT_EQ(io::format_cand(got), io::format_cand(want));
  EXPECT_FALSE(want.empty());
}

// The per-gulp hook of FileSearchPlan::execute stops the search between gulps: the gulps
// searched are a prefix, and their candidates are those a search of the prefix alone finds.
TEST(SearchSlices, TheGulpHookStopsBetweenGulps) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const auto path = wbtest::data_file("filterbank/burst_28.fil");
  auto c = quiet();
  c.snr_min = 5;
  auto run = quiet_run();
  run.gulp = 1024;
  const auto source = io::open_filterbank(path);
  const search::FileSearchPlan plan(c, run, source->header(), Backend::cpu, path);
  ASSERT_EQ(plan.gulps(), 3);
  std::vector<std::int64_t> seen;
  const auto r = plan.execute(*source, [&](std::int64_t done, std::int64_t gulps) {
    seen.push_back(done);
    EXPECT_EQ(gulps, 3);
    return done < 2;  // stop after the second gulp
  });
  EXPECT_EQ(seen, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(r.gulps_searched, 2);
  EXPECT_EQ(r.to_json().at("gulps_searched"), 2);
  const auto all = plan.execute(*source);
  EXPECT_EQ(all.gulps_searched, 3);
  // Every candidate of the stopped search lies in the first two gulps and is one of the whole
  // search's whose span ends there too (clusters are final once no later peak can reach them).
  for (const auto& k : r.candidates) {
    EXPECT_LT(k.sample, 2 * plan.gulp());
    const bool in_all =
        std::any_of(all.candidates.begin(), all.candidates.end(), [&](const auto& a) {
          return a.sample == k.sample && a.dm_trial == k.dm_trial && a.snr == k.snr;
        });
    if (k.end + c.cluster.time_tol < 2 * plan.gulp() - plan.margin())
      EXPECT_TRUE(in_all) << k.sample;
  }
}

// ---------------------------------------------------------------------------------------------
// The distributed search with several CPU workers against one worker

TEST(DistSearch, Burst28SplitOverWorkersWritesTheSameCand) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const std::vector<std::string> files = {wbtest::data_file("filterbank/burst_28.fil")};
  auto c = quiet();
  c.snr_min = 5;  // two candidates
  const std::string one = cand_text(files, c, 1);
  ASSERT_FALSE(one.empty());
  for (int w : {2, 3, 5}) {
    const std::string got = cand_text(files, c, w);
    EXPECT_EQ(got, one) << w << " workers: " << first_difference(one, got);
  }
  // One worker through the driver is the plain file search, re-sorted.
  auto want = search::search_filterbank(files[0], c, quiet_run(), Backend::cpu).candidates;
  sort_candidates(want);
  EXPECT_EQ(io::format_cand(want, true), one);
}

// With gulps of 1024 samples burst_28.fil has 3 gulps: 2 or 3 workers cut it in time (each
// reads, cleans and searches only its gulps), 5 cut its DM trials; all write one worker's .cand.
TEST(SearchSlices, ASliceOutsideTheSearchIsAnError) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const auto source = io::open_filterbank(wbtest::data_file("filterbank/burst_28.fil"));
  auto run = quiet_run();
  run.gulp = 1024;
  const search::FileSearchPlan plan(quiet(), run, source->header(), Backend::cpu);
  ASSERT_EQ(plan.gulps(), 3);
  const auto whole = search::SearchSlice{}.resolve(plan);
  EXPECT_EQ(whole.gulp_end, 3);
  EXPECT_EQ(whole.dm_end, plan.ndms());
  EXPECT_EQ((search::SearchSlice{1, 2, 0, -1}.resolve(plan).gulp_begin), 1);
  const std::int64_t n = plan.ndms();
  for (const search::SearchSlice bad :
       {search::SearchSlice{-1, 2}, search::SearchSlice{2, 2}, search::SearchSlice{2, 1},
        search::SearchSlice{0, 4}, search::SearchSlice{3, -1}, search::SearchSlice{0, -1, 5, 5},
        search::SearchSlice{0, -1, 0, n + 1}, search::SearchSlice{0, -1, -1, 3}})
    EXPECT_THROW(bad.resolve(plan), Error)
        << bad.gulp_begin << " " << bad.gulp_end << " " << bad.dm_begin << " " << bad.dm_end;
}

TEST(DistSearch, Burst28CutInTimeWritesTheSameCand) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const std::vector<std::string> files = {wbtest::data_file("filterbank/burst_28.fil")};
  auto c = quiet();
  c.snr_min = 5;
  auto run = quiet_run();
  run.gulp = 1024;
  const std::string one = cand_text(files, c, 1, run);
  ASSERT_FALSE(one.empty());
  for (int w : {2, 3, 5}) {
    DistSearchConfig dc;
    dc.files = files;
    dc.search = c;
    dc.run = run;
    dc.cpu_workers = w;
    const auto r = search_files(dc, Comm());
    const std::string got = io::format_cand(r.candidates, true);
    EXPECT_EQ(got, one) << w << " workers: " << first_difference(one, got);
    ASSERT_EQ(r.files.at(0).pieces.size(), static_cast<std::size_t>(w));
    const auto& last = r.files[0].pieces.back().task;
    if (w <= 3) {
      EXPECT_EQ(last.gulp_end, 3) << "cut in time";
      EXPECT_EQ(last.dm_begin, 0);
    } else {
      EXPECT_EQ(last.gulp_end, -1) << "cut in DM trials";
      EXPECT_GT(last.dm_begin, 0);
    }
  }
}

TEST(DistSearch, MultiBeamObservationSplitOverWorkersWritesTheSameCand) {
  wbtest::TempDir dir;
  const auto files = multibeam(dir, 3, 3.0);
  auto c = quiet();
  c.dm_max = 400;
  const std::string one = cand_text(files, c, 1);
  // Every simulated burst is found in its own beam.
  const auto cands = io::read_cand([&] {
    const auto p = dir.file("one.cand");
    std::ofstream(p) << one;
    return p;
  }());
  for (int b : {0, 1}) {
    const bool found = std::any_of(cands.begin(), cands.end(), [&](const search::Candidate& k) {
      return k.beam == b && k.snr > 8 && std::abs(k.dm - (120.0 + 60 * b)) < 15;
    });
    EXPECT_TRUE(found) << "the burst of beam " << b;
  }
  // Fewer workers than files (whole files), as many, more (one file split), many more.
  for (int w : {2, 3, 4, 7}) {
    const std::string got = cand_text(files, c, w);
    EXPECT_EQ(got, one) << w << " workers: " << first_difference(one, got);
  }
}

TEST(DistSearch, ABadFileStopsTheRunWithOneError) {
  wbtest::TempDir dir;
  auto files = multibeam(dir, 2, 2.0);
  {
    std::ofstream f(dir.file("bad.fil"), std::ios::binary);
    f << "this is not a filterbank";
  }
  files.insert(files.begin() + 1, dir.file("bad.fil"));
  DistSearchConfig dc;
  dc.files = files;
  dc.search = quiet();
  dc.run = quiet_run();
  for (int w : {1, 3}) {
    dc.cpu_workers = w;
    try {
      search_files(dc, Comm());
      ADD_FAILURE() << "no error";
    } catch (const AgreedError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.fil"), std::string::npos) << e.what();
      EXPECT_NE(e.category(), ErrorCategory::invalid_argument);
    }
  }
  // A file shorter than the largest delay fails when the run plans it (the second: the 2.0 s beam
  // is shorter than the 2.2 s delay at DM 5000, the 2.5 s one is not): a usage error naming
  // dm_max.
  dc.files = {files[2], files[0]};
  dc.search.dm_max = 5000;
  dc.cpu_workers = 2;
  try {
    search_files(dc, Comm());
    ADD_FAILURE() << "no error";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dm_max"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// EPIC split over channel blocks

TEST(MultiEpic, ChannelBlocksKeepTheWholeBandsCell) {
  epic::EpicConfig c;
  c.nchan = 132;
  c.nstand = 4;
  c.ntime = 1;
  for (int i = 0; i < c.nchan; ++i)
    c.freqs_hz.push_back(58.7e6 + 25e3 * i);
  c.stand_xyz_m = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}};
  for (double cell : {0.0, 1.234567, 2.0}) {
    c.cell_m = cell;
    for (int parts = 1; parts <= 9; ++parts)
      for (int k = 0; k < parts; ++k) {
        const auto [b, e] = split_range(c.nchan, parts, k);
        const auto blk = channel_block(c, static_cast<int>(b), static_cast<int>(e));
        EXPECT_EQ(blk.nchan, e - b);
        EXPECT_EQ(blk.freqs_hz.front(), c.freqs_hz[static_cast<std::size_t>(b)]);
        EXPECT_EQ(blk.cell_wavelengths(), c.cell_wavelengths())
            << "cell " << cell << ", block " << k << " of " << parts;
        EXPECT_NO_THROW(blk.validate());
      }
  }
  auto wide = c;
  wide.du_override = 0.6;  // coarser than half a wavelength: the sky would alias
  EXPECT_THROW(wide.validate(), Error);
  EXPECT_THROW(channel_block(c, 5, 5), Error);
  EXPECT_THROW(channel_block(c, 0, 133), Error);
}

TEST(MultiEpic, BlocksOnTheCpuImageAsOnePlan) {
  using namespace wbepic;
  epic::EpicConfig c;
  c.nchan = 7;
  c.nstand = 24;
  c.ntime = 5;
  for (int i = 0; i < c.nchan; ++i)
    c.freqs_hz.push_back(62e6 - 25e3 * 41 * i);
  c.stand_xyz_m = random_station(c.nstand, 12, 3);
  c.stand_ok.assign(static_cast<std::size_t>(c.nstand), 1);
  c.stand_ok[5] = 0;
  c.grid_size = 32;
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> ph(-kPi, kPi);
  for (int i = 0; i < c.nchan * c.nstand * 2; ++i)
    c.calibration.push_back(std::polar(1.0f, static_cast<float>(ph(rng))));
  c.threads = 1;  // the same threads in every block: the comparison is bitwise
  const auto in = random_ci4(static_cast<std::size_t>(c.nchan) * c.ntime * c.nstand * 2, 11);
  const epic::EpicPlan one(c, Backend::cpu);
  const auto want = image(one, in);
  for (int blocks : {1, 2, 3, 7, 9}) {
    const MultiEpicPlan multi(c, Backend::cpu,
                              std::vector<int>(static_cast<std::size_t>(blocks), 0));
    EXPECT_EQ(multi.blocks(), std::min(blocks, c.nchan));
    EXPECT_EQ(multi.geometry().du, one.geometry().du);
    EXPECT_EQ(multi.used_stands(), one.used_stands());
    std::vector<float> got(want.size(), std::nanf(""));
    multi.execute(View<const std::uint8_t, 4>(in.data(), {c.nchan, c.ntime, c.nstand, 2}),
                  View<float, 4>(got.data(), {c.nchan, 4, c.grid_size, c.grid_size}));
    std::size_t bad = 0, first = got.size();
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(got[i] == want[i]) && !(std::isnan(got[i]) && std::isnan(want[i]))) {
        if (bad++ == 0) first = i;
      }
    EXPECT_EQ(bad, 0u) << blocks << " blocks: first mismatch at " << first << ": got " << got[first]
                       << ", one plan " << want[first];
  }
  // Shapes are checked as EpicPlan checks them.
  const MultiEpicPlan multi(c, Backend::cpu, {0, 0});
  std::vector<float> out(want.size());
  EXPECT_THROW(
      multi.execute(View<const std::uint8_t, 4>(in.data(), {c.nchan, c.ntime - 1, c.nstand, 2}),
                    View<float, 4>(out.data(), {c.nchan, 4, c.grid_size, c.grid_size})),
      Error);
}

// ---------------------------------------------------------------------------------------------
// The command line

TEST(DistCli, SeveralFilesAndDeviceOptions) {
  wbtest::TempDir dir;
  const auto files = multibeam(dir, 2, 2.0);
  const std::string in = "'" + files[0] + "' '" + files[1] + "'";
  const auto r =
      wbtest::run_cli("search " + in + " --dm-max 300 --output '" + dir.file("two.cand") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cands = io::read_cand(dir.file("two.cand"));
  ASSERT_FALSE(cands.empty());
  EXPECT_TRUE(std::any_of(cands.begin(), cands.end(), [](auto& c) { return c.beam == 1; }))
      << "several files write the beam column";
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n') > 4, true) << r.out;

  struct Bad {
    std::string args, word;
  };
  for (const Bad& b : std::vector<Bad>{
           {in + " --json '" + dir.file("x.json") + "'", "--json"},
           {in + " --gpus 0", "--gpus"},
           {in + " --backend cuda --gpus 0,x", "--gpus"},
           {in + " --backend cuda --device 0 --gpus 0", "--device"},
       }) {
    SCOPED_TRACE(b.args);
    const auto before = dir.files();
    const auto e = wbtest::run_cli("search " + b.args + " --output '" + dir.file("bad.cand") + "'");
    EXPECT_EQ(e.exit_code, 2) << e.err;
    EXPECT_EQ(e.err.rfind("warpbeam: error: ", 0), 0u) << e.err;
    EXPECT_NE(e.err.find(b.word), std::string::npos) << e.err;
    EXPECT_EQ(dir.files(), before);
  }
}

TEST(DistCli, ImageGpusIsCheckedBeforeAnyFile) {
  if (!io::fits_supported()) GTEST_SKIP() << "this build has no cfitsio (image writes FITS)";
  wbtest::TempDir dir;
  struct Bad {
    std::string args, word;
  };
  for (const Bad& b : std::vector<Bad>{
           {"--backend cpu --gpus 0", "CUDA"},  // --gpus needs the CUDA backend
           {"--backend cpu --gpus 0,", "--gpus"},
           {"--backend cuda --gpus x", "--gpus"},
       }) {
    SCOPED_TRACE(b.args);
    const auto e = wbtest::run_cli("image '" + dir.file("missing.tbf") + "' --out '" +
                                   dir.file("img") + "' " + b.args);
    EXPECT_EQ(e.exit_code, 2) << e.err;
    EXPECT_NE(e.err.find(b.word), std::string::npos) << e.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("img")));
  }
}

// The scaling benchmark's options are checked before anything is simulated: no record written.
TEST(DistCli, ScalingBenchmarkRejectsBadOptions) {
  wbtest::TempDir dir;
  for (const char* bad : {"--files 0", "--files 65", "--workers 0", "--file-samples 10"}) {
    const auto r = wbtest::run_cli(std::string("bench search-scaling --backend cpu ") + bad +
                                   " --json '" + dir.file("s.json") + "'");
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("s.json"))) << bad;
  }
}

TEST(DistCli, ScalingBenchmarkRunsOnTheCpu) {
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli(
      "bench search-scaling --backend cpu --workers 2 --file-samples 8192 --dm-max 100 --json '" +
      dir.file("s.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(wbtest::slurp(dir.file("s.json")));
  EXPECT_EQ(j.at("benchmark"), "search-scaling");
  EXPECT_TRUE(j.at("search").at("identical_candidates").get<bool>());
  EXPECT_GE(j.at("search").at("candidates").get<int>(), 1);
  EXPECT_TRUE(j.at("search").at("scaling").contains("overhead"));
  EXPECT_NE(j.at("summary").get<std::string>().find("search"), std::string::npos);
  EXPECT_TRUE(j.contains("provenance"));
}

TEST(DistSearch, GatherCandidatesSortsInOneTotalOrder) {
  std::vector<search::Candidate> c(5);
  const float snr[] = {7, 9, 9, 9, 9};
  const std::int64_t sample[] = {10, 20, 20, 20, 5};
  const int beam[] = {0, 1, 0, 0, 3};
  const int trial[] = {1, 1, 2, 1, 0};
  for (int i = 0; i < 5; ++i) {
    c[i].snr = snr[i];
    c[i].sample = sample[i];
    c[i].beam = beam[i];
    c[i].dm_trial = trial[i];
  }
  const auto got = gather_candidates(c, Comm());
  ASSERT_EQ(got.size(), 5u);
  // S/N descending, then sample, beam, dm_trial.
  EXPECT_EQ(got[0].sample, 5);
  EXPECT_EQ(got[1].beam, 0);
  EXPECT_EQ(got[1].dm_trial, 1);
  EXPECT_EQ(got[2].beam, 0);
  EXPECT_EQ(got[2].dm_trial, 2);
  EXPECT_EQ(got[3].beam, 1);
  EXPECT_EQ(got[4].snr, 7);
}
