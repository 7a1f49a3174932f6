// The pipeline on the GPU against the CPU on the simulated observation: the same candidates
// (beam, sample, DM trial, width; S/N within 1e-3 relative; see expect_contains), the beams
// never copied back (device -> host bytes far below the beams' size), one and two search streams
// identical, several gulps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "pipeline_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/pipeline.hpp"

using namespace warpbeam;
using pltest::Observation;

namespace {

pipeline::PipelineResult run(const pipeline::PipelineConfig& c, Backend b) {
  const Observation& obs = Observation::get();
  io::GuppiReader reader(obs.raw);
  return pipeline::run_pipeline(reader, reader.nblocks(), c, b);
}

// Every candidate of `a` with S/N >= snr_min + 0.5 is in `b`: the candidate of the same beam
// nearest in sample (within its width). Mostly the same (DM trial, width, sample within 1) with
// S/N within 1e-3 relative; the two beamformers round differently (fp32, different orders), so
// a cluster's best peak may move to a neighbouring DM trial or width of nearly equal S/N: then
// within 2 trials, 1 width and 2e-2. Prints the first mismatch and the largest difference.
void expect_contains(const std::vector<search::Candidate>& a,
                     const std::vector<search::Candidate>& b, float snr_min, const char* what) {
  double max_rel = 0;
  int moved = 0;
  for (const auto& c : a) {
    if (c.snr < snr_min + 0.5f) continue;
    const search::Candidate* best = nullptr;
    for (const auto& d : b)
      if (d.beam == c.beam && std::abs(d.sample - c.sample) <= std::max(c.width(), d.width()) &&
          (!best || std::abs(d.sample - c.sample) < std::abs(best->sample - c.sample)))
        best = &d;
    ASSERT_NE(best, nullptr) << what << ": no match for beam " << c.beam << " sample " << c.sample
                             << " dm_trial " << c.dm_trial << " filter " << c.filter << " S/N "
                             << c.snr;
    const double rel = std::abs(best->snr - c.snr) / c.snr;
    max_rel = std::max(max_rel, rel);
    const bool same = best->dm_trial == c.dm_trial && best->filter == c.filter &&
                      std::abs(best->sample - c.sample) <= 1;
    if (same) {
      EXPECT_LE(rel, 1e-3) << what << ": beam " << c.beam << " sample " << c.sample << " got "
                           << best->snr << " expected " << c.snr;
    } else {
      ++moved;
      EXPECT_LE(std::abs(best->dm_trial - c.dm_trial), 2) << what << ": sample " << c.sample;
      EXPECT_LE(std::abs(best->filter - c.filter), 1) << what << ": sample " << c.sample;
      EXPECT_LE(rel, 2e-2) << what << ": beam " << c.beam << " sample " << c.sample << " got "
                           << best->snr << " expected " << c.snr;
    }
  }
  std::printf("%s: max relative S/N difference %.3g, %d best peak(s) moved\n", what, max_rel,
              moved);
}

// The same candidates in the same order: beam, sample, DM trial and S/N equal.
void expect_identical(const std::vector<search::Candidate>& a,
                      const std::vector<search::Candidate>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].beam, b[i].beam) << i;
    EXPECT_EQ(a[i].sample, b[i].sample) << i;
    EXPECT_EQ(a[i].dm_trial, b[i].dm_trial) << i;
    EXPECT_EQ(a[i].snr, b[i].snr) << i;
  }
}

}  // namespace

TEST(PipelineGpu, CudaMatchesCpuAndKeepsTheBeamsOnTheGpu) {
  WB_REQUIRE_GPU();
  for (std::int64_t gulp : {std::int64_t{0}, std::int64_t{700}}) {
    auto c = pltest::library_config(Observation::get());
    c.run.gulp = gulp;
    const auto cpu = run(c, Backend::cpu);
    const auto gpu = run(c, Backend::cuda);
    SCOPED_TRACE("gulp " + std::to_string(gulp));
    EXPECT_EQ(gpu.backend, "cuda");
    EXPECT_TRUE(gpu.input_pinned) << "run_pipeline page-locks its block buffer";
    EXPECT_FALSE(cpu.input_pinned);
    EXPECT_EQ(gpu.gulps, cpu.gulps);
    ASSERT_FALSE(cpu.candidates.empty());
    expect_contains(cpu.candidates, gpu.candidates, c.search.snr_min, "cpu in gpu");
    expect_contains(gpu.candidates, cpu.candidates, c.search.snr_min, "gpu in cpu");
    // The pulsar's beam is the best on both.
    EXPECT_EQ(gpu.candidates.front().beam, Observation::kPulsarBeam);
    // The beams stay on the GPU: only statistics and peaks come back.
    std::printf(
        "bytes to device %lld, from device %lld, beams %lld, device to device %lld\n",
        static_cast<long long>(gpu.bytes_to_device), static_cast<long long>(gpu.bytes_from_device),
        static_cast<long long>(gpu.beam_bytes), static_cast<long long>(gpu.bytes_device_to_device));
    EXPECT_GT(gpu.bytes_from_device, 0);
    EXPECT_LT(gpu.bytes_from_device, gpu.beam_bytes / 4);
    const std::int64_t voltages = 10 * std::int64_t{32} * 4096 * 32;
    EXPECT_GE(gpu.bytes_to_device, voltages);
    EXPECT_LT(gpu.bytes_to_device, voltages + gpu.beam_bytes / 4);
    EXPECT_GE(gpu.bytes_device_to_device, gpu.beam_bytes);
  }
}

