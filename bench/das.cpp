// `warpbeam bench das --config U1|U2 --backend cuda|cpu [--algorithm X --storage S] [--sweep]`:
// points per second (voxels x receivers x transmits x frames / s) of every DAS variant on a
// reference configuration, against the baseline (BL, fp32) measured in the same run with the
// same settings, plus each variant's largest deviation from that baseline.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bench/bench.hpp"
#include "bench/drivers.hpp"
#include "commands.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::bench {

namespace {

int omp_threads() {
  return omp_get_max_threads();
}

struct Variant {
  das::Algorithm algorithm;
  das::Storage storage;
  std::string name() const {
    return fmt::format("{}-{}", das::to_string(algorithm), das::to_string(storage));
  }
};

struct Result {
  std::string name;
  das::CudaTuning tuning;
  bench::Timing timing;  // execute(): layout change + kernel
  double kernel_ms = 0;  // median of the kernel alone
  double layout_ms = 0;  // median of the layout change alone
  double max_rel_error = 0;
  bool checked = false, pass = true;
  int tried = 0, failed = 0;  // tunings timed, and those whose output mismatched
};

std::vector<std::complex<float>> random_iq(std::size_t n) {
  std::vector<std::complex<float>> v(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {  // xorshift64*: fast, fixed seed
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return static_cast<float>((x * 0x2545f4914f6cdd1dull) >> 40) / 16777216.f * 2.f - 1.f;
  };
  for (auto& z : v)
    z = {next(), next()};
  return v;
}

// The tunings `--sweep` tries per variant (each verified against BL before it may count).
std::vector<das::CudaTuning> tunings(const Variant& v, std::int64_t batch, bool sweep,
                                     int rx_split) {
  if (!sweep || v.algorithm == das::Algorithm::tensor_core) {
    das::CudaTuning t;
    if (v.algorithm == das::Algorithm::tensor_core_window) t.rx_split = rx_split;
    return {t};
  }
  std::vector<das::CudaTuning> t;
  const bool fp16 = v.storage == das::Storage::fp16;
  switch (v.algorithm) {
    case das::Algorithm::baseline:
      for (int threads : {128, 256})
        for (int tb : {4, 8, 16})
          t.push_back({tb, 0, threads, 0, 0});
      break;
    case das::Algorithm::batch_inner:
      // fp16 IQ builds R <= 4 (R = 8 would hold 64 accumulators); fp16 also tries the
      // double-precision delays against the float ones.
      for (int threads : {128, 256})
        for (int r : {1, 2, 4, 8})
          for (int bits : {32, 64}) {
            if (fp16 && r == 8) continue;
            if (!fp16 && bits == 32) continue;
            t.push_back({0, r, threads, 0, fp16 ? bits : 0});
          }
      break;
    case das::Algorithm::tensor_core_window:
      for (int threads : {64, 128, 256})
        for (int wf : {32, 64, 128})
          for (int split : {1, 2, 4})
            if ((wf == 32 || wf / 2 < batch) && threads / 32 % split == 0)
              t.push_back({0, 0, threads, wf, 0, split});
      break;
    default:
      t.push_back({});
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_rel(const std::vector<std::complex<float>>& a,
               const std::vector<std::complex<float>>& b) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(std::complex<double>(a[i]) - std::complex<double>(b[i]));
    err = std::isnan(e) ? INFINITY : std::max(err, e);
    ref = std::max(ref, static_cast<double>(std::abs(b[i])));
  }
  return ref > 0 ? err / ref : INFINITY;
}

}  // namespace

void bench_das(const DasBenchOptions& o) {
  das::DasConfig base = das::reference_config(o.config);
  if (o.batch > 0) base.batch = o.batch;
  const Backend backend = resolve_backend(parse_backend(o.backend));
  const std::size_t nin =
      static_cast<std::size_t>(base.batch * base.nrx() * base.ntx() * base.nsamples);
  const auto host_in = random_iq(nin);
  const double points = static_cast<double>(base.nvoxels()) * base.nrx() * base.ntx() * base.batch;
  nlohmann::json j = {
      {"benchmark", "das"},
      {"config", o.config},
      {"backend", std::string(to_string(backend))},
      {"shape",
       {{"voxels", base.nvoxels()},
        {"rx", base.nrx()},
        {"tx", base.ntx()},
        {"samples", base.nsamples},
        {"batch", base.batch}}},
      {"sample_type", "iq"},
      {"fnumber", base.fnumber ? nlohmann::json(*base.fnumber) : nlohmann::json(nullptr)},
      {"window", "boxcar"},
      {"points_per_execute", points},
      {"timing",
       "median of CUDA-event-timed execute() calls after 2 warm-ups; median_ms includes the "
       "layout change of the input (permute / fp16 conversion), kernel_median_ms is the "
       "beamforming kernel alone (as kernel-only figures of other libraries)"}};
  std::string summary;
  if (backend == Backend::cpu) {
    das::DasPlan plan(base, Backend::cpu);
    std::vector<std::complex<float>> out(static_cast<std::size_t>(base.batch * base.nvoxels()));
    const auto t = bench::time_host(
        [&] {
          plan.execute(View<const std::complex<float>, 4>(host_in.data(), plan.input_shape()),
                       View<std::complex<float>, 2>(out.data(), plan.output_shape()));
        },
        1, std::max(1, o.repeats / 3));
    j["variants"] = {{{"name", "cpu-reference"},
                      {"median_ms", t.median_s * 1e3},
                      {"min_ms", t.min_s * 1e3},
                      {"points_per_s", points / t.median_s},
                      {"threads", omp_threads()}}};
    summary = fmt::format("das {} cpu ({} threads, batch {}): {:.1f} ms, {:.3g} points/s", o.config,
                          omp_threads(), base.batch, t.median_s * 1e3, points / t.median_s);
  } else {
    const auto ceilings = bench::measure_device_ceilings();
    j["ceilings"] = bench::to_json(ceilings);
    Stream stream;
    DeviceArray<std::complex<float>> din(nin),
        dout(static_cast<std::size_t>(base.batch * base.nvoxels()));
    copy_bytes(din.data(), host_in.data(), din.bytes());
    std::vector<Variant> variants = {{das::Algorithm::baseline, das::Storage::fp32}};
    if (!o.algorithm.empty()) {
      const Variant v{das::parse_algorithm(o.algorithm), das::parse_storage(o.storage)};
      if (v.name() != variants[0].name()) variants.push_back(v);
    } else {
      variants.push_back({das::Algorithm::baseline, das::Storage::fp16});
      variants.push_back({das::Algorithm::batch_inner, das::Storage::fp32});
      variants.push_back({das::Algorithm::batch_inner, das::Storage::fp16});
      variants.push_back({das::Algorithm::tensor_core, das::Storage::fp16});
      variants.push_back({das::Algorithm::tensor_core_window, das::Storage::fp16});
    }
    std::vector<std::complex<float>> ref, got(dout.size());
    std::vector<Result> results;
    for (const auto& v : variants) {
      Result best;
      best.name = v.name();
      best.timing.median_s = INFINITY;
      const double tol =
          v.storage == das::Storage::fp32 && v.algorithm != das::Algorithm::tensor_core ? 1e-5
                                                                                        : 1e-2;
      for (const auto& tu : tunings(v, base.batch, o.sweep, o.rx_split)) {
        das::DasConfig c = base;
        c.algorithm = v.algorithm;
        c.storage = v.storage;
        c.tuning = tu;
        das::DasPlan plan(c, Backend::cuda);
        const View<const std::complex<float>, 4> in(din.data(), plan.input_shape(), Space::device);
        const View<std::complex<float>, 2> out(dout.data(), plan.output_shape(), Space::device);
        // Every tuning's numbers against the baseline's (the baseline is BL fp32's default,
        // itself tested against the CPU reference); a mismatching tuning never counts.
        device_memset(dout.data(), 0xFF, dout.bytes(), &stream);
        plan.execute(in, out, &stream);
        stream.synchronize();
        copy_bytes(got.data(), dout.data(), dout.bytes());
        double err = 0;
        bool checked = false;
        if (ref.empty()) {
          ref = got;
        } else {
          err = max_rel(got, ref);
          checked = true;
        }
        ++best.tried;
        const bool pass = !checked || err <= tol;
        if (!pass) {
          ++best.failed;
          fmt::print(
              "  {} {} threads, tile {}, repeats {}, warp frames {}, delay bits {}, rx split {}: "
              "numbers FAIL ({:.2e} > {:.0e}), not timed\n",
              v.name(), tu.threads_per_block, tu.batch_tile, tu.bi_repeats, tu.warp_frames,
              tu.delay_bits, tu.rx_split, err, tol);
          if (!best.pass || best.timing.median_s == INFINITY) {
            best.max_rel_error = err;
            best.checked = true;
            best.pass = false;
          }
          continue;
        }
        for (int w = 0; w < 2; ++w)
          plan.execute(in, out, &stream);
        std::vector<double> total, kernel, layout;
        for (int r = 0; r < o.repeats; ++r) {
          const auto t = plan.execute_timed(in, out, &stream);
          total.push_back(t.layout_ms + t.kernel_ms);
          kernel.push_back(t.kernel_ms);
          layout.push_back(t.layout_ms);
        }
        std::sort(total.begin(), total.end());
        const double med = median(total) * 1e-3;
        if (o.sweep)
          fmt::print(
              "  {} threads {} tile {} repeats {} warp-frames {} delay-bits {} rx-split {}: "
              "{:.3f} ms ({:.3f} kernel)\n",
              v.name(), tu.threads_per_block, tu.batch_tile, tu.bi_repeats, tu.warp_frames,
              tu.delay_bits, tu.rx_split, med * 1e3, median(kernel));
        if (med < best.timing.median_s) {
          best.timing = {med, total.front() * 1e-3, total.back() * 1e-3,
                         static_cast<int>(total.size())};
          best.kernel_ms = median(kernel);
          best.layout_ms = median(layout);
          best.tuning = tu;
          best.max_rel_error = err;
          best.checked = checked;
          best.pass = true;
        }
      }
      results.push_back(best);
    }
    const double base_s = results[0].timing.median_s;
    const double flops = 16.0 * points;  // 8 fp32 FMA per complex point (interpolate + rotate)
    const double bytes = static_cast<double>(din.bytes() + dout.bytes());
    nlohmann::json arr = nlohmann::json::array();
    const Result* fastest = &results[0];
    for (const auto& r : results) {
      const bool timed = r.timing.median_s < INFINITY;
      if (timed && r.pass && r.timing.median_s < fastest->timing.median_s) fastest = &r;
      nlohmann::json e = {{"name", r.name},
                          {"tunings_tried", r.tried},
                          {"tunings_failed", r.failed},
                          {"max_rel_error_vs_bl", r.max_rel_error},
                          {"check", r.checked ? (r.pass ? "pass" : "FAIL") : "baseline"}};
      if (timed)
        e.update({{"median_ms", r.timing.median_s * 1e3},
                  {"min_ms", r.timing.min_s * 1e3},
                  {"max_ms", r.timing.max_s * 1e3},
                  {"kernel_median_ms", r.kernel_ms},
                  {"layout_median_ms", r.layout_ms},
                  {"points_per_s", points / r.timing.median_s},
                  {"points_per_s_kernel_only", points / (r.kernel_ms * 1e-3)},
                  {"speedup_vs_bl", base_s / r.timing.median_s},
                  {"fp32_fma_fraction", flops / r.timing.median_s / ceilings.fp32_fma_flop_per_s},
                  {"hbm_fraction_min_bytes", bytes / r.timing.median_s / ceilings.copy_bytes_per_s},
                  {"tuning",
                   {{"batch_tile", r.tuning.batch_tile},
                    {"bi_repeats", r.tuning.bi_repeats},
                    {"threads_per_block", r.tuning.threads_per_block},
                    {"warp_frames", r.tuning.warp_frames},
                    {"delay_bits", r.tuning.delay_bits},
                    {"rx_split", r.tuning.rx_split}}}});
      arr.push_back(e);
      if (timed)
        fmt::print(
            "{:<10} {:9.3f} ms ({:8.3f} kernel + {:6.3f} layout)  {:.3g} points/s  x{:.2f} vs BL  "
            "err {:.2e} {}\n",
            r.name, r.timing.median_s * 1e3, r.kernel_ms, r.layout_ms, points / r.timing.median_s,
            base_s / r.timing.median_s, r.max_rel_error, r.checked ? (r.pass ? "ok" : "FAIL") : "");
      else
        fmt::print("{:<10} every tuning FAILED the check (err {:.2e}): not timed\n", r.name,
                   r.max_rel_error);
    }
    j["variants"] = arr;
    j["baseline"] = results[0].name;
    j["best"] = fastest->name;
    // What Algorithm::automatic resolves to for this shape, per storage.
    for (das::Storage st : {das::Storage::fp32, das::Storage::fp16}) {
      das::DasConfig c = base;
      c.storage = st;
      j["automatic"][std::string(das::to_string(st))] =
          std::string(das::to_string(das::automatic_algorithm(c)));
    }
    const std::string target = o.config == "U2"   ? " (target <= 13.6 ms)"
                               : o.config == "U1" ? " (target <= 0.17 ms)"
                                                  : "";
    summary = fmt::format(
        "das {} cuda: best {} {:.3f} ms incl. layout change, {:.3f} ms kernel only ({:.3g} "
        "points/s, x{:.2f} vs BL {:.3f} ms){}",
        o.config, fastest->name, fastest->timing.median_s * 1e3, fastest->kernel_ms,
        points / fastest->timing.median_s, base_s / fastest->timing.median_s, base_s * 1e3, target);
    for (const auto& r : results) {
      if (!r.pass)
        summary += fmt::format("; {} numbers FAIL ({:.1e})", r.name, r.max_rel_error);
      else if (r.failed > 0)
        summary += fmt::format("; {}: {} of {} tunings FAIL", r.name, r.failed, r.tried);
    }
  }
  fmt::print("{}\n", summary);
  j["summary"] = summary;
  j["provenance"] = provenance();
  if (!o.json.empty()) io::write_text_file(o.json, j.dump(2) + "\n");
}

}  // namespace warpbeam::bench
