// The file search: FileSearchConfig and RunOptions (validation, JSON), the FileSearchPlan (DM
// list, delays, gulps and DM chunk from the budgets, which are computed from the GulpSearcher's
// and the plans' workspace reports), its execute() (the GulpSearcher over every gulp, clustering
// across gulps) and search_filterbank().
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "search/gulp_reader.hpp"
#include "search/gulp_searcher.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/progress.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

namespace {

constexpr float kMinRms = 1e-2f;  // channels have unit sigma: a real trial has sigma >= ~1

// Field by field, the larger of two workspaces.
Workspace larger(const Workspace& a, const Workspace& b) {
  return {std::max(a.host_bytes, b.host_bytes), std::max(a.device_bytes, b.device_bytes)};
}

// The delay, in samples, of DM 1 at the lowest frequency of `h` relative to its highest.
double samples_per_dm(const io::FilterbankHeader& h) {
  const double top = std::max(h.fch1, h.fch1 + (h.nchans - 1) * h.foff);
  const double bottom = std::min(h.fch1, h.fch1 + (h.nchans - 1) * h.foff);
  return dedisp::dispersion_delay_s(1.0, bottom, top) / h.tsamp;
}

// The largest dm_max (from c.dm_min) whose DM list's last trial delays the lowest channel by at
// most nsamples - need samples (the rounding of delay_table()); -1 when even dm_min does not.
double largest_dm_max(const FileSearchConfig& c, const io::FilterbankHeader& h, std::int64_t need) {
  const double per_dm = samples_per_dm(h);
  const double room = static_cast<double>(h.nsamples - need);
  auto fits = [&](double dm_max) {
    const auto dms = dedisp::dm_list_dedisp(c.dm_min, dm_max, c.pulse_width_us, c.dm_tolerance,
                                            h.nchans, h.tsamp, h.fch1, h.foff);
    return static_cast<double>(std::lround(dms.back() * per_dm)) <= room;
  };
  if (room < 0 || !fits(c.dm_min)) return -1;
  double dm = per_dm > 0 ? room / per_dm : c.dm_max;
  for (int i = 0; i < 200 && dm > c.dm_min && !fits(dm); ++i)
    dm = std::max(c.dm_min, dm * 0.99);  // the list may step past dm_max: back off
  return std::floor(dm * 100) / 100;
}

// "lower dm_max to X" or, when no DM range fits, why (the CLI writes the fields as its flags).
std::string dm_max_advice(const FileSearchConfig& c, const io::FilterbankHeader& h,
                          std::int64_t need) {
  const double dm = largest_dm_max(c, h, need);
  if (dm < 0)
    return fmt::format(
        "no dm_max works: the data are too short to search from DM {} (dm_min; the search "
        "needs at least {} samples after the largest delay)",
        c.dm_min, need);
  return fmt::format("lower dm_max to at most {:.2f}", dm);
}

}  // namespace

std::string to_string(DedispMethod m) {
  switch (m) {
    case DedispMethod::automatic:
      return "auto";
    case DedispMethod::brute:
      return "brute";
    case DedispMethod::subband:
      return "subband";
    case DedispMethod::fdmt:
      return "fdmt";
  }
  return "unknown";
}

DedispMethod parse_dedisp_method(const std::string& name) {
  if (name == "auto" || name == "automatic") return DedispMethod::automatic;
  if (name == "brute") return DedispMethod::brute;
  if (name == "subband") return DedispMethod::subband;
  if (name == "fdmt") return DedispMethod::fdmt;
  fail(ErrorCategory::invalid_argument, "dedisp = {} is not one of auto, brute, subband, fdmt",
       name);
}

// ---------------------------------------------------------------------------------------------
// Parameters and results
// ---------------------------------------------------------------------------------------------