TEST(PipelineGpu, OneAndTwoSearchStreamsGiveTheSameCandidates) {
  WB_REQUIRE_GPU();
  auto c = pltest::library_config(Observation::get());
  c.run.gulp = 700;
  c.run.gpu_streams = 1;
  const auto one = run(c, Backend::cuda);
  c.run.gpu_streams = 2;
  const auto two = run(c, Backend::cuda);
  expect_identical(one.candidates, two.candidates);
}

// --gpus: the work split over devices (issue 7) gives the same candidates as one device, for
// both splits. With one GPU, the device listed twice or three times (two or three workers, host
// threads, stores) exercises the split and the exchange of beam rows between stores; with two or
// more, devices 0 and 1 (peer copies).
static void expect_split_equals_one_device(pipeline::Split how) {
  auto c = pltest::library_config(Observation::get());
  c.run.gulp = 700;
  const auto one = run(c, Backend::cuda);
  ASSERT_FALSE(one.candidates.empty());
  std::vector<std::vector<int>> splits = {{0}, {0, 0}, {0, 0, 0}};
  if (device_count() >= 2) splits.push_back({0, 1});
  c.split = how;
  for (const auto& devs : splits) {
    c.devices = devs;
    const auto split = run(c, Backend::cuda);
    SCOPED_TRACE(std::to_string(devs.size()) + " workers, last device " +
                 std::to_string(devs.back()) + ", split by " + pipeline::to_string(how));
    EXPECT_EQ(split.devices, devs);
    EXPECT_EQ(split.workers, static_cast<int>(devs.size()));
    ASSERT_EQ(split.candidates.size(), one.candidates.size());
    for (std::size_t i = 0; i < one.candidates.size(); ++i) {
      EXPECT_EQ(split.candidates[i].beam, one.candidates[i].beam) << i;
      EXPECT_EQ(split.candidates[i].sample, one.candidates[i].sample) << i;
      EXPECT_EQ(split.candidates[i].dm_trial, one.candidates[i].dm_trial) << i;
      EXPECT_EQ(split.candidates[i].filter, one.candidates[i].filter) << i;
      // Each beam's sum over antennas and each channel's do not depend on the other beams or
      // channels: the same to rounding.
      EXPECT_NEAR(split.candidates[i].snr, one.candidates[i].snr, 1e-4f * one.candidates[i].snr)
          << i;
    }
    // Every beam row reaches its buffer once (on the device, or from a peer).
    EXPECT_EQ(split.bytes_device_to_device + split.bytes_between_devices,
              one.bytes_device_to_device);
    const std::int64_t voltages = std::int64_t{10} * 32 * 4096 * 32;
    if (how == pipeline::Split::beams) {
      // Every device receives every voltage block.
      EXPECT_GE(split.bytes_to_device, static_cast<std::int64_t>(devs.size()) * voltages);
    } else {
      // Each device receives its sub-band: the voltages cross the host link once in all.
      EXPECT_GE(split.bytes_to_device, voltages);
      EXPECT_LT(split.bytes_to_device, one.bytes_to_device + voltages / 100);
    }
    EXPECT_EQ(split.bytes_between_devices > 0,
              devs.size() > 1 && devs.back() != devs.front() && how == pipeline::Split::channels);
  }
}

TEST(PipelineGpu, BeamsSplitOverDevicesGiveTheSameCandidates) {
  WB_REQUIRE_GPU();
  expect_split_equals_one_device(pipeline::Split::beams);
}

TEST(PipelineGpu, ChannelsSplitOverDevicesGiveTheSameCandidates) {
  WB_REQUIRE_GPU();
  expect_split_equals_one_device(pipeline::Split::channels);
}

