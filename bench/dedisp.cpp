// `warpbeam bench dedisp --config D1 [--backend cpu|cuda] [--nsamples N] [--json FILE]`:
// dedispersion throughput (channel*DM*samples/s) and real-time factor on a reference
// configuration. The CPU runner is here; the CUDA runner is bench_dedisp_cuda() (dedisp.hpp,
// dedisp_cuda.cpp): `--backend cuda [--sweep] [--autotune]`.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <random>

#include <omp.h>

#include <fmt/format.h>

#include "bench/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::bench {

namespace {

// The 1-minute load average: the CPUs are shared, so it says how much of them a run had.
double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  f >> l;
  return l;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

// Times the CPU plan on `ngulps` gulps of `gulp` output samples (fresh input per gulp is not
// needed: the work does not depend on the values). Returns the median seconds per gulp.
bench::Timing time_cpu_gulps(const DedispBenchSetup& s, dedisp::DedispersionConfig c,
                             std::int64_t gulp, int repeats, Progress* progress,
                             std::int64_t* done) {
  const auto delays = dedisp::delay_table(c);
  c.nsamples_in = gulp + *std::max_element(delays.begin(), delays.end());
  dedisp::DedispersionPlan plan(c, Backend::cpu);
  const auto in = dedisp_bench_input(s, c.nsamples_in);
  std::vector<float> out(static_cast<std::size_t>(plan.ndms() * plan.nsamples_out()));
  const View<const std::uint8_t, 2> vin(in.data(), {c.nsamples_in, plan.row_bytes()});
  const View<float, 2> vout(out.data(), {plan.ndms(), plan.nsamples_out()});
  return bench::time_host(
      [&] {
        plan.execute(vin, vout);
        if (progress) progress->update(*done += gulp);
      },
      1, repeats);
}

}  // namespace

DedispBenchSetup dedisp_bench_setup(const std::string& name) {
  if (name != "D1")
    fail(ErrorCategory::invalid_argument, "--config {}: the dedispersion benchmark knows D1", name);
  DedispBenchSetup s;
  s.name = name;
  auto& c = s.config;
  c.nchans = 1024;
  c.fch1_mhz = 1500;
  c.foff_mhz = -0.29296875;
  c.tsamp_s = 64e-6;
  c.nbits = 8;
  c.dms = dedisp::dm_list_dedisp(0, 1000, 40, 1.25, c.nchans, c.tsamp_s, c.fch1_mhz, c.foff_mhz);
  const auto delays = dedisp::delay_table(c);
  s.max_delay = *std::max_element(delays.begin(), delays.end());
  s.nsamples_in_full = std::int64_t{1} << 20;
  s.nsamples_out_full = s.nsamples_in_full - s.max_delay;
  return s;
}

std::vector<std::uint8_t> dedisp_bench_input(const DedispBenchSetup& s, std::int64_t nsamples_in) {
  std::vector<std::uint8_t> in(
      static_cast<std::size_t>(nsamples_in) *
      packed_bytes(s.config.nbits, static_cast<std::size_t>(s.config.nchans)));
  std::mt19937 rng(12345);
  for (auto& b : in)
    b = static_cast<std::uint8_t>(rng());
  return in;
}

nlohmann::json dedisp_bench_record(const DedispBenchSetup& s, const std::string& backend,
                                   std::int64_t nsamples_out, double seconds) {
  const auto& c = s.config;
  const double ndm = static_cast<double>(c.dms.size());
  const double work = static_cast<double>(c.nchans) * ndm * static_cast<double>(nsamples_out);
  const double rtf = static_cast<double>(nsamples_out) * c.tsamp_s / seconds;
  const double full_s = seconds * static_cast<double>(s.nsamples_out_full) / nsamples_out;
  const std::string summary = fmt::format(
      "dedisp {} {}: {:.3g} channel*DM*samples/s, {:.3g}x real time ({} DM trials x {} output "
      "samples in {:.3f} s; full {} ~{:.1f} s)",
      s.name, backend, work / seconds, rtf, c.dms.size(), nsamples_out, seconds, s.name, full_s);
  return {{"benchmark", "dedisp"},
          {"config", s.name},
          {"backend", backend},
          {"summary", summary},
          {"nchans", c.nchans},
          {"ndms", c.dms.size()},
          {"nbits", c.nbits},
          {"tsamp_s", c.tsamp_s},
          {"max_delay_samples", s.max_delay},
          {"nsamples_out", nsamples_out},
          {"nsamples_out_full", s.nsamples_out_full},
          {"seconds", seconds},
          {"seconds_full_extrapolated", full_s},
          {"channel_dm_samples_per_s", work / seconds},
          {"dm_samples_per_s", ndm * static_cast<double>(nsamples_out) / seconds},
          {"additions", work},
          {"real_time_factor", rtf}};
}