void FileSearchConfig::validate() const {
  if (!(dm_min >= 0) || !std::isfinite(dm_min))
    fail(ErrorCategory::invalid_argument, "dm_min = {} must be >= 0", dm_min);
  if (!(dm_max >= dm_min) || !std::isfinite(dm_max))
    fail(ErrorCategory::invalid_argument, "dm_max = {} must be >= dm_min = {}", dm_max, dm_min);
  if (!(dm_tolerance > 1) || !std::isfinite(dm_tolerance))
    fail(ErrorCategory::invalid_argument, "dm_tolerance = {} must be > 1", dm_tolerance);
  if (!(pulse_width_us > 0) || !std::isfinite(pulse_width_us))
    fail(ErrorCategory::invalid_argument, "pulse_width_us = {} us must be > 0", pulse_width_us);
  if (boxcar_max < 1 || boxcar_max > (1 << 20) ||
      !std::has_single_bit(static_cast<unsigned>(boxcar_max)))
    fail(ErrorCategory::invalid_argument, "boxcar_max = {} must be a power of 2 from 1 to 1048576",
         boxcar_max);
  if (!(snr_min > 0) || !std::isfinite(snr_min))
    fail(ErrorCategory::invalid_argument, "snr_min = {} must be > 0", snr_min);
  if (!(baseline_s > 0) || !std::isfinite(baseline_s))
    fail(ErrorCategory::invalid_argument, "baseline_s = {} s must be > 0", baseline_s);
  if (!(zap_sigma >= 0) || !std::isfinite(zap_sigma))
    fail(ErrorCategory::invalid_argument, "zap_sigma = {} must be >= 0", zap_sigma);
  cluster.validate();
  require_range("beam", beam, 0, 1 << 30);
  if (dedisp != DedispMethod::automatic && dedisp != DedispMethod::brute &&
      dedisp != DedispMethod::subband && dedisp != DedispMethod::fdmt)
    fail(ErrorCategory::invalid_argument, "dedisp = {} is not a DedispMethod",
         static_cast<int>(dedisp));
  if (!(dedisp_min_snr > 0 && dedisp_min_snr <= 1))
    fail(ErrorCategory::invalid_argument, "dedisp_min_snr = {} must be in (0, 1]", dedisp_min_snr);
  require_range("subbands", subbands, 0, 1 << 20);
  if (!(subband_dm_step >= 0) || !std::isfinite(subband_dm_step))
    fail(ErrorCategory::invalid_argument, "subband_dm_step = {} must be >= 0 (0: automatic)",
         subband_dm_step);
}

nlohmann::json FileSearchConfig::to_json() const {
  return {{"dm_min", dm_min},
          {"dm_max", dm_max},
          {"dm_tolerance", dm_tolerance},
          {"pulse_width_us", pulse_width_us},
          {"boxcar_max", boxcar_max},
          {"snr_min", snr_min},
          {"baseline_s", baseline_s},
          {"zap_channels", zap.channels()},
          {"zap_sigma", zap_sigma},
          {"zero_dm", zero_dm},
          {"cluster",
           {{"time_tol", cluster.time_tol},
            {"filter_tol", cluster.filter_tol},
            {"dm_tol", cluster.dm_tol}}},
          {"beam", beam},
          {"dedisp", to_string(dedisp)},
          {"dedisp_min_snr", dedisp_min_snr},
          {"subbands", subbands},
          {"subband_dm_step", subband_dm_step}};
}

void RunOptions::validate() const {
  require_range<std::int64_t>("gulp", gulp, 0, std::int64_t{1} << 40);
  if (memory_bytes < (std::int64_t{1} << 20))
    fail(ErrorCategory::invalid_argument, "memory_bytes = {} bytes must be at least 1 MiB",
         memory_bytes);
  require_range("threads", threads, 0, 4096);
  if (device_memory_bytes != 0 && device_memory_bytes < (std::int64_t{1} << 20))
    fail(ErrorCategory::invalid_argument,
         "device_memory_bytes = {} bytes must be 0 (automatic) or at least 1 MiB",
         device_memory_bytes);
  require_range("device", device, 0, 1023);
  require_range("gpu_streams", gpu_streams, 1, 2);
  require_range("read_threads", read_threads, 0, 64);
}

int RunOptions::resolved_read_threads() const {
  if (read_threads > 0) return read_threads;
  // Half the hardware threads: the page cache copies at a few GB/s per thread, and the other
  // half is left to the search (and, on a GPU host, to the threads that feed the GPU).
  const auto hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw / 2, 1, 8);
}

