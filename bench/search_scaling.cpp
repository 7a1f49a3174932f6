// `warpbeam bench search-scaling --config D1`: how the D1 search scales from one GPU to all of
// them, measured in one run (issue 7). Two parts:
//   kernel  D1's dedispersion (1122 DM trials of 2^20 8-bit samples x 1024 channels) with the
//           DM trials split over the devices: the input copied to every device, each device
//           dedisperses its slice, all at once (one host thread each); wall time of the slowest.
//   search  --files D1-like filterbanks (simulated, one burst each, --file-samples samples)
//           searched end to end by warpbeam/dist/search.hpp on the first device and on all of
//           them (one file: its DM trials split; several: whole files per worker); the
//           candidates of both runs must be identical.
// Scaling efficiency = t(1 GPU) / (N t(N GPUs)) for N distinct devices. With a single device
// (the one-GPU machine) the run "shared" puts two workers on it instead: it checks the split and
// measures its overhead t(shared) / t(1), not scaling. --backend cpu (tests) runs the search part
// only, with --workers CPU workers.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "bench/bench.hpp"
#include "bench/dedisp.hpp"
#include "bench/drivers.hpp"
#include "commands.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/dist/search.hpp"
#include "warpbeam/dist/work.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/sim/filterbank.hpp"

namespace warpbeam::bench {

namespace {

// A named list of workers (devices) to time.
struct Layout {
  std::string name;
  std::vector<int> devices;
};

int distinct(const std::vector<int>& d) {
  return static_cast<int>(std::set<int>(d.begin(), d.end()).size());
}

// The layouts: one device, then all of them; with one distinct device, two workers sharing it.
std::vector<Layout> layouts(const std::vector<int>& all) {
  std::vector<Layout> out = {{"one", {all.front()}}};
  if (distinct(all) > 1 || all.size() > 1)
    out.push_back({"all", all});
  else
    out.push_back({"shared", {all.front(), all.front()}});
  return out;
}

nlohmann::json scaling(const nlohmann::json& runs, const std::vector<Layout>& ls) {
  const double t1 = runs.at("one").at("seconds").get<double>();
  const auto& second = ls.back();
  const double tn = runs.at(second.name).at("seconds").get<double>();
  const int n = distinct(second.devices);
  nlohmann::json j = {{"speedup", t1 / tn}, {"devices", n}};
  if (n > 1)
    j["efficiency"] = t1 / (n * tn);
  else
    j["overhead"] = tn / t1;  // two workers on one device: the cost of the split
  return j;
}

// Part 1: D1's dedispersion with the DM trials split over the layout's devices.
nlohmann::json kernel_part(const SearchScalingOptions& o, const std::vector<Layout>& ls) {
  const DedispBenchSetup s = dedisp_bench_setup(o.config);
  auto c = s.config;
  c.nsamples_in = s.nsamples_in_full;
  const auto input = dedisp_bench_input(s, c.nsamples_in);
  const auto ndm = static_cast<std::int64_t>(c.dms.size());
  nlohmann::json runs;
  for (const auto& l : ls) {
    const int w = static_cast<int>(l.devices.size());
    struct Worker {
      ~Worker() {  // release the plan and buffers on their own device
        try {
          if (device >= 0) set_device(device);
        } catch (...) {
        }
      }
      int device = -1;
      std::optional<dedisp::DedispersionPlan> plan;
      DeviceArray<std::uint8_t> in;
      DeviceArray<float> out;
    };
    std::vector<Worker> workers(static_cast<std::size_t>(w));
    for (int k = 0; k < w; ++k) {  // plans and buffers on their devices, input copied to each
      auto& wk = workers[static_cast<std::size_t>(k)];
      wk.device = l.devices[static_cast<std::size_t>(k)];
      set_device(wk.device);
      const auto [b, e] = dist::split_range(ndm, w, k);
      auto ck = c;
      ck.dms.assign(c.dms.begin() + b, c.dms.begin() + e);
      wk.plan.emplace(ck, Backend::cuda);
      wk.in = DeviceArray<std::uint8_t>(input.size());
      copy_bytes(wk.in.data(), input.data(), input.size());
      wk.out =
          DeviceArray<float>(static_cast<std::size_t>(wk.plan->ndms() * wk.plan->nsamples_out()));
    }
    auto run_all = [&] {
      std::vector<std::thread> threads;
      for (int k = 0; k < w; ++k)
        threads.emplace_back([&, k] {
          auto& wk = workers[static_cast<std::size_t>(k)];
          set_device(l.devices[static_cast<std::size_t>(k)]);
          wk.plan->execute(View<const std::uint8_t, 2>(
                               wk.in.data(), {c.nsamples_in, wk.plan->row_bytes()}, Space::device),
                           View<float, 2>(wk.out.data(), {wk.plan->ndms(), wk.plan->nsamples_out()},
                                          Space::device));
          device_synchronize();
        });
      for (auto& t : threads)
        t.join();
    };
    const auto t = bench::time_host(run_all, 1, o.repeats);
    const double work = static_cast<double>(c.nchans) * static_cast<double>(ndm) *
                        static_cast<double>(s.nsamples_out_full);
    runs[l.name] = {
        {"devices", l.devices},
        {"seconds", t.median_s},
        {"min_max_s", {t.min_s, t.max_s}},
        {"channel_dm_samples_per_s", work / t.median_s},
        {"real_time_factor", static_cast<double>(s.nsamples_out_full) * c.tsamp_s / t.median_s}};
    fmt::print(stderr, "bench search-scaling: kernel, {} ({}): {:.3f} s\n", l.name,
               fmt::join(l.devices, ","), t.median_s);
  }
  nlohmann::json j = {{"what", fmt::format("{} dedispersion, {} DM trials x {} output samples, DM "
                                           "trials split over the devices, input on every device",
                                           s.name, ndm, s.nsamples_out_full)},
                      {"runs", runs}};
  j["scaling"] = scaling(runs, ls);
  return j;
}

// Part 2: a D1-like file searched end to end by one worker and by all.
nlohmann::json search_part(const SearchScalingOptions& o, Backend backend,
                           const std::vector<Layout>& ls) {
  const DedispBenchSetup s = dedisp_bench_setup(o.config);
  sim::FilterbankSimConfig sc;
  sc.nchans = s.config.nchans;
  sc.fch1_mhz = s.config.fch1_mhz;
  sc.foff_mhz = s.config.foff_mhz;
  sc.tsamp_s = s.config.tsamp_s;
  sc.nbits = s.config.nbits;
  sc.duration_s = static_cast<double>(o.file_samples) * sc.tsamp_s;
  // --files files (beams): one file's DM trials are split over the workers; as many files as
  // workers go whole to them.
  struct Remove {
    std::vector<std::string> paths;
    ~Remove() {
      std::error_code ec;
      for (const auto& p : paths) {
        std::filesystem::remove(p, ec);
        std::filesystem::remove(p + ".json", ec);
      }
    }
  } remove;
  const auto dir = std::filesystem::temp_directory_path();
  const auto ts = std::chrono::steady_clock::now();
  for (int k = 0; k < o.files; ++k) {
    sc.seed = 7 + static_cast<std::uint64_t>(k);
    sc.bursts = {{std::min(o.dm_max, 1000.0) * 0.6, 25, 2e-3, sc.duration_s * (0.2 + 0.05 * k)}};
    remove.paths.push_back(
        (dir / fmt::format("warpbeam-scaling-{}-{}.fil", ::getpid(), k)).string());
    sim::simulate_filterbank(sc, remove.paths.back());
  }
  fmt::print(stderr, "bench search-scaling: simulated {} file(s) of {} samples in {:.1f} s\n",
             o.files, o.file_samples,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count());

  dist::DistSearchConfig dc;
  dc.files = remove.paths;
  dc.backend = backend;
  dc.search.dm_max = o.dm_max;
  dc.run.progress = false;
  nlohmann::json runs;
  std::string first_cands;
  bool identical = true;
  std::size_t ncands = 0;
  double searched_s = 0;
  const auto use = [&](const Layout& l) {
    if (backend == Backend::cuda)
      dc.gpus = l.devices;
    else
      dc.cpu_workers = static_cast<int>(l.devices.size());
  };
  // Warm-up: every device's context and kernels are loaded (once per process, lazily) before
  // the timed runs, so that the device first used by `all` does not pay them there.
  if (backend == Backend::cuda) {
    use(ls.back());
    dist::search_files(dc, dist::Comm());
  }
  for (const auto& l : ls) {
    use(l);
    const auto r = dist::search_files(dc, dist::Comm());
    const std::string text = io::format_cand(r.candidates, false);
    if (first_cands.empty()) {
      first_cands = text;
      ncands = r.candidates.size();
    }
    identical = identical && text == first_cands;
    searched_s = 0;
    for (const auto& f : r.files)
      searched_s +=
          static_cast<double>(f.pieces.front().run.at("nsamples_searched").get<std::int64_t>()) *
          sc.tsamp_s;
    runs[l.name] = {{"devices", l.devices},
                    {"seconds", r.seconds},
                    {"real_time_factor", searched_s / r.seconds},
                    {"candidates", r.candidates.size()},
                    {"layout", r.to_json()}};
    fmt::print(stderr, "bench search-scaling: search, {} ({} worker(s)): {:.2f} s\n", l.name,
               l.devices.size(), r.seconds);
  }
  nlohmann::json j = {
      {"what", fmt::format("end to end search of {} simulated {}-like file(s): {} samples of {} "
                           "channels, 8-bit, DM 0-{}, one burst each; one worker vs all",
                           o.files, s.name, o.file_samples, sc.nchans, o.dm_max)},
      {"files", o.files},
      {"data_seconds", searched_s},
      {"runs", runs},
      {"identical_candidates", identical},
      {"candidates", ncands}};
  j["scaling"] = scaling(runs, ls);
  if (!identical)
    fail(ErrorCategory::io,
         "bench search-scaling: the candidates of one worker and of all differ (a bug: they must "
         "be identical)");
  return j;
}

std::string part_summary(const char* what, const nlohmann::json& p) {
  const auto& sc = p.at("scaling");
  const auto& runs = p.at("runs");
  const double t1 = runs.at("one").at("seconds").get<double>();
  if (sc.contains("efficiency"))
    return fmt::format("{} {:.3f} s on 1 GPU, {:.3f} s on {} ({:.2f}x, efficiency {:.0f} %)", what,
                       t1, runs.at("all").at("seconds").get<double>(), sc.at("devices").get<int>(),
                       sc.at("speedup").get<double>(), 100 * sc.at("efficiency").get<double>());
  const auto& second = runs.contains("all") ? runs.at("all") : runs.at("shared");
  return fmt::format("{} {:.3f} s on 1 worker, {:.3f} s on 2 sharing one device (overhead x{:.2f})",
                     what, t1, second.at("seconds").get<double>(), sc.at("overhead").get<double>());
}

}  // namespace

void bench_search_scaling(const SearchScalingOptions& o) {
  const Backend backend = resolve_backend(parse_backend(o.backend));
  require_range<std::int64_t>("--file-samples", o.file_samples, 1024, std::int64_t{1} << 24);
  require_range("--repeats", o.repeats, 1, 100);
  require_range("--workers", o.workers, 1, 64);
  require_range("--files", o.files, 1, 64);
  if (!(o.dm_max > 0 && o.dm_max <= 1000))
    fail(ErrorCategory::invalid_argument, "--dm-max = {} must be in (0, 1000] (D1's range)",
         o.dm_max);
  std::vector<int> all;
  if (backend == Backend::cuda) {
    all = dist::local_devices(
        backend, o.gpus.empty() ? std::vector<int>{} : dist::parse_gpu_list(o.gpus), dist::Comm());
  } else {
    if (!o.gpus.empty()) fail(ErrorCategory::invalid_argument, "--gpus needs --backend cuda");
    all.assign(static_cast<std::size_t>(o.workers), -1);
  }
  const auto ls = layouts(all);

  nlohmann::json j = {{"benchmark", "search-scaling"},
                      {"config", o.config},
                      {"backend", std::string(to_string(backend))},
                      {"devices", all}};
  if (backend == Backend::cuda) {
    std::vector<std::string> names;
    for (int d : std::set<int>(all.begin(), all.end()))
      names.push_back(fmt::format("{}: {}", d, device_description(d)));
    j["device_descriptions"] = names;
  }
  std::vector<std::string> summary;
  if (backend == Backend::cuda && !o.no_kernel) {
    j["kernel"] = kernel_part(o, ls);
    summary.push_back(part_summary("D1 dedispersion", j["kernel"]));
  }
  if (!o.no_search) {
    j["search"] = search_part(o, backend, ls);
    summary.push_back(part_summary("search", j["search"]));
  }
  j["summary"] = fmt::format("search-scaling {} {}: {}", o.config, to_string(backend),
                             fmt::join(summary, "; "));
  j["provenance"] = provenance();
  fmt::print("{}\n", j["summary"].get<std::string>());
  if (!o.json.empty()) io::write_text_file(o.json, j.dump(2) + "\n");
}

}  // namespace warpbeam::bench
