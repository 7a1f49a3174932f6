// `warpbeam bench pipeline --config B1 [--backend cpu|cuda] [--seconds S] --json FILE`: the
// voltages -> beams -> search pipeline (warpbeam/pipeline.hpp) on DESIGN.md's B1 shape (BEST-2:
// 32 antennas, 1024 channels over 20 MHz at 408 MHz, ci4, one pol, blocks of 8192 samples, 32
// beams), fed from memory (random ci4 voltages, so disk reads are not measured): seconds per
// second of voltages (the real-time factor), the beamformer's and the search's share, and the
// bytes copied each way (on cuda, device -> host is statistics and peaks only: the record gives
// its ratio to the beams' size). The baseline measured in the same run: the same pipeline with one
// search stream (no overlap of one beam's RFI stage with the previous beam's search).
// --scaling (issue 7): instead, the same pipeline on the first device of --gpus and on all of
// them, split by channels and by beams, in one run: speedup and scaling efficiency t(1) / (N
// t(N)) for N distinct devices; the candidates of every run must be identical.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <set>
#include <span>

#include <nlohmann/json.hpp>

#include "bench/drivers.hpp"
#include "commands.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/pipeline.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::bench {

namespace {

// One run over `nblocks` blocks of random voltages; the blocks are drawn once and reused.
pipeline::PipelineResult run_once(const pipeline::PipelineConfig& c,
                                  const io::VoltageStreamInfo& info, std::int64_t nblocks,
                                  const std::vector<std::span<const std::uint8_t>>& blocks,
                                  Backend backend) {
  const auto t0 = std::chrono::steady_clock::now();
  pipeline::PipelinePlan plan(c, info, nblocks, backend);
  for (std::int64_t i = 0; i < nblocks; ++i) {
    const auto& b = blocks[static_cast<std::size_t>(i) % blocks.size()];
    plan.execute(b.data(), b.size(),
                 info.mjd_start + i * info.block_samples * info.tsamp_s / 86400);
  }
  auto r = plan.finish();
  r.seconds_total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

bool same_candidates(const pipeline::PipelineResult& a, const pipeline::PipelineResult& b) {
  if (a.candidates.size() != b.candidates.size()) return false;
  for (std::size_t i = 0; i < a.candidates.size(); ++i) {
    const auto &x = a.candidates[i], &y = b.candidates[i];
    if (x.beam != y.beam || x.sample != y.sample || x.dm_trial != y.dm_trial ||
        x.filter != y.filter || std::abs(x.snr - y.snr) > 1e-4f * std::abs(y.snr))
      return false;
  }
  return true;
}

// Seconds of the stream: the run without its planning (buffers, plans, pinned slots: once per
// observation, before the voltages flow).
double stream_s(const pipeline::PipelineResult& r) {
  return r.seconds_total - r.seconds_plan;
}

// --scaling: `all` (c's devices, c's split) was measured; now the first device alone and all
// devices with the other split. Speedups and efficiencies of the stream (and, beside them, of the
// whole run with its planning). Records them in rec["scaling"]; returns the summary's part.
std::string scaling_part(const pipeline::PipelineConfig& c, const io::VoltageStreamInfo& info,
                         std::int64_t nblocks,
                         const std::vector<std::span<const std::uint8_t>>& blocks,
                         const pipeline::PipelineResult& all, nlohmann::json& rec) {
  auto c1 = c;
  c1.devices = {all.devices.front()};
  const auto one = run_once(c1, info, nblocks, blocks, Backend::cuda);
  auto c2 = c;
  c2.split = all.split == "beams" ? pipeline::Split::channels : pipeline::Split::beams;
  const auto other = run_once(c2, info, nblocks, blocks, Backend::cuda);
  const int n = static_cast<int>(std::set<int>(all.devices.begin(), all.devices.end()).size());
  nlohmann::json runs = nlohmann::json::object();
  std::string text =
      fmt::format("1 GPU {:.3f} s stream + {:.3f} s plan", stream_s(one), one.seconds_plan);
  for (const auto* r : {&all, &other}) {
    const double speedup = stream_s(one) / stream_s(*r);
    const double speedup_total = one.seconds_total / r->seconds_total;
    runs[r->split] = {{"seconds_stream", stream_s(*r)},
                      {"seconds_plan", r->seconds_plan},
                      {"seconds_total", r->seconds_total},
                      {"speedup", speedup},
                      {"efficiency", speedup / n},
                      {"speedup_with_plan", speedup_total},
                      {"efficiency_with_plan", speedup_total / n},
                      {"bytes_to_device", r->bytes_to_device},
                      {"bytes_between_devices", r->bytes_between_devices},
                      {"identical_candidates", same_candidates(*r, one)}};
    text += fmt::format(
        "; {} GPUs by {} {:.3f} s + {:.3f} s (stream x{:.2f}, efficiency {:.0f} %; with the "
        "plan {:.0f} %)",
        n, r->split, stream_s(*r), r->seconds_plan, speedup, 100 * speedup / n,
        100 * speedup_total / n);
  }
  rec["scaling"] = {{"devices", all.devices},
                    {"distinct_devices", n},
                    {"one",
                     {{"seconds_stream", stream_s(one)},
                      {"seconds_plan", one.seconds_plan},
                      {"seconds_total", one.seconds_total},
                      {"result", one.to_json()}}},
                    {"all", runs}};
  if (!same_candidates(all, one) || !same_candidates(other, one))
    fail(ErrorCategory::io,
         "bench pipeline --scaling: one device and all devices found different candidates (a "
         "bug: they must be identical)");
  return text;
}

}  // namespace

void bench_pipeline(const PipelineBenchOptions& o) {
  const Backend backend = resolve_backend(parse_backend(o.backend));
  const bool gpu = backend == Backend::cuda;
  io::VoltageStreamInfo info;
  info.format = "memory";
  info.nchans = 1024;
  info.nantennas = 32;
  info.npol = 1;
  info.sample_type = SampleType::ci4;
  info.fch1_hz = beamform::best2_frequencies_hz(1024)[0];
  info.foff_hz = 20e6 / 1024;
  info.tsamp_s = 1024 / 20e6;
  info.mjd_start = 60000.5;
  info.block_samples = 8192;
  info.source_name = "bench";
  const double seconds = o.seconds > 0 ? o.seconds : (gpu ? 16.0 : 2.0);
  const std::int64_t nblocks = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::ceil(seconds / (info.block_samples * info.tsamp_s))));

  pipeline::PipelineConfig c;
  c.array = beamform::best2_geometry();
  // A fan of beams across the sky (az 0..360 at el 60..80).
  for (int b = 0; b < o.beams; ++b)
    c.pointings.push_back({beamform::Frame::azel, 2 * std::numbers::pi * b / o.beams,
                           (60 + 20.0 * (b % 5) / 4) * std::numbers::pi / 180,
                           fmt::format("b{}", b)});
  c.integration = o.integrate;
  c.int8_weights = o.int8_weights;
  c.devices = o.gpus;
  if (gpu && o.scaling && c.devices.empty()) {
    // Every visible device; a one-GPU machine puts two workers on it (checks the split and
    // shows its overhead: not scaling).
    for (int d = 0; d < device_count(); ++d)
      c.devices.push_back(d);
    if (c.devices.size() == 1) c.devices.push_back(0);
  }
  c.split = pipeline::parse_split(o.split);
  c.search.dm_min = 0;
  c.search.dm_max = o.dm_max;
  c.search.baseline_s = 1.0;
  c.run.progress = false;
  c.search.boxcar_max = 256;
  c.run.gulp = 4096;  // beam samples: several gulps, so that searches interleave with blocks

  // Random ci4 voltages: a few distinct blocks, reused. On cuda they are pinned (as a capture
  // buffer would be) unless --pageable: pageable blocks are staged through a pinned buffer by a
  // host memcpy per device and block.
  std::mt19937_64 rng(1);
  const auto block_bytes = static_cast<std::size_t>(info.block_bytes());
  const bool pinned = gpu && !o.pageable;
  std::vector<std::vector<std::uint8_t>> pageable_blocks;
  std::vector<PinnedArray<std::uint8_t>> pinned_blocks;
  std::vector<std::span<const std::uint8_t>> blocks;
  for (int k = 0; k < 2; ++k) {
    std::uint8_t* b = nullptr;
    if (pinned) {
      pinned_blocks.emplace_back(block_bytes);
      b = pinned_blocks.back().data();
    } else {
      pageable_blocks.emplace_back(block_bytes);
      b = pageable_blocks.back().data();
    }
    for (std::size_t i = 0; i < block_bytes; i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(b + i, &v, std::min<std::size_t>(8, block_bytes - i));
    }
    blocks.emplace_back(b, block_bytes);
  }

  nlohmann::json rec = {{"benchmark", "pipeline"},
                        {"config", o.config},
                        {"backend", to_string(backend)},
                        {"nbeams", o.beams},
                        {"nchans", info.nchans},
                        {"nantennas", info.nantennas},
                        {"block_samples", info.block_samples},
                        {"blocks", nblocks},
                        {"integration", o.integrate},
                        {"input_memory", pinned ? "pinned" : "pageable"},
                        {"gpus", o.gpus},
                        {"split", o.split},
                        {"parameters", c.to_json()}};
  // Warm-up (plans, kernels, allocations) on a short run, then the measured run.
  if (gpu) run_once(c, info, std::min<std::int64_t>(nblocks, 4), blocks, backend);
  const auto r = run_once(c, info, nblocks, blocks, backend);
  rec["result"] = r.to_json();
  const double rtf = r.observation_s / r.seconds_total;
  std::string summary = fmt::format(
      "pipeline {} {}: {} beams x {} ch, {} DM trials 0-{:.0f}, {:.2f} s for {:.2f} s of voltages "
      "(real-time x{:.3f}; beamform {:.2f} s ({}), search {:.2f} s; {} input)",
      o.config, to_string(backend), o.beams, info.nchans, r.dms.size(), o.dm_max, r.seconds_total,
      r.observation_s, rtf, r.seconds_beamform, r.algorithm, r.seconds_search,
      pinned ? "pinned" : "pageable");
  if (gpu && o.scaling) {
    summary += "; " + scaling_part(c, info, nblocks, blocks, r, rec);
  } else if (gpu) {
    summary += fmt::format(
        "; copied {:.1f} MB to the GPU, {:.3f} MB back ({:.2g} of the beams' {:.1f} MB)",
        r.bytes_to_device / 1e6, r.bytes_from_device / 1e6,
        static_cast<double>(r.bytes_from_device) / r.beam_bytes, r.beam_bytes / 1e6);
    // Baseline: one search stream.
    auto c1 = c;
    c1.run.gpu_streams = 1;
    const auto b1 = run_once(c1, info, nblocks, blocks, backend);
    rec["baseline_one_stream"] = b1.to_json();
    rec["speedup_vs_one_stream"] = b1.seconds_total / r.seconds_total;
    summary += fmt::format("; one search stream {:.2f} s (x{:.2f})", b1.seconds_total,
                           b1.seconds_total / r.seconds_total);
  }
  rec["real_time_factor"] = rtf;
  rec["summary"] = summary;
  rec["provenance"] = provenance();
  fmt::print("{}\n", summary);
  if (!o.json.empty()) io::write_text_file(o.json, rec.dump(2) + "\n");
}

}  // namespace warpbeam::bench
