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
#include <cmath>
#include <complex>
#include <cstring>
#include <ctime>
#include <fstream>
#include <numbers>

#include <nlohmann/json.hpp>

#include "bench/bench.hpp"
#include "bench/drivers.hpp"
#include "commands.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/host_array.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::bench {

namespace {

using beamform::BeamformConfig;
using beamform::BeamformPlan;

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
// the 4-cycle latency of 2 FMA pipes), all cores. The chains are 10 named variables, so that they
// stay in registers at any optimisation level: as an array `a[10]` GCC -O2 (this library's level)
// kept them on the stack, and the loop measured store-to-load forwarding (a quarter of the FMA
// rate on the development VM) instead of the FMA pipes.
// Returns flop per wall second; *per_cpu_second gets flop per second of CPU time (robust on a
// shared machine, where other processes take cores away).
__attribute__((target("avx2,fma"))) double cpu_fma_flops(int threads, double* per_cpu_second) {
  const long iters = 40'000'000;
  float sink = 0;
  const std::clock_t c0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    const float b = static_cast<float>(omp_get_thread_num());
    __m256 a0 = _mm256_set1_ps(b + 0), a1 = _mm256_set1_ps(b + 1), a2 = _mm256_set1_ps(b + 2),
           a3 = _mm256_set1_ps(b + 3), a4 = _mm256_set1_ps(b + 4), a5 = _mm256_set1_ps(b + 5),
           a6 = _mm256_set1_ps(b + 6), a7 = _mm256_set1_ps(b + 7), a8 = _mm256_set1_ps(b + 8),
           a9 = _mm256_set1_ps(b + 9);
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < iters; ++i) {
      a0 = _mm256_fmadd_ps(a0, m, c);
      a1 = _mm256_fmadd_ps(a1, m, c);
      a2 = _mm256_fmadd_ps(a2, m, c);
      a3 = _mm256_fmadd_ps(a3, m, c);
      a4 = _mm256_fmadd_ps(a4, m, c);
      a5 = _mm256_fmadd_ps(a5, m, c);
      a6 = _mm256_fmadd_ps(a6, m, c);
      a7 = _mm256_fmadd_ps(a7, m, c);
      a8 = _mm256_fmadd_ps(a8, m, c);
      a9 = _mm256_fmadd_ps(a9, m, c);
    }
    const __m256 s =
        _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                    _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
                      _mm256_add_ps(a8, a9));
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

// CPU repeats, each between two runs of the FMA loop.
struct CpuRepeats {
  Measured wall;                                   // ms per buffer
  double median_cpu_s = 0;                         // CPU seconds per buffer (all threads)
  double median_fma_wall = 0, median_fma_cpu = 0;  // FMA loop: flop per wall / CPU second
  std::vector<double> fractions;                   // sorted: beamformer / FMA loop, CPU time
  double median_fraction = 0;
  nlohmann::json per_repeat = nlohmann::json::array();
};

CpuRepeats time_cpu(const BeamformPlan& plan, const std::uint8_t* in, float* out, int threads,
                    int repeats) {
  const auto& c = plan.config();
  View<const std::uint8_t, 3> vin(in, c.input_shape());
  View<float, 4> vout(out, c.output_shape());
  plan.execute(vin, vout);  // warm-up
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> fma_cpu, fma_wall, ms, cpu_s;
  double fc = 0;
  fma_wall.push_back(cpu_fma_flops(threads, &fc));
  fma_cpu.push_back(fc);
  CpuRepeats r;
  for (int i = 0; i < repeats; ++i) {
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    plan.execute(vin, vout);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu_s.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    ms.push_back(dt * 1e3);
    fma_wall.push_back(cpu_fma_flops(threads, &fc));
    fma_cpu.push_back(fc);
    const double ceiling = 0.5 * (fma_cpu[i] + fma_cpu[i + 1]);
    const double f = c.flops() / cpu_s.back() / ceiling;
    r.fractions.push_back(f);
    r.per_repeat.push_back({{"ms", ms.back()},
                            {"cpu_s", cpu_s.back()},
                            {"fma_flop_per_cpu_second", ceiling},
                            {"fraction", f}});
  }
  std::sort(r.fractions.begin(), r.fractions.end());
  r.median_fraction = median(r.fractions);
  r.median_cpu_s = median(cpu_s);
  r.median_fma_wall = median(fma_wall);
  r.median_fma_cpu = median(fma_cpu);
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  r.wall = {median(ms), sorted.front(), sorted.back(), repeats};
  return r;
}