nlohmann::json RunOptions::to_json() const {
  return {{"gulp", gulp},         {"memory_bytes", memory_bytes},
          {"threads", threads},   {"device_memory_bytes", device_memory_bytes},
          {"device", device},     {"gpu_streams", gpu_streams},
          {"autotune", autotune}, {"read_threads", read_threads}};
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
          {"dedisp_method", dedisp_method},
          {"dedisp_choice", dedisp_choice},
          {"ndms", dms.size()},
          {"dm_first", dms.empty() ? 0.f : dms.front()},
          {"dm_last", dms.empty() ? 0.f : dms.back()},
          {"max_delay_samples", max_delay},
          {"nsamples_searched", nsamples_searched},
          {"gulp", gulp},
          {"gulps", gulps},
          {"gulps_searched", gulps_searched},
          {"margin", margin},
          {"dm_chunk", dm_chunk},
          {"widest_boxcar", widest_boxcar},
          {"memory_bytes", memory_bytes},
          {"device_memory_bytes", device_memory_bytes},
          {"bytes_to_device", bytes_to_device},
          {"bytes_from_device", bytes_from_device},
          {"read_threads", read_threads},
          {"dedisp_plans", dedisp_plans},
          {"min_channels_kept", min_channels_kept},
          {"zapped_channels",
           {{"mask", zapped_channels(kZapMask)},
            {"dead_or_nonfinite", zapped_channels(kZapDead)},
            {"outlier", zapped_channels(kZapOutlier)}}},
          {"seconds",
           {{"read", seconds_read},
            {"read_wait", seconds_read_wait},
            {"unpack", seconds_unpack},
            {"copy", seconds_copy},
            {"rfi", seconds_rfi},
            {"dedisp", seconds_dedisp},
            {"search", seconds_search},
            {"cluster", seconds_cluster},
            {"gpu_wait", seconds_gpu_wait},
            {"setup", seconds_setup},
            {"gulp_plans", seconds_gulp_plans},
            {"plan", seconds_plan},
            {"total", seconds_total}}}};
}

// ---------------------------------------------------------------------------------------------
// The plan
// ---------------------------------------------------------------------------------------------

