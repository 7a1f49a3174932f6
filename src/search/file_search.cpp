// The file search: plans the gulps and DM chunks of a SIGPROC filterbank (plan_file_search),
// runs them on the CPU (file_search_cpu.cpp) or the GPU (file_search_cuda.cpp), and clusters the
// peaks across gulps into candidates. Memory is bounded by the budgets (see search_filterbank()
// in the header for the CPU's bound, plan_file_search() for both).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "search/file_search.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

namespace {

constexpr float kMinRms = 1e-2f;  // channels have unit sigma: a real trial has sigma >= ~1

// Host buffers of the CPU search of one gulp for a plane of L samples and `chunk` DM trials (the
// header's bound).
std::int64_t cpu_memory_need(const io::FilterbankHeader& h, std::int64_t L, std::int32_t max_delay,
                             std::int64_t chunk, int threads) {
  const std::int64_t rows = L + max_delay;
  return rows * (static_cast<std::int64_t>(h.bytes_per_sample()) + 8 * std::int64_t{h.nchans} +
                 68 * std::int64_t{threads}) +
         chunk * L * 4 + std::int64_t{threads} * L * 24;
}

// The largest --dm-max (from cfg.dm_min) whose DM list's last trial delays the lowest channel by
// at most nsamples - need samples (the rounding of delay_table()); -1 when even --dm-min does not.
double largest_dm_max(const FileSearchConfig& cfg, const io::FilterbankHeader& h,
                      std::int64_t need) {
  const double top = std::max(h.fch1, h.fch1 + (h.nchans - 1) * h.foff);
  const double bottom = std::min(h.fch1, h.fch1 + (h.nchans - 1) * h.foff);
  const double per_dm = dedisp::dispersion_delay_s(1.0, bottom, top) / h.tsamp;  // samples
  const double room = static_cast<double>(h.nsamples - need);
  auto fits = [&](double dm_max) {
    const auto dms = dedisp::dm_list_dedisp(cfg.dm_min, dm_max, cfg.pulse_width_us,
                                            cfg.dm_tolerance, h.nchans, h.tsamp, h.fch1, h.foff);
    return std::lround(dms.back() * per_dm) <= room;
  };
  if (room < 0 || !fits(cfg.dm_min)) return -1;
  double dm = per_dm > 0 ? room / per_dm : cfg.dm_max;
  for (int i = 0; i < 200 && dm > cfg.dm_min && !fits(dm); ++i)
    dm = std::max(cfg.dm_min, dm * 0.99);  // the list may step past dm_max: back off
  return std::floor(dm * 100) / 100;
}

// "lower --dm-max to X" or, when no DM range fits, why.
std::string dm_max_advice(const FileSearchConfig& cfg, const io::FilterbankHeader& h,
                          std::int64_t need) {
  const double dm = largest_dm_max(cfg, h, need);
  if (dm < 0)
    return fmt::format(
        "no --dm-max works: the file is too short to search from DM {} (--dm-min; the search "
        "needs at least {} samples after the largest delay)",
        cfg.dm_min, need);
  return fmt::format("lower --dm-max to at most {:.2f}", dm);
}

// Host buffers of the CUDA search: two pinned gulps of packed rows.
std::int64_t cuda_host_need(const io::FilterbankHeader& h, std::int64_t L, std::int32_t max_delay) {
  return 2 * (L + max_delay) * static_cast<std::int64_t>(h.bytes_per_sample());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The layout
// ---------------------------------------------------------------------------------------------

namespace detail {

GulpRange FileSearchLayout::gulp_range(std::int64_t g) const {
  GulpRange r;
  r.own_begin = g * gulp;
  r.own_end = std::min(nout, r.own_begin + gulp);
  r.p0 = std::max<std::int64_t>(0, r.own_begin - margin);
  r.p1 = std::min(nout, r.own_end + margin);
  return r;
}

std::int32_t FileSearchLayout::trial_max_delay(std::int64_t d) const {
  const auto n = static_cast<std::ptrdiff_t>(header.nchans);
  return *std::max_element(delays.begin() + d * n, delays.begin() + (d + 1) * n);
}

dedisp::DedispersionConfig FileSearchLayout::chunk_dedisp(std::int64_t d0, std::int64_t d1,
                                                          std::int64_t len) const {
  auto c = dedisp;
  c.dms.assign(dms.begin() + d0, dms.begin() + d1);
  c.nsamples_in = len + trial_max_delay(d1 - 1);
  return c;
}

SearchConfig FileSearchLayout::chunk_search(std::int64_t d0, std::int64_t d1,
                                            std::int64_t len) const {
  SearchConfig sc = search;
  sc.ndms = d1 - d0;
  sc.nsamples = len;
  sc.max_width.clear();
  if (rfi.zero_dm)  // a pulse wider than its trial's sweep is mostly removed by zero-DM
    for (std::int64_t d = d0; d < d1; ++d)
      sc.max_width.push_back(std::max(1, trial_max_delay(d)));
  return sc;
}

FileSearchLayout plan_file_search(const std::string& path, const io::FilterbankHeader& h,
                                  const FileSearchConfig& cfg, Backend backend) {
  FileSearchLayout L;
  L.path = path;
  L.header = h;
  L.backend = backend;
  L.threads = cfg.threads > 0 ? cfg.threads : omp_get_max_threads();

  // Sizes from the header are checked before anything is sized by them (a 327-byte file with
  // nchans 16777216 built a 17.5 GiB delay table before its 0 samples were noticed).
  if (h.nsamples < 1)
    fail(ErrorCategory::format,
         "'{}' holds no whole time sample ({} channels of {} bits): nothing "
         "to search",
         path, h.nchans, h.nbits);

  // The user's channel mask.
  L.rfi.zap_sigma = cfg.zap_sigma;
  L.rfi.zero_dm = cfg.zero_dm;
  L.rfi.zap.assign(static_cast<std::size_t>(h.nchans), 0);
  for (int c : cfg.zap_channels) {
    if (c >= h.nchans)
      fail(ErrorCategory::invalid_argument, "--zap-chans: channel {} is outside 0-{} of '{}'", c,
           h.nchans - 1, path);
    L.rfi.zap[static_cast<std::size_t>(c)] = 1;
  }
  // A search that cannot find anything fails with the reason (issue 18, B5): zero-DM subtraction
  // of one channel subtracts the channel itself, and no channel leaves nothing.
  const auto unmasked = static_cast<int>(std::count(L.rfi.zap.begin(), L.rfi.zap.end(), 0));
  if (unmasked == 0)
    fail(ErrorCategory::invalid_argument, "--zap-chans zaps every channel of '{}'", path);
  if (cfg.zero_dm && unmasked < 2)
    fail(ErrorCategory::invalid_argument,
         "'{}' has {} channel{} left to search: zero-DM subtraction (the default) would subtract "
         "it from itself and leave nothing; give --no-zero-dm",
         path, unmasked, unmasked == 1 ? "" : "s");

  // DM list and delays.
  auto& dc = L.dedisp;
  dc.nchans = h.nchans;
  dc.fch1_mhz = h.fch1;
  dc.foff_mhz = h.foff;
  dc.tsamp_s = h.tsamp;
  dc.nbits = 32;  // the cleaned gulp is float32
  dc.threads = cfg.threads;
  if (backend == Backend::cuda) {
    dc.channel_major = true;  // cleaned on the GPU into channel rows; zapped rows are zeros
  } else {
    dc.killmask.resize(static_cast<std::size_t>(h.nchans));
    for (int c = 0; c < h.nchans; ++c)
      dc.killmask[c] = L.rfi.zap[c] ? 0 : 1;
  }
  L.dms = dedisp::dm_list_dedisp(cfg.dm_min, cfg.dm_max, cfg.pulse_width_us, cfg.dm_tolerance,
                                 h.nchans, h.tsamp, h.fch1, h.foff);
  dc.dms = L.dms;
  {
    // The largest delay (the last trial's at the lowest frequency) and the table's size, before
    // the table: the same rounding as delay_table().
    const double top = std::max(h.fch1, h.fch1 + (h.nchans - 1) * h.foff);
    const double bottom = std::min(h.fch1, h.fch1 + (h.nchans - 1) * h.foff);
    const double widest = dedisp::dispersion_delay_s(L.dms.back(), bottom, top) / h.tsamp;
    if (!(widest + kMinBoxcars <= static_cast<double>(h.nsamples)))
      fail(ErrorCategory::invalid_argument,
           "'{}' holds {} samples ({:.3f} s) but the dispersion delay at DM {} is {:.0f} samples "
           "({:.3f} s), and the search needs {} more: {}",
           path, h.nsamples, h.duration_s(), L.dms.back(), widest, widest * h.tsamp, kMinBoxcars,
           dm_max_advice(cfg, h, kMinBoxcars));
    const std::int64_t table = static_cast<std::int64_t>(L.dms.size()) * h.nchans * 4;
    if (table > cfg.memory_bytes)
      fail(ErrorCategory::invalid_argument,
           "the delay table of '{}' ({} DM trials x {} channels) needs {} MiB, more than --memory "
           "({} MiB): raise --memory or lower --dm-max",
           path, L.dms.size(), h.nchans, table >> 20, cfg.memory_bytes >> 20);
  }
  L.delays = dedisp::delay_table(dc);
  dc.dms.clear();
  const std::int64_t ndm = L.ndms();
  L.max_delay = L.trial_max_delay(ndm - 1);
  L.nout = h.nsamples - L.max_delay;
  // Boxcars need kMinBoxcars valid centres (even width 1): fewer output samples search nothing
  // ("boxcars 1-0", "no candidates", exit 0 before issue 18, B6).
  if (L.nout < kMinBoxcars)
    fail(ErrorCategory::invalid_argument,
         "'{}' holds {} samples ({:.3f} s) but the dispersion delay at DM {} is {} samples "
         "({:.3f} s), leaving {} to search where at least {} are needed: {}",
         path, h.nsamples, h.duration_s(), L.dms.back(), L.max_delay, L.max_delay * h.tsamp, L.nout,
         kMinBoxcars, dm_max_advice(cfg, h, kMinBoxcars));

  // The per-plane search.
  L.margin = cfg.boxcar_max;
  auto& sc = L.search;
  sc.tsamp_s = h.tsamp;
  sc.baseline_s = cfg.baseline_s;
  sc.boxcar_max = cfg.boxcar_max;
  sc.snr_min = cfg.snr_min;
  sc.min_rms = kMinRms;
  sc.threads = cfg.threads;

  // Gulp and DM chunk from the budgets. The default gulp is the same on both backends (the
  // statistics are per gulp, so equal gulps give equal candidates): long enough for kMinBoxcars
  // of the widest boxcar the baseline allows.
  const std::int64_t widest_target = widest_boxcar(sc, std::int64_t{1} << 40, 0);
  std::int64_t gulp = cfg.gulp > 0 ? cfg.gulp
                                   : std::max({std::int64_t{1} << 17, 2 * std::int64_t{L.max_delay},
                                               kMinBoxcars * widest_target});
  gulp = std::min(gulp, L.nout);
  if (cfg.gulp > 0 && gulp < L.nout && gulp < kMinBoxcars * widest_target) {
    static std::atomic<bool> warned{false};  // once per process (plans are made per worker)
    if (!warned.exchange(true))
      warn(
          fmt::format("--gulp {} is shorter than the {} samples a gulp needs for {} boxcars of "
                      "the widest width the baseline allows ({} samples): the per-gulp "
                      "statistics get noisy and pulses can be missed; --gulp 0 picks a gulp",
                      cfg.gulp, kMinBoxcars * widest_target, kMinBoxcars, widest_target));
  }
  const std::int64_t min_gulp =
      std::min<std::int64_t>(L.nout, std::max<std::int64_t>(L.margin, 4096));
  auto plane_len = [&](std::int64_t g) { return std::min(g + 2 * L.margin, L.nout); };
  const bool cuda = backend == Backend::cuda;
  [[maybe_unused]] const int streams = cfg.gpu_streams;
#ifdef WARPBEAM_HAVE_CUDA
  const std::int64_t device_budget = cuda ? detail::cuda_device_budget(cfg) : 0;
  auto device_need = [&](std::int64_t len, std::int64_t chunk) {
    return detail::cuda_device_bytes(h, len, L.max_delay, chunk, streams);
  };
#else
  const std::int64_t device_budget = 0;
  auto device_need = [&](std::int64_t, std::int64_t) { return std::int64_t{0}; };
#endif
  auto fits = [&](std::int64_t len, std::int64_t chunk) {
    if (!cuda) return cpu_memory_need(h, len, L.max_delay, chunk, L.threads) <= cfg.memory_bytes;
    return cuda_host_need(h, len, L.max_delay) <= cfg.memory_bytes &&
           device_need(len, chunk) <= device_budget;
  };
  while (cfg.gulp == 0 && gulp > min_gulp && !fits(plane_len(gulp), ndm))
    gulp = std::max(min_gulp, gulp / 2);
  const std::int64_t len = plane_len(gulp);
  if (widest_boxcar(sc, len, 0) < 1)
    fail(ErrorCategory::invalid_argument,
         "--gulp {} gives planes of {} samples, fewer than the {} a boxcar search needs: a longer "
         "--gulp (or 0)",
         cfg.gulp, len, kMinBoxcars);
  // The largest chunk of DM trials that fits (the budgets are linear in the chunk).
  std::int64_t chunk = 0;
  if (!cuda) {
    const std::int64_t fixed = cpu_memory_need(h, len, L.max_delay, 0, L.threads);
    chunk = std::min<std::int64_t>(ndm, (cfg.memory_bytes - fixed) / (len * 4));
  } else if (cuda_host_need(h, len, L.max_delay) <= cfg.memory_bytes) {
    const std::int64_t fixed = device_need(len, 0), per_trial = device_need(len, 1) - fixed;
    chunk =
        std::min<std::int64_t>(ndm, (device_budget - fixed) / std::max<std::int64_t>(per_trial, 1));
  }
  if (chunk < 1) {
    const std::int64_t need =
        cuda ? device_need(len, 1) : cpu_memory_need(h, len, L.max_delay, 1, L.threads);
    fail(ErrorCategory::invalid_argument,
         "searching '{}' to DM {} needs at least {} MiB of {} memory ({} channels x {} samples "
         "of maximum delay plus a gulp of {}): raise {} or lower --dm-max",
         path, L.dms.back(), need >> 20, cuda ? "device" : "host", h.nchans, L.max_delay, len,
         cuda ? "--gpu-memory" : "--memory");
  }
  L.gulp = gulp;
  L.gulps = (L.nout + gulp - 1) / gulp;
  L.chunk = chunk;
  L.plane_len = len;
  if (cuda) {
    L.host_bytes = cuda_host_need(h, len, L.max_delay);
    L.device_bytes = device_need(len, chunk);
  } else {
    L.host_bytes = cpu_memory_need(h, len, L.max_delay, chunk, L.threads);
  }
  return L;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Options and results
// ---------------------------------------------------------------------------------------------

std::vector<int> parse_channel_list(const std::string& spec) {
  std::vector<int> out;
  std::vector<std::pair<long, long>> ranges;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (spec.empty()) break;
      fail(ErrorCategory::invalid_argument, "--zap-chans '{}': empty item", spec);
    }
    // from_chars, not sscanf: an out-of-range number is an error, not undefined behaviour.
    const auto number = [](std::string_view t, long& v) {
      while (!t.empty() && t.front() == ' ')
        t.remove_prefix(1);
      while (!t.empty() && t.back() == ' ')
        t.remove_suffix(1);
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return !t.empty() && ec == std::errc() && end == t.data() + t.size();
    };
    long a = 0, b = 0;
    const std::size_t dash = item.find('-', 1);
    const bool ok = dash == std::string::npos
                        ? number(item, a) && number(item, b)
                        : number(std::string_view(item).substr(0, dash), a) &&
                              number(std::string_view(item).substr(dash + 1), b);
    if (!ok)
      fail(ErrorCategory::invalid_argument,
           "--zap-chans: '{}' is not a channel or a range such as 10-20", item);
    if (a < 0 || b < a || b > (1 << 24))
      fail(ErrorCategory::invalid_argument, "--zap-chans: '{}' is not a valid channel range", item);
    ranges.emplace_back(a, b);
  }
  // Overlapping ranges merged before they are expanded: the list holds each channel once, at
  // most 2^24 + 1 of them (twenty "0-16777216" took 2.3 GB when expanded one by one).
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<long, long>> merged;
  for (const auto& r : ranges)
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  for (const auto& [a, b] : merged)
    for (long c = a; c <= b; ++c)
      out.push_back(static_cast<int>(c));
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
  if (device_memory_bytes != 0 && device_memory_bytes < (std::int64_t{1} << 20))
    fail(ErrorCategory::invalid_argument,
         "--gpu-memory = {} bytes must be 0 (automatic) or at least 1 MiB", device_memory_bytes);
  require_range("--device", device, 0, 1023);
  require_range("--gpu-streams", gpu_streams, 1, 2);
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
          {"beam", beam},
          {"device_memory_bytes", device_memory_bytes},
          {"device", device},
          {"gpu_streams", gpu_streams},
          {"autotune", autotune}};
}

void SearchResult::add_zapped(const std::vector<std::uint8_t>& gulp_reasons) {
  if (zapped.size() < gulp_reasons.size()) zapped.resize(gulp_reasons.size(), kZapNone);
  for (std::size_t c = 0; c < gulp_reasons.size(); ++c)
    if (zapped[c] == kZapNone) zapped[c] = gulp_reasons[c];
}

std::vector<int> SearchResult::zapped_channels(std::uint8_t reason) const {
  std::vector<int> out;
  for (std::size_t c = 0; c < zapped.size(); ++c)
    if (zapped[c] == reason) out.push_back(static_cast<int>(c));
  return out;
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
          {"device_memory_bytes", device_memory_bytes},
          {"bytes_to_device", bytes_to_device},
          {"bytes_from_device", bytes_from_device},
          {"min_channels_kept", min_channels_kept},
          {"zapped_channels",
           {{"mask", zapped_channels(kZapMask)},
            {"dead_or_nonfinite", zapped_channels(kZapDead)},
            {"outlier", zapped_channels(kZapOutlier)}}},
          {"seconds",
           {{"read", seconds_read},
            {"rfi", seconds_rfi},
            {"dedisp", seconds_dedisp},
            {"search", seconds_search},
            {"cluster", seconds_cluster},
            {"setup", seconds_setup}}}};
}