// A GPU variant the benchmark measures.
struct Variant {
  std::string label;
  beamform::Algorithm algorithm;
  beamform::CudaTuning tuning;
  int repeats = 0;  // 0: the run's default
};

std::string tuning_label(beamform::Algorithm a, const beamform::CudaTuning& t) {
  using beamform::Algorithm;
  if (a == Algorithm::register_tiled)
    return fmt::format("register-tiled {}x{}/{}", t.beams_per_thread, t.samples_per_thread,
                       t.threads_per_block);
  if (a == Algorithm::register_stream)
    return fmt::format("register-stream {}x{}", t.beams_per_thread, t.samples_per_thread);
  if (a == Algorithm::cublas_fp16) return fmt::format("cublas-fp16 C'{}", t.gemm_output_bits);
  if (a == Algorithm::tensor_int8) return fmt::format("tensor-int8 /{}", t.threads_per_block);
  return std::string(beamform::to_string(a));
}

// The first entry is the round-1 baseline of the configuration (register-tiled 16x2/256 for B1,
// the hand-written tensor-core kernel for B2); then the candidates. --algorithm restricts the
// candidates to one algorithm; --sweep adds every tuning.
std::vector<Variant> gpu_variants(const BeamformBenchOptions& o, const BeamformConfig& /*config*/) {
  using beamform::Algorithm;
  using beamform::CudaTuning;
  const Algorithm only = beamform::parse_algorithm(o.algorithm);
  std::vector<Variant> v;
  auto add = [&](Algorithm a, CudaTuning t, int repeats = 0) {
    v.push_back({tuning_label(a, t), a, t, repeats});
  };
  const bool b2 = o.config == "B2";
  if (b2)
    add(Algorithm::tensor_core, {}, 3);
  else
    add(Algorithm::register_tiled, {16, 2, 256, 0});
  auto want = [&](Algorithm a) { return only == Algorithm::automatic || only == a; };
  if (!b2) {
    if (want(Algorithm::register_tiled) && o.sweep) {
      add(Algorithm::register_tiled, {32, 2, 256, 0});  // round 1's second and third best
      add(Algorithm::register_tiled, {16, 2, 128, 0});
    }
    if (want(Algorithm::register_stream)) {
      add(Algorithm::register_stream, {32, 1, 0, 0});
      if (o.sweep) {
        add(Algorithm::register_stream, {16, 1, 0, 0});
        add(Algorithm::register_stream, {16, 2, 0, 0});
      }
    }
    if (only == Algorithm::cublas_fp16 || only == Algorithm::tensor_core) add(only, {});
  } else {
    if (want(Algorithm::cublas_fp16)) {
      add(Algorithm::cublas_fp16, {0, 0, 0, 16});
      add(Algorithm::cublas_fp16, {0, 0, 0, 32});
    }
    if (o.sweep && want(Algorithm::register_stream)) add(Algorithm::register_stream, {32, 1}, 2);
    if (only == Algorithm::register_tiled) add(only, {}, 2);
  }
  // tensor-int8 (issue 17) only when asked for, until the H200 has run it once: a fault of the
  // unmeasured kernel must not cost the --sweep runs their records.
  if (only == Algorithm::tensor_int8) {
    add(Algorithm::tensor_int8, {0, 0, 256, 0});
    add(Algorithm::tensor_int8, {0, 0, 128, 0});
  }
  if (only == Algorithm::tensor_int8_stream) add(Algorithm::tensor_int8_stream, {});
  return v;
}

struct Check {
  bool ok = false;
  double rel = 0;  // max |gpu - ref| / max |ref| over the checked values
  std::int64_t values = 0;
  std::string first;  // the first mismatch: index, got, expected
};

