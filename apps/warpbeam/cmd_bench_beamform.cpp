// `warpbeam bench beamform --config B1|B2 [--backend cpu|cuda] [--algorithm ...] [--sweep]`:
// DESIGN.md's beamformer reference configurations. Median time per buffer over repeats after
// warm-up, TFLOP/s (8 real flops per complex multiply-accumulate), the real-time factor (B1),
// fractions of the device ceilings measured in the same run (copy bandwidth, fp32 FMA rate,
// cuBLAS fp16 GEMM rate) and, for B2, cuBLAS complex GEMMs on the same shapes (fp32 and TF32).
// On the CPU: the fraction of this CPU's AVX2 FMA peak, measured with a register-resident FMA
// loop on every core (and the nominal peak from the clock in /proc/cpuinfo).
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <numbers>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/bench.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

namespace {

using beamform::BeamformConfig;
using beamform::BeamformPlan;

struct BenchOptions {
  std::string config = "B1", backend = "cuda", algorithm = "auto", json;
  bool sweep = false;
  int repeats = 0;
};

BeamformConfig reference_config(const std::string& name) {
  BeamformConfig c;
  if (name == "B1") {  // BEST-2: 32 antennas, 1024 ch, ci4, single pol, 8192 samples, 32 beams
    c.nchans = 1024;
    c.nantennas = 32;
    c.npol = 1;
    c.nbeams = 32;
    c.nsamples = 8192;
    c.sample_type = SampleType::ci4;
  } else if (name == "B2") {  // large N: 256 dual-pol antennas, 384 ch, 1024 beams, ci8
    c.nchans = 384;
    c.nantennas = 256;
    c.npol = 2;
    c.nbeams = 1024;
    c.nsamples = 2048;
    c.sample_type = SampleType::ci8;
  } else {
    fail(ErrorCategory::invalid_argument, "--config {} is not B1 or B2", name);
  }
  return c;
}

// Random bytes, fast (splitmix64); never all zero.
std::vector<std::uint8_t> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  std::uint64_t x = 12345;
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(v.data() + i, &z, std::min<std::size_t>(8, n - i));
  }
  return v;
}

std::vector<std::complex<float>> bench_weights(const BeamformConfig& c) {
  if (c.nantennas == 32 && c.nchans == 1024) {
    // B1: BEST-2 beams on an 8 x 4 grid around the zenith, real geometry and frequencies.
    std::vector<beamform::Pointing> p;
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 8; ++i)
        p.push_back({beamform::Frame::direction_cosines, (i - 3.5) * 0.05, (j - 1.5) * 0.1, {}});
    return beamform::compute_weights(beamform::best2_geometry(), p,
                                     beamform::best2_frequencies_hz(), c.npol);
  }
  // Others: unit phasors from a table (the time is in the kernel, not in the values).
  std::vector<std::complex<float>> table(4096);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = std::polar(1.0f, static_cast<float>(2 * std::numbers::pi * i / 4096.0));
  std::vector<std::complex<float>> w(static_cast<std::size_t>(c.nchans) * c.npol * c.nbeams *
                                     c.nantennas);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = table[(i * 2654435761u >> 7) % 4096];
  return w;
}

// Measured AVX2 FMA peak of this CPU: 10 independent 8-wide FMA chains per core (enough to cover
// the 4-cycle latency of 2 FMA pipes), all cores.
// Returns flop per wall second; *per_cpu_second gets flop per second of CPU time (robust on a
// shared machine, where other processes take cores away).
__attribute__((target("avx2,fma"))) double cpu_fma_flops(int threads, double* per_cpu_second) {
  const long iters = 20'000'000;
  float sink = 0;
  const std::clock_t c0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    __m256 a[10];
    for (int k = 0; k < 10; ++k)
      a[k] = _mm256_set1_ps(static_cast<float>(omp_get_thread_num() + k));
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < iters; ++i)
      for (int k = 0; k < 10; ++k)
        a[k] = _mm256_fmadd_ps(a[k], m, c);
    __m256 s = a[0];
    for (int k = 1; k < 10; ++k)
      s = _mm256_add_ps(s, a[k]);
    float f[8];
    _mm256_storeu_ps(f, s);
    sink += f[0];
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  if (sink == 42.f) fmt::print(" ");  // keeps the loop alive
  const double flop = static_cast<double>(threads) * iters * 10 * 8 * 2;
  *per_cpu_second = flop / cpu;
  return flop / dt;
}

