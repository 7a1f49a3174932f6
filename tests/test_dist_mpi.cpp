// `mpirun -n N warpbeam search ...` against one process (issue 7): the same .cand file, byte for
// byte, on the real burst and on a simulated multi-beam observation, with 2 and 3 ranks (on the
// CI's 2 cores: --oversubscribe); a failing rank stops every rank with one error line (from rank
// 0) and no output file. MpiPipeline: the same for `mpirun -n N warpbeam pipeline ...` (voltages
// -> beams -> search) with the sub-bands (or the beams) split over the ranks. Skipped with a
// message when the build has no MPI or no mpirun is found. MpiGpu: the same with --backend cuda,
// two ranks sharing one GPU (the lead's GPU run; mpirun there comes from scripts/stage-mpi's
// .mpi/env.sh).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "dist_test_util.hpp"
#include "pipeline_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/dist/comm.hpp"
#include "warpbeam/sim/filterbank.hpp"

using namespace warpbeam;

namespace {

// mpirun: $WARPBEAM_MPIRUN, else the one found at configure time, else the PATH's; "" if none.
std::string find_mpirun() {
  if (const char* e = std::getenv("WARPBEAM_MPIRUN"); e && *e) return e;
  const std::string configured = WARPBEAM_MPIEXEC;
  if (!configured.empty() && std::filesystem::exists(configured)) return configured;
  if (std::system("command -v mpirun >/dev/null 2>&1") == 0) return "mpirun";
  return "";
}

#define WB_REQUIRE_MPI()                                                                     \
  do {                                                                                       \
    if (!dist::mpi_built()) GTEST_SKIP() << "this build has no MPI (libopenmpi-dev)";        \
    if (find_mpirun().empty())                                                               \
      GTEST_SKIP() << "no mpirun found (install openmpi-bin or set WARPBEAM_MPIRUN; on the " \
                      "GPU machine: source .mpi/env.sh from scripts/stage-mpi)";             \
  } while (0)

// `mpirun -n N warpbeam ARGS`: quiet (-q: no OpenMPI banner), more ranks than cores allowed,
// shared memory without the single-copy mechanism (containers may refuse it).
wbtest::CliResult run_mpi(int n, const std::string& mpirun_options, const std::string& args) {
  std::string cmd = "'" + find_mpirun() + "' -q --oversubscribe";
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  // Sanitized build (docs/FUZZING.md), for OpenMPI's sake only: its MCA plugins keep allocations
  // until exit and are built without frame pointers, so LeakSanitizer's fast unwinder stops in
  // them and reports "<unknown module>" (MPI_Finalize has unloaded them) instead of libopen-pal,
  // which tests/fuzz/lsan.supp suppresses. The full unwinder names the library; a leak of
  // warpbeam's own is still reported.
  cmd = "ASAN_OPTIONS=\"$ASAN_OPTIONS:fast_unwind_on_malloc=0\" " + cmd;
#endif
#endif
  if (::geteuid() == 0) cmd += " --allow-run-as-root";
  cmd +=
      " --mca btl_vader_single_copy_mechanism none " + mpirun_options + " -n " + std::to_string(n);
  return wbdist::run(cmd, args);
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

// The .cand of one process and of `ranks` ranks must be identical files.
void expect_same_cand(const wbtest::TempDir& dir, const std::string& inputs,
                      const std::string& options, const std::vector<int>& ranks) {
  const auto one = wbdist::run(
      "", "search " + inputs + " " + options + " --output '" + dir.file("one.cand") + "'");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::string want = wbtest::slurp(dir.file("one.cand"));
  ASSERT_FALSE(want.empty());
  for (int n : ranks) {
    const std::string out = dir.file("n" + std::to_string(n) + ".cand");
    const auto r = run_mpi(n, "", "search " + inputs + " " + options + " --output '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << "mpirun -n " << n << ": " << r.err;
    EXPECT_EQ(wbtest::slurp(out), want) << "mpirun -n " << n << " wrote another .cand";
    EXPECT_EQ(count(r.out, "candidate(s)"), 1u) << "rank 0 alone reports:\n" << r.out;
    // One run of n ranks (not n runs of one process that each wrote the whole file).
    EXPECT_NE(r.out.find(std::to_string(n) + " rank(s)"), std::string::npos) << r.out;
    EXPECT_EQ(count(r.err, "error"), 0u) << r.err;
  }
}

std::string simulate_beams(const wbtest::TempDir& dir, int beams) {
  std::string list;
  for (int b = 0; b < beams; ++b) {
    sim::FilterbankSimConfig s;
    s.nchans = 64;
    s.fch1_mhz = 1400;
    s.foff_mhz = -2;
    s.tsamp_s = 256e-6;
    s.duration_s = 2.5 + 0.5 * b;
    s.seed = 40 + static_cast<std::uint64_t>(b);
    if (b != 1) s.bursts = {{150.0 + 50 * b, 14, 1e-3, 0.7 + 0.4 * b}};
    const std::string p = dir.file("beam" + std::to_string(b) + ".fil");
    sim::simulate_filterbank(s, p);
    list += " '" + p + "'";
  }
  return list;
}

// `warpbeam pipeline` of the simulated BEST-2 observation (4 beams, 32 channels) into `out`.
std::string pipeline_args(const std::string& out, const std::string& options) {
  const auto& obs = pltest::Observation::get();
  return "pipeline '" + obs.raw + "' --beams '" + obs.beams + "' " +
         pltest::Observation::pipeline_args() + " " + options + " --out '" + out + "'";
}

// The pipeline's candidates.cand of one process and of `ranks` ranks, for each split, must be
// identical files.
void expect_same_pipeline_cand(const std::string& options, const std::vector<int>& ranks) {
  wbtest::TempDir dir;
  const auto one = wbdist::run("", pipeline_args(dir.file("one"), options));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::string want = wbtest::slurp(dir.file("one") + "/candidates.cand");
  ASSERT_NE(want.find("\t1\n"), std::string::npos) << "no candidate in the pulsar's beam:\n"
                                                   << want;
  for (const char* split : {"channels", "beams"})
    for (int n : ranks) {
      SCOPED_TRACE("mpirun -n " + std::to_string(n) + " pipeline --split " + split);
      const std::string out = dir.file(std::string(split) + std::to_string(n));
      const auto r = run_mpi(n, "", pipeline_args(out, options + " --split " + split));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(wbtest::slurp(out + "/candidates.cand"), want) << "another candidates.cand";
      EXPECT_EQ(count(r.out, "candidate(s) ->"), 1u) << "rank 0 alone reports:\n" << r.out;
      const std::string workers =
          std::to_string(n) + " workers (" + std::to_string(n) + " rank(s)), split by " + split;
      EXPECT_NE(r.out.find(workers), std::string::npos) << r.out;
      // The channel split exchanges beam rows between the ranks; the beam split nothing.
      const bool exchanged =
          r.out.find(": 0 bytes of beam rows between ranks") == std::string::npos;
      EXPECT_EQ(exchanged, std::string(split) == "channels") << r.out;
      EXPECT_EQ(count(r.err, "error"), 0u) << r.err;
    }
}

}  // namespace

TEST(MpiSearch, Burst28WithTwoAndThreeRanksWritesTheSameCand) {
  WB_REQUIRE_MPI();
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  wbtest::TempDir dir;
  // One file: its DM trials split over the ranks, peaks clustered on rank 0.
  expect_same_cand(dir, "'" + wbtest::data_file("filterbank/burst_28.fil") + "'", "--snr-min 5",
                   {2, 3});
  // Gulps of 1024 samples: 3 gulps, so the ranks cut the file in time instead.
  wbtest::TempDir in_time;
  expect_same_cand(in_time, "'" + wbtest::data_file("filterbank/burst_28.fil") + "'",
                   "--snr-min 5 --gulp 1024", {2, 3});
}

TEST(MpiSearch, MultiBeamObservationWithTwoAndThreeRanksWritesTheSameCand) {
  WB_REQUIRE_MPI();
  wbtest::TempDir dir;
  // Three beams: two ranks take whole files; with two beams, three ranks split one of them.
  expect_same_cand(dir, simulate_beams(dir, 3), "--dm-max 400", {2, 3});
  const std::string want = wbtest::slurp(dir.file("one.cand"));
  EXPECT_NE(want.find("\t0\n"), std::string::npos) << "no candidate of beam 0:\n" << want;
  EXPECT_NE(want.find("\t2\n"), std::string::npos) << "no candidate of beam 2:\n" << want;
  wbtest::TempDir two;
  expect_same_cand(two, simulate_beams(two, 2), "--dm-max 400", {3});
}

TEST(MpiSearch, AFailingRankStopsEveryRankWithOneErrorAndNoOutput) {
  WB_REQUIRE_MPI();
  wbtest::TempDir dir;
  const std::string beams = simulate_beams(dir, 2);  // 2.5 s and 3.0 s
  {
    std::ofstream f(dir.file("bad.fil"), std::ios::binary);
    f << "HEADER_START but not a filterbank";
  }
  struct Case {
    std::string inputs, options;
    int code;
    std::string word;
  };
  const std::vector<Case> cases = {
      // A malformed file (every rank reads the headers).
      {beams + " '" + dir.file("bad.fil") + "'", "", 1, "bad.fil"},
      // The 2.5 s beam is shorter than the delay at DM 6000 (2.64 s), the 3.0 s one is not: the
      // run's planning (every rank) fails on beam 0; a usage error (exit 2).
      {beams, "--dm-max 6000", 2, "--dm-max"},
      // A bad option value, seen by every rank alike.
      {beams, "--snr-min -1", 2, "--snr-min"},
  };
  for (const auto& c : cases)
    for (int n : {2, 3}) {
      SCOPED_TRACE("mpirun -n " + std::to_string(n) + " warpbeam search" + c.inputs + " " +
                   c.options);
      const auto r = run_mpi(
          n, "",
          "search " + c.inputs + " " + c.options + " --output '" + dir.file("out.cand") + "'");
      EXPECT_EQ(r.exit_code, c.code) << r.err;
      EXPECT_EQ(r.err.rfind("warpbeam: error: ", 0), 0u) << r.err;
      EXPECT_EQ(count(r.err, "\n"), 1u) << "one line, from rank 0:\n" << r.err;
      EXPECT_NE(r.err.find(c.word), std::string::npos) << r.err;
      EXPECT_FALSE(std::filesystem::exists(dir.file("out.cand"))) << "a partial product";
      // One process says the same.
      const auto one = wbdist::run(
          "", "search " + c.inputs + " " + c.options + " --output '" + dir.file("out.cand") + "'");
      EXPECT_EQ(one.exit_code, c.code) << one.err;
      EXPECT_NE(one.err.find(c.word), std::string::npos) << one.err;
    }
}

TEST(MpiSearch, ARankFailingAloneAfterItsSearchStopsEveryRank) {
  WB_REQUIRE_MPI();
  wbtest::TempDir dir;
  const std::string beams = simulate_beams(dir, 3);
  // Rank 2 of 3 fails after its search (fault injection), while ranks 0 and 1 have searched
  // theirs and wait in the agreement: one error line from rank 0, naming rank 2, no output.
  const auto r =
      run_mpi(3, "-x WARPBEAM_TEST_FAIL_RANK=2",
              "search " + beams + " --dm-max 400 --output '" + dir.file("out.cand") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("warpbeam: error: injected failure", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("(rank 2 of 3)"), std::string::npos) << r.err;
  EXPECT_EQ(count(r.err, "\n"), 1u) << "one line, from rank 0:\n" << r.err;
  EXPECT_EQ(count(r.out, "candidate(s)"), 0u) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.cand"))) << "a partial product";
  // Without the injection the same run succeeds (so the failure above is the injected one).
  const auto ok =
      run_mpi(3, "", "search " + beams + " --dm-max 400 --output '" + dir.file("out.cand") + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("out.cand")));
}

TEST(MpiPipeline, TwoAndThreeRanksWriteOneProcesssCandForEitherSplit) {
  WB_REQUIRE_MPI();
  expect_same_pipeline_cand("--backend cpu", {2, 3});
}

TEST(MpiPipeline, AFailingRankStopsEveryRankWithOneErrorAndNoOutput) {
  WB_REQUIRE_MPI();
  wbtest::TempDir dir;
  const auto& obs = pltest::Observation::get();
  struct Case {
    std::string args;
    int ranks, code;
    std::string word;
  };
  const std::string out = dir.file("out");
  const std::vector<Case> cases = {
      // More ranks than beams: a usage error on every rank.
      {pipeline_args(out, "--backend cpu"), 5, 2, "5 ranks for 4 beams"},
      // A missing voltage file.
      {"pipeline '" + dir.file("missing.raw") + "' --beams '" + obs.beams + "' --out '" + out +
           "' --backend cpu",
       2, 1, "missing.raw"},
      // The output folder's parent does not exist: found before the run.
      {pipeline_args(dir.file("no/out"), "--backend cpu"), 3, 1, "does not exist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("mpirun -n " + std::to_string(c.ranks) + " warpbeam " + c.args);
    const auto r = run_mpi(c.ranks, "", c.args);
    EXPECT_EQ(r.exit_code, c.code) << r.err;
    EXPECT_EQ(r.err.rfind("warpbeam: error: ", 0), 0u) << r.err;
    EXPECT_EQ(count(r.err, "\n"), 1u) << "one line, from rank 0:\n" << r.err;
    EXPECT_NE(r.err.find(c.word), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << "a partial product";
    EXPECT_FALSE(std::filesystem::exists(dir.file("no"))) << "a folder made";
  }
}

// ---------------------------------------------------------------------------------------------
// On the GPU machine (the lead's run): two ranks sharing one GPU give one rank's candidates.

TEST(MpiGpu, TwoRanksSharingTheGpuWriteOneRanksCand) {
  WB_REQUIRE_GPU();
  WB_REQUIRE_MPI();
  wbtest::TempDir dir;
  if (std::filesystem::exists(wbtest::data_file("filterbank/burst_28.fil")))
    expect_same_cand(dir, "'" + wbtest::data_file("filterbank/burst_28.fil") + "'",
                     "--backend cuda --snr-min 5", {2});
  else
    std::printf("burst_28.fil not found (%s): the simulated observation only\n",
                wbtest::data_file("filterbank/burst_28.fil").c_str());
  wbtest::TempDir sim;
  expect_same_cand(sim, simulate_beams(sim, 3), "--backend cuda --dm-max 400", {2, 3});
}

TEST(MpiGpu, PipelineRanksSharingTheGpuWriteOneProcesssCand) {
  WB_REQUIRE_GPU();
  WB_REQUIRE_MPI();
  expect_same_pipeline_cand("--backend cuda", {2, 3});
}