// Recomputes ~2000 output rows (all channels of one beam, pol and output sample each, spread
// over the whole output) on the host in double precision from the input bytes, the conversion
// table and the plan's effective weights, and compares them with the device output. Fails on
// any non-finite value or an error above tol * max|ref|.
Check verify_sampled(const BeamformPlan& plan, const std::vector<std::uint8_t>& in,
                     const float* d_out, double tol,
                     const std::vector<std::complex<float>>* weights = nullptr) {
  const BeamformConfig& c = plan.config();
  const auto& w = weights ? *weights : plan.effective_weights();
  std::vector<float> table;
  if (c.sample_type == SampleType::ci4 || c.sample_type == SampleType::ci8)
    table = conversion_table(c.sample_type, c.encoding, c.levels);
  const int nop = c.nout_pols();
  const bool voltage = c.output == beamform::OutputKind::voltage;
  const std::int64_t ntout = c.nsamples_out(), rowf = c.out_row_floats();
  const std::int64_t nrows = static_cast<std::int64_t>(c.nbeams) * nop * ntout;
  const std::int64_t want = std::min<std::int64_t>(nrows, 2000);
  const std::int64_t stride = nrows / want;
  const int bpc = bytes_per_complex(c.sample_type);
  const std::int64_t row_bytes = c.row_bytes();
  auto sample = [&](int ch, std::int64_t t, int a, int p) {
    const std::uint8_t* s = in.data() +
                            (static_cast<std::int64_t>(ch) * c.nsamples + t) * row_bytes +
                            (static_cast<std::int64_t>(a) * c.npol + p) * bpc;
    switch (c.sample_type) {
      case SampleType::ci4:
        return std::complex<double>(table[2 * s[0]], table[2 * s[0] + 1]);
      case SampleType::ci8:
        return std::complex<double>(table[2 * s[0]], table[2 * s[1]]);
      case SampleType::cf16: {
        std::uint16_t h[2];
        std::memcpy(h, s, 4);
        return std::complex<double>(half_to_float(h[0]), half_to_float(h[1]));
      }
      case SampleType::cf32: {
        float f[2];
        std::memcpy(f, s, 8);
        return std::complex<double>(f[0], f[1]);
      }
    }
    return std::complex<double>();
  };
  std::vector<std::int64_t> rows;
  for (std::int64_t k = 0; k < want; ++k)
    rows.push_back(k * stride + (k * 7919) % std::max<std::int64_t>(stride, 1));
  std::vector<float> got(static_cast<std::size_t>(want * rowf)), ref(got.size());
  const bool device = plan.backend() == Backend::cuda;
  for (std::int64_t k = 0; k < want; ++k) {
    const float* src = d_out + rows[static_cast<std::size_t>(k)] * rowf;
    const std::size_t bytes = static_cast<std::size_t>(rowf) * sizeof(float);
    if (device)
      copy_bytes(got.data() + k * rowf, src, bytes);
    else
      std::memcpy(got.data() + k * rowf, src, bytes);
  }
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t k = 0; k < want; ++k) {
    const std::int64_t r = rows[static_cast<std::size_t>(k)];
    const std::int64_t tout = r % ntout;
    const int op = static_cast<int>((r / ntout) % nop);
    const int b = static_cast<int>(r / (ntout * nop));
    for (int ch = 0; ch < c.nchans; ++ch) {
      double power = 0;
      std::complex<double> volt;
      const int np_in = (!voltage && c.sum_pols) ? c.npol : 1;
      for (int q = 0; q < np_in; ++q) {
        const int p = np_in == 1 ? op : q;
        const std::complex<float>* wr =
            w.data() + ((static_cast<std::int64_t>(ch) * c.npol + p) * c.nbeams + b) * c.nantennas;
        for (std::int64_t t = tout * c.integration; t < (tout + 1) * c.integration; ++t) {
          std::complex<double> v;
          for (int a = 0; a < c.nantennas; ++a)
            v += std::complex<double>(wr[a]) * sample(ch, t, a, p);
          power += std::norm(v);
          volt = v;
        }
      }
      float* dst = ref.data() + k * rowf;
      if (voltage) {
        dst[2 * ch] = static_cast<float>(volt.real());
        dst[2 * ch + 1] = static_cast<float>(volt.imag());
      } else {
        dst[ch] = static_cast<float>(power);
      }
    }
  }
  Check chk;
  chk.values = static_cast<std::int64_t>(got.size());
  double max_ref = 0, max_err = 0;
  bool finite = true;
  for (std::size_t i = 0; i < got.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    if (!std::isfinite(got[i])) {
      if (finite)
        chk.first =
            fmt::format("row {} value {}: got {} (not finite)", rows[i / rowf], i % rowf, got[i]);
      finite = false;
    }
    max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - ref[i]));
  }
  chk.rel = max_ref > 0 ? max_err / max_ref : max_err;
  chk.ok = finite && max_ref > 0 && max_err <= tol * max_ref;
  if (finite && !chk.ok)
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::fabs(static_cast<double>(got[i]) - ref[i]) > tol * max_ref) {
        chk.first = fmt::format("row {} value {}: got {}, expected {} (max |ref| {})",
                                rows[i / rowf], i % rowf, got[i], ref[i], max_ref);
        break;
      }
  return chk;
}

}  // namespace

