// The voltages -> beams -> search pipeline (warpbeam/pipeline.hpp, `warpbeam pipeline`), CPU:
// the demo (a simulated BEST-2 observation with a pulsar in one beam direction), the equality of
// each beam's candidates with the file search of the filterbank `warpbeam beamform` writes for
// it, bad inputs and a trailing partial block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/pipeline.hpp"

using namespace warpbeam;
using pltest::Observation;

namespace {

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(wbtest::slurp(path));
}

// True when a candidate of beam `beam` arrives within `tol_s` of a pulse of the simulated pulsar.
bool at_a_pulse(const search::Candidate& c, double tol_s) {
  const double k = std::round((c.time_s - Observation::kT0) / Observation::kPeriod);
  return std::abs(c.time_s - (Observation::kT0 + k * Observation::kPeriod)) < tol_s;
}

}  // namespace

// The far beams are far from the pulsar in the array factor (not on a grating lobe of the
// 4 x 8 grid): what the demo's "not in the far beams" rests on.
TEST(Pipeline, FarBeamsAreOutOfThePulsarsArrayFactor) {
  const auto array = beamform::best2_geometry();
  const auto freqs = beamform::best2_frequencies_hz(32);
  const auto beams = beamform::parse_beam_list(Observation::beam_list());
  const auto w = beamform::compute_weights(array, beams, freqs, 1, 60000.5);
  const auto psr = beamform::direction_enu(beams[Observation::kPulsarBeam], array.site, 60000.5);
  for (int ch : {0, 16, 31})
    for (int b = 0; b < 4; ++b) {
      const auto r = beamform::array_response(
          array, w.data() + (static_cast<std::size_t>(ch) * 4 + b) * 32, freqs[ch], psr);
      const double gain = std::norm(r) / (32.0 * 32.0);
      if (b == Observation::kPulsarBeam)
        EXPECT_NEAR(gain, 1.0, 1e-5);
      else
        EXPECT_LT(gain, 0.005) << "beam " << b << " channel " << ch;
    }
}

// The demo: the pipeline finds the pulsar in its beam, at its DM, at its pulses, and not in the
// far beams; the CPU copies nothing to a device.
TEST(PipelineCli, FindsTheSimulatedPulsarInItsBeam) {
  const Observation& obs = Observation::get();
  wbtest::TempDir dir;
  const auto r =
      wbtest::run_cli("pipeline '" + obs.raw + "' --beams '" + obs.beams + "' --out '" +
                      dir.file("out") + "' --backend cpu " + Observation::pipeline_args());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cands = io::read_cand(dir.file("out/candidates.cand"));
  const auto summary = read_json(dir.file("out/pipeline.json"));
  const auto& res = summary["result"];
  EXPECT_TRUE(summary.contains("provenance"));
  EXPECT_EQ(res["backend"], "cpu");
  EXPECT_EQ(res["nbeams"], 4);
  EXPECT_EQ(res["blocks"], Observation::kBlocks);
  EXPECT_EQ(res["bytes_to_device"], 0);
  EXPECT_EQ(res["bytes_from_device"], 0);
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/candidates.json")));

  // The DM grid step near the pulsar's DM.
  const auto cj = read_json(dir.file("out/candidates.json"));
  std::vector<float> dms = cj["dms"].get<std::vector<float>>();
  ASSERT_GT(dms.size(), 2u);
  double step = 0;
  for (std::size_t i = 1; i < dms.size(); ++i)
    if (dms[i - 1] <= Observation::kDm && dms[i] >= Observation::kDm) step = dms[i] - dms[i - 1];
  ASSERT_GT(step, 0);

  // Every pulse inside the searched span is found in the pulsar's beam at its DM.
  const double tsamp = res["tsamp_s"].get<double>();
  const double searched_s =
      (res["nsamples_per_beam"].get<double>() - res["max_delay_samples"].get<double>()) * tsamp;
  int pulses = 0;
  for (double t = Observation::kT0; t < searched_s - 2e-3; t += Observation::kPeriod) {
    ++pulses;
    bool found = false;
    for (const auto& c : cands)
      if (c.beam == Observation::kPulsarBeam && std::abs(c.time_s - t) < 1e-3 &&
          std::abs(c.dm - Observation::kDm) <= step + 1e-6 && c.snr > 10)
        found = true;
    EXPECT_TRUE(found) << "pulse at " << t << " s not found in beam " << Observation::kPulsarBeam
                       << "\n"
                       << r.out;
  }
  EXPECT_GE(pulses, 4);
  // The far beams see none of the pulses (noise candidates elsewhere are allowed).
  float best_far = 0, best_on = 0;
  for (const auto& c : cands) {
    if (c.beam == Observation::kPulsarBeam) {
      best_on = std::max(best_on, c.snr);
    } else {
      EXPECT_FALSE(at_a_pulse(c, 1e-3) && c.dm > 1)
          << "beam " << c.beam << " has a candidate at a pulse: S/N " << c.snr << " DM " << c.dm
          << " t " << c.time_s;
      best_far = std::max(best_far, c.snr);
    }
  }
  EXPECT_GT(best_on, 3 * best_far);
  EXPECT_NE(r.out.find("candidate(s)"), std::string::npos);
}