// Pinned input blocks are copied to every device straight from the caller's buffer (no staging):
// the same candidates as pageable blocks, with one device and with the beams split over two
// shares. The buffer is overwritten with garbage as soon as execute() returns, so a copy that was
// still in flight would corrupt the beams and change the candidates.
TEST(PipelineGpu, PinnedBlocksGiveTheSameCandidatesAndMayBeReusedAtOnce) {
  WB_REQUIRE_GPU();
  auto c = pltest::library_config(Observation::get());
  c.run.gulp = 700;
  io::GuppiReader reader(Observation::get().raw);
  const auto info = reader.info();
  const std::int64_t nblocks = reader.nblocks();
  std::vector<std::vector<std::uint8_t>> blocks;
  std::vector<double> mjds;
  std::vector<std::uint8_t> b;
  double mjd = info.mjd_start;
  while (reader.read_block(b, &mjd)) {
    blocks.push_back(b);
    mjds.push_back(mjd);
  }
  ASSERT_EQ(static_cast<std::int64_t>(blocks.size()), nblocks);
  for (const std::vector<int>& devs : {std::vector<int>{0}, std::vector<int>{0, 0}}) {
    c.devices = devs;
    const auto pageable = run(c, Backend::cuda);
    pipeline::PipelinePlan plan(c, info, nblocks, Backend::cuda);
    PinnedArray<std::uint8_t> pinned(blocks.front().size());
    ASSERT_TRUE(is_pinned_host(pinned.data()));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      std::copy(blocks[i].begin(), blocks[i].end(), pinned.data());
      plan.execute(pinned.data(), pinned.size(), mjds[i]);
      std::fill(pinned.data(), pinned.data() + pinned.size(), std::uint8_t{0x77});
    }
    const auto direct = plan.finish();
    SCOPED_TRACE(std::to_string(devs.size()) + " share(s)");
    ASSERT_FALSE(direct.candidates.empty());
    expect_identical(direct.candidates, pageable.candidates);
  }
  EXPECT_FALSE(is_pinned_host(blocks.front().data()));
}

// execute_zeros() on the GPU (issue 16, the live stream's blocks that never came): zero beams
// written by a memset instead of the beamformer, the gulps of zeros not searched; the candidates
// are identical to the GPU's own run on zero-filled blocks (where the GPU search of the zero
// gulp finds nothing), and every-zero blocks give none.
TEST(PipelineGpu, ZeroBlocksGiveTheZeroFilledBlocksCandidates) {
  WB_REQUIRE_GPU();
  const Observation& obs = Observation::get();
  const std::vector<int> zeros = {2, 3, 4, 5, 6, 7, 8};
  const auto file = pltest::run_with_zero_blocks(obs, Backend::cuda, zeros, false);
  const auto live = pltest::run_with_zero_blocks(obs, Backend::cuda, zeros, true);
  ASSERT_FALSE(file.candidates.empty());
  expect_identical(file.candidates, live.candidates);
  EXPECT_EQ(live.zero_blocks, 7);
  EXPECT_EQ(live.gulps_skipped, 1);
  EXPECT_EQ(file.gulps_skipped, 0);
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_TRUE(pltest::run_with_zero_blocks(obs, Backend::cuda, all, false).candidates.empty())
      << "the GPU search of zeros finds nothing";
  EXPECT_EQ(pltest::run_with_zero_blocks(obs, Backend::cuda, all, true).gulps_skipped, 5);
}

// An open-ended plan on the GPU (issue 16, `pipeline --listen` without --blocks): the CUDA
// store's searcher is renewed when the tail is planned; the candidates are identical to the GPU
// pipeline planned for the blocks that came (one gulp: nothing searched before the end; gulp
// 1024: gulps searched as they come, then the tail), with blocks that never came.
TEST(PipelineGpu, OpenEndedStreamGivesThePlannedStreamsCandidates) {
  WB_REQUIRE_GPU();
  const Observation& obs = Observation::get();
  for (const std::int64_t gulp : {std::int64_t{0}, std::int64_t{1024}}) {
    SCOPED_TRACE(::testing::Message() << "gulp " << gulp);
    const auto file = pltest::run_stream(obs, Backend::cuda, 7, gulp, false, {3});
    const auto live = pltest::run_stream(obs, Backend::cuda, 7, gulp, true, {3});
    ASSERT_FALSE(file.result.candidates.empty());
    expect_identical(file.result.candidates, live.result.candidates);
    EXPECT_EQ(live.result.gulps, file.result.gulps);
    EXPECT_EQ(live.taken.size(), live.result.candidates.size());
  }
}
