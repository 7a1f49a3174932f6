#pragma once
// Pipeline test helpers: one small simulated BEST-2 observation shared by the suite (32
// channels, 10 blocks of 4096 samples = 65.5 ms, a pulsar at az 200 el 70, DM 3, every 10 ms),
// a beam list with the pulsar's beam and three far ones, GUPPI header edits.
#include <algorithm>
#include <fstream>
#include <string>

#include "test_util.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/pipeline.hpp"
#include "warpbeam/sim/voltages.hpp"

namespace pltest {

struct Observation {
  static constexpr double kT0 = 0.005, kPeriod = 0.01, kDm = 3;
  static constexpr int kPulsarBeam = 1, kBlocks = 10;
  /// Search options shared by `pipeline` and `search` (the beams: tsamp 12.8 us, 5120 samples).
  static constexpr const char* kSearchArgs =
      "--dm-min 0 --dm-max 5 --baseline 0.01 --boxcar-max 64 --threads 2";
  /// `pipeline`'s: 8 voltage samples per beam sample, as `beamform --integrate 8`.
  static std::string pipeline_args() { return std::string("--integrate 8 ") + kSearchArgs; }
  static std::string beam_list() {
    return "azel 90 40 east\nazel 200 70 psr\nazel 20 50 north\nazel 250 30 west\n";
  }

  wbtest::TempDir dir;
  std::string raw, beams;

  static const Observation& get() {
    static const Observation obs;
    return obs;
  }

 private:
  Observation() {
    raw = dir.file("sim.raw");
    beams = dir.file("beams.txt");
    std::ofstream(beams) << beam_list();
    // The library's simulator (as `simulate voltages --nchans 32 --nsamples 40960
    // --block-samples 4096 --no-sources --pulsar 'azel 200 70 0.03 0.01 3 0.0001 0.005' --seed
    // 7`), so that the GPU tests need no CLI.
    warpbeam::sim::VoltageSimConfig c;
    c.freqs_hz = warpbeam::beamform::best2_frequencies_hz(32);
    c.tsamp_s = 32 / 20e6;
    c.nsamples = 40960;
    c.block_samples = 4096;
    warpbeam::sim::Pulsar p;
    p.direction = warpbeam::beamform::parse_beam_list("azel 200 70").front();
    p.peak_flux = 0.03;
    p.period_s = kPeriod;
    p.dm = kDm;
    p.width_s = 1e-4;
    p.t0_s = kT0;
    c.pulsars.push_back(p);
    c.seed = 7;
    warpbeam::sim::simulate_voltages(c, raw);
  }
};

/// Copies `in` to `out` with the first header card starting with `key` replaced by `card`
/// (80 characters, io::guppi_card()).
inline void replace_first_card(const std::string& in, const std::string& out,
                               const std::string& key, const std::string& card) {
  std::string data = wbtest::slurp(in);
  for (std::size_t pos = 0; pos + 80 <= data.size(); pos += 80)
    if (data.compare(pos, key.size(), key) == 0) {
      data.replace(pos, 80, card);
      std::ofstream(out, std::ios::binary) << data;
      return;
    }
  throw std::runtime_error("no card " + key);
}

/// The pipeline of the observation as a library configuration (the same as pipeline_args()).
inline warpbeam::pipeline::PipelineConfig library_config(const Observation& obs) {
  (void)obs;
  warpbeam::pipeline::PipelineConfig c;
  c.array = warpbeam::beamform::best2_geometry();
  c.pointings = warpbeam::beamform::parse_beam_list(Observation::beam_list());
  c.integration = 8;
  c.search.dm_min = 0;
  c.search.dm_max = 5;
  c.search.baseline_s = 0.01;
  c.search.boxcar_max = 64;
  c.run.threads = 2;
  c.run.progress = false;
  return c;
}

/// The observation's pipeline (library_config, gulps of 1024 beam samples: 5 gulps) with the
/// blocks in `zeros` replaced by zeros: given as zero-filled blocks to execute() (`as_zeros`
/// false: what the file path does with a zeroed file) or to execute_zeros() (true: what a live
/// stream does with the blocks that never came).
inline warpbeam::pipeline::PipelineResult run_with_zero_blocks(const Observation& obs,
                                                               warpbeam::Backend backend,
                                                               const std::vector<int>& zeros,
                                                               bool as_zeros) {
  auto cfg = library_config(obs);
  cfg.run.gulp = 1024;
  warpbeam::io::GuppiReader reader(obs.raw);
  const auto& info = reader.info();
  warpbeam::pipeline::PipelinePlan plan(cfg, info, reader.nblocks(), backend);
  std::vector<std::uint8_t> block;
  double mjd = info.mjd_start;
  for (int k = 0; reader.read_block(block, &mjd); ++k) {
    const bool zero = std::find(zeros.begin(), zeros.end(), k) != zeros.end();
    if (zero && as_zeros) {
      plan.execute_zeros(mjd);
      continue;
    }
    if (zero) std::fill(block.begin(), block.end(), std::uint8_t{0});
    plan.execute(block.data(), block.size(), mjd);
  }
  return plan.finish();
}

/// A live stream's pipeline: the first `blocks` blocks of the observation (blocks in `zeros`
/// given to execute_zeros()), planned open-ended (PipelinePlan::open_ended) or for exactly those
/// blocks (what run_pipeline() plans for a file of them), with take_candidates() after every
/// block (`taken`: in the order they came; `taken_before_last`: how many before the last block).
struct StreamRun {
  warpbeam::pipeline::PipelineResult result;
  std::vector<warpbeam::search::Candidate> taken;
  std::size_t taken_before_last = 0;
};
inline StreamRun run_stream(const Observation& obs, warpbeam::Backend backend, int blocks,
                            std::int64_t gulp, bool open_ended,
                            const std::vector<int>& zeros = {}) {
  auto cfg = library_config(obs);
  cfg.run.gulp = gulp;
  warpbeam::io::GuppiReader reader(obs.raw);
  const auto& info = reader.info();
  warpbeam::pipeline::PipelinePlan plan(
      cfg, info, open_ended ? warpbeam::pipeline::PipelinePlan::open_ended : blocks, backend);
  StreamRun out;
  std::vector<std::uint8_t> block;
  double mjd = info.mjd_start;
  for (int k = 0; k < blocks && reader.read_block(block, &mjd); ++k) {
    if (k == blocks - 1) out.taken_before_last = out.taken.size();
    if (std::find(zeros.begin(), zeros.end(), k) != zeros.end())
      plan.execute_zeros(mjd);
    else
      plan.execute(block.data(), block.size(), mjd);
    for (const auto& c : plan.take_candidates())
      out.taken.push_back(c);
  }
  out.result = plan.finish();
  for (const auto& c : plan.take_candidates())  // those the end made final
    out.taken.push_back(c);
  return out;
}

/// Same candidates, field by field (the file path's and the live path's must be identical).
inline void expect_same_candidates(const warpbeam::pipeline::PipelineResult& a,
                                   const warpbeam::pipeline::PipelineResult& b) {
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  for (std::size_t i = 0; i < a.candidates.size(); ++i) {
    const auto &x = a.candidates[i], &y = b.candidates[i];
    EXPECT_EQ(x.beam, y.beam) << i;
    EXPECT_EQ(x.sample, y.sample) << i;
    EXPECT_EQ(x.dm_trial, y.dm_trial) << i;
    EXPECT_EQ(x.filter, y.filter) << i;
    EXPECT_EQ(x.members, y.members) << i;
    EXPECT_EQ(x.snr, y.snr) << i;
  }
}

}  // namespace pltest
