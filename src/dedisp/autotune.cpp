// autotune(): times a small set of CUDA kernel variants and tile sizes on the caller's shape and
// caches the fastest per shape in a JSON file (see dedisp.hpp). Host code only: it measures
// through the public plan API with CUDA events.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "warpbeam/dedisp.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp {
namespace {

// Bump when the kernels change enough to make cached tunings stale.
constexpr int kCacheVersion = 1;

// The tile sizes tried for each tiled variant: {dms_per_block, samples_per_thread,
// threads_per_block, channels_per_stage}; channels 0 = automatic. Around the default (16 DMs x
// 512 samples): fewer/more DMs per block, longer/shorter time tiles, 64 lanes along time.
constexpr CudaTuning kCandidates[] = {
    {16, 16, 512, 0}, {8, 16, 256, 0}, {32, 16, 1024, 0},
    {16, 32, 512, 0}, {8, 16, 512, 0}, {16, 8, 512, 0},
};

std::vector<Algorithm> variants(const DedispersionConfig& c) {
  switch (c.algorithm) {
    case Algorithm::automatic:
      if (c.nbits <= 8) return {Algorithm::packed, Algorithm::tiled};
      return {Algorithm::tiled};
    case Algorithm::direct:
      return {};
    default:
      return {c.algorithm};
  }
}

nlohmann::json to_json(const CudaTuning& t) {
  return {{"dms_per_block", t.dms_per_block},
          {"samples_per_thread", t.samples_per_thread},
          {"threads_per_block", t.threads_per_block},
          {"channels_per_stage", t.channels_per_stage}};
}

CudaTuning tuning_from_json(const nlohmann::json& j) {
  CudaTuning t;
  t.dms_per_block = j.at("dms_per_block").get<int>();
  t.samples_per_thread = j.at("samples_per_thread").get<int>();
  t.threads_per_block = j.at("threads_per_block").get<int>();
  t.channels_per_stage = j.at("channels_per_stage").get<int>();
  validate(t);
  return t;
}

// The cache file's JSON, or a fresh one when it is absent or unreadable (with a warning).
nlohmann::json load_cache(const std::string& path) {
  nlohmann::json fresh = {{"version", kCacheVersion}, {"entries", nlohmann::json::object()}};
  if (path.empty() || !std::filesystem::exists(path)) return fresh;
  try {
    std::ifstream f(path);
    nlohmann::json j = nlohmann::json::parse(f);
    if (j.value("version", 0) != kCacheVersion || !j.contains("entries") ||
        !j["entries"].is_object())
      return fresh;
    return j;
  } catch (const std::exception& e) {
    warnf("ignoring the unreadable autotune cache {}: {}", path, e.what());
    return fresh;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

std::string default_autotune_cache_path() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return (fs::path(xdg) / "warpbeam" / "dedisp-tuning.json").string();
  const char* home = std::getenv("HOME");
  if (home && *home)
    return (fs::path(home) / ".cache" / "warpbeam" / "dedisp-tuning.json").string();
  return "";
}

std::string autotune_cache_key(const DedispersionConfig& c, const std::string& device_name) {
  c.validate();
  const auto delays = delay_table(c);
  const std::int32_t max_delay =
      delays.empty() ? 0 : *std::max_element(delays.begin(), delays.end());
  const auto bucket = std::bit_ceil(static_cast<std::uint32_t>(std::max(max_delay, 1)));
  return fmt::format("nchans={} nbits={} ndm={} nsamples={} max_delay<={} algorithm={} device={}",
                     c.nchans, c.nbits, c.dms.size(), c.nsamples_in, bucket, to_string(c.algorithm),
                     device_name);
}

AutotuneResult autotune(const DedispersionConfig& config, const AutotuneOptions& opt) {
  if (!cuda_available()) fail(ErrorCategory::unsupported, "autotune needs a CUDA device");
  require_range("autotune repeats", opt.repeats, 1, 100);
  AutotuneResult r;
  r.key = autotune_cache_key(config, device_description(0));
  r.cache_path = opt.use_cache
                     ? (opt.cache_path.empty() ? default_autotune_cache_path() : opt.cache_path)
                     : std::string();
  const auto algs = variants(config);
  if (algs.empty()) {  // direct: nothing to tune
    r.algorithm = Algorithm::direct;
    return r;
  }
  nlohmann::json cache = load_cache(r.cache_path);
  if (!r.cache_path.empty() && !opt.refresh && cache["entries"].contains(r.key)) {
    try {
      const auto& e = cache["entries"][r.key];
      r.algorithm = parse_algorithm(e.at("algorithm").get<std::string>());
      r.tuning = tuning_from_json(e.at("tuning"));
      r.kernel_s = e.value("kernel_s", 0.0);
      r.from_cache = true;
      return r;
    } catch (const std::exception& ex) {
      warnf("ignoring the autotune cache entry for this shape in {}: {}", r.cache_path, ex.what());
    }
  }

  // Random input of the shape, made on the GPU; one float32 output reused by every candidate.
  DedispersionConfig probe = config;
  probe.channel_major = false;  // timed through the packed input (the same tiled kernel)
  const std::int64_t row = static_cast<std::int64_t>(packed_bytes(config.nbits, config.nchans));
  DeviceArray<std::uint8_t> in(static_cast<std::size_t>(config.nsamples_in * row));
  random_device_bytes(in.data(), in.size(), 0x5eed);
  DeviceArray<float> out;
  Stream stream;
  Event start, stop;
  double best = -1;
  for (Algorithm alg : algs)
    for (const CudaTuning& t : kCandidates) {
      AutotuneTrial trial{alg, t, -1.0};
      probe.algorithm = alg;
      probe.tuning = t;
      try {
        DedispersionPlan plan(probe, Backend::cuda);
        const auto nout = static_cast<std::size_t>(plan.ndms() * plan.nsamples_out());
        if (out.size() != nout) out = DeviceArray<float>(nout);
        const View<const std::uint8_t, 2> vin(in.data(), {config.nsamples_in, row}, Space::device);
        const View<float, 2> vout(out.data(), {plan.ndms(), plan.nsamples_out()}, Space::device);
        plan.execute(vin, vout, &stream);  // warm-up
        std::vector<double> times;
        for (int i = 0; i < opt.repeats; ++i) {
          start.record(&stream);
          plan.execute(vin, vout, &stream);
          stop.record(&stream);
          stop.synchronize();
          times.push_back(stop.elapsed_ms_since(start) * 1e-3);
        }
        trial.kernel_s = median(times);
        if (best < 0 || trial.kernel_s < best) {
          best = trial.kernel_s;
          r.algorithm = plan.algorithm();
          r.tuning = plan.tuning();
          r.kernel_s = best;
        }
      } catch (const Error& e) {
        if (e.category() == ErrorCategory::cuda) throw;  // a failing device is not a bad tuning
      }
      r.trials.push_back(trial);
    }
  if (best < 0) fail(ErrorCategory::unsupported, "autotune: no kernel variant runs on this shape");

  if (!r.cache_path.empty()) {
    try {
      std::filesystem::create_directories(std::filesystem::path(r.cache_path).parent_path());
      cache["entries"][r.key] = {{"algorithm", to_string(r.algorithm)},
                                 {"tuning", to_json(r.tuning)},
                                 {"kernel_s", r.kernel_s}};
      io::write_text_file(r.cache_path, cache.dump(2) + "\n");
    } catch (const std::exception& e) {
      warnf("cannot write the autotune cache {}: {}", r.cache_path, e.what());
    }
  }
  return r;
}

}  // namespace warpbeam::dedisp