FileSearchPlan::FileSearchPlan(FileSearchConfig config, RunOptions options,
                               const io::FilterbankHeader& h, Backend backend, std::string name)
    : config_(std::move(config)),
      options_(options),
      header_(h),
      name_(std::move(name)),
      backend_(resolve_backend(backend)) {
  config_.validate();
  options_.validate();
  if (name_.empty()) name_ = "the filterbank";
  const RunOptions& o = options_;
  threads_ = o.threads > 0 ? o.threads : omp_get_max_threads();
  if (!config_.zap.empty() && config_.zap.channels().back() >= h.nchans)
    fail(ErrorCategory::invalid_argument, "zap: channel {} is outside 0-{} of '{}'",
         config_.zap.channels().back(), h.nchans - 1, name_);
  // Sizes from the header are checked before anything is sized by them (a 327-byte file with
  // nchans 16777216 built a 17.5 GiB delay table before its 0 samples were noticed).
  if (h.nsamples < 1)
    fail(ErrorCategory::format,
         "'{}' holds no whole time sample ({} channels of {} bits): nothing to search", name_,
         h.nchans, h.nbits);
  // A search that cannot find anything fails with the reason (issue 18, B5): zero-DM subtraction
  // of one channel subtracts the channel itself, and no channel leaves nothing.
  const auto unmasked = h.nchans - static_cast<int>(config_.zap.channels().size());
  if (unmasked == 0)
    fail(ErrorCategory::invalid_argument, "zap: every channel of '{}' is masked", name_);
  if (config_.zero_dm && unmasked < 2)
    fail(ErrorCategory::invalid_argument,
         "'{}' has {} channel{} left to search: zero-DM subtraction (zero_dm, the default) would "
         "subtract it from itself and leave nothing; set zero_dm = false (--no-zero-dm)",
         name_, unmasked, unmasked == 1 ? "" : "s");

  // DM list and delays.
  dms_ = dedisp::dm_list_dedisp(config_.dm_min, config_.dm_max, config_.pulse_width_us,
                                config_.dm_tolerance, h.nchans, h.tsamp, h.fch1, h.foff);
  {
    // The largest delay (the last trial's at the lowest frequency) and the table's size, before
    // the table: the same rounding as delay_table().
    const double widest = dms_.back() * samples_per_dm(h);
    if (!(widest + kMinBoxcars <= static_cast<double>(h.nsamples)))
      fail(ErrorCategory::invalid_argument,
           "'{}' holds {} samples ({:.3f} s) but the dispersion delay at DM {} is {:.0f} samples "
           "({:.3f} s), and the search needs {} more: {}",
           name_, h.nsamples, h.duration_s(), dms_.back(), widest, widest * h.tsamp, kMinBoxcars,
           dm_max_advice(config_, h, kMinBoxcars));
    const std::int64_t table = static_cast<std::int64_t>(dms_.size()) * h.nchans * 4;
    if (table > o.memory_bytes)
      fail(ErrorCategory::invalid_argument,
           "the delay table of '{}' ({} DM trials x {} channels) needs {} MiB, more than "
           "memory_bytes ({} MiB): raise memory_bytes or lower dm_max",
           name_, dms_.size(), h.nchans, table >> 20, o.memory_bytes >> 20);
  }
  dedisp::DedispersionConfig dc = dedispersion_config(0, 0, 0);
  dc.dms = dms_;
  delays_ = dedisp::delay_table(dc);
  max_delay_ = trial_max_delay(ndms() - 1);
  nout_ = h.nsamples - max_delay_;
  // Boxcars need kMinBoxcars valid centres (even width 1): fewer output samples search nothing
  // ("boxcars 1-0", "no candidates", exit 0 before issue 18, B6).
  if (nout_ < kMinBoxcars)
    fail(ErrorCategory::invalid_argument,
         "'{}' holds {} samples ({:.3f} s) but the dispersion delay at DM {} is {} samples "
         "({:.3f} s), leaving {} to search where at least {} are needed: {}",
         name_, h.nsamples, h.duration_s(), dms_.back(), max_delay_, max_delay_ * h.tsamp, nout_,
         kMinBoxcars, dm_max_advice(config_, h, kMinBoxcars));
  margin_ = config_.boxcar_max;

  // Gulp and DM chunk from the budgets. The default gulp is the same on both backends (the
  // statistics are per gulp, so equal gulps give equal candidates): long enough for kMinBoxcars
  // of the widest boxcar the baseline allows.
  const SearchConfig sc = search_config(0, 0, 0);
  const std::int64_t widest_target = widest_boxcar(sc, std::int64_t{1} << 40, 0);
  std::int64_t gulp = o.gulp > 0 ? o.gulp
                                 : std::max({std::int64_t{1} << 17, 2 * std::int64_t{max_delay_},
                                             kMinBoxcars * widest_target});
  gulp = std::min(gulp, nout_);
  if (o.gulp > 0 && gulp < nout_ && gulp < kMinBoxcars * widest_target) {
    static std::atomic<bool> warned{false};  // once per process (plans are made per worker)
    if (!warned.exchange(true))
      warn(
          fmt::format("gulp = {} is shorter than the {} samples a gulp needs for {} boxcars of "
                      "the widest width the baseline allows ({} samples): the per-gulp "
                      "statistics get noisy and pulses can be missed; gulp = 0 picks a gulp",
                      o.gulp, kMinBoxcars * widest_target, kMinBoxcars, widest_target));
  }
  const std::int64_t min_gulp =
      std::min<std::int64_t>(nout_, std::max<std::int64_t>(margin_, 4096));
  auto plane_len = [&](std::int64_t g) { return std::min(g + 2 * margin_, nout_); };
  const bool cuda = backend_ == Backend::cuda;
  const std::int64_t device_budget = cuda ? device_memory_budget(o) : 0;
  const int lanes = cuda ? o.gpu_streams : 1;
  // The searcher's buffers and the reader's (search_gulps(): detail::kReadBuffers gulps of
  // packed rows on the host, which the searcher takes instead of its own).
  auto need = [&](std::int64_t len, std::int64_t chunk, const Workspace* method_plan = nullptr) {
    Workspace w = GulpSearcher::estimate(h, backend_, len, max_delay_, chunk, threads_, lanes,
                                         method_plan, false);
    w.host_bytes +=
        detail::kReadBuffers * (len + max_delay_) * static_cast<std::int64_t>(h.bytes_per_sample());
    return w;
  };
  auto fits = [&](const Workspace& w) {
    return w.host_bytes <= o.memory_bytes && (!cuda || w.device_bytes <= device_budget);
  };
  const std::int64_t ndm = ndms();
  while (o.gulp == 0 && gulp > min_gulp && !fits(need(plane_len(gulp), ndm)))
    gulp = std::max(min_gulp, gulp / 2);
  const std::int64_t len = plane_len(gulp);
  if (widest_boxcar(sc, len, 0) < 1)
    fail(ErrorCategory::invalid_argument,
         "gulp = {} gives planes of {} samples, fewer than the {} a boxcar search needs: a longer "
         "gulp (or 0)",
         o.gulp, len, kMinBoxcars);
  // The largest chunk of DM trials that fits: the needs are linear in the chunk.
  const Workspace fixed = need(len, 0), one = need(len, 1);
  auto most = [&](std::int64_t budget, std::int64_t f, std::int64_t per_trial) {
    if (f > budget) return std::int64_t{0};
    return per_trial <= 0 ? ndm : (budget - f) / per_trial;
  };
  std::int64_t chunk =
      std::min(ndm, most(o.memory_bytes, fixed.host_bytes, one.host_bytes - fixed.host_bytes));
  if (cuda)
    chunk = std::min(
        chunk, most(device_budget, fixed.device_bytes, one.device_bytes - fixed.device_bytes));
  if (chunk < 1) {
    const bool host_short = one.host_bytes > o.memory_bytes;
    fail(ErrorCategory::invalid_argument,
         "searching '{}' to DM {} needs at least {} MiB of {} memory ({} channels x {} samples "
         "of maximum delay plus a gulp of {}): raise {} or lower dm_max",
         name_, dms_.back(), (host_short ? one.host_bytes : one.device_bytes) >> 20,
         host_short ? "host" : "device", h.nchans, max_delay_, len,
         host_short ? "memory_bytes" : "device_memory_bytes");
  }
  // The dedispersion method, then its plans' own buffers (stage-1 series, FDMT levels): the
  // largest chunk's plan, one per CPU searcher and CUDA lane, must fit beside the rest.
  choose_dedisp_method(len);
  std::optional<Workspace> method_plan;
  while (dedisp_algorithm_ != dedisp::Algorithm::automatic) {
    Workspace worst;
    for (std::int64_t d0 = 0; d0 < ndm; d0 += chunk)
      worst = larger(worst, dedisp::DedispersionPlan::estimate_workspace(
                                dedispersion_config(d0, std::min(ndm, d0 + chunk), len), backend_));
    const Workspace total = need(len, chunk, &worst);
    if (fits(total)) {
      method_plan = worst;
      break;
    }
    if (chunk > 1) {
      chunk = std::max<std::int64_t>(1, chunk / 2);
      continue;
    }
    const bool host_short = total.host_bytes > o.memory_bytes;
    const std::string why = fmt::format(
        "the {} plan of one DM trial needs {} MiB of {} memory beside the gulp's buffers",
        dedisp::to_string(dedisp_algorithm_),
        (host_short ? worst.host_bytes : worst.device_bytes) >> 20, host_short ? "host" : "device");
    if (config_.dedisp != DedispMethod::automatic)
      fail(ErrorCategory::invalid_argument, "searching '{}' with dedisp = {}: {}: raise {}", name_,
           to_string(config_.dedisp), why, host_short ? "memory_bytes" : "device_memory_bytes");
    dedisp_choice_ += fmt::format("; {}: brute force instead", why);
    dedisp_algorithm_ = dedisp::Algorithm::automatic;
    chunk =
        std::min(ndm, most(o.memory_bytes, fixed.host_bytes, one.host_bytes - fixed.host_bytes));
    if (cuda)
      chunk = std::min(
          chunk, most(device_budget, fixed.device_bytes, one.device_bytes - fixed.device_bytes));
  }
  gulp_ = gulp;
  gulps_ = (nout_ + gulp - 1) / gulp;
  chunk_ = chunk;
  plane_len_ = len;
  workspace_ = need(len, chunk, method_plan ? &*method_plan : nullptr);
}