double cpu_clock_mhz() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::stod(line.substr(line.find(':') + 1));
  return 0;
}

struct Measured {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int repeats = 0;
};

Measured time_plan(const BeamformPlan& plan, const std::uint8_t* in, float* out, int warmup,
                   int repeats) {
  const auto& c = plan.config();
  View<const std::uint8_t, 3> vin(in, c.input_shape(),
                                  plan.backend() == Backend::cuda ? Space::device : Space::host);
  View<float, 4> vout(out, c.output_shape(), vin.space);
  std::vector<double> ms;
  if (plan.backend() == Backend::cuda) {
    Stream s;
    for (int i = 0; i < warmup; ++i)
      plan.execute(vin, vout, &s);
    s.synchronize();
    for (int r = 0; r < repeats; ++r) {
      Event e0, e1;
      e0.record(&s);
      plan.execute(vin, vout, &s);
      e1.record(&s);
      e1.synchronize();
      ms.push_back(e1.elapsed_ms_since(e0));
    }
  } else {
    const auto t = bench::time_host([&] { plan.execute(vin, vout); }, warmup, repeats);
    return {t.median_s * 1e3, t.min_s * 1e3, t.max_s * 1e3, t.repeats};
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back(), static_cast<int>(ms.size())};
}

nlohmann::json timing_json(const Measured& m, double flops) {
  return {{"median_ms", m.median_ms},
          {"min_ms", m.min_ms},
          {"max_ms", m.max_ms},
          {"repeats", m.repeats},
          {"tflops", flops / (m.median_ms * 1e-3) / 1e12}};
}