void bench_beamform(const BeamformBenchOptions& o) {
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
  HostArray<float> h_out;  // as a NumPy caller's output: huge pages (warpbeam/host_array.hpp)
  const std::uint8_t* in = host_in.data();
  float* out = nullptr;
  if (gpu) {
    d_in = DeviceArray<std::uint8_t>(host_in.size());
    d_out = DeviceArray<float>(static_cast<std::size_t>(out_bytes / sizeof(float)));
    copy_bytes(d_in.data(), host_in.data(), host_in.size());
    in = d_in.data();
    out = d_out.data();
  } else {
    h_out = HostArray<float>(static_cast<std::size_t>(out_bytes / sizeof(float)));
    out = h_out.data();
  }
  auto make_plan = [&](const BeamformConfig& cc) {
    BeamformPlan p(cc, backend);
    p.set_weights(View<const std::complex<float>, 4>(
        weights.data(), {cc.nchans, cc.npol, cc.nbeams, cc.nantennas}));
    return p;
  };

  if (gpu) {
    // Every variant: built, run once on a poisoned output, verified on sampled output rows
    // against the host reference (its own effective weights), then timed. Only verified
    // variants can be the result.
    const auto variants = gpu_variants(o, c);
    const auto& baseline = variants.front();  // the round-1 kernel of this configuration
    nlohmann::json vj = nlohmann::json::array();
    const Variant* best = nullptr;
    double best_ms = 1e30, baseline_ms = 0;
    for (const auto& v : variants) {
      BeamformConfig cc = c;
      cc.algorithm = v.algorithm;
      cc.tuning = v.tuning;
      const BeamformPlan plan = make_plan(cc);
      device_memset(out, 0xFF, static_cast<std::size_t>(out_bytes));  // NaN
      View<const std::uint8_t, 3> vin(in, cc.input_shape(), Space::device);
      View<float, 4> vout(out, cc.output_shape(), Space::device);
      plan.execute(vin, vout);
      // Against the weights the kernel applies (fp16-rounded or int8 x scale): fp32 rounding
      // for the fp32 and int8 kernels (exact integer sums, then two roundings), fp16 operands'
      // rounding for the fp16 ones.
      const double tol = beamform::uses_fp16(v.algorithm) ? 1e-2 : 1e-5;
      const Check chk = verify_sampled(plan, host_in, out, tol);
      const Measured m = time_plan(plan, in, out, 1, v.repeats > 0 ? v.repeats : repeats);
      auto j = timing_json(m, flops);
      const auto t = plan.tuning();
      j["variant"] = v.label;
      j["algorithm"] = beamform::to_string(plan.algorithm());
      j["tuning"] = {{"beams_per_thread", t.beams_per_thread},
                     {"samples_per_thread", t.samples_per_thread},
                     {"threads_per_block", t.threads_per_block},
                     {"gemm_output_bits", t.gemm_output_bits}};
      j["verified"] = chk.ok;
      j["max_err_over_max"] = chk.rel;
      j["checked_values"] = chk.values;
      j["tolerance"] = tol;
      if (!chk.ok) j["mismatch"] = chk.first;
      if (beamform::uses_int8(v.algorithm)) {
        // The int8 weights' own error, against the unquantised weights (docs/PERFORMANCE.md,
        // "int8 weights"; BeamformInt8.PowerErrorOfInt8WeightsIsBounded asserts <= 1e-2).
        const Check q = verify_sampled(plan, host_in, out, 1e-2, &weights);
        j["max_err_over_max_vs_fp32_weights"] = q.rel;
      }
      vj.push_back(j);
      fmt::print("  {:<34} {:9.3f} ms  {:6.1f} TFLOP/s  err/max {:.2e}  {}\n", v.label, m.median_ms,
                 flops / (m.median_ms * 1e-3) / 1e12, chk.rel,
                 chk.ok ? "ok" : "MISMATCH (not reported): " + chk.first);
      if (&v == &baseline) baseline_ms = chk.ok ? m.median_ms : 0;
      if (chk.ok && m.median_ms < best_ms) {
        best_ms = m.median_ms;
        best = &v;
      }
    }
    rec["variants"] = vj;
    if (!best) fail(ErrorCategory::cuda, "beamform {}: no variant matched the reference", o.config);
    BeamformConfig auto_c = c;
    auto_c.algorithm = beamform::Algorithm::automatic;
    auto_c.tuning = {};
    const BeamformPlan auto_plan(auto_c, backend);
    const auto at = auto_plan.tuning();
    rec["automatic"] = {{"algorithm", beamform::to_string(auto_plan.algorithm())},
                        {"beams_per_thread", at.beams_per_thread},
                        {"samples_per_thread", at.samples_per_thread},
                        {"gemm_output_bits", at.gemm_output_bits}};
    rec["best_variant"] = best->label;
    const double ms = best_ms;
    const double tflops = flops / (ms * 1e-3) / 1e12;
    rec["algorithm"] = beamform::to_string(best->algorithm);
    rec["median_ms"] = ms;
    rec["tflops"] = tflops;
    rec["baseline_variant"] = baseline.label;
    rec["baseline_ms"] = baseline_ms;
    if (baseline_ms > 0) rec["speedup_vs_baseline"] = baseline_ms / ms;
    rec["samples_per_s"] =
        static_cast<double>(c.nsamples) * c.nchans * c.nantennas * c.npol / (ms * 1e-3);
    if (data_s > 0) {
      rec["data_duration_s"] = data_s;
      rec["realtime_factor"] = data_s / (ms * 1e-3);
    }
    // B2 names no channel width: the real-time factor is this rate over the channel width (Hz)
    // of critically sampled channels.
    rec["sustained_channel_rate_hz"] = static_cast<double>(c.nsamples) / (ms * 1e-3);
    const auto ceil = bench::measure_device_ceilings();
    rec["ceilings"] = bench::to_json(ceil);
    const double bw = (in_bytes + out_bytes) / (ms * 1e-3);
    rec["bytes_per_s"] = bw;
    rec["copy_bandwidth_fraction"] = bw / ceil.copy_bytes_per_s;
    rec["fp32_fma_fraction"] = flops / (ms * 1e-3) / ceil.fp32_fma_flop_per_s;
    summary = fmt::format(
        "beamform {} cuda best {}: {:.3f} ms/buffer, {:.1f} TFLOP/s ({:.0f}% of measured fp32 "
        "FMA), {:.0f}% of copy bandwidth",
        o.config, best->label, ms, tflops, 100 * rec["fp32_fma_fraction"].get<double>(),
        100 * rec["copy_bandwidth_fraction"].get<double>());
    if (data_s > 0) summary += fmt::format(", real-time x{:.0f}", data_s / (ms * 1e-3));
    if (baseline_ms > 0)
      summary +=
          fmt::format("; x{:.2f} vs {} ({:.3f} ms)", baseline_ms / ms, baseline.label, baseline_ms);
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
      rec["speedup_vs_cublas_fp32"] = fp32_ms / ms;
      rec["speedup_vs_cublas_tf32"] = tf32_ms / ms;
      rec["cublas_fp16_gemm_flops"] = hgemm;
      rec["fp16_tensor_fraction"] = flops / (ms * 1e-3) / hgemm;
      summary += fmt::format(
          "; {:.0f}% of cuBLAS fp16 GEMM ({:.0f} TFLOP/s); x{:.1f} cuBLAS Cgemm fp32 ({:.1f} ms), "
          "x{:.1f} TF32 ({:.1f} ms)",
          100 * flops / (ms * 1e-3) / hgemm, hgemm / 1e12, fp32_ms / ms, fp32_ms, tf32_ms / ms,
          tf32_ms);
    }
    summary += fmt::format("; automatic = {}", beamform::to_string(auto_plan.algorithm()));
  } else {
    const BeamformPlan plan = make_plan(c);
    const int threads = omp_get_max_threads();
    // Every timed repeat is bracketed by the FMA loop on the same threads, so that the ceiling
    // and the beamformer see the same machine (on a shared VM its state changes by the second);
    // the fraction of each repeat uses the mean of the loops before and after it. CPU time
    // (std::clock: all threads, user + system) is robust to cores taken by other processes.
    const CpuRepeats cr = time_cpu(plan, in, out, threads, repeats);
    const Measured& m = cr.wall;
    const double cpu_s = cr.median_cpu_s;
    // The same check as the GPU variants get (the CPU path is the reference of the tests; this
    // also exercises the check itself on every CPU run).
    const Check chk = verify_sampled(plan, host_in, out, 1e-5);
    rec["verified"] = chk.ok;
    rec["max_err_over_max"] = chk.rel;
    if (!chk.ok) fail(ErrorCategory::format, "beamform {} cpu: {}", o.config, chk.first);
    rec["algorithm"] = beamform::to_string(plan.algorithm());
    rec["timing"] = timing_json(m, flops);
    rec["median_ms"] = m.median_ms;
    rec["tflops"] = flops / (m.median_ms * 1e-3) / 1e12;
    rec["samples_per_s"] =
        static_cast<double>(c.nsamples) * c.nchans * c.nantennas * c.npol / (m.median_ms * 1e-3);
    if (data_s > 0) {
      rec["data_duration_s"] = data_s;
      rec["realtime_factor"] = data_s / (m.median_ms * 1e-3);
    }
    // B2 names no channel width: the real-time factor is this rate over the channel width (Hz)
    // of critically sampled channels.
    rec["sustained_channel_rate_hz"] = static_cast<double>(c.nsamples) / (m.median_ms * 1e-3);
    const double peak = cr.median_fma_wall, peak_cpu = cr.median_fma_cpu;
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
    rec["cpu_time_peak_fraction"] = cr.median_fraction;
    rec["cpu_time_peak_fraction_min"] = cr.fractions.front();
    rec["cpu_time_peak_fraction_max"] = cr.fractions.back();
    rec["cpu_time_peak_fractions"] = cr.per_repeat;
    rec["gflops_per_core_cpu_time"] = flops / cpu_s / 1e9;
    summary = fmt::format(
        "beamform {} cpu ({} threads): {:.1f} ms/buffer, {:.1f} GFLOP/s = {:.0f}% of the measured "
        "AVX2 FMA peak {:.1f} GFLOP/s (nominal {:.1f} at {:.0f} MHz); in CPU time {:.1f} GFLOP per "
        "core-second = {:.0f}% of the FMA loop's (repeats {:.0f}-{:.0f}%)",
        o.config, threads, m.median_ms, flops / (m.median_ms * 1e-3) / 1e9,
        100 * flops / (m.median_ms * 1e-3) / peak, peak / 1e9, nominal / 1e9, mhz,
        flops / cpu_s / 1e9, 100 * cr.median_fraction, 100 * cr.fractions.front(),
        100 * cr.fractions.back());
    if (data_s > 0) summary += fmt::format(", real-time x{:.3f}", data_s / (m.median_ms * 1e-3));
  }
  rec["summary"] = summary;
  rec["provenance"] = provenance();
  fmt::print("{}\n", summary);
  if (!o.json.empty()) io::write_text_file(o.json, rec.dump(2) + "\n");
}

}  // namespace warpbeam::bench