void FileSearchPlan::choose_dedisp_method(std::int64_t len) {
  const FileSearchConfig& c = config_;
  subband_ = {};
  subband_.subbands = c.subbands;
  subband_.coarse_dm_step = c.subband_dm_step;
  subband_.min_snr_fraction = c.dedisp_min_snr;
  dedisp_algorithm_ = dedisp::Algorithm::automatic;
  if (c.dedisp == DedispMethod::brute) return;
  dedisp::TrialReport subband_trials;  // the whole list's sub-band plan, when chosen
  if (c.subbands > header_.nchans)
    fail(ErrorCategory::invalid_argument, "subbands = {} is more than the {} channels of '{}'",
         c.subbands, header_.nchans, name_);
  // The whole DM list on the longest plane, without the killmask (as the methods run).
  dedisp::DedispersionConfig all = dedispersion_config(0, ndms(), len);
  all.killmask.clear();
  switch (c.dedisp) {
    case DedispMethod::subband:
      dedisp_algorithm_ = dedisp::Algorithm::subband;
      break;
    case DedispMethod::fdmt:
      dedisp_algorithm_ = dedisp::Algorithm::fdmt;
      break;
    default: {
      auto choice = dedisp::select_algorithm(all, backend_, c.dedisp_min_snr);
      dedisp_algorithm_ = choice.algorithm;
      dedisp_choice_ = choice.reason;
      if (dedisp_algorithm_ == dedisp::Algorithm::subband)
        subband_trials = std::move(choice.subband_trials);
    }
  }
  if (dedisp_algorithm_ != dedisp::Algorithm::subband) return;
  // One grid for the whole list, given to every chunk (SubbandConfig::trial_coarse_dms). A
  // setting the smearing bound refuses fails here, naming the option.
  all.algorithm = dedisp::Algorithm::subband;
  dedisp::TrialReport& r = subband_trials;
  try {
    if (r.coarse_dms.empty()) r = dedisp::DedispersionPlan::preview(all, backend_).trials;
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::invalid_argument) throw;
    if (c.subband_dm_step > 0)
      fail(ErrorCategory::invalid_argument, "subband_dm_step = {} is refused: {}",
           c.subband_dm_step, e.what());
    fail(ErrorCategory::invalid_argument, "dedisp = subband is refused for '{}': {}", name_,
         e.what());
  }
  subband_.subbands = r.subbands;
  subband_.coarse_dm_step = 0;
  subband_.trial_coarse_dms.resize(r.dms.size());
  subband_.trial_phases.resize(r.dms.size());
  for (std::size_t i = 0; i < r.dms.size(); ++i) {
    const auto j = static_cast<std::size_t>(r.coarse_trial[i]);
    subband_.trial_coarse_dms[i] = r.coarse_dms[j];
    subband_.trial_phases[i] = r.coarse_phases[j];
  }
}