// ---------------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------------

namespace detail {
std::pair<std::int64_t, std::int64_t> GulpSpan::resolve(std::int64_t gulps) const {
  const std::int64_t e = end < 0 ? gulps : end;
  if (begin < 0 || begin >= e || e > gulps)
    fail(ErrorCategory::invalid_argument, "gulps [{}, {}) of {}", begin, e, gulps);
  return {begin, e};
}

SearchResult planned_result(const FileSearchLayout& L) {
  SearchResult res;
  res.header = L.header;
  res.backend = L.backend == Backend::cuda ? "cuda" : "cpu";
  res.dms = L.dms;
  res.max_delay = L.max_delay;
  res.nsamples_searched = L.nout;
  res.gulp = L.gulp;
  res.gulps = L.gulps;
  res.margin = L.margin;
  res.dm_chunk = L.chunk;
  res.memory_bytes = L.host_bytes;
  res.device_memory_bytes = L.device_bytes;
  res.min_channels_kept = L.header.nchans;
  res.widest_boxcar = widest_boxcar(L.search, L.plane_len, 0);
  return res;
}
}  // namespace detail

SearchResult search_filterbank(const std::string& path, const FileSearchConfig& cfg,
                               Backend backend) {
  cfg.validate();
  const Backend b = resolve_backend(backend);
  const io::FilterbankHeader h = io::read_filterbank_header(path);
  const detail::FileSearchLayout L = detail::plan_file_search(path, h, cfg, b);

  SearchResult res = detail::planned_result(L);

  // Clustering across gulps: the peaks of gulp g are complete once the runner hands them over;
  // every later gulp's plane starts at or after own_end - margin, so spans begin no earlier.
  Clusterer clusterer(cfg.cluster);
  std::vector<Cluster> clusters;
  Progress progress(fmt::format("search {}", path), L.nout);
  if (!cfg.progress) progress.set_enabled(false);
  auto sink = [&](detail::GulpPeaks&& gp) {
    const auto t0 = std::chrono::steady_clock::now();
    const detail::GulpRange r = L.gulp_range(gp.gulp);
    res.min_channels_kept = std::min(res.min_channels_kept, gp.channels_kept);
    res.add_zapped(gp.zap_reason);
    clusterer.add(gp.peaks);
    const auto done =
        gp.gulp + 1 < L.gulps ? clusterer.take_final(r.own_end - L.margin) : clusterer.finish();
    clusters.insert(clusters.end(), done.begin(), done.end());
    res.seconds_cluster +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.update(r.own_end);
  };
  detail::StageTimes times;
  if (b == Backend::cuda) {
    detail::CudaRunOptions o;
    o.device = cfg.device;
    o.streams = cfg.gpu_streams;
    o.autotune = cfg.autotune;
    detail::run_gulps_cuda(L, 0, L.ndms(), o, sink, times);
  } else {
    detail::run_gulps_cpu(L, 0, L.ndms(), sink, times);
  }
  progress.finish();
  times.report_to(res);

  std::sort(clusters.begin(), clusters.end(), [](const Cluster& a, const Cluster& b) {
    if (a.best.snr != b.best.snr) return a.best.snr > b.best.snr;
    return a.best.sample < b.best.sample;
  });
  res.candidates.reserve(clusters.size());
  for (const auto& cl : clusters)
    res.candidates.push_back(to_candidate(cl, res.dms, h.tsamp, cfg.beam));
  return res;
}

#ifndef WARPBEAM_HAVE_CUDA
void detail::run_gulps_cuda(const FileSearchLayout&, std::int64_t, std::int64_t,
                            const CudaRunOptions&, const PeakSink&, StageTimes&, GulpSpan) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

}  // namespace warpbeam::search