// Each beam's candidates are those of `warpbeam search` on the filterbank `warpbeam beamform`
// writes for it, with the same gulp: several gulps and blocks, pulses across their boundaries.
TEST(PipelineCli, EachBeamMatchesTheFileSearchOfItsFilterbank) {
  const Observation& obs = Observation::get();
  wbtest::TempDir dir;
  const std::string args = std::string(Observation::kSearchArgs) + " --gulp 700";
  auto r = wbtest::run_cli("pipeline '" + obs.raw + "' --beams '" + obs.beams + "' --out '" +
                           dir.file("out") + "' --backend cpu --integrate 8 " + args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = read_json(dir.file("out/pipeline.json"));
  EXPECT_GE(summary["result"]["gulps"].get<int>(), 4);
  const auto all = io::read_cand(dir.file("out/candidates.cand"));
  r = wbtest::run_cli("beamform '" + obs.raw + "' --beams '" + obs.beams + "' --out '" +
                      dir.file("beams") + "' --backend cpu --integrate 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int b = 0; b < 4; ++b) {
    const std::string fil = dir.file("beams") + "/beam000" + std::to_string(b) + ".fil";
    const std::string cand = dir.file("b" + std::to_string(b) + ".cand");
    r = wbtest::run_cli("search '" + fil + "' --output '" + cand + "' --backend cpu " + args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto want = io::read_cand(cand);
    std::vector<search::Candidate> got;
    for (const auto& c : all)
      if (c.beam == b) got.push_back(c);
    ASSERT_EQ(got.size(), want.size()) << "beam " << b;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].sample, want[i].sample) << "beam " << b << " candidate " << i;
      EXPECT_EQ(got[i].dm_trial, want[i].dm_trial) << "beam " << b << " candidate " << i;
      EXPECT_EQ(got[i].filter, want[i].filter) << "beam " << b << " candidate " << i;
      EXPECT_EQ(got[i].members, want[i].members) << "beam " << b << " candidate " << i;
      EXPECT_NEAR(got[i].snr, want[i].snr, 1e-3f * want[i].snr) << "beam " << b;
    }
    if (b == Observation::kPulsarBeam) {
      EXPECT_GE(want.size(), 4u);
    }
  }
}

