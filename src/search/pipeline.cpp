// The file search: reads a SIGPROC filterbank in gulps, cleans RFI, dedisperses (CPU or CUDA),
// searches each DM-time plane and clusters the peaks across gulps. Memory is bounded by the
// budget (see search_filterbank() in the header for the formula).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::search {

namespace {

constexpr float kMinRms = 1e-2f;

// Adds the seconds since `t` to `acc` and restarts `t`.
void lap(std::chrono::steady_clock::time_point& t, double& acc) {
  const auto now = std::chrono::steady_clock::now();
  acc += std::chrono::duration<double>(now - t).count();
  t = now;
}  // channels have unit sigma: a real trial has sigma >= ~1

// Buffers of one gulp for a plane of L samples and `chunk` DM trials (the header's bound).
std::int64_t memory_need(const io::FilterbankHeader& h, std::int64_t L, std::int32_t max_delay,
                         std::int64_t chunk, int threads) {
  const std::int64_t rows = L + max_delay;
  return rows * (static_cast<std::int64_t>(h.bytes_per_sample()) + 8 * std::int64_t{h.nchans} +
                 68 * std::int64_t{threads}) +
         chunk * L * 4 + std::int64_t{threads} * L * 24;
}

// The delay (samples) of the lowest channel at DM trial d: the largest of that trial.
std::int32_t trial_max_delay(const std::vector<std::int32_t>& delays, int nchans, std::size_t d) {
  return *std::max_element(delays.begin() + static_cast<std::ptrdiff_t>(d * nchans),
                           delays.begin() + static_cast<std::ptrdiff_t>((d + 1) * nchans));
}

// Unpacks `rows` time samples to float32 [rows][nchans]; each row starts on a byte boundary.
void unpack_rows(const io::FilterbankHeader& h, const std::uint8_t* raw, std::int64_t rows,
                 float* out) {
  const auto nchans = static_cast<std::size_t>(h.nchans);
  const auto row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  if ((nchans * h.nbits) % 8 == 0) {
    unpack_samples(raw, h.nbits, static_cast<std::size_t>(rows) * nchans, out, h.is_signed);
    return;
  }
  for (std::int64_t t = 0; t < rows; ++t)
    unpack_samples(raw + t * row_bytes, h.nbits, nchans, out + t * h.nchans, h.is_signed);
}

// Dedisperses a chunk of DM trials of the cleaned gulp on the chosen backend.
class ChunkDedisperser {
 public:
  ChunkDedisperser(Backend backend) : backend_(backend) {}

  // in: cleaned float32 [rows][nchans] (host); out: [ndms][L] (host).
  void run(const dedisp::DedispersionConfig& c, const float* in, float* out) {
    if (!plan_ || plan_->config().nsamples_in != c.nsamples_in || plan_->config().dms != c.dms)
      plan_.emplace(c, backend_);
    const auto& p = *plan_;
    const std::int64_t in_bytes = c.nsamples_in * p.row_bytes();
    const std::int64_t out_count = p.ndms() * p.nsamples_out();
    if (backend_ == Backend::cpu) {
      p.execute(View<const std::uint8_t, 2>(reinterpret_cast<const std::uint8_t*>(in),
                                            {c.nsamples_in, p.row_bytes()}),
                View<float, 2>(out, {p.ndms(), p.nsamples_out()}));
      return;
    }
    if (d_in_.size() < static_cast<std::size_t>(in_bytes))
      d_in_ = DeviceArray<std::uint8_t>(static_cast<std::size_t>(in_bytes));
    if (d_out_.size() < static_cast<std::size_t>(out_count))
      d_out_ = DeviceArray<float>(static_cast<std::size_t>(out_count));
    copy_bytes(d_in_.data(), in, static_cast<std::size_t>(in_bytes));
    p.execute(
        View<const std::uint8_t, 2>(d_in_.data(), {c.nsamples_in, p.row_bytes()}, Space::device),
        View<float, 2>(d_out_.data(), {p.ndms(), p.nsamples_out()}, Space::device));
    copy_bytes(out, d_out_.data(), static_cast<std::size_t>(out_count) * sizeof(float));
  }