std::int32_t FileSearchPlan::trial_max_delay(std::int64_t d) const {
  const auto n = static_cast<std::ptrdiff_t>(header_.nchans);
  return *std::max_element(delays_.begin() + d * n, delays_.begin() + (d + 1) * n);
}

GulpRange FileSearchPlan::gulp_range(std::int64_t g) const {
  GulpRange r;
  r.own_begin = g * gulp_;
  r.own_end = std::min(nout_, r.own_begin + gulp_);
  r.p0 = std::max<std::int64_t>(0, r.own_begin - margin_);
  r.p1 = std::min(nout_, r.own_end + margin_);
  return r;
}

RfiConfig FileSearchPlan::rfi() const {
  RfiConfig r;
  r.zap = config_.zap;
  r.zap_sigma = config_.zap_sigma;
  r.zero_dm = config_.zero_dm;
  return r;
}

dedisp::DedispersionConfig FileSearchPlan::dedispersion_config(std::int64_t d0, std::int64_t d1,
                                                               std::int64_t len) const {
  dedisp::DedispersionConfig c;
  c.nchans = header_.nchans;
  c.fch1_mhz = header_.fch1;
  c.foff_mhz = header_.foff;
  c.tsamp_s = header_.tsamp;
  c.nbits = 32;  // the cleaned gulp is float32
  c.threads = options_.threads;
  c.pulse_width_us = config_.pulse_width_us;
  c.algorithm = dedisp_algorithm_;
  c.subband = subband_;
  c.subband.trial_coarse_dms.clear();
  c.subband.trial_phases.clear();
  if (backend_ == Backend::cuda)
    c.channel_major = true;  // cleaned on the GPU into channel rows; zapped rows are zeros
  else if (dedisp_algorithm_ == dedisp::Algorithm::automatic)
    c.killmask = config_.zap.use_flags(header_.nchans);  // brute force skips them
  if (d1 > d0) {
    c.dms.assign(dms_.begin() + d0, dms_.begin() + d1);
    c.nsamples_in = len + trial_max_delay(d1 - 1);
    if (!subband_.trial_coarse_dms.empty()) {
      c.subband.trial_coarse_dms.assign(subband_.trial_coarse_dms.begin() + d0,
                                        subband_.trial_coarse_dms.begin() + d1);
      c.subband.trial_phases.assign(subband_.trial_phases.begin() + d0,
                                    subband_.trial_phases.begin() + d1);
    }
  }
  return c;
}