// The bad inputs: a raw header that contradicts its block size, a raw header missing a
// keyword, an antenna count that does not match the geometry, a beam below the horizon; plus
// usage errors. Each gives a one-line error naming the problem and leaves no output folder.
TEST(PipelineCli, BadInputsGiveClearErrorsAndNoOutput) {
  const Observation& obs = Observation::get();
  wbtest::TempDir dir;
  // Observation::kSearchArgs without the DM range (an option given twice is a usage error).
  const std::string common = " --backend cpu --baseline 0.01 --boxcar-max 64 --threads 2";
  const std::string i8 = " --integrate 8 --dm-min 0 --dm-max 5";
  auto expect_fail = [&](const std::string& in, const std::string& beams, int code,
                         const std::string& needle) {
    const std::string out = dir.file("out");
    const auto r =
        wbtest::run_cli("pipeline '" + in + "' " + beams + " --out '" + out + "'" + common);
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << needle;
  };
  const std::string beams = "--beams '" + obs.beams + "'";
  // A header that contradicts its block size (not a whole number of samples).
  const std::string bad_size = dir.file("badsize.raw");
  pltest::replace_first_card(obs.raw, bad_size, "BLOCSIZE=",
                             io::guppi_card("BLOCSIZE", std::to_string(32 * 4096 * 32 + 1)));
  expect_fail(bad_size, beams + i8, 1, "BLOCSIZE");
  // A header missing a keyword (TBIN renamed).
  const std::string no_tbin = dir.file("notbin.raw");
  pltest::replace_first_card(obs.raw, no_tbin, "TBIN    =", io::guppi_card("XBIN", "1.6e-06"));
  expect_fail(no_tbin, beams + i8, 1, "TBIN");
  // An antenna count that does not match the geometry.
  {
    std::ofstream f(dir.file("five.txt"));
    f << "0 0 0\n1 0 0\n2 0 0\n3 0 0\n4 0 0\n";
  }
  expect_fail(obs.raw, beams + i8 + " --array '" + dir.file("five.txt") + "'", 2, "32 antennas");
  // A beam below the horizon.
  expect_fail(obs.raw, "--grid azel:180:180:1:-5:-5:1" + i8, 2, "below the horizon");
  // Usage: no beams; a negative threshold; --integrate that does not divide a block.
  expect_fail(obs.raw, i8, 2, "--beams");
  expect_fail(obs.raw, beams + i8 + " --snr-min -1", 2, "--snr-min");
  expect_fail(obs.raw, beams + " --integrate 3000", 2, "--integrate");
  expect_fail(obs.raw, beams + i8 + " --gpus 0", 2, "--gpus");
  expect_fail(obs.raw, beams + i8 + " --split sideways", 2, "--split");
  // A missing file.
  expect_fail(dir.file("nope.raw"), beams + i8, 1, "nope.raw");
  // Beams shorter than the dispersion delay.
  expect_fail(obs.raw, beams + " --integrate 8 --dm-min 50 --dm-max 100", 2, "--dm-max");
  // --out whose parent does not exist: an io error, and no tree of folders is created.
  const auto r = wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out '" +
                                 dir.file("nodir/out") + "'" + common);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("nodir")));
  // A product that cannot be written after the run: the --out folder made for it is removed.
  const auto j =
      wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out '" + dir.file("out2") +
                      "' --json '" + dir.file("nodir2/x.json") + "'" + common);
  EXPECT_EQ(j.exit_code, 1) << j.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out2"))) << "a failed run left its --out folder";
  // ... and it is found before the run, as an --out that is a file.
  EXPECT_NE(j.err.find("'" + dir.file("nodir2/x.json") + "': the folder"), std::string::npos)
      << j.err;
  { std::ofstream(dir.file("afile")) << "x"; }
  const auto f = wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out '" +
                                 dir.file("afile") + "'" + common);
  EXPECT_EQ(f.exit_code, 1) << f.err;
  EXPECT_NE(f.err.find("it is a file"), std::string::npos) << f.err;
  EXPECT_EQ(wbtest::slurp(dir.file("afile")), "x");
  // An empty --out: a command line that cannot work.
  const auto e = wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out ''" + common);
  EXPECT_EQ(e.exit_code, 2) << e.err;
  EXPECT_NE(e.err.find("the output folder (--out) is empty"), std::string::npos) << e.err;
  // A folder under that file, and a link to nowhere, each named for what they are (a new user's
  // trial of 2026-12-03: "the folder 'afile' does not exist", "File exists"); the link stays.
  const auto u = wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out '" +
                                 dir.file("afile/sub") + "'" + common);
  EXPECT_EQ(u.exit_code, 1) << u.err;
  EXPECT_NE(u.err.find("afile' is a file, not a folder"), std::string::npos) << u.err;
  std::filesystem::create_symlink(dir.file("nowhere"), dir.file("dangling"));
  const auto l = wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out '" +
                                 dir.file("dangling") + "'" + common);
  EXPECT_EQ(l.exit_code, 1) << l.err;
  EXPECT_NE(l.err.find("is a symbolic link to '" + dir.file("nowhere") + "', which does not exist"),
            std::string::npos)
      << l.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("dangling")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("nowhere")));
  // An --out with a trailing '/' is the folder (the README's `--out cands/`).
  const auto t = wbtest::run_cli("pipeline '" + obs.raw + "' " + beams + i8 + " --out '" +
                                 dir.file("slash") + "/'" + common);
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("slash/candidates.cand")));
}