nlohmann::json bench_dedisp_cpu(const DedispBenchRequest& r) {
  const DedispBenchSetup s = dedisp_bench_setup(r.config);
  const std::int64_t total =
      r.nsamples > 0 ? std::min(r.nsamples, s.nsamples_out_full) : s.nsamples_out_full;
  // About 32768 output samples per gulp keep the CPU's buffers near 400 MB for D1; the gulps
  // are evened out so that they cover the samples asked for with at most ngulps - 1 more.
  const std::int64_t nominal = std::min(r.gulp > 0 ? r.gulp : std::int64_t{32768}, total);
  const std::int64_t ngulps = (total + nominal - 1) / nominal;
  const std::int64_t gulp = (total + ngulps - 1) / ngulps;
  auto c = s.config;
  c.threads = r.threads;

  // Sweep a few tile sizes on one gulp; the winner runs the timed work.
  nlohmann::json sweep = nlohmann::json::array();
  dedisp::CpuTuning best{};
  if (r.sweep) {
    const dedisp::CpuTuning candidates[] = {{8, 256},  {8, 512},   {16, 256}, {16, 512},
                                            {32, 256}, {16, 1024}, {4, 1024}};
    const std::int64_t g = std::min<std::int64_t>(gulp, 8192);
    double best_s = INFINITY;
    for (const auto& t : candidates) {
      auto ct = c;
      ct.cpu_tuning = t;
      const auto tm = time_cpu_gulps(s, ct, g, 2, nullptr, nullptr);
      sweep.push_back({{"dms_per_tile", t.dms_per_tile},
                       {"samples_per_tile", t.samples_per_tile},
                       {"nsamples_out", g},
                       {"seconds", tm.median_s}});
      if (tm.median_s < best_s) best_s = tm.median_s, best = t;
    }
    c.cpu_tuning = best;
  }

  // The timed run: every gulp once after a warm-up (the whole configuration), or `repeats`
  // times when it is one gulp; seconds = the median gulp's time x the number of gulps.
  const int reps = ngulps == 1 ? std::max(r.repeats, 1) : static_cast<int>(ngulps);
  Progress progress(fmt::format("bench dedisp {} cpu", s.name), (reps + 1) * gulp);
  std::int64_t done = 0;
  double seconds = 0;
  const double load_before = load_average();
  const std::clock_t cpu0 = std::clock();
  const auto tm = time_cpu_gulps(s, c, gulp, reps, &progress, &done);
  const double cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  seconds = tm.median_s * static_cast<double>(ngulps);
  progress.finish();
  const std::int64_t timed = ngulps * gulp;

  // Baseline: the untiled direct loop (tens of times slower) against the tiled kernel on one
  // gulp of 512 output samples of every DM trial (both unpack the gulp's input first).
  const auto& cs = c;
  auto cb = cs;
  cb.algorithm = dedisp::Algorithm::direct;
  const std::int64_t gb = std::min<std::int64_t>(gulp, 512);
  const auto base = time_cpu_gulps(s, cb, gb, 1, nullptr, nullptr);
  const auto tiled = time_cpu_gulps(s, cs, gb, 1, nullptr, nullptr);

  auto rec = dedisp_bench_record(s, "cpu", timed, seconds);
  rec["variant"] = "tiled";
  rec["cpu_tuning"] = {{"dms_per_tile", c.cpu_tuning.dms_per_tile},
                       {"samples_per_tile", c.cpu_tuning.samples_per_tile}};
  rec["gulp_out_samples"] = gulp;
  rec["gulps"] = ngulps;
  rec["median_s_per_gulp"] = tm.median_s;
  rec["threads"] = c.threads > 0 ? c.threads : omp_get_max_threads();
  rec["cpu_model"] = cpu_model();
  rec["cpus"] = omp_get_num_procs();
  rec["load_average_1min_before"] = load_before;
  rec["load_average_1min_after"] = load_average();
  // CPU time of the timed gulps (warm-up included): against wall time it shows how much of the
  // machine the run had; per CPU second it is the kernel's rate on one core.
  rec["process_cpu_seconds"] = cpu_s;
  rec["channel_dm_samples_per_cpu_s"] = static_cast<double>(c.nchans) *
                                        static_cast<double>(c.dms.size()) *
                                        static_cast<double>(gulp) * (reps + 1) / cpu_s;
  rec["sweep"] = sweep;
  rec["baseline"] = {{"variant", "direct"},
                     {"ndms", cs.dms.size()},
                     {"nsamples_out", gb},
                     {"seconds", base.median_s},
                     {"tiled_seconds", tiled.median_s},
                     {"speedup", base.median_s / tiled.median_s}};
  rec["summary"] = rec["summary"].get<std::string>() +
                   fmt::format("; {:.1f}x the direct loop", base.median_s / tiled.median_s);
  return rec;
}

void bench_dedisp(const DedispBenchRequest& req) {
  const Backend b = resolve_backend(parse_backend(req.backend));
  nlohmann::json rec = b == Backend::cuda ? bench_dedisp_cuda(req) : bench_dedisp_cpu(req);
  rec["provenance"] = provenance();
  fmt::print("{}\n", rec["summary"].get<std::string>());
  if (!req.json.empty()) io::write_text_file(req.json, rec.dump(2) + "\n");
  if (rec.contains("failed")) fail(ErrorCategory::cuda, "{}", rec["failed"].get<std::string>());
}

}  // namespace warpbeam::bench