SearchConfig FileSearchPlan::search_config(std::int64_t d0, std::int64_t d1,
                                           std::int64_t len) const {
  SearchConfig sc;
  sc.ndms = d1 - d0;
  sc.nsamples = len;
  sc.tsamp_s = header_.tsamp;
  sc.baseline_s = config_.baseline_s;
  sc.boxcar_max = config_.boxcar_max;
  sc.snr_min = config_.snr_min;
  sc.min_rms = kMinRms;
  sc.threads = options_.threads;
  if (config_.zero_dm)  // a pulse wider than its trial's sweep is mostly removed by zero-DM
    for (std::int64_t d = d0; d < d1; ++d)
      sc.max_width.push_back(std::max(1, trial_max_delay(d)));
  return sc;
}

SearchResult FileSearchPlan::execute(io::FilterbankSource& source, const GulpHook& hook) const {
  const io::FilterbankHeader& sh = source.header();
  if (sh.nchans != header_.nchans || sh.nbits != header_.nbits || sh.nsamples != header_.nsamples ||
      sh.tsamp != header_.tsamp || sh.is_signed != header_.is_signed)
    fail(ErrorCategory::invalid_argument,
         "'{}' ({} channels, {} bits, {} samples) is not the data the search of '{}' was "
         "planned for ({} channels, {} bits, {} samples)",
         source.path(), sh.nchans, sh.nbits, sh.nsamples, name_, header_.nchans, header_.nbits,
         header_.nsamples);
  const auto t_start = std::chrono::steady_clock::now();
  SearchResult res = planned_result(*this);

  // Clustering across gulps: the peaks of gulp g are complete once the searcher hands them over;
  // every later gulp's plane starts at or after own_end - margin, so spans begin no earlier.
  Clusterer clusterer(config_.cluster);
  std::vector<Cluster> clusters;
  Progress progress(fmt::format("search {}", name_), nout_);
  if (!options_.progress) progress.set_enabled(false);
  bool go_on = true;
  auto sink = [&](GulpPeaks&& gp) {
    const auto t0 = std::chrono::steady_clock::now();
    const GulpRange r = gulp_range(gp.gulp);
    res.min_channels_kept = std::min(res.min_channels_kept, gp.channels_kept);
    res.add_zapped(gp.zap_reason);
    clusterer.add(gp.peaks);
    const auto done =
        gp.gulp + 1 < gulps_ ? clusterer.take_final(r.own_end - margin_) : clusterer.finish();
    clusters.insert(clusters.end(), done.begin(), done.end());
    res.seconds_cluster +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.update(r.own_end);
    ++res.gulps_searched;
    if (go_on && hook) go_on = hook(res.gulps_searched, gulps_);
    return go_on;
  };
  StageTimes times;
  search_gulps(*this, source, {}, options_.device, sink, times);
  if (res.gulps_searched < gulps_) {  // stopped: what is left is final too
    const auto rest = clusterer.finish();
    clusters.insert(clusters.end(), rest.begin(), rest.end());
  }
  progress.finish();
  times.report_to(res);

  std::sort(clusters.begin(), clusters.end(), [](const Cluster& a, const Cluster& b) {
    if (a.best.snr != b.best.snr) return a.best.snr > b.best.snr;
    return a.best.sample < b.best.sample;
  });
  res.candidates.reserve(clusters.size());
  for (const auto& cl : clusters)
    res.candidates.push_back(to_candidate(cl, res.dms, header_.tsamp, config_.beam));
  res.seconds_total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return res;
}

SearchResult search_filterbank(const std::string& path, const FileSearchConfig& config,
                               const RunOptions& options, Backend backend) {
  config.validate();
  options.validate();
  const auto t0 = std::chrono::steady_clock::now();
  const auto source = io::open_filterbank(path);
  const FileSearchPlan plan(config, options, source->header(), backend, path);
  const double plan_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SearchResult res = plan.execute(*source);
  res.seconds_plan = plan_s;
  res.seconds_total += plan_s;
  return res;
}

}  // namespace warpbeam::search