// A trailing partial block is dropped with a warning and the whole blocks are searched: the same
// candidates as the file cut at the last whole block.
TEST(PipelineCli, TrailingPartialBlockWarnsAndWholeBlocksAreSearched) {
  const Observation& obs = Observation::get();
  wbtest::TempDir dir;
  const std::string cut = dir.file("cut.raw");
  const auto size = std::filesystem::file_size(obs.raw);
  const auto block = size / Observation::kBlocks;
  std::filesystem::copy_file(obs.raw, cut);
  std::filesystem::resize_file(cut, size - block / 3);  // the last block loses a third
  const std::string whole = dir.file("whole.raw");
  std::filesystem::copy_file(obs.raw, whole);
  std::filesystem::resize_file(whole, size - block);
  const std::string args =
      "--beams '" + obs.beams + "' --backend cpu " + Observation::pipeline_args();
  auto r = wbtest::run_cli("pipeline '" + cut + "' --out '" + dir.file("o1") + "' " + args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("arning"), std::string::npos) << r.err;
  EXPECT_EQ(read_json(dir.file("o1/pipeline.json"))["result"]["blocks"], Observation::kBlocks - 1);
  r = wbtest::run_cli("pipeline '" + whole + "' --out '" + dir.file("o2") + "' " + args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(wbtest::slurp(dir.file("o1/candidates.cand")),
            wbtest::slurp(dir.file("o2/candidates.cand")));
  EXPECT_FALSE(io::read_cand(dir.file("o1/candidates.cand")).empty());
}

// The library: execute() past the planned blocks and finish() before them are errors; a plan
// for a stream whose antennas do not match the array is refused.
TEST(Pipeline, PlanChecksItsBlocks) {
  const Observation& obs = Observation::get();
  io::GuppiReader reader(obs.raw);
  auto cfg = pltest::library_config(obs);
  // One block (512 beam samples): DMs up to 0.5 (a 96-sample delay), a short baseline.
  cfg.search.dm_max = 0.5;
  cfg.search.baseline_s = 0.002;
  std::vector<std::uint8_t> block;
  ASSERT_TRUE(reader.read_block(block));
  const double mjd = reader.info().mjd_start;
  pipeline::PipelinePlan plan(cfg, reader.info(), 1, Backend::cpu);
  EXPECT_THROW(plan.execute(block.data(), block.size() - 1, mjd), Error);
  EXPECT_THROW(plan.finish(), Error);  // before its block
  plan.execute(block.data(), block.size(), mjd);
  EXPECT_THROW(plan.execute(block.data(), block.size(), mjd), Error);  // past its block
  EXPECT_NO_THROW(plan.finish());
  // Planned with the full DM range, one block is shorter than the largest delay.
  auto deep = cfg;
  deep.search.dm_max = 5;
  EXPECT_THROW(pipeline::PipelinePlan(deep, reader.info(), 1, Backend::cpu), Error);
  auto bad = cfg;
  bad.array.enu_m.pop_back();
  EXPECT_THROW(pipeline::PipelinePlan(bad, reader.info(), 1, Backend::cpu), Error);
}

// A live stream's blocks that never came are searched as zeros (issue 16). The H200's B1 run of
// 2026-12-02 beamformed and searched each at full cost, so an engine that had fallen behind and
// dropped blocks fell further behind, and after the stream ended it searched zeros for minutes.
// execute_zeros() writes zero beams and skips the gulps that read only zeros; the candidates
// must stay those of execute() on zero-filled blocks (the file path on the zeroed file).
TEST(Pipeline, ZeroBlocksCostNoSearchAndGiveTheZeroFilledFilesCandidates) {
  const Observation& obs = Observation::get();
  const std::vector<int> zeros = {2, 3, 4, 5, 6, 7, 8};  // beam rows 1024-4608: one whole gulp
  const auto file = pltest::run_with_zero_blocks(obs, Backend::cpu, zeros, false);
  const auto live = pltest::run_with_zero_blocks(obs, Backend::cpu, zeros, true);
  ASSERT_EQ(file.gulps, 5);
  EXPECT_FALSE(file.candidates.empty()) << "the pulsar in blocks 0, 1 and 9";
  pltest::expect_same_candidates(file, live);
  EXPECT_EQ(file.zero_blocks, 0);
  EXPECT_EQ(file.gulps_skipped, 0);
  EXPECT_EQ(live.zero_blocks, 7);
  // Gulp 2 (owned rows 2048-3072, read 1984 to 3072 + margin + the DM 5 delay < 4608) is all
  // zeros; gulps 1 and 3 read rows of blocks 1 and 9.
  EXPECT_EQ(live.gulps_skipped, 1);
  // Every block zeros: no gulp is searched.
  const auto none =
      pltest::run_with_zero_blocks(obs, Backend::cpu, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, true);
  EXPECT_EQ(none.gulps_skipped, 5);
  EXPECT_TRUE(none.candidates.empty());
  const auto none_file =
      pltest::run_with_zero_blocks(obs, Backend::cpu, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, false);
  EXPECT_TRUE(none_file.candidates.empty()) << "the search of zeros finds nothing";
}

// A live stream whose length is known only at its end (issue 16: `pipeline --listen` without
// --blocks): planned open-ended, it gives run_pipeline()'s candidates on the blocks that came,
// for a stream of one gulp (default gulp: nothing is searched before the end, and the tail's
// plan is the file's) and of several (gulp 1024: gulps searched as they come), ending on any
// block, with blocks that never came; take_candidates() hands out each candidate once, final,
// and all of them by the end.
TEST(Pipeline, OpenEndedStreamGivesTheCandidatesOfItsLength) {
  const Observation& obs = Observation::get();
  struct Case {
    int blocks;
    std::int64_t gulp;
    std::vector<int> zeros;
  };
  for (const Case& k : {Case{10, 0, {}}, Case{10, 1024, {}}, Case{7, 1024, {}},
                        Case{6, 1024, {2, 3}}, Case{9, 0, {4}}}) {
    SCOPED_TRACE(::testing::Message() << k.blocks << " blocks, gulp " << k.gulp);
    const auto file = pltest::run_stream(obs, Backend::cpu, k.blocks, k.gulp, false, k.zeros);
    const auto live = pltest::run_stream(obs, Backend::cpu, k.blocks, k.gulp, true, k.zeros);
    EXPECT_FALSE(file.result.candidates.empty()) << "the pulsar, every 10 ms";
    pltest::expect_same_candidates(file.result, live.result);
    EXPECT_EQ(live.result.gulps, file.result.gulps);
    EXPECT_EQ(live.result.gulp, file.result.gulp);
    EXPECT_EQ(live.result.blocks, k.blocks);
    EXPECT_TRUE(live.result.open_ended);
    EXPECT_FALSE(file.result.open_ended);
    EXPECT_DOUBLE_EQ(live.result.observation_s, file.result.observation_s);
    // Every candidate handed out once: the same set as finish()'s, in the order found.
    auto key = [](const search::Candidate& c) {
      return std::make_tuple(c.beam, c.sample, c.dm_trial, c.filter, c.members, c.snr);
    };
    std::vector<decltype(key(live.taken[0]))> got, want;
    for (const auto& c : live.taken)
      got.push_back(key(c));
    for (const auto& c : live.result.candidates)
      want.push_back(key(c));
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    if (k.gulp == 1024)  // the gulps searched before the end gave their candidates then
      EXPECT_GT(live.taken_before_last, 0u);
  }
}

// The end of an open-ended stream is checked when it comes: no block at all, or fewer beam
// samples than the largest delay and a few boxcars, is a clear invalid_argument.
TEST(Pipeline, OpenEndedPlanChecksItsEnd) {
  const Observation& obs = Observation::get();
  io::GuppiReader reader(obs.raw);
  const auto cfg = pltest::library_config(obs);  // DM 5: a delay of ~1000 beam samples
  {
    pipeline::PipelinePlan none(cfg, reader.info(), pipeline::PipelinePlan::open_ended,
                                Backend::cpu);
    EXPECT_THROW(none.finish(), Error);
  }
  pipeline::PipelinePlan one(cfg, reader.info(), pipeline::PipelinePlan::open_ended, Backend::cpu);
  std::vector<std::uint8_t> block;
  ASSERT_TRUE(reader.read_block(block));
  one.execute(block.data(), block.size(), reader.info().mjd_start);  // 512 beam samples
  try {
    one.finish();
    ADD_FAILURE() << "one block is shorter than DM 5's delay";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dispersion delay"), std::string::npos) << e.what();
  }
}