 private:
  Backend backend_;
  std::optional<dedisp::DedispersionPlan> plan_;
  DeviceArray<std::uint8_t> d_in_;
  DeviceArray<float> d_out_;
};

}  // namespace

std::vector<int> parse_channel_list(const std::string& spec) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (spec.empty()) break;
      fail(ErrorCategory::invalid_argument, "--zap-chans '{}': empty item", spec);
    }
    long a = 0, b = 0;
    char dash = 0, extra = 0;
    const int got = std::sscanf(item.c_str(), "%ld%c%ld%c", &a, &dash, &b, &extra);
    if (got == 1) {
      b = a;
    } else if (!(got == 3 && dash == '-')) {
      fail(ErrorCategory::invalid_argument,
           "--zap-chans: '{}' is not a channel or a range such as 10-20", item);
    }
    if (a < 0 || b < a || b > (1 << 24))
      fail(ErrorCategory::invalid_argument, "--zap-chans: '{}' is not a valid channel range", item);
    for (long c = a; c <= b; ++c)
      out.push_back(static_cast<int>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void FileSearchConfig::validate() const {
  if (!(dm_min >= 0) || !std::isfinite(dm_min))
    fail(ErrorCategory::invalid_argument, "--dm-min = {} must be >= 0", dm_min);
  if (!(dm_max >= dm_min) || !std::isfinite(dm_max))
    fail(ErrorCategory::invalid_argument, "--dm-max = {} must be >= --dm-min = {}", dm_max, dm_min);
  if (!(dm_tolerance > 1) || !std::isfinite(dm_tolerance))
    fail(ErrorCategory::invalid_argument, "--dm-tol = {} must be > 1", dm_tolerance);
  if (!(pulse_width_us > 0) || !std::isfinite(pulse_width_us))
    fail(ErrorCategory::invalid_argument, "--pulse-width = {} us must be > 0", pulse_width_us);
  if (boxcar_max < 1 || boxcar_max > (1 << 20) ||
      !std::has_single_bit(static_cast<unsigned>(boxcar_max)))
    fail(ErrorCategory::invalid_argument,
         "--boxcar-max = {} must be a power of 2 from 1 to 1048576", boxcar_max);
  if (!(snr_min > 0) || !std::isfinite(snr_min))
    fail(ErrorCategory::invalid_argument, "--snr-min = {} must be > 0", snr_min);
  if (!(baseline_s > 0) || !std::isfinite(baseline_s))
    fail(ErrorCategory::invalid_argument, "--baseline = {} s must be > 0", baseline_s);
  if (!(zap_sigma >= 0) || !std::isfinite(zap_sigma))
    fail(ErrorCategory::invalid_argument, "--zap-sigma = {} must be >= 0", zap_sigma);
  for (int c : zap_channels)
    if (c < 0) fail(ErrorCategory::invalid_argument, "--zap-chans: channel {} is negative", c);
  cluster.validate();
  require_range<std::int64_t>("--gulp", gulp, 0, std::int64_t{1} << 40);
  if (memory_bytes < (std::int64_t{1} << 20))
    fail(ErrorCategory::invalid_argument, "--memory = {} bytes must be at least 1 MiB",
         memory_bytes);
  require_range("--threads", threads, 0, 4096);
  require_range("beam", beam, 0, 1 << 30);
  require_range<std::int64_t>("part.dm_trial_begin", part.dm_trial_begin, 0, std::int64_t{1} << 40);
  require_range<std::int64_t>("part.dm_trial_end", part.dm_trial_end, 0, std::int64_t{1} << 40);
  require_range("part.memory_threads", part.memory_threads, 0, 4096);
}

nlohmann::json FileSearchConfig::to_json() const {
  return {{"dm_min", dm_min},
          {"dm_max", dm_max},
          {"dm_tolerance", dm_tolerance},
          {"pulse_width_us", pulse_width_us},
          {"boxcar_max", boxcar_max},
          {"snr_min", snr_min},
          {"baseline_s", baseline_s},
          {"zap_channels", zap_channels},
          {"zap_sigma", zap_sigma},
          {"zero_dm", zero_dm},
          {"cluster",
           {{"time_tol", cluster.time_tol},
            {"filter_tol", cluster.filter_tol},
            {"dm_tol", cluster.dm_tol}}},
          {"gulp", gulp},
          {"memory_bytes", memory_bytes},
          {"threads", threads},
          {"beam", beam}};
}

nlohmann::json SearchResult::to_json() const {
  return {{"backend", backend},
          {"ndms", dms.size()},
          {"dm_first", dms.empty() ? 0.f : dms.front()},
          {"dm_last", dms.empty() ? 0.f : dms.back()},
          {"max_delay_samples", max_delay},
          {"nsamples_searched", nsamples_searched},
          {"gulp", gulp},
          {"gulps", gulps},
          {"margin", margin},
          {"dm_chunk", dm_chunk},
          {"widest_boxcar", widest_boxcar},
          {"memory_bytes", memory_bytes},
          {"min_channels_kept", min_channels_kept},
          {"seconds",
           {{"read", seconds_read},
            {"rfi", seconds_rfi},
            {"dedisp", seconds_dedisp},
            {"search", seconds_search},
            {"cluster", seconds_cluster}}}};
}

SearchResult search_filterbank(const std::string& path, const FileSearchConfig& cfg,
                               Backend backend) {
  cfg.validate();
  io::FilterbankReader reader(path);
  const io::FilterbankHeader& h = reader.header();
  SearchResult res;
  res.header = h;
  const Backend dedisp_backend = resolve_backend(backend);
  res.backend = dedisp_backend == Backend::cuda ? "cuda (dedispersion) + cpu (search)" : "cpu";
  const int threads = cfg.threads > 0 ? cfg.threads : omp_get_max_threads();

  // The user's channel mask.
  RfiConfig rfi;
  rfi.zap_sigma = cfg.zap_sigma;
  rfi.zero_dm = cfg.zero_dm;
  rfi.zap.assign(static_cast<std::size_t>(h.nchans), 0);
  for (int c : cfg.zap_channels) {
    if (c >= h.nchans)
      fail(ErrorCategory::invalid_argument, "--zap-chans: channel {} is outside 0-{} of '{}'", c,
           h.nchans - 1, path);
    rfi.zap[static_cast<std::size_t>(c)] = 1;
  }

  // DM list and delays.
  dedisp::DedispersionConfig dc;
  dc.nchans = h.nchans;
  dc.fch1_mhz = h.fch1;
  dc.foff_mhz = h.foff;
  dc.tsamp_s = h.tsamp;
  dc.nbits = 32;  // the cleaned gulp is float32
  dc.threads = cfg.threads;
  dc.killmask.resize(static_cast<std::size_t>(h.nchans));
  for (int c = 0; c < h.nchans; ++c)
    dc.killmask[c] = rfi.zap[c] ? 0 : 1;
  res.dms = dedisp::dm_list_dedisp(cfg.dm_min, cfg.dm_max, cfg.pulse_width_us, cfg.dm_tolerance,
                                   h.nchans, h.tsamp, h.fch1, h.foff);
  dc.dms = res.dms;
  const auto delays = dedisp::delay_table(dc);
  const auto ndm = static_cast<std::int64_t>(res.dms.size());
  res.max_delay = trial_max_delay(delays, h.nchans, res.dms.size() - 1);
  const std::int64_t nout = h.nsamples - res.max_delay;
  if (nout < 1)
    fail(ErrorCategory::invalid_argument,
         "'{}' holds {} samples ({:.3f} s) but the dispersion delay at DM {} is {} samples "
         "({:.3f} s): lower --dm-max",
         path, h.nsamples, h.duration_s(), res.dms.back(), res.max_delay, res.max_delay * h.tsamp);
  res.nsamples_searched = nout;
  // The DM trials of this search (all, or a distributed run's slice).
  const std::int64_t dm_b = cfg.part.dm_trial_begin;
  const std::int64_t dm_e = cfg.part.dm_trial_end > 0 ? cfg.part.dm_trial_end : ndm;
  if (dm_b >= dm_e || dm_e > ndm)
    fail(ErrorCategory::invalid_argument,
         "DM trials [{}, {}) are not a slice of the {} trials of '{}'", dm_b, dm_e, ndm, path);
  const int memory_threads = cfg.part.memory_threads > 0 ? cfg.part.memory_threads : threads;

  // Gulp and DM chunk from the memory budget.
  const std::int64_t margin = cfg.boxcar_max;
  res.margin = margin;
  SearchConfig sc;
  sc.tsamp_s = h.tsamp;
  sc.baseline_s = cfg.baseline_s;
  sc.boxcar_max = cfg.boxcar_max;
  sc.snr_min = cfg.snr_min;
  sc.min_rms = kMinRms;
  sc.threads = cfg.threads;
  // Long enough for kMinBoxcars of the widest boxcar the baseline allows.
  const std::int64_t widest_target = widest_boxcar(sc, std::int64_t{1} << 40, 0);
  std::int64_t gulp = cfg.gulp > 0
                          ? cfg.gulp
                          : std::max({std::int64_t{1} << 17, 2 * std::int64_t{res.max_delay},
                                      kMinBoxcars * widest_target});
  gulp = std::min(gulp, nout);
  const std::int64_t min_gulp = std::min<std::int64_t>(nout, std::max<std::int64_t>(margin, 4096));
  auto plane_len = [&](std::int64_t g) { return std::min(g + 2 * margin, nout); };
  while (cfg.gulp == 0 && gulp > min_gulp &&
         memory_need(h, plane_len(gulp), res.max_delay, ndm, memory_threads) > cfg.memory_bytes)
    gulp = std::max(min_gulp, gulp / 2);
  const std::int64_t L = plane_len(gulp);
  const std::int64_t fixed = memory_need(h, L, res.max_delay, 0, memory_threads);
  std::int64_t chunk = std::min<std::int64_t>(dm_e - dm_b, (cfg.memory_bytes - fixed) / (L * 4));
  if (chunk < 1)
    fail(ErrorCategory::invalid_argument,
         "searching '{}' to DM {} needs at least {} MiB ({} channels x {} samples of maximum "
         "delay plus a gulp of {}): raise --memory or lower --dm-max",
         path, res.dms.back(), (fixed + L * 4) >> 20, h.nchans, res.max_delay, L);
  res.gulp = gulp;
  res.gulps = (nout + gulp - 1) / gulp;
  res.dm_chunk = chunk;
  res.memory_bytes = memory_need(h, L, res.max_delay, chunk, memory_threads);
  res.min_channels_kept = h.nchans;
  res.widest_boxcar = widest_boxcar(sc, L, 0);

  // The largest gulp's buffers up front: growing a vector would hold two copies for a moment.
  std::vector<std::uint8_t> raw;
  std::vector<float> gulp_data, plane;
  const std::int64_t row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  raw.reserve(static_cast<std::size_t>((L + res.max_delay) * row_bytes));
  gulp_data.reserve(static_cast<std::size_t>((L + res.max_delay) * h.nchans));
  plane.reserve(static_cast<std::size_t>(chunk * L));
  ChunkDedisperser dedisperser(dedisp_backend);
  std::optional<SearchPlan> search_plan;
  Clusterer clusterer(cfg.cluster);
  std::vector<Cluster> clusters;
  std::vector<Peak> peaks;
  Progress progress(fmt::format("search {}", path), nout);
  if (!cfg.progress) progress.set_enabled(false);

  for (std::int64_t g = 0; g < res.gulps; ++g) {
    const std::int64_t own_b = g * gulp, own_e = std::min(nout, own_b + gulp);
    const std::int64_t p0 = std::max<std::int64_t>(0, own_b - margin);
    const std::int64_t p1 = std::min(nout, own_e + margin);
    const std::int64_t len = p1 - p0, rows = len + res.max_delay;

    // Read and clean the gulp's input rows [p0, p1 + max_delay).
    auto clock = std::chrono::steady_clock::now();
    gulp_data.resize(static_cast<std::size_t>(rows * h.nchans));
    raw.resize(static_cast<std::size_t>(rows * row_bytes));
    reader.seek(p0);
    if (reader.read_raw(rows, raw.data()) != rows)
      fail(ErrorCategory::io, "'{}': short read at sample {}", path, p0);
    unpack_rows(h, raw.data(), rows, gulp_data.data());
    lap(clock, res.seconds_read);
    const RfiReport rep = clean_filterbank(gulp_data.data(), rows, h.nchans, rfi, cfg.threads);
    res.min_channels_kept = std::min(res.min_channels_kept, rep.kept());
    lap(clock, res.seconds_rfi);

    // Dedisperse and search the DM trials chunk by chunk.
    peaks.clear();
    for (std::int64_t d0 = dm_b; d0 < dm_e; d0 += chunk) {
      const std::int64_t d1 = std::min(dm_e, d0 + chunk);
      auto c = dc;
      c.dms.assign(res.dms.begin() + d0, res.dms.begin() + d1);
      c.nsamples_in = len + trial_max_delay(delays, h.nchans, static_cast<std::size_t>(d1 - 1));
      plane.resize(static_cast<std::size_t>((d1 - d0) * len));
      dedisperser.run(c, gulp_data.data(), plane.data());
      lap(clock, res.seconds_dedisp);
      if (!search_plan || search_plan->config().ndms != d1 - d0 ||
          search_plan->config().nsamples != len || chunk < dm_e - dm_b) {
        sc.ndms = d1 - d0;
        sc.nsamples = len;
        sc.max_width.clear();
        if (cfg.zero_dm)  // a pulse wider than its trial's sweep is mostly removed by zero-DM
          for (std::int64_t d = d0; d < d1; ++d)
            sc.max_width.push_back(
                std::max(1, trial_max_delay(delays, h.nchans, static_cast<std::size_t>(d))));
        search_plan.emplace(sc, Backend::cpu);
      }
      search_plan->execute(View<const float, 2>(plane.data(), {d1 - d0, len}), own_b - p0,
                           own_e - p0, static_cast<std::int32_t>(d0), p0, peaks);
      lap(clock, res.seconds_search);
    }
    if (cfg.part.on_peaks) {
      cfg.part.on_peaks(peaks);  // a distributed run clusters every worker's peaks together
    } else {
      clusterer.add(peaks);
      // Every later gulp's plane starts at or after own_e - margin: spans begin no earlier.
      const auto done =
          g + 1 < res.gulps ? clusterer.take_final(own_e - margin) : clusterer.finish();
      clusters.insert(clusters.end(), done.begin(), done.end());
    }
    lap(clock, res.seconds_cluster);
    progress.update(own_e);
  }
  progress.finish();

  std::sort(clusters.begin(), clusters.end(), [](const Cluster& a, const Cluster& b) {
    if (a.best.snr != b.best.snr) return a.best.snr > b.best.snr;
    return a.best.sample < b.best.sample;
  });
  res.candidates.reserve(clusters.size());
  for (const auto& cl : clusters)
    res.candidates.push_back(to_candidate(cl, res.dms, h.tsamp, cfg.beam));
  return res;
}

}  // namespace warpbeam::search