void run(const BenchOptions& o) {
  BeamformConfig c = reference_config(o.config);
  c.algorithm = beamform::parse_algorithm(o.algorithm);
  const Backend backend = resolve_backend(parse_backend(o.backend));
  const bool gpu = backend == Backend::cuda;
  const int repeats = o.repeats > 0 ? o.repeats : (gpu ? 10 : 3);
  const double flops = c.flops();
  const double in_bytes = static_cast<double>(c.nchans) * c.nsamples * c.row_bytes();
  const double out_bytes = static_cast<double>(c.nbeams) * c.nout_pols() * c.nsamples_out() *
                           c.out_row_floats() * sizeof(float);
  // B1: 8192 samples per channel of 20 MHz / 1024 channels = 19.53125 kHz -> 0.4194 s of data.
  const double data_s = o.config == "B1" ? c.nsamples / (20e6 / 1024) : 0;

  const auto host_in = random_bytes(static_cast<std::size_t>(in_bytes));
  const auto weights = bench_weights(c);
  nlohmann::json rec = {{"benchmark", "beamform"},
                        {"config", o.config},
                        {"backend", to_string(backend)},
                        {"nchans", c.nchans},
                        {"nantennas", c.nantennas},
                        {"npol", c.npol},
                        {"nbeams", c.nbeams},
                        {"nsamples", c.nsamples},
                        {"sample_type", to_string(c.sample_type)},
                        {"gflop_per_buffer", flops / 1e9},
                        {"input_bytes", in_bytes},
                        {"output_bytes", out_bytes}};
  std::string summary;

  DeviceArray<std::uint8_t> d_in;
  DeviceArray<float> d_out;
  std::vector<float> h_out;
  const std::uint8_t* in = host_in.data();
  float* out = nullptr;
  if (gpu) {
    d_in = DeviceArray<std::uint8_t>(host_in.size());
    d_out = DeviceArray<float>(static_cast<std::size_t>(out_bytes / sizeof(float)));
    copy_bytes(d_in.data(), host_in.data(), host_in.size());
    in = d_in.data();
    out = d_out.data();
  } else {
    h_out.resize(static_cast<std::size_t>(out_bytes / sizeof(float)));
    out = h_out.data();
  }
  auto make_plan = [&](const BeamformConfig& cc) {
    BeamformPlan p(cc, backend);
    p.set_weights(View<const std::complex<float>, 4>(
        weights.data(), {cc.nchans, cc.npol, cc.nbeams, cc.nantennas}));
    return p;
  };

  // The sweep over the register-tiled kernel's tunables (CUDA): the best becomes the result.
  nlohmann::json sweep = nlohmann::json::array();
  beamform::CudaTuning best_tuning{};
  if (gpu && o.sweep && c.algorithm != beamform::Algorithm::tensor_core) {
    double best = 1e30;
    for (int bpt : {8, 16, 32})
      for (int tpt : {2, 4})
        for (int threads : {128, 256}) {
          if (bpt == 32 && tpt == 4) continue;
          BeamformConfig cc = c;
          cc.algorithm = beamform::Algorithm::register_tiled;
          cc.tuning = {bpt, tpt, threads};
          const auto m = time_plan(make_plan(cc), in, out, 1, std::max(3, repeats / 2));
          auto j = timing_json(m, flops);
          j["tuning"] = {{"beams_per_thread", bpt},
                         {"samples_per_thread", tpt},
                         {"threads_per_block", threads}};
          sweep.push_back(j);
          fmt::print("  sweep {:2d} beams x {} samples, {} threads: {:.3f} ms ({:.1f} TFLOP/s)\n",
                     bpt, tpt, threads, m.median_ms, flops / (m.median_ms * 1e-3) / 1e12);
          if (m.median_ms < best) {
            best = m.median_ms;
            best_tuning = cc.tuning;
          }
        }
    c.algorithm = beamform::Algorithm::register_tiled;
    c.tuning = best_tuning;
    rec["sweep"] = sweep;
  }

  const BeamformPlan plan = make_plan(c);
  const std::clock_t cpu0 = std::clock();
  const Measured m = time_plan(plan, in, out, gpu ? 3 : 1, repeats);
  // CPU seconds per buffer (all threads; the warm-up run is included in the clock, so divide by
  // repeats + 1).
  const double cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC / (repeats + 1);
  const double tflops = flops / (m.median_ms * 1e-3) / 1e12;
  rec["algorithm"] = beamform::to_string(plan.algorithm());
  const auto t = plan.tuning();
  rec["tuning"] = {{"beams_per_thread", t.beams_per_thread},
                   {"samples_per_thread", t.samples_per_thread},
                   {"threads_per_block", t.threads_per_block}};
  rec["timing"] = timing_json(m, flops);
  rec["median_ms"] = m.median_ms;
  rec["tflops"] = tflops;
  rec["samples_per_s"] =
      static_cast<double>(c.nsamples) * c.nchans * c.nantennas * c.npol / (m.median_ms * 1e-3);
  if (data_s > 0) {
    rec["data_duration_s"] = data_s;
    rec["realtime_factor"] = data_s / (m.median_ms * 1e-3);
  }
  if (gpu) {
    const auto ceil = bench::measure_device_ceilings();
    rec["ceilings"] = bench::to_json(ceil);
    const double bw = (in_bytes + out_bytes) / (m.median_ms * 1e-3);
    rec["bytes_per_s"] = bw;
    rec["copy_bandwidth_fraction"] = bw / ceil.copy_bytes_per_s;
    rec["fp32_fma_fraction"] = flops / (m.median_ms * 1e-3) / ceil.fp32_fma_flop_per_s;
    summary = fmt::format(
        "beamform {} cuda {}: {:.3f} ms/buffer, {:.1f} TFLOP/s ({:.0f}% of measured fp32 FMA), "
        "{:.0f}% of copy bandwidth",
        o.config, beamform::to_string(plan.algorithm()), m.median_ms, tflops,
        100 * rec["fp32_fma_fraction"].get<double>(),
        100 * rec["copy_bandwidth_fraction"].get<double>());
    if (data_s > 0) summary += fmt::format(", real-time x{:.0f}", data_s / (m.median_ms * 1e-3));
    if (o.config == "B2") {
      // Same shapes as cuBLAS complex GEMMs: C[beams x time] = W[beams x ant] X[ant x time],
      // one per channel and pol.
      const int batch = c.nchans * c.npol;
      const double fp32_ms = beamform::cublas_cgemm_ms(c.nbeams, static_cast<int>(c.nsamples),
                                                       c.nantennas, batch, false, 3);
      const double tf32_ms = beamform::cublas_cgemm_ms(c.nbeams, static_cast<int>(c.nsamples),
                                                       c.nantennas, batch, true, 3);
      const double hgemm = beamform::cublas_hgemm_flops(8192, 5);
      rec["cublas_cgemm_fp32_ms"] = fp32_ms;
      rec["cublas_cgemm_tf32_ms"] = tf32_ms;
      rec["speedup_vs_cublas_fp32"] = fp32_ms / m.median_ms;
      rec["speedup_vs_cublas_tf32"] = tf32_ms / m.median_ms;
      rec["cublas_fp16_gemm_flops"] = hgemm;
      rec["fp16_tensor_fraction"] = flops / (m.median_ms * 1e-3) / hgemm;
      // The fp32 CUDA-core kernel on the same buffer, for comparison.
      if (plan.algorithm() == beamform::Algorithm::tensor_core) {
        BeamformConfig cr = c;
        cr.algorithm = beamform::Algorithm::register_tiled;
        const auto mr = time_plan(make_plan(cr), in, out, 1, 3);
        rec["register_tiled"] = timing_json(mr, flops);
      }
      summary += fmt::format(
          "; {:.0f}% of cuBLAS fp16 GEMM ({:.0f} TFLOP/s); x{:.1f} cuBLAS Cgemm fp32 ({:.1f} ms), "
          "x{:.1f} TF32 ({:.1f} ms)",
          100 * flops / (m.median_ms * 1e-3) / hgemm, hgemm / 1e12, fp32_ms / m.median_ms, fp32_ms,
          tf32_ms / m.median_ms, tf32_ms);
    }
  } else {
    const int threads = omp_get_max_threads();
    double peak_cpu = 0;
    const double peak = cpu_fma_flops(threads, &peak_cpu);
    const double mhz = cpu_clock_mhz();
    // Nominal: cores x 2 FMA pipes x 8 fp32 lanes x 2 flops x clock (AVX2, e.g. Zen 3).
    const double nominal = threads * 2.0 * 8 * 2 * mhz * 1e6;
    rec["cpu_threads"] = threads;
    rec["cpu_clock_mhz"] = mhz;
    rec["cpu_fma_peak_measured_flops"] = peak;
    rec["cpu_fma_peak_nominal_flops"] = nominal;
    rec["cpu_peak_fraction"] = flops / (m.median_ms * 1e-3) / peak;
    // The same in CPU time: flop per CPU-second against the FMA loop's flop per CPU-second.
    rec["cpu_seconds_per_buffer"] = cpu_s;
    rec["cpu_fma_peak_per_cpu_second"] = peak_cpu;
    rec["cpu_time_peak_fraction"] = flops / cpu_s / peak_cpu;
    rec["gflops_per_core_cpu_time"] = flops / cpu_s / 1e9;
    summary = fmt::format(
        "beamform {} cpu ({} threads): {:.1f} ms/buffer, {:.1f} GFLOP/s = {:.0f}% of the measured "
        "AVX2 FMA peak {:.1f} GFLOP/s (nominal {:.1f} at {:.0f} MHz); in CPU time {:.1f} GFLOP per "
        "core-second = {:.0f}% of the FMA loop's",
        o.config, threads, m.median_ms, flops / (m.median_ms * 1e-3) / 1e9,
        100 * flops / (m.median_ms * 1e-3) / peak, peak / 1e9, nominal / 1e9, mhz,
        flops / cpu_s / 1e9, 100 * flops / cpu_s / peak_cpu);
    if (data_s > 0) summary += fmt::format(", real-time x{:.3f}", data_s / (m.median_ms * 1e-3));
  }
  rec["summary"] = summary;
  rec["provenance"] = provenance();
  fmt::print("{}\n", summary);
  if (!o.json.empty()) io::write_text_file(o.json, rec.dump(2) + "\n");
}

}  // namespace

void add_bench_beamform_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("bench")->add_subcommand(
      "beamform", "Benchmark the beamformer on B1 (BEST-2) or B2 (large N)");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("--config", o->config, "B1 or B2 (DESIGN.md)")
      ->check(CLI::IsMember({"B1", "B2"}))
      ->capture_default_str();
  add_backend_option(*cmd, o->backend);
  cmd->add_option("--algorithm", o->algorithm, "auto, register-tiled or tensor-core")
      ->check(CLI::IsMember({"auto", "register-tiled", "tensor-core"}))
      ->capture_default_str();
  cmd->add_flag("--sweep", o->sweep,
                "Try every tuning of the register-tiled kernel; keep the best");
  cmd->add_option("--repeats", o->repeats, "Timed repeats (default 10 on CUDA, 3 on the CPU)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", o->json, "Write the record as JSON to this file");
  cmd->callback([o] { run(*o); });
}

}  // namespace warpbeam::cli
