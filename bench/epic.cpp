// `warpbeam bench epic --config E1|E2|E3`: time per 40 ms gulp (1000 spectra x 132 channels x
// 256 dual-pol stands, ci4) of the multi-kernel and fused CUDA imagers measured in the same run,
// their real-time factors and ratio, cuFFT alone for the gulp's transforms (fp32 and fp16) as
// context, roofline fractions against the measured device ceilings, and (--sweep) the fused
// kernel's tunables. With --backend cpu: the FFTW reference on a few spectra, scaled to a gulp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "bench/bench.hpp"
#include "bench/drivers.hpp"
#include "commands.hpp"
#include "epic_common.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/epic.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::bench {

namespace epic_common = cli::epic_common;

namespace {

struct Timed {
  std::string name;
  bench::Timing t;
  double plan_s = 0;
  nlohmann::json tuning;
};

constexpr double kGulpSeconds = 1000 / io::kLwaChannelWidthHz;  // 40 ms per 1000 spectra

}  // namespace

void bench_epic(const EpicBenchOptions& o) {
  int n = 0;
  if (o.config == "E1") n = 128;
  if (o.config == "E2") n = 64;
  if (o.config == "E3") n = 256;
  if (!n) fail(ErrorCategory::invalid_argument, "--config {} is not E1, E2 or E3", o.config);
  const Backend backend = parse_backend(o.backend);
  if (o.algorithm != "all" && o.algorithm != "multikernel" && o.algorithm != "fused" &&
      o.algorithm != "reference")
    fail(ErrorCategory::invalid_argument,
         "--algorithm {} is not all, multikernel, fused or reference", o.algorithm);
  const bool cuda = resolve_backend(backend) == Backend::cuda;

  // DESIGN.md's E configurations: LWA-SV, 256 dual-pol stands, 132 x 25 kHz from 58.7 MHz.
  epic::EpicConfig c;
  c.nchan = epic_common::kChannels;
  c.nstand = 256;
  c.ntime = o.ntime > 0 ? o.ntime : cuda ? 1000 : 10;
  for (int k = 0; k < c.nchan; ++k)
    c.freqs_hz.push_back((epic_common::kFirstChannel + k) * io::kLwaChannelWidthHz);
  c.grid_size = n;
  std::string station = "synthetic LWA-SV-like ellipse (no SSMIF found)";
  const std::string ssmif_path = epic_common::find_ssmif(o.ssmif);
  std::mt19937 rng(2024);
  if (!ssmif_path.empty()) {
    const auto model = io::tbf_station_model(io::read_ssmif(ssmif_path), 256);
    c.stand_xyz_m = model.xyz_m;
    c.stand_ok = model.ok;
    station = ssmif_path;
  } else {
    std::uniform_real_distribution<double> u(-1, 1);
    while (c.stand_xyz_m.size() < 256) {
      const double x = u(rng), y = u(rng);
      if (x * x + y * y <= 1) c.stand_xyz_m.push_back({44 * x, 55 * y, 0.0});
    }
  }
  std::uniform_real_distribution<double> ph(-3.14159265, 3.14159265);
  for (int i = 0; i < c.nchan * c.nstand * 2; ++i)
    c.calibration.push_back(std::polar(1.0f, static_cast<float>(ph(rng))));

  // Random ci4 voltages (never all zero).
  const std::size_t in_bytes = static_cast<std::size_t>(c.nchan) * c.ntime * c.nstand * 2;
  const std::size_t out_floats = static_cast<std::size_t>(c.nchan) * 4 * n * n;
  std::vector<std::uint8_t> host_in(in_bytes);
  std::uniform_int_distribution<int> lev(-7, 7);
  for (auto& b : host_in)
    b = io::ci4_pack(lev(rng), lev(rng));

  std::vector<Timed> runs;
  nlohmann::json sweep = nlohmann::json::array();
  nlohmann::json refused = nlohmann::json::object();
  nlohmann::json profile;
  bench::DeviceCeilings ceil{};
  double cufft32 = 0, cufft16 = 0;
  const std::int64_t transforms = std::int64_t{c.nchan} * c.ntime * 2;

  if (!cuda) {
    if (o.algorithm != "all" && o.algorithm != "reference")
      fail(ErrorCategory::unsupported, "--algorithm {} needs --backend cuda", o.algorithm);
    Timed r{"reference", {}, 0, {}};
    const auto t0 = std::chrono::steady_clock::now();
    const epic::EpicPlan plan(c, Backend::cpu);
    r.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<float> out(out_floats);
    r.t = bench::time_host(
        [&] {
          plan.execute(View<const std::uint8_t, 4>(host_in.data(), {c.nchan, c.ntime, 256, 2}),
                       View<float, 4>(out.data(), {c.nchan, 4, n, n}));
        },
        1, std::max(1, o.repeats / 2));
    runs.push_back(r);
  } else {
    ceil = bench::measure_device_ceilings();
    DeviceArray<std::uint8_t> d_in(in_bytes);
    DeviceArray<float> d_out(out_floats);
    copy_bytes(d_in.data(), host_in.data(), in_bytes);
    Stream stream;
    std::vector<float> reference;  // the multi-kernel (fp32) images: what every variant must match
    auto run_once = [&](const epic::EpicPlan& plan) {
      plan.execute(
          View<const std::uint8_t, 4>(d_in.data(), {c.nchan, c.ntime, 256, 2}, Space::device),
          View<float, 4>(d_out.data(), {c.nchan, 4, n, n}, Space::device), &stream);
    };
    // Worst relative L2 over (channel, product) of the last output against the reference.
    auto check = [&]() {
      std::vector<float> got(out_floats);
      copy_bytes(got.data(), d_out.data(), out_floats * sizeof(float));
      const std::size_t nn = static_cast<std::size_t>(n) * n;
      double worst = 0;
      for (std::size_t k = 0; k < out_floats / nn; ++k) {
        double num = 0, den = 0;
        for (std::size_t i = k * nn; i < (k + 1) * nn; ++i) {
          const double d = double(got[i]) - reference[i];
          num += std::isnan(got[i]) ? INFINITY : d * d;
          den += double(reference[i]) * reference[i];
        }
        worst = std::max(worst, den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0.0));
      }
      return worst;
    };
    auto time_plan = [&](const std::string& name, epic::EpicConfig cfg, int repeats) {
      Timed r{name, {}, 0, {}};
      const auto t0 = std::chrono::steady_clock::now();
      const epic::EpicPlan plan(cfg, Backend::cuda);
      r.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.tuning = {{"xy_in_shared", cfg.fused.xy_in_shared},
                  {"spectra_per_pass", cfg.fused.spectra_per_pass},
                  {"time_split", cfg.fused.time_split},
                  {"multikernel_batch", cfg.multikernel.batch}};
      if (plan.algorithm() == epic::Algorithm::fused) {
        const auto prof = plan.fused_profile();
        r.tuning["time_split_used"] = prof.time_split;
        r.tuning["active_clusters"] = prof.active_clusters;
      }
      std::vector<double> ms;
      for (int i = 0; i < repeats + 1; ++i) {
        Event a, b;
        device_memset(d_out.data(), 0xFF, d_out.bytes(), &stream);  // NaN: all must be written
        a.record(&stream);
        run_once(plan);
        b.record(&stream);
        b.synchronize();
        if (i > 0) ms.push_back(b.elapsed_ms_since(a) / 1e3);  // first run: warm-up
      }
      std::sort(ms.begin(), ms.end());
      r.t = {ms[ms.size() / 2], ms.front(), ms.back(), static_cast<int>(ms.size())};
      if (name == "multikernel") {
        reference.resize(out_floats);
        copy_bytes(reference.data(), d_out.data(), out_floats * sizeof(float));
      } else if (!reference.empty()) {
        r.tuning["relative_l2_vs_multikernel"] = check();
      }
      return r;
    };
    // A path the device cannot run (e.g. no room for a cluster) is reported, not fatal, so that
    // the other path's figures still come back.
    auto try_time = [&](const std::string& name, const epic::EpicConfig& cfg, int repeats) {
      try {
        runs.push_back(time_plan(name, cfg, repeats));
      } catch (const Error& err) {
        if (err.category() != ErrorCategory::unsupported) throw;
        refused[name] = err.what();
      }
    };
    // The multi-kernel path runs first: its images are the reference every fused variant is
    // checked against (relative L2 <= 1.5 % per channel and product, the fp16 bound).
    {
      auto m = c;
      m.algorithm = epic::Algorithm::multikernel;
      if (o.algorithm == "all" || o.algorithm == "multikernel") {
        try_time("multikernel", m, std::max(1, o.repeats / 2));
      } else {
        const epic::EpicPlan plan(m, Backend::cuda);
        run_once(plan);
        stream.synchronize();
        reference.resize(out_floats);
        copy_bytes(reference.data(), d_out.data(), out_floats * sizeof(float));
      }
    }
    if (o.algorithm == "all" || o.algorithm == "fused") {
      auto f = c;
      f.algorithm = epic::Algorithm::fused;
      try_time("fused", f, o.repeats);
      // The stage profile of the default variant (one more run, clock64 in one lane per warp).
      try {
        f.fused.profile = true;
        const epic::EpicPlan plan(f, Backend::cuda);
        run_once(plan);
        const auto pr = plan.fused_profile();
        const double wb = std::max(pr.batches, 1.0);
        profile = {{"row_cycles_per_warp_batch", pr.row_cycles / wb},
                   {"barrier_cycles_per_warp_batch", pr.barrier_cycles / wb},
                   {"column_cycles_per_warp_batch", pr.column_cycles / wb},
                   {"warp_batches", pr.batches},
                   {"time_split", pr.time_split},
                   {"active_clusters", pr.active_clusters}};
      } catch (const Error& err) {
        if (err.category() != ErrorCategory::unsupported) throw;
      }
    }
    if (runs.empty())
      fail(ErrorCategory::unsupported, "no EPIC path could run: {}", refused.dump());
    if (o.sweep) {
      // Every built variant with the automatic time split, then the default variant with the
      // gulp split over 1, 2 and 4 clusters per channel.
      std::vector<epic::FusedTuning> variants = epic::fused_variants(n);
      for (int split : {1, 2, 4}) {
        epic::FusedTuning t;
        t.time_split = split;
        variants.push_back(t);
      }
      for (const auto& v : variants) {
        auto f = c;
        f.algorithm = epic::Algorithm::fused;
        f.fused = v;
        nlohmann::json e = {{"xy_in_shared", v.xy_in_shared},
                            {"spectra_per_pass", v.spectra_per_pass},
                            {"time_split", v.time_split}};
        try {
          const Timed t = time_plan("fused", f, 3);
          e["median_ms"] = t.t.median_s * 1e3;
          for (const auto& [k, val] : t.tuning.items())
            if (!e.contains(k)) e[k] = val;
          const double l2 = t.tuning.value("relative_l2_vs_multikernel", INFINITY);
          e["verified"] = l2 <= 0.015;
        } catch (const Error& err) {
          if (err.category() != ErrorCategory::unsupported) throw;
          e["skipped"] = err.what();
        }
        sweep.push_back(e);
      }
    }
    cufft32 = epic::cufft_reference_time_s(n, transforms, false);
    cufft16 = epic::cufft_reference_time_s(n, transforms, true);
  }

  // Figures.
  const double gulp_s = static_cast<double>(c.ntime) / io::kLwaChannelWidthHz;
  const double fft_flop = static_cast<double>(transforms) * 5.0 * n * n * std::log2(double(n) * n);
  nlohmann::json algs = nlohmann::json::object();
  for (const auto& r : runs) {
    const double t = r.t.median_s;
    const double per_gulp = t * kGulpSeconds / gulp_s;  // scaled to 1000 spectra
    nlohmann::json a = {{"median_s", t},
                        {"min_s", r.t.min_s},
                        {"max_s", r.t.max_s},
                        {"repeats", r.t.repeats},
                        {"per_1000_spectra_s", per_gulp},
                        {"real_time_factor", gulp_s / t},
                        {"channel_spectra_per_s", c.nchan * static_cast<double>(c.ntime) / t},
                        {"fft_equivalent_flop_per_s", fft_flop / t},
                        {"plan_s", r.plan_s},
                        {"tuning", r.tuning}};
    if (cuda) {
      // Bytes each path must move at least: fused reads the voltages and writes the sums once
      // (+ finalisation); multikernel also writes, transforms (>= 2 passes) and reads every grid.
      const double grids = static_cast<double>(transforms) * n * n * 8;
      const double fixed = static_cast<double>(in_bytes) + 3.0 * out_floats * 4;
      const double bytes = r.name == "fused" ? fixed : fixed + grids * (1 + 4 + 1);
      a["bytes_moved"] = bytes;
      a["hbm_fraction"] = bytes / t / ceil.copy_bytes_per_s;
      a["fft_flop_fraction_of_fp32_fma"] = fft_flop / t / ceil.fp32_fma_flop_per_s;
    }
    algs[r.name] = a;
  }
  std::string summary = fmt::format("{} ({}^2, {} ch, {} spectra):", o.config, n, c.nchan, c.ntime);
  auto find = [&](const char* name) -> const Timed* {
    for (const auto& r : runs)
      if (r.name == name) return &r;
    return nullptr;
  };
  for (const auto& r : runs)
    summary += fmt::format(" {} {:.3g} ms/gulp ({:.3g}x real time);", r.name,
                           r.t.median_s * 1e3 * kGulpSeconds / gulp_s, gulp_s / r.t.median_s);
  nlohmann::json j = {
      {"benchmark", "epic"}, {"config", o.config}, {"grid", n},
      {"nchan", c.nchan},    {"nstand", c.nstand}, {"ntime", c.ntime},
      {"gulp_s", gulp_s},    {"station", station}, {"backend", cuda ? "cuda" : "cpu"},
      {"algorithms", algs}};
  if (const Timed* f = find("fused"), *m = find("multikernel"); f && m) {
    const double ratio = m->t.median_s / f->t.median_s;
    j["fused_speedup_over_multikernel"] = ratio;
    summary += fmt::format(" fused {:.1f}x multikernel;", ratio);
  }
  if (cuda) {
    j["cufft_alone_s"] = {{"fp32", cufft32}, {"fp16", cufft16}, {"transforms", transforms}};
    j["ceilings"] = bench::to_json(ceil);
    summary += fmt::format(" cuFFT alone {:.1f} ms (fp32) / {:.1f} ms (fp16)", cufft32 * 1e3,
                           cufft16 * 1e3);
  }
  if (const Timed* f = find("fused")) {
    const double l2 = f->tuning.value("relative_l2_vs_multikernel", INFINITY);
    j["fused_verified"] = l2 <= 0.015;
    summary += fmt::format("; fused {} (relative L2 {:.2g} vs multikernel)",
                           l2 <= 0.015 ? "verified" : "MISMATCH", l2);
  }
  if (!profile.is_null()) {
    j["fused_profile"] = profile;
    summary += fmt::format(
        "; fused cycles per warp and pass: rows {:.0f}, barrier {:.0f}, columns {:.0f} ({} "
        "clusters resident, {} per channel)",
        profile["row_cycles_per_warp_batch"].get<double>(),
        profile["barrier_cycles_per_warp_batch"].get<double>(),
        profile["column_cycles_per_warp_batch"].get<double>(),
        profile["active_clusters"].get<int>(), profile["time_split"].get<int>());
  }
  if (!sweep.empty()) {
    j["sweep"] = sweep;
    double best = INFINITY;
    nlohmann::json best_cfg;
    int unverified = 0;
    for (const auto& e : sweep) {
      if (!e.contains("median_ms")) continue;
      if (!e.value("verified", false)) {  // a variant whose images mismatch is never the best
        ++unverified;
        continue;
      }
      if (e["median_ms"].get<double>() < best) {
        best = e["median_ms"].get<double>();
        best_cfg = e;
      }
    }
    j["sweep_best"] = best_cfg;
    if (!best_cfg.is_null())
      summary += fmt::format(
          "; sweep best (verified) xy_in_shared={} spectra_per_pass={} time_split={} ({} used) "
          "{:.2f} ms",
          best_cfg["xy_in_shared"].get<int>(), best_cfg["spectra_per_pass"].get<int>(),
          best_cfg["time_split"].get<int>(), best_cfg.value("time_split_used", 0), best);
    if (unverified)
      summary += fmt::format("; {} variant(s) MISMATCHED and were not ranked", unverified);
  }
  if (!refused.empty()) {
    j["refused"] = refused;
    for (const auto& [name, why] : refused.items())
      summary += fmt::format(" {} refused: {};", name, why.get<std::string>());
  }
  j["summary"] = summary;
  j["provenance"] = provenance();
  fmt::print("{}\n", summary);
  if (!o.json.empty()) io::write_text_file(o.json, j.dump(2) + "\n");
}

}  // namespace warpbeam::bench
